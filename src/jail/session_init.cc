// The session's init (session_init.h), inside the sandbox: pid 1 of the session's namespace,
// locked down like the kernel it forked. It keeps its state in fixed buffers: one message in,
// one process started at a time. Each process starts with clone(CLONE_VM | CLONE_VFORK), as
// posix_spawn does: the init is a copy of the warm interpreter, and a real fork would copy its
// page tables for every command. The clone's child shares the init's memory until its exec, so
// from the clone to the exec nothing allocates or takes a lock: raw syscalls, fixed buffers.
// A new kernel is the exception: a plain fork (it runs the interpreter, which allocates), once
// per stopped execution at most.
#include "jail/session_init.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include "jail/lockdown.h"
#include "jail/loopback.h"
#include "jail/proc_sessions.h"
#include "jail/warm_host.h"
#include "jail/wire.h"

extern char** environ;

namespace execbox::jail {
namespace {

using init_wire::Header;
using init_wire::Op;

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

// Code that runs in the clone's child, on g_clone_stack: a sanitizer build must not instrument
// it (ASan cannot tell that stack, and its noreturn handling would write to the child's stderr).
#define EXECBOX_CLONE_CHILD __attribute__((no_sanitize("address", "undefined")))

constexpr size_t kCloneStack = 64 << 10;
constexpr const char* kDefaultPath = "/usr/local/bin:/usr/bin:/bin";

alignas(64) char g_clone_stack[kCloneStack];
alignas(Header) char g_message[sizeof(Header) + init_wire::kMaxPayload + 1];
char* g_argv[init_wire::kMaxStrings + 1];
// The sandbox's base environment (this process's, as the kernel started with it) plus the
// request's entries.
constexpr size_t kMaxEnv = init_wire::kMaxStrings + 1024;
char* g_envp[kMaxEnv + 1];
pid_t g_table[init_wire::kMaxProcesses];  // the processes the host started, alive; 0: free
// The sessions of table processes that have exited, the newest kMaxProcesses: what they left
// running in their session (`nohup server &` of a command that ended) is the host's start as
// much as they were, and outlives the kernel's end too. A number whose session has emptied may
// come back as a new process's, which is then spared as well: it still ends with the sandbox.
pid_t g_left_sessions[init_wire::kMaxProcesses];
size_t g_left_next = 0;
pid_t g_kernel = 0;                       // the kernel, while it runs
int g_kernel_status = 0;                  // the last kernel's wait status
KernelStart g_start;
int g_host = -1;              // the socket to the host
int g_proc = -1;              // this namespace's /proc: what the kernel left is found there
int g_sigfd = -1;             // SIGCHLD's signalfd
char g_kernel_name[16] = {};  // the kernel's comm, as the first one had it

// The kernel's channel, relayed (KernelChannel): the host's bytes and descriptors down, one
// chunk at a time (read from the host only once the last went down), and the 'D' up.
constexpr int kRelayFds = 8;  // the host sends 4 with a request
struct ChannelRelay {
  int host = -1, kernel = -1;
  bool host_open = false;    // false after the host's EOF (passed down as the kernel's EOF)
  bool kernel_open = false;  // false after the kernel's EOF or an error
  char down[64 << 10];
  size_t len = 0, off = 0;
  int fds[kRelayFds];
  int nfds = 0;  // sent with the chunk's first byte that goes down
} g_relay;

bool InTable(pid_t pid) {
  for (pid_t p : g_table) {
    if (p == pid && pid > 0) return true;
  }
  return false;
}

bool AddToTable(pid_t pid) {
  for (pid_t& p : g_table) {
    if (p == 0) {
      p = pid;
      return true;
    }
  }
  return false;
}

bool RemoveFromTable(pid_t pid) {
  for (pid_t& p : g_table) {
    if (p == pid && pid > 0) {
      p = 0;
      return true;
    }
  }
  return false;
}

bool TableFull() {
  for (pid_t p : g_table) {
    if (p == 0) return false;
  }
  return true;
}

// One message to the host, with `fd` attached when >= 0. A host that is gone is noticed by the
// loop (its end of the socket hangs up).
void Send(int host, const Header& h, int fd = -1) noexcept {
  (void)SendWithFds(host, &h, sizeof h, &fd, fd >= 0 ? 1 : 0);
}

void SendEvent(int host, Op op, uint32_t id, pid_t pid, int value, const char* step = nullptr) noexcept {
  Header h{.op = op, .id = id, .pid = pid, .value = value};
  if (step != nullptr) wire::CopyText(h.step, sizeof h.step, step);
  Send(host, h);
}

// What the clone's child needs, written by the init before the clone; `err` and `step` are
// written by the child (the memory is shared) when it fails before its exec.
struct Spawn {
  int fds[3] = {-1, -1, -1};  // to become 0, 1, 2; -1 keeps the init's (/dev/null)
  bool controlling_tty = false;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* cwd = nullptr;
  const char* search_path = nullptr;
  volatile int err = 0;
  const char* volatile step = nullptr;
};

[[noreturn]] EXECBOX_CLONE_CHILD void ChildFail(Spawn& s, const char* step) noexcept {
  s.err = errno != 0 ? errno : EINVAL;
  s.step = step;
  ::_exit(127);
}

// execvpe without allocation: `file` as is when it has a slash, else each directory of the
// search path in turn (ENOENT and ENOTDIR try the next; EACCES is kept, as the shell does).
[[noreturn]] EXECBOX_CLONE_CHILD void ExecSearching(Spawn& s) noexcept {
  const char* file = s.argv[0];
  if (std::strchr(file, '/') != nullptr) {
    ::execve(file, s.argv, s.envp);
    ChildFail(s, "exec");
  }
  char path[4096];
  const size_t file_len = std::strlen(file);
  int kept = ENOENT;
  for (const char* dir = s.search_path;;) {
    const char* end = ::strchrnul(dir, ':');
    const size_t dir_len = static_cast<size_t>(end - dir);
    if (dir_len + 1 + file_len + 1 <= sizeof path) {
      size_t at = 0;
      if (dir_len == 0) {
        path[at++] = '.';  // an empty entry is the working directory
      } else {
        std::memcpy(path, dir, dir_len);
        at = dir_len;
      }
      path[at++] = '/';
      std::memcpy(path + at, file, file_len + 1);
      ::execve(path, s.argv, s.envp);
      if (errno == EACCES) {
        kept = EACCES;
      } else if (errno != ENOENT && errno != ENOTDIR) {
        kept = errno;
        break;
      }
    }
    if (*end == '\0') break;
    dir = end + 1;
  }
  errno = kept;
  ChildFail(s, "exec (searching PATH)");
}

// The clone's child: a session (and process group) of its own, its descriptors, its working
// directory, default signals, then the exec. Allocation-free: it runs on the init's memory.
EXECBOX_CLONE_CHILD int ChildMain(void* arg) noexcept {
  Spawn& s = *static_cast<Spawn*>(arg);
  errno = 0;
  ResetSignals();  // the init's blocked SIGCHLD, and the ignored SIGPIPE and SIGXFSZ
  if (::setsid() < 0) ChildFail(s, "setsid");
  for (int i = 0; i < 3; ++i) {
    if (s.fds[i] >= 0 && ::dup2(s.fds[i], i) < 0) ChildFail(s, "place descriptors");
  }
  // A session leader without a terminal: the pty's slave becomes its controlling terminal.
  if (s.controlling_tty && ::ioctl(0, TIOCSCTTY, 0) != 0)
    ChildFail(s, "make the pty the controlling terminal");
  if (s.cwd[0] != '\0' && ::chdir(s.cwd) != 0) ChildFail(s, "chdir to the working directory");
  ::close_range(3, ~0U, 0);  // the init's socket to the host above all
  ExecSearching(s);
}

// The request's strings: argc + envc + 1 NUL-terminated strings exactly filling the payload.
bool ParseStrings(char* payload, uint32_t size, uint32_t count, char** out) {
  uint32_t at = 0;
  for (uint32_t i = 0; i < count; ++i) {
    if (at >= size) return false;
    char* end = static_cast<char*>(std::memchr(payload + at, '\0', size - at));
    if (end == nullptr) return false;
    out[i] = payload + at;
    at = static_cast<uint32_t>(end - payload) + 1;
  }
  return at == size;
}

size_t NameLength(const char* entry) {
  const char* eq = std::strchr(entry, '=');
  return eq == nullptr ? 0 : static_cast<size_t>(eq - entry);
}

// The environment: the base entries the request does not set, then the request's. False when
// an entry of the request is not NAME=value or there are too many.
bool MergeEnvironment(char** request, uint32_t count, const char** search_path) {
  size_t n = 0;
  for (uint32_t i = 0; i < count; ++i) {
    if (NameLength(request[i]) == 0) return false;
  }
  for (char** base = environ; base != nullptr && *base != nullptr; ++base) {
    size_t len = NameLength(*base);
    bool overridden = false;
    for (uint32_t i = 0; i < count && !overridden; ++i) {
      overridden = NameLength(request[i]) == len && std::strncmp(request[i], *base, len) == 0;
    }
    if (overridden || len == 0) continue;
    if (n >= kMaxEnv) return false;
    g_envp[n++] = *base;
  }
  for (uint32_t i = 0; i < count; ++i) {
    if (n >= kMaxEnv) return false;
    g_envp[n++] = request[i];
  }
  g_envp[n] = nullptr;
  *search_path = kDefaultPath;
  for (size_t i = 0; i < n; ++i) {
    if (std::strncmp(g_envp[i], "PATH=", 5) == 0) *search_path = g_envp[i] + 5;
  }
  return true;
}

// A pseudo-terminal of the session's devpts instance: the master (returned) and its slave.
int OpenPty(const Header& h, int* slave, const char** step) {
  int master = ::open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0) {
    *step = "open /dev/pts/ptmx";
    return -1;
  }
  int unlock = 0;
  struct winsize ws {};
  ws.ws_row = h.rows >= 1 && h.rows <= 1000 ? h.rows : 24;
  ws.ws_col = h.cols >= 1 && h.cols <= 1000 ? h.cols : 80;
  if (::ioctl(master, TIOCSPTLCK, &unlock) != 0 || ::ioctl(master, TIOCSWINSZ, &ws) != 0) {
    *step = "set up the pty";
  } else {
    // Through the master itself: no path to look up (and swap) between the two.
    *slave = ::ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (*slave >= 0) return master;
    *step = "open the pty's slave";
  }
  int err = errno;
  ::close(master);
  errno = err;
  return -1;
}

void Start(int host, const Header& h, uint32_t payload_size, const int* fds, int nfds) {
  char* payload = g_message + sizeof(Header);
  const bool pty = (h.flags & init_wire::kPty) != 0;
  const int want_fds = pty ? 0 : 2 + ((h.flags & init_wire::kStdinPipe) != 0 ? 1 : 0);
  auto fail = [&](int err, const char* step) { SendEvent(host, Op::kStartFailed, h.id, 0, err, step); };
  if (h.argc < 1 || h.argc + h.envc > init_wire::kMaxStrings || nfds != want_fds) {
    return fail(EINVAL, "a malformed start request");
  }
  // argv, then env, then cwd, as they stand in the payload.
  static char* strings[init_wire::kMaxStrings + 1];
  if (!ParseStrings(payload, payload_size, h.argc + h.envc + 1, strings))
    return fail(EINVAL, "a malformed start request");
  for (uint32_t i = 0; i < h.argc; ++i) g_argv[i] = strings[i];
  g_argv[h.argc] = nullptr;
  if (g_argv[0][0] == '\0') return fail(ENOENT, "an empty program name");
  Spawn s;
  if (!MergeEnvironment(strings + h.argc, h.envc, &s.search_path))
    return fail(EINVAL, "an environment entry that is not NAME=value");
  if (TableFull()) return fail(EAGAIN, "the session's process table is full");
  s.argv = g_argv;
  s.envp = g_envp;
  s.cwd = strings[h.argc + h.envc];
  int master = -1, slave = -1;
  if (pty) {
    const char* step = nullptr;
    master = OpenPty(h, &slave, &step);
    if (master < 0) return fail(errno, step);
    s.fds[0] = s.fds[1] = s.fds[2] = slave;
    s.controlling_tty = true;
  } else {
    s.fds[1] = fds[0];
    s.fds[2] = fds[1];
    if (nfds == 3) s.fds[0] = fds[2];
  }
  pid_t pid = ::clone(ChildMain, g_clone_stack + sizeof g_clone_stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &s);
  int err = errno;
  if (slave >= 0) ::close(slave);
  if (pid < 0 || s.err != 0) {
    if (master >= 0) ::close(master);
    // A child that failed has exited already: the reaper takes it (it is not in the table).
    return pid < 0 ? fail(err, "fork") : fail(s.err, s.step);
  }
  AddToTable(pid);
  Send(host, Header{.op = Op::kStarted, .id = h.id, .pid = pid}, master);
  if (master >= 0) ::close(master);
}

// One recvmsg without waiting (the host's messages, the kernel's channel both ways): the bytes
// into `buf`; the first `max_fds` descriptors that came with them into `fds` (`*kept` of them),
// close-on-exec, any beyond closed and counted in `*dropped`; `*flags` the message's flags.
// Returns what recvmsg returned (errno as it set it).
ssize_t ReceiveWithFds(int sock, void* buf, size_t size, int* fds, int max_fds, int* kept, int* dropped,
                       int* flags) {
  char cbuf[CMSG_SPACE(sizeof(int) * 16)];
  struct iovec iov = {.iov_base = buf, .iov_len = size};
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof cbuf;
  *kept = *dropped = *flags = 0;
  ssize_t n = ::recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0) return n;
  *flags = msg.msg_flags;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (*kept < max_fds) {
        fds[(*kept)++] = fd;
      } else {
        ::close(fd);
        ++*dropped;
      }
    }
  }
  return n;
}

void DropPendingFds() {
  for (int i = 0; i < g_relay.nfds; ++i) ::close(g_relay.fds[i]);
  g_relay.nfds = 0;
}

void OpenRelay(const KernelChannel& channel) {
  g_relay.host = channel.host;
  g_relay.kernel = channel.kernel;
  g_relay.host_open = g_relay.kernel_open = channel.host >= 0 && channel.kernel >= 0;
  g_relay.len = g_relay.off = 0;
}

// The kernel ended (or never started): its channel goes, and the host's socket hangs up.
void CloseRelay() {
  DropPendingFds();
  for (int* fd : {&g_relay.host, &g_relay.kernel}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
  g_relay.host_open = g_relay.kernel_open = false;
  g_relay.len = g_relay.off = 0;
}

// As much of the host's chunk as the kernel's socket takes now, its descriptors with the first
// byte. A kernel whose end is gone (EPIPE) takes nothing more: the relay closes, so that the
// host's next send fails at once rather than wait for a reader.
void RelayDown() {
  while (g_relay.off < g_relay.len) {
    char cbuf[CMSG_SPACE(sizeof(int) * kRelayFds)];
    struct iovec iov = {.iov_base = g_relay.down + g_relay.off, .iov_len = g_relay.len - g_relay.off};
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (g_relay.nfds > 0) {
      std::memset(cbuf, 0, sizeof cbuf);
      msg.msg_control = cbuf;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * static_cast<size_t>(g_relay.nfds));
      struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * static_cast<size_t>(g_relay.nfds));
      std::memcpy(CMSG_DATA(c), g_relay.fds, sizeof(int) * static_cast<size_t>(g_relay.nfds));
    }
    ssize_t n = ::sendmsg(g_relay.kernel, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // POLLOUT brings the rest
    if (n <= 0) {
      CloseRelay();
      return;
    }
    g_relay.off += static_cast<size_t>(n);
    DropPendingFds();  // the kernel has its copies
  }
  g_relay.len = g_relay.off = 0;
}

// One chunk from the host, once the last has gone down. The host's EOF becomes the kernel's.
void RelayFromHost() {
  int dropped = 0, flags = 0;
  ssize_t n = ReceiveWithFds(g_relay.host, g_relay.down, sizeof g_relay.down, g_relay.fds, kRelayFds,
                             &g_relay.nfds, &dropped, &flags);
  if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return;
  if (n <= 0) {  // the host is done with this kernel: it reads EOF where a request would start
    DropPendingFds();
    g_relay.host_open = false;
    ::shutdown(g_relay.kernel, SHUT_WR);
    return;
  }
  g_relay.len = static_cast<size_t>(n);
  g_relay.off = 0;
  RelayDown();
}

// What the kernel wrote on its channel (the code can write there too): a 'D' in it goes up as
// one 'D', anything else is dropped, any descriptor closed. The host checks the 'D' itself.
void RelayFromKernel() {
  char up[4096];
  for (int batch = 0; batch < 16; ++batch) {
    int kept = 0, dropped = 0, flags = 0;
    ssize_t n = ReceiveWithFds(g_relay.kernel, up, sizeof up, nullptr, 0, &kept, &dropped, &flags);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      // Its end closed (the code may close its fd 3) or broke: the host's socket hangs up too,
      // so that the host neither waits on a relay nobody reads nor believes the kernel serves.
      CloseRelay();
      return;
    }
    if (std::memchr(up, 'D', static_cast<size_t>(n)) != nullptr) {
      (void)::send(g_relay.host, "D", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
  }
}

// The first kernel's setup, again, in a fork of the init: a new pair for its channel (the init
// relays `host`, the host's new socket, to it), SIGCHLD unblocked, a session of its own.
void StartKernel(int host) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return;  // the host gives up
  int relay_host = ::fcntl(host, F_DUPFD_CLOEXEC, 3);
  if (relay_host < 0) {
    ::close(pair[0]);
    ::close(pair[1]);
    return;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    ::sigprocmask(SIG_UNBLOCK, &chld, nullptr);
    ::prctl(PR_SET_NAME, g_kernel_name, 0, 0, 0);
    if (::setsid() < 0) ::_exit(127);
    // The init's socket to the host, the signalfd and /proc go with the rest.
    if (!PlaceKernelDescriptors(host, pair[1], g_start.layer)) ::_exit(127);
    g_start.run(g_start.context, kKernelReadyFd, g_start.layer);
    ::_exit(70);
  }
  ::close(pair[1]);
  // A fork that failed: the host waits for the new kernel's ready byte in vain, and gives up.
  if (pid > 0) {
    g_kernel = pid;
    OpenRelay({.host = relay_host, .kernel = pair[0]});
  } else {
    ::close(relay_host);
    ::close(pair[0]);
  }
}

void SignalProcess(const Header& h) {
  // Only a process of the table: it is not reaped yet, so its pid cannot have been reused.
  if (!InTable(h.pid) || h.value < 1 || h.value > 64) return;
  if (::kill(-h.pid, h.value) != 0) (void)::kill(h.pid, h.value);
}

// One message from the host. False when the host is gone.
bool ServeHost(int host) {
  int fds[4];
  int nfds = 0, dropped = 0, flags = 0;
  ssize_t n = ReceiveWithFds(host, g_message, sizeof g_message - 1, fds, 4, &nfds, &dropped, &flags);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) {
    for (int i = 0; i < nfds; ++i) ::close(fds[i]);
    return false;
  }
  Header h;
  bool framed = static_cast<size_t>(n) >= sizeof h && dropped == 0 && (flags & (MSG_TRUNC | MSG_CTRUNC)) == 0;
  if (framed) {
    std::memcpy(&h, g_message, sizeof h);
    framed = h.magic == init_wire::kMagic && h.payload == static_cast<size_t>(n) - sizeof h;
  }
  if (framed && h.op == Op::kStart) Start(host, h, h.payload, fds, nfds);
  if (framed && h.op == Op::kSignal) SignalProcess(h);
  if (framed && h.op == Op::kNewKernel && g_kernel == 0 && nfds == 1) StartKernel(fds[0]);
  for (int i = 0; i < nfds; ++i) ::close(fds[i]);  // the started process has its copies
  return true;
}

void ReportExit(int host, pid_t pid, int status) {
  if (!RemoveFromTable(pid)) return;
  g_left_sessions[g_left_next++ % init_wire::kMaxProcesses] = pid;  // started by setsid: its session
  SendEvent(host, Op::kExited, 0, pid, status);
}

// What the kernel left: everything outside the sessions the table's processes lead or led.
bool KillWhatTheKernelLeft() {
  pid_t keep[2 * init_wire::kMaxProcesses];
  std::memcpy(keep, g_table, sizeof g_table);
  std::memcpy(keep + init_wire::kMaxProcesses, g_left_sessions, sizeof g_left_sessions);
  return KillOutsideSessions(g_proc, keep, 2 * init_wire::kMaxProcesses);
}

// The host went away (or the kernel's remnants would not die): everything else in the
// namespace goes, every process of the table is reported, and the init exits, its status
// mirroring the last kernel's.
[[noreturn]] void EndAll(int host, int kernel_status) {
  ::kill(-1, SIGKILL);  // pid 1 is spared; nothing else in the namespace is
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, __WALL);
    if (pid > 0) {
      ReportExit(host, pid, status);
    } else if (errno != EINTR) {
      break;
    }
  }
  ::_exit(WIFEXITED(kernel_status) ? WEXITSTATUS(kernel_status) : 128 + WTERMSIG(kernel_status));
}

void Reap(int host) {
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG | __WALL);
    if (pid <= 0) return;
    if (pid == g_kernel) {
      // First, before anything is killed: the host classifies the execution's end by it.
      g_kernel = 0;
      g_kernel_status = status;
      SendEvent(host, Op::kKernelEnded, 0, pid, status);
      CloseRelay();
      if (!KillWhatTheKernelLeft()) EndAll(host, status);
      continue;
    }
    ReportExit(host, pid, status);  // an orphan that is not the table's is only reaped
  }
}

}  // namespace

bool PlaceKernelDescriptors(int host, int kernel_end, int layer) noexcept {
  int h = ::fcntl(host, F_DUPFD_CLOEXEC, 8);
  int k = ::fcntl(kernel_end, F_DUPFD, 8);
  if (h < 0 || k < 0) return false;
  if (::dup2(k, kKernelChannelFd) < 0 || ::dup3(h, kKernelReadyFd, O_CLOEXEC) < 0) return false;
  constexpr unsigned kFirstOther = kKernelReadyFd + 1;
  if (layer >= static_cast<int>(kFirstOther)) {
    if (static_cast<unsigned>(layer) > kFirstOther)
      ::close_range(kFirstOther, static_cast<unsigned>(layer) - 1, 0);
    ::close_range(static_cast<unsigned>(layer) + 1, ~0U, 0);
  } else {
    ::close_range(kFirstOther, ~0U, 0);
  }
  return true;
}

void RunSessionInit(int host_fd, pid_t kernel, const KernelChannel& channel, const KernelStart& start,
                    const SessionRelay& relay) noexcept {
  OpenRelay(channel);
  g_kernel = kernel;
  g_host = host_fd;
  g_start = start;
  ::prctl(PR_GET_NAME, g_kernel_name, 0, 0, 0);
  g_proc = ::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  // SIGCHLD was blocked before the kernel was forked, so its end cannot be missed: a signalfd
  // wakes the loop (without one, it looks every second). An idle init costs no CPU.
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  int sigfd = g_sigfd = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  ::prctl(PR_SET_NAME, "execbox-init", 0, 0, 0);
  // Without a signalfd the loop looks every second; the relay's slot is then left unused
  // (fd -1 is skipped by poll).
  bool relayed = relay.listener >= 0 && relay.connector >= 0;
  bool connector_full = false;  // then the connector is polled for room, not the listener
  for (;;) {
    struct pollfd p[5] = {{.fd = host_fd, .events = POLLIN, .revents = 0},
                          {.fd = sigfd, .events = POLLIN, .revents = 0},
                          {.fd = -1, .events = 0, .revents = 0},
                          {.fd = -1, .events = 0, .revents = 0},
                          {.fd = -1, .events = 0, .revents = 0}};
    if (relayed)
      p[2] = {.fd = connector_full ? relay.connector : relay.listener,
              .events = static_cast<short>(connector_full ? POLLOUT : POLLIN),
              .revents = 0};
    // The kernel's channel: the host's next chunk only once the last went down.
    const bool pending = g_relay.off < g_relay.len;
    if (g_relay.host_open && g_relay.kernel_open && !pending)
      p[3] = {.fd = g_relay.host, .events = POLLIN, .revents = 0};
    if (g_relay.kernel_open)
      p[4] = {
          .fd = g_relay.kernel, .events = static_cast<short>(POLLIN | (pending ? POLLOUT : 0)), .revents = 0};
    int n = ::poll(p, 5, sigfd >= 0 ? -1 : 1000);
    if (n < 0 && errno != EINTR) EndAll(host_fd, g_kernel_status);
    if (relayed && connector_full && (p[2].revents & (POLLERR | POLLHUP)) != 0) {
      relayed = false;  // the host's proxy is gone: connections wait unanswered, as to a dead peer
    } else if (relayed && p[2].revents != 0) {
      // A bounded batch per wake: the host's messages and the reaping are never starved.
      connector_full = !PassConnections(relay.listener, relay.connector, 16);
    }
    if (p[4].revents != 0) {
      if ((p[4].revents & POLLOUT) != 0) RelayDown();
      if ((p[4].revents & ~POLLOUT) != 0) RelayFromKernel();
    }
    if (p[3].revents != 0 && g_relay.host_open) RelayFromHost();
    if (sigfd >= 0 && p[1].revents != 0) {
      struct signalfd_siginfo si;
      while (::read(sigfd, &si, sizeof si) > 0) {
      }
    }
    Reap(host_fd);
    // The host closed its end (the session is ending): nothing here outlives it.
    if (p[0].revents != 0 && !ServeHost(host_fd)) {
      if (g_kernel != 0) ::kill(g_kernel, SIGKILL);
      EndAll(host_fd, g_kernel != 0 ? SIGKILL : g_kernel_status);
    }
  }
}

}  // namespace execbox::jail
