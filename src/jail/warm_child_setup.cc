// The child's side of a warm child: one process, forked from the zygote into a pid namespace of
// its own, that isolates itself and becomes the code's process. It runs in a forked copy of a
// single-threaded worker (fork(), not raw clone), so it may allocate.
#include "jail/warm_child_setup.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "jail/child_fs.h"
#include "jail/lockdown.h"
#include "jail/loopback.h"
#include "jail/session_init.h"
#include "jail/session_root.h"
#include "jail/warm_host.h"
#include "jail/wire.h"

namespace execbox::jail {
namespace {

constexpr int kChannelFd = 3;
constexpr int kInitFd = 4;   // a session's: the init's socket to the host
constexpr int kLayerFd = 5;  // a session's: its root's upper layer, read-only (the kernel's only)
// A session with network: the relay's listener and the connector to the host (the init's only).
constexpr int kRelayListenFd = 6;
constexpr int kRelayConnectorFd = 7;

// A session's relay port (0: no network), for the kernels the init forks later too.
int g_egress_port = 0;
// WarmChildSpec::prewarm, for the session's kernels (the first, and any the init forks after a
// restart).
bool g_prewarm = true;

[[noreturn]] void SetupFail(int control, const char* step) noexcept {
  wire::Header h{.kind = wire::Kind::kSetupFailed, .a = errno};
  wire::CopyText(h.text, sizeof h.text, step);
  (void)wire::WriteExact(control, &h, sizeof h);
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

// A kernel, its descriptors placed (PlaceKernelDescriptors): what the first one does once the
// init has forked it, and what each new one the init forks does (session_init.h). The ready
// byte goes to the host on `ready`, which is then closed: from here on the kernel's channel
// reaches the init only.
[[noreturn]] void BecomeKernel(const void* context, int ready, int layer) noexcept {
  const ZygoteSetup& setup = *static_cast<const ZygoteSetup*>(context);
  // Dumpable like any exec'd process: the sandbox's own tools may read /proc/self.
  ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  if (!wire::WriteExact(ready, "R", 1)) ::_exit(1);
  ::close(ready);
  setup.run_code(kKernelChannelFd, true, layer, g_egress_port, g_prewarm);
  ::_exit(70);
}

// A session's process, locked down: it forks, the child goes on to be the kernel, and this
// process stays pid 1 as the session's init (session_init.h), relaying the kernel's channel:
// `channel` (the host's) stays the init's, and the kernel gets a pair's end instead. SIGCHLD is
// blocked across the fork, so the init cannot miss the kernel's end; the kernel unblocks it.
// The init keeps the dumpability it inherited from the zygote (none): nothing in the sandbox
// reads its descriptors, the root's layer among them (kept for the kernels it may start later).
// Returns in the kernel, with the host's socket at kKernelReadyFd for its ready byte.
void ForkSessionInit(int channel, int init, int layer, const SessionRelay& relay, const ZygoteSetup& setup) noexcept {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
    CodeFail(channel, "socketpair for the kernel's channel");
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  pid_t kernel = ::fork();
  if (kernel < 0) CodeFail(channel, "fork the session's kernel");
  if (kernel > 0) {
    ::close(pair[1]);
    (void)::fcntl(channel, F_SETFD, FD_CLOEXEC);  // placed as fd 3 without it
    RunSessionInit(init, kernel, KernelChannel{.host = channel, .kernel = pair[0]},
                   KernelStart{.run = BecomeKernel, .context = &setup, .layer = layer}, relay);
  }
  // The init's socket to the host and the relay's descriptors go too.
  if (!PlaceKernelDescriptors(channel, pair[1], layer)) CodeFail(channel, "place the kernel's channel");
  ::sigprocmask(SIG_UNBLOCK, &chld, nullptr);
  if (::setsid() < 0) CodeFail(kKernelReadyFd, "setsid");
}

// The proxies' addresses, for the code, its commands and the session's processes: what pip,
// requests, urllib, curl and git follow; and pip no longer told to stay offline
// (python_program.cc does the same for a cold run).
void SetProxyEnvironment(int port) {
  char http[48], socks[48];
  std::snprintf(http, sizeof http, "http://127.0.0.1:%d", port);
  std::snprintf(socks, sizeof socks, "socks5h://127.0.0.1:%d", port);
  for (const char* name : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"}) ::setenv(name, http, 1);
  for (const char* name : {"ALL_PROXY", "all_proxy"}) ::setenv(name, socks, 1);
  for (const char* name : {"NO_PROXY", "no_proxy"}) ::setenv(name, "localhost,127.0.0.1", 1);
  ::unsetenv("PIP_NO_INDEX");  // pip may reach an index the policy allows
}

// A session's child whose processes may serve TCP on its loopback (lo up, AF_INET stream
// sockets allowed, Landlock leaving TCP to the namespace); every session where the worker has
// the loopback's seccomp program.
bool SessionServers(const WarmChildSpec& spec, const ZygoteSetup& setup) noexcept {
  return spec.session != 0 && setup.seccomp_loopback != nullptr;
}

// The code's process, isolated: locked down before it waits for code. `init` (a session's,
// else -1) is the socket the session's init serves the host on; `layer` (a session's, else -1)
// its root's upper layer; `relay` (a session's with network) the listener and connector.
[[noreturn]] void RunCode(const WarmChildSpec& spec, int channel, int init, int layer, SessionRelay relay,
                          const ZygoteSetup& setup) noexcept {
  // Refused only where the zygote's own jail was refused one too (its layers say so).
  if (MountProcIfAllowed("/proc") < 0) CodeFail(channel, "mount /proc");
  ResetSignals();  // the zygote's blocked SIGCHLD included
  // What python3 itself does at start-up: broken pipes and file-size overruns become OSErrors.
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGXFSZ, SIG_IGN);
  if (::setsid() < 0) CodeFail(channel, "setsid");

  int high = ::fcntl(channel, F_DUPFD, 64);
  int high_init = init >= 0 ? ::fcntl(init, F_DUPFD, 64) : -1;
  int high_layer = layer >= 0 ? ::fcntl(layer, F_DUPFD, 64) : -1;
  const bool relayed = relay.listener >= 0;
  int high_listener = relayed ? ::fcntl(relay.listener, F_DUPFD, 64) : -1;
  int high_connector = relayed ? ::fcntl(relay.connector, F_DUPFD, 64) : -1;
  int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (high < 0 || null < 0 || (init >= 0 && high_init < 0) || (layer >= 0 && high_layer < 0) ||
      (relayed && (high_listener < 0 || high_connector < 0))) {
    CodeFail(channel, "open /dev/null");
  }
  for (int fd = 0; fd < 3; ++fd) {
    if (::dup2(null, fd) < 0) CodeFail(channel, "place descriptors");
  }
  if (::dup2(high, kChannelFd) < 0) CodeFail(channel, "place the channel");
  channel = kChannelFd;
  if (init >= 0) {
    if (::dup2(high_init, kInitFd) < 0) CodeFail(channel, "place the init's socket");
    init = kInitFd;
  }
  int last = init >= 0 ? kInitFd : kChannelFd;
  if (layer >= 0) {
    // Close-on-exec: a command the code runs never holds it.
    if (::dup3(high_layer, kLayerFd, O_CLOEXEC) < 0) CodeFail(channel, "place the root's layer");
    layer = last = kLayerFd;
  }
  if (relayed) {
    if (layer < 0) ::close(kLayerFd);  // a gap below the relay's descriptors holds nothing
    // Close-on-exec: the init's, and no command it starts holds them.
    if (::dup3(high_listener, kRelayListenFd, O_CLOEXEC) < 0 ||
        ::dup3(high_connector, kRelayConnectorFd, O_CLOEXEC) < 0) {
      CodeFail(channel, "place the network relay");
    }
    relay = {.listener = kRelayListenFd, .connector = kRelayConnectorFd};
    last = kRelayConnectorFd;
    g_egress_port = static_cast<int>(spec.egress_port);
    SetProxyEnvironment(g_egress_port);
  }
  // Everything else the zygote held goes here: its command socket, the other children's
  // control sockets and work dirs.
  ::close_range(static_cast<unsigned>(last) + 1, ~0U, 0);

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
  g_prewarm = spec.prewarm != 0;

  // Writes beneath / only where / is the session's own overlay.
  LandlockPlan landlock = layer >= 0 ? setup.session_landlock : setup.landlock;
  // With network, TCP to the relay's port (connect; and bind, which the init's listener holds).
  if (relayed) landlock.tcp_port = static_cast<uint16_t>(spec.egress_port);
  // A session is a machine: its servers listen on its loopback, any port (lo is all its net
  // namespace has: nothing outside reaches them but the host's relay, e2b_ports.cc).
  const bool servers = SessionServers(spec, setup);
  if (servers) landlock.tcp_open = true;
  const SeccompProgram& seccomp = relayed || servers ? *setup.seccomp_loopback : *setup.seccomp;
  if (const char* step = LockDown(landlock, seccomp)) CodeFail(channel, step);
  if (init >= 0) {
    ForkSessionInit(channel, init, layer, relay, setup);
    BecomeKernel(&setup, kKernelReadyFd, layer);
  }
  // Dumpable like any exec'd process: the sandbox's own tools may read /proc/self.
  ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  if (!wire::WriteExact(channel, "R", 1)) ::_exit(1);
  setup.run_code(channel, false, layer, 0, spec.prewarm != 0);
  ::_exit(70);
}

}  // namespace

void RunChild(const WarmChildSpec& spec, int control, int channel, int init, int egress, int link,
              const ZygoteSetup& setup) noexcept {
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) SetupFail(control, "PR_SET_PDEATHSIG");
  // The host reads this process's pid from the message's credentials and moves it into the
  // child's own cgroup before anything else happens.
  wire::Header hello{.kind = wire::Kind::kHello};
  if (!wire::WriteExact(control, &hello, sizeof hello)) ::_exit(1);
  wire::Header go{};
  if (!wire::ReadExact(control, &go, sizeof go) || go.kind != wire::Kind::kGo) ::_exit(1);

  // The pid namespace came with the fork; the cgroup namespace is made only now, inside the
  // child's own group.
  constexpr int kFlags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;
  if (::unshare(kFlags) != 0) SetupFail(control, "unshare mount, net, ipc, uts, cgroup namespaces");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) SetupFail(control, "make / private");
  // A session with network: lo up and the relay listening on it, before the lockdown (the code
  // may then only connect there); nothing else is added to the namespace.
  SessionRelay relay;
  if (egress >= 0 && setup.seccomp_loopback == nullptr) {
    errno = ENOSYS;
    SetupFail(control, "network in a session (this worker cannot)");
  }
  if (egress >= 0 || SessionServers(spec, setup)) {
    if (int err = BringLoopbackUp(); err != 0) {
      errno = err;
      SetupFail(control, "bring up the loopback interface");
    }
  }
  if (egress >= 0) {
    relay.listener = ListenOnLoopback(static_cast<uint16_t>(spec.egress_port));
    if (relay.listener < 0) SetupFail(control, "listen on the loopback for the network relay");
    relay.connector = egress;
  }
  // A session is a machine: its root is writable, into a layer of its own (session_root.h).
  int layer = -1;
  if (spec.session != 0) {
    if (const char* step = MountSessionRoot(spec.work_dir_bytes, spec.inodes, setup.work_dir, &layer)) {
      SetupFail(control, step);
    }
  }
  if (MountTmpfs(setup.work_dir, spec.work_dir_bytes, spec.inodes, "0700") != 0)
    SetupFail(control, "mount the work dir");
  if (MountTmpfs("/tmp", spec.tmp_bytes, spec.inodes, "1777") != 0) SetupFail(control, "mount /tmp");
  if (MountTmpfs("/dev/shm", spec.shm_bytes, 1024, "1777") != 0) SetupFail(control, "mount /dev/shm");
  // A session's own pseudo-terminals (its init opens them for the host). Without it a session
  // works as before and a pty start says why it failed.
  if (spec.session != 0) {
    (void)::mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                  "newinstance,ptmxmode=0666,mode=0620");
  }
  (void)::sethostname("sandbox", 7);

  // The zygote serves the host's file requests and collections from here on, through this
  // descriptor (it keeps the tmpfs alive after this process and its namespace are gone).
  int workfd = ::open(setup.work_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (workfd < 0) SetupFail(control, "open the work dir");
  if (!SendWithFds(link, "W", 1, &workfd, 1)) SetupFail(control, "hand the work dir to the zygote");
  ::close(workfd);
  ::close(link);
  ::close(control);  // the code never holds the host's control socket
  RunCode(spec, channel, init, layer, relay, setup);
}

}  // namespace execbox::jail
