// The zygote's side of warm children. Unlike the cold jail's init this code runs in a forked
// copy of a single-threaded worker (fork(), not raw clone), so it may allocate.
#include "jail/warm_child.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "jail/child_fs.h"
#include "jail/child_plan.h"
#include "jail/lockdown.h"
#include "jail/wire.h"

namespace execbox::jail {
namespace {

constexpr int kChannelFd = 3;

void Send(int control, wire::Kind kind, int64_t a = 0, int64_t b = 0, int64_t c = 0,
          const char* text = nullptr) noexcept {
  wire::Header h{.kind = kind, .a = a, .b = b, .c = c};
  if (text != nullptr) wire::CopyText(h.text, sizeof h.text, text);
  (void)wire::WriteExact(control, &h, sizeof h);
}

[[noreturn]] void KeeperFail(int control, const char* step) noexcept {
  Send(control, wire::Kind::kSetupFailed, errno, 0, 0, step);
  ::_exit(1);
}

// In the code's process a failure goes on the channel: 'F', then the step and the errno.
[[noreturn]] void CodeFail(int channel, const char* step) noexcept {
  char text[256];
  int n = std::snprintf(text, sizeof text, "F%s: %s", step, std::strerror(errno));
  if (n > 0) (void)wire::WriteExact(channel, text, static_cast<size_t>(std::min(n, 255)));
  ::_exit(127);
}

// Owned by the caller's ids (the one mapped id, 1000): id 0 does not exist in this namespace.
int MountTmpfs(const char* target, uint64_t bytes, uint64_t inodes, const char* mode) noexcept {
  char options[160];
  std::snprintf(options, sizeof options, "size=%llu,nr_inodes=%llu,mode=%s",
                static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(inodes), mode);
  return ::mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, options);
}

// The code's process: pid 1 of its own pid namespace, locked down before it waits for code.
[[noreturn]] void RunCodeProcess(const WarmChildSpec& spec, int channel, const ZygoteSetup& setup) noexcept {
  // Refused only where the zygote's own jail was refused one too (its layers say so).
  if (MountProcIfAllowed("/proc") < 0) CodeFail(channel, "mount /proc");
  ResetSignals();
  // What python3 itself does at start-up: broken pipes and file-size overruns become OSErrors.
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGXFSZ, SIG_IGN);
  if (::setsid() < 0) CodeFail(channel, "setsid");

  int high = ::fcntl(channel, F_DUPFD, 64);
  int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (high < 0 || null < 0) CodeFail(channel, "open /dev/null");
  for (int fd = 0; fd < 3; ++fd) {
    if (::dup2(null, fd) < 0) CodeFail(channel, "place descriptors");
  }
  if (::dup2(high, kChannelFd) < 0) CodeFail(channel, "place the channel");
  channel = kChannelFd;
  ::close_range(kChannelFd + 1, ~0U, 0);

  if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) CodeFail(channel, "PR_SET_PDEATHSIG");
  const rlim_t memlock = 64 << 10;
  const struct {
    int resource;
    rlim_t value;
  } limits[] = {
      {RLIMIT_FSIZE, spec.work_dir_bytes},
      {RLIMIT_NOFILE, spec.open_files},
      {RLIMIT_CORE, 0},
      {RLIMIT_MSGQUEUE, 0},
      {RLIMIT_MEMLOCK, memlock},
  };
  for (const auto& l : limits) {
    struct rlimit rl {
      .rlim_cur = l.value, .rlim_max = l.value
    };
    if (::setrlimit(static_cast<__rlimit_resource>(l.resource), &rl) != 0) CodeFail(channel, "setrlimit");
  }
  ::umask(022);
  if (::chdir(setup.work_dir) != 0) CodeFail(channel, "chdir to the work dir");

  if (const char* step = LockDown(setup.landlock, *setup.seccomp)) CodeFail(channel, step);
  // Dumpable like any exec'd process: the sandbox's own tools may read /proc/self.
  ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  if (!wire::WriteExact(channel, "R", 1)) ::_exit(1);
  setup.run_code(channel, spec.session != 0);
  ::_exit(70);
}

// What a session's work dir looked like at the last collection: a file goes back when it is
// new or any of these changed. No clock is compared, so coarse and fine-grained (multigrain)
// file timestamps both work.
struct FileStamp {
  ino_t ino;
  struct timespec mtime, ctime;
  off_t size;
  bool operator==(const FileStamp& o) const {
    return ino == o.ino && size == o.size && mtime.tv_sec == o.mtime.tv_sec &&
           mtime.tv_nsec == o.mtime.tv_nsec && ctime.tv_sec == o.ctime.tv_sec &&
           ctime.tv_nsec == o.ctime.tv_nsec;
  }
};

struct ChangedFiles {
  std::map<std::string, FileStamp> last, now;

  static bool Wanted(void* context, const char* path, const struct stat& st) {
    auto* self = static_cast<ChangedFiles*>(context);
    FileStamp stamp{st.st_ino, st.st_mtim, st.st_ctim, st.st_size};
    if (self->now.size() < (1u << 16)) self->now[path] = stamp;
    auto it = self->last.find(path);
    return it == self->last.end() || !(it->second == stamp);
  }
  void Collect(const ChildPlan& plan) {
    now.clear();
    FileFilter filter{this, &ChangedFiles::Wanted};
    SendOutputsFiltered(plan, &filter);
    last.swap(now);
  }
  // A file the host put in place between executions: not the code's doing, so it goes back
  // only once the code changes it.
  void Uploaded(const char* path, const struct stat& st) {
    if (last.size() < (1u << 16)) last[path] = FileStamp{st.st_ino, st.st_mtim, st.st_ctim, st.st_size};
  }
};

// One kReadFile or kWriteFile from the host, between a session's executions. False when the
// request itself is malformed or the host went away mid-request: the stream is no longer framed.
bool ServeFile(int control, int workfd, const wire::Header& h, ChangedFiles& changed) {
  char path[4096];
  if (h.a <= 0 || h.a >= static_cast<int64_t>(sizeof path) || h.b < 0) return false;
  if (!wire::ReadExact(control, path, static_cast<size_t>(h.a))) return false;
  path[h.a] = '\0';
  if (std::strlen(path) != static_cast<size_t>(h.a)) path[0] = '\0';  // a NUL inside: refused below
  if (h.kind == wire::Kind::kReadFile) {
    SendOneFile(control, workfd, path, static_cast<uint64_t>(h.b));
    return true;
  }
  struct stat st {};
  Received r = ReceiveOneFile(control, workfd, path, h.b, &st);
  if (r == Received::kWritten) changed.Uploaded(path, st);
  return r != Received::kBrokenOff;
}

// Waits for the code's process; stops it when told; sends files back.
[[noreturn]] void Keep(const WarmChildSpec& spec, int control, pid_t code, int sigfd,
                       const ZygoteSetup& setup) {
  ChildPlan plan;
  plan.control = control;
  plan.work_dir = setup.work_dir;
  plan.max_files = spec.max_files;
  plan.max_file_bytes = spec.max_file_bytes;
  struct pollfd fds[2] = {{.fd = control, .events = POLLIN, .revents = 0},
                          {.fd = sigfd, .events = POLLIN, .revents = 0}};
  bool control_open = true;
  ChangedFiles changed;
  // The work dir as this keeper mounted it (the code cannot unmount or replace it): session
  // files are read and written beneath it by descriptor.
  int workfd = ::open(setup.work_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  ::umask(022);
  ::signal(SIGXFSZ, SIG_IGN);  // a file past a size limit is an error to report, not a death
  for (;;) {
    if (::poll(fds, control_open ? 2 : 1, -1) < 0 && errno != EINTR) ::_exit(1);
    if (control_open && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      wire::Header h{};
      if (!wire::ReadExact(control, &h, sizeof h)) {
        control_open = false;  // the host is gone: the tree goes too
        fds[0] = fds[1];
        ::kill(code, SIGKILL);
      } else if (h.kind == wire::Kind::kStop) {
        ::kill(code, SIGKILL);
      } else if (h.kind == wire::Kind::kCollect) {
        changed.Collect(plan);
        Send(control, wire::Kind::kCollected);
      } else if (h.kind == wire::Kind::kReadFile || h.kind == wire::Kind::kWriteFile) {
        if (!ServeFile(control, workfd, h, changed)) {
          ::kill(code, SIGKILL);  // fail closed: the host sees the keeper end
          ::_exit(1);
        }
      }
      continue;
    }
    struct signalfd_siginfo si;
    (void)::read(sigfd, &si, sizeof si);
    int status = 0;
    pid_t p = ::waitpid(code, &status, WNOHANG | __WALL);
    if (p != code) continue;
    // The code's process was pid 1 of its namespace: the kernel has killed and reaped the rest.
    struct rusage all {};
    ::getrusage(RUSAGE_CHILDREN, &all);
    int64_t cpu_us =
        (all.ru_utime.tv_sec + all.ru_stime.tv_sec) * 1000000LL + all.ru_utime.tv_usec + all.ru_stime.tv_usec;
    Send(control, wire::Kind::kExited, status, cpu_us, all.ru_maxrss);
    if (spec.session == 0 && spec.collect != 0) SendOutputs(plan);
    Send(control, wire::Kind::kDone);
    ::_exit(0);
  }
}

[[noreturn]] void RunKeeper(const WarmChildSpec& spec, int control, int channel, const ZygoteSetup& setup) {
  ::signal(SIGCHLD, SIG_DFL);
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) KeeperFail(control, "PR_SET_PDEATHSIG");
  // The host reads this process's pid from the message's credentials and moves it into the
  // child's own cgroup before anything else happens.
  Send(control, wire::Kind::kHello);
  wire::Header go{};
  if (!wire::ReadExact(control, &go, sizeof go) || go.kind != wire::Kind::kGo) ::_exit(1);

  constexpr int kFlags =
      CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;
  if (::unshare(kFlags) != 0) KeeperFail(control, "unshare mount, pid, net, ipc, uts, cgroup namespaces");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    KeeperFail(control, "make / private");
  if (MountTmpfs(setup.work_dir, spec.work_dir_bytes, spec.inodes, "0700") != 0)
    KeeperFail(control, "mount the work dir");
  if (MountTmpfs("/tmp", spec.tmp_bytes, spec.inodes, "1777") != 0) KeeperFail(control, "mount /tmp");
  if (MountTmpfs("/dev/shm", spec.shm_bytes, 1024, "1777") != 0) KeeperFail(control, "mount /dev/shm");
  if (::chdir(setup.work_dir) != 0) KeeperFail(control, "chdir to the work dir");
  (void)::sethostname("sandbox", 7);

  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  int sigfd = ::signalfd(-1, &chld, SFD_CLOEXEC);
  if (sigfd < 0) KeeperFail(control, "signalfd");

  if (setup.before_fork != nullptr) setup.before_fork();
  pid_t pid = ::fork();
  if (pid == 0) {
    if (setup.after_fork_child != nullptr) setup.after_fork_child();
    ::close(control);
    RunCodeProcess(spec, channel, setup);
  }
  if (setup.after_fork_parent != nullptr) setup.after_fork_parent();
  if (pid < 0) KeeperFail(control, "fork the code's process");
  ::close(channel);
  Keep(spec, control, pid, sigfd, setup);
}

// Receives one command: the spec and exactly two descriptors. False on EOF or a broken socket.
bool ReceiveCommand(int command_fd, WarmChildSpec& spec, int& control, int& channel, bool& valid) {
  char cbuf[CMSG_SPACE(sizeof(int) * 4)];
  struct iovec iov = {.iov_base = &spec, .iov_len = sizeof spec};
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof cbuf;
  ssize_t n;
  do {
    n = ::recvmsg(command_fd, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  int fds[4];
  int nfds = 0;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count && nfds < 4; ++i)
      std::memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
  }
  valid = n == static_cast<ssize_t>(sizeof spec) && spec.magic == kWarmSpawnMagic && nfds == 2 &&
          (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == 0;
  if (!valid) {
    for (int i = 0; i < nfds; ++i) ::close(fds[i]);
    return true;
  }
  control = fds[0];
  channel = fds[1];
  return true;
}

}  // namespace

void ServeZygote(int command_fd, const ZygoteReady& ready, const ZygoteSetup& setup) {
  ::signal(SIGCHLD, SIG_IGN);  // keepers are reaped by the kernel
  ::signal(SIGPIPE, SIG_IGN);
  // Not dumpable: nothing in the jail may ptrace the zygote or read its memory through /proc.
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  if (::send(command_fd, &ready, sizeof ready, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof ready))
    ::_exit(1);
  if (ready.ok == 0) ::_exit(1);
  for (;;) {
    WarmChildSpec spec{};
    int control = -1, channel = -1;
    bool valid = false;
    if (!ReceiveCommand(command_fd, spec, control, channel, valid)) ::_exit(0);
    if (!valid) {
      std::fputs("execbox-worker: ignored a malformed spawn command\n", stderr);
      continue;
    }
    if (setup.before_fork != nullptr) setup.before_fork();
    pid_t pid = ::fork();
    if (pid == 0) {
      if (setup.after_fork_child != nullptr) setup.after_fork_child();
      ::close(command_fd);
      RunKeeper(spec, control, channel, setup);
    }
    if (setup.after_fork_parent != nullptr) setup.after_fork_parent();
    if (pid < 0) Send(control, wire::Kind::kSetupFailed, errno, 0, 0, "fork the keeper");
    ::close(control);
    ::close(channel);
  }
}

}  // namespace execbox::jail
