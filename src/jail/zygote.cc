// Host side of warm execution. The zygote's jail is started like any other (Launch); each
// child is asked for over the zygote's command socket, moved into its own cgroup as soon as
// it says hello, and watched per execution with the same Watch as a cold run.
#include "jail/zygote.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdint>
#include <cstring>

#include "base/io.h"
#include "jail/launch.h"
#include "jail/warm_host.h"
#include "jail/wire.h"
#include "jail/zygote_loop.h"

namespace execbox::jail {

// ---- shared with warm_child_host.cc (warm_host.h) ----

// Waits until `fd` is readable; false on timeout.
bool WaitReadable(int fd, Clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    struct pollfd p = {.fd = fd, .events = POLLIN, .revents = 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

bool SendWithFds(int sock, const void* data, size_t size, const int* fds, size_t nfds, int flags) {
  if (nfds > 4) return false;
  alignas(struct cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * 4)] = {};
  struct iovec iov = {.iov_base = const_cast<void*>(data), .iov_len = size};
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (nfds > 0) {
    msg.msg_control = cbuf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  ssize_t n;
  do {
    n = ::sendmsg(sock, &msg, MSG_NOSIGNAL | flags);
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(size);
}

CgroupLimits ChildCgroupLimits(const Limits& l) {
  return {.memory_bytes = l.memory_bytes, .max_pids = l.max_processes};
}

Expected<std::pair<UniqueFd, UniqueFd>> StreamPair() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return FailErrno("socketpair");
  return std::pair{UniqueFd(sv[0]), UniqueFd(sv[1])};
}

// One read of the channel; `pid` is the sender's (in the host's pid namespace) when its
// credentials came with it (SO_PASSCRED), else left as it is.
ssize_t RecvWithPid(int fd, char* buf, size_t size, pid_t& pid) {
  char cbuf[CMSG_SPACE(sizeof(struct ucred))];
  struct iovec iov = {.iov_base = buf, .iov_len = size};
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof cbuf;
  ssize_t n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  for (struct cmsghdr* c = n > 0 ? CMSG_FIRSTHDR(&msg) : nullptr; c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
      struct ucred cred {};
      std::memcpy(&cred, CMSG_DATA(c), sizeof cred);
      pid = cred.pid;
    }
  }
  return n;
}

// The parent of `pid` as the host's /proc says, or -1.
pid_t ParentOf(pid_t pid) {
  auto stat = ReadFile("/proc/" + std::to_string(pid) + "/stat", 4096);
  if (!stat) return -1;
  size_t close = stat->rfind(')');
  if (close == std::string::npos || close + 4 >= stat->size()) return -1;
  // ") S PPID ..."
  size_t at = stat->find(' ', close + 2);
  if (at == std::string::npos) return -1;
  auto ppid = ParseU64(stat->substr(at + 1, stat->find(' ', at + 1) - at - 1));
  return ppid ? static_cast<pid_t>(*ppid) : -1;
}

Expected<UniqueFd> HoldKernel(pid_t init, pid_t kernel) {
  if (kernel <= 0 || kernel == init || ParentOf(kernel) != init)
    return Fail("the session's kernel is not the init's child");
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, kernel, 0)));
  if (!pidfd.Valid() || ParentOf(kernel) != init) return FailErrno("pidfd_open of the session's kernel");
  return pidfd;
}

namespace {

constexpr auto kSpawnTimeout = std::chrono::seconds(20);
constexpr size_t kLogKeep = 8192;

// Reads one control header and, when the sender's credentials came with it, its pid.
bool ReadHeaderWithPid(int fd, wire::Header& h, pid_t& pid) {
  char cbuf[CMSG_SPACE(sizeof(struct ucred))];
  struct iovec iov = {.iov_base = &h, .iov_len = sizeof h};
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof cbuf;
  ssize_t n = ::recvmsg(fd, &msg, MSG_WAITALL | MSG_CMSG_CLOEXEC);
  if (n != static_cast<ssize_t>(sizeof h)) return false;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
      struct ucred cred {};
      std::memcpy(&cred, CMSG_DATA(c), sizeof cred);
      pid = cred.pid;
    }
  }
  return true;
}

std::string ControlFailure(const wire::Header& h) {
  wire::Header copy = h;
  copy.text[sizeof copy.text - 1] = '\0';
  return std::string("warm child setup failed at '") + copy.text +
         "': " + std::strerror(static_cast<int>(h.a));
}

}  // namespace

// ---- Zygote ----

Expected<std::unique_ptr<Zygote>> Zygote::Start(const Policy& policy, std::chrono::milliseconds timeout) {
  if (!policy.zygote) return Fail("zygote: the policy must be a zygote policy");
  // The operator reads this (server log, doctor): it says why this process has no cgroups
  // and how to give it some, e.g. that it shares a delegated group with other processes.
  if (const CgroupSupport& cgroups = DetectCgroups(); cgroups.tier == CgroupTier::kNone) {
    return Fail("warm workers need cgroups: per-execution memory and process limits come from them (" +
                cgroups.why_not + ")");
  }
  auto launched = Launch(policy);
  if (!launched) return std::unexpected(Context("starting the zygote's jail", launched.error()));
  std::unique_ptr<Zygote> z(new Zygote());
  z->launched_ = std::make_unique<Launched>(std::move(*launched));
  Launched& l = *z->launched_;
  if (auto s = SendInputs(l.ch.control_host.Get(), policy); !s) {
    return std::unexpected(Context("starting the zygote", s.error()));
  }
  for (UniqueFd* fd : {&l.ch.stdout_read, &l.ch.stderr_read}) ::fcntl(fd->Get(), F_SETFL, O_NONBLOCK);
  auto stop = MakePipe();
  if (!stop) return std::unexpected(stop.error());
  z->log_stop_read_ = std::move(stop->first);
  z->log_stop_write_ = std::move(stop->second);
  z->log_thread_ = std::thread([zp = z.get()] { zp->DrainLogs(); });

  // The init reports the exec (or why it failed), then the worker its readiness.
  const auto deadline = Clock::now() + timeout;
  int command = l.ch.report_read.Get();
  int control = l.ch.control_host.Get();
  for (;;) {
    struct pollfd p[2] = {{.fd = command, .events = POLLIN, .revents = 0},
                          {.fd = control, .events = POLLIN, .revents = 0}};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0)
      return Fail("the zygote did not become warm within the start-up timeout; log: " + z->RecentLog());
    if (::poll(p, 2, static_cast<int>(std::min<int64_t>(left, 1000))) < 0 && errno != EINTR) {
      return FailErrno("poll");
    }
    if (p[1].revents != 0) {
      wire::Header h{};
      if (!wire::ReadExact(control, &h, sizeof h)) {
        return Fail("the zygote's jail ended during start-up; log: " + z->RecentLog());
      }
      if (h.kind == wire::Kind::kSetupFailed) return Fail(ControlFailure(h));
      if (h.kind == wire::Kind::kExited)
        return Fail("the zygote exited during start-up; log: " + z->RecentLog());
      if (h.kind == wire::Kind::kStarted) ApplyStartFlags(h.b, l.layers);
      continue;
    }
    if (p[0].revents != 0) {
      ZygoteReady ready{};
      ssize_t n = ::recv(command, &ready, sizeof ready, 0);
      if (n != static_cast<ssize_t>(sizeof ready) || ready.magic != kWarmSpawnMagic) {
        return Fail("the zygote ended during start-up; log: " + z->RecentLog());
      }
      ready.message[sizeof ready.message - 1] = '\0';
      z->ready_message_ = ready.message;
      if (ready.ok == 0) return Fail("the zygote cannot serve: " + z->ready_message_);
      return z;
    }
  }
}

Zygote::~Zygote() {
  // The log thread first: it polls the worker's pipes, which go with launched_.
  if (log_thread_.joinable()) {
    (void)!::write(log_stop_write_.Get(), "x", 1);
    log_thread_.join();
  }
  if (launched_) {
    launched_->ch.report_read.Reset();  // the worker's command socket: it exits on EOF
    launched_.reset();                  // kills and reaps the init, removes the worker's cgroup
  }
}

void Zygote::DrainLogs() {
  int out = launched_->ch.stdout_read.Get(), err = launched_->ch.stderr_read.Get();
  for (;;) {
    struct pollfd p[3] = {{.fd = out, .events = POLLIN, .revents = 0},
                          {.fd = err, .events = POLLIN, .revents = 0},
                          {.fd = log_stop_read_.Get(), .events = POLLIN, .revents = 0}};
    if (::poll(p, 3, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[2].revents != 0) return;
    bool open = false;
    for (int i = 0; i < 2; ++i) {
      if (p[i].fd < 0) continue;
      open = true;
      if (p[i].revents == 0) continue;
      char buf[4096];
      ssize_t n = ::read(p[i].fd, buf, sizeof buf);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        (i == 0 ? out : err) = -1;
        continue;
      }
      if (n < 0) continue;
      std::lock_guard lock(log_mu_);
      log_.append(buf, static_cast<size_t>(n));
      if (log_.size() > kLogKeep) log_.erase(0, log_.size() - kLogKeep);
    }
    if (!open) return;
  }
}

std::string Zygote::RecentLog() const {
  std::lock_guard lock(log_mu_);
  return log_;
}

bool Zygote::Alive() {
  std::lock_guard lock(command_mu_);
  if (dead_ || !launched_) return false;
  int status = 0;
  pid_t p = ::waitpid(launched_->init, &status, WNOHANG | __WALL);
  if (p == launched_->init) {
    launched_->init = -1;
    dead_ = true;
  }
  return !dead_;
}

CgroupUsage Zygote::Usage() {
  std::lock_guard lock(command_mu_);
  if (!launched_ || !launched_->cgroup) return {};
  return launched_->cgroup->ReadUsage();
}

Expected<std::unique_ptr<WarmChild>> Zygote::Spawn(const WarmChildOptions& options) {
  if (auto s = ValidateLimits(options.limits); !s) return std::unexpected(s.error());
  const bool network = options.egress_fd >= 0;
  if (network && (!options.session || options.egress_port < 1024))
    return Fail("network in a warm child needs a session and a relay port from 1024 up");
  auto control = StreamPair();
  if (!control) return std::unexpected(control.error());
  auto channel = StreamPair();
  if (!channel) return std::unexpected(channel.error());
  int on = 1;
  if (::setsockopt(control->first.Get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0) {
    return FailErrno("SO_PASSCRED");
  }
  // A session's init serves the host on a socket of its own (session_init.h); its kernel is
  // its child, whose pid the host reads from the credentials of the ready byte.
  int init_pair[2] = {-1, -1};
  if (options.session) {
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, init_pair) != 0)
      return FailErrno("socketpair for the session's init");
    if (::setsockopt(channel->first.Get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0)
      return FailErrno("SO_PASSCRED");
  }
  UniqueFd init_host(init_pair[0]), init_child(init_pair[1]);
  const Limits& l = options.limits;
  WarmChildSpec spec{.session = options.session ? 1u : 0u,
                     .work_dir_bytes = l.work_dir_bytes,
                     .tmp_bytes = l.tmp_bytes,
                     .shm_bytes = l.shm_bytes,
                     .inodes = l.inodes,
                     .open_files = l.open_files,
                     .max_files = options.collect.max_files,
                     .collect = options.collect.enabled ? 1u : 0u,
                     .max_file_bytes = options.collect.max_file_bytes,
                     .egress_port = network ? options.egress_port : 0u,
                     .prewarm = options.prewarm ? 1u : 0u};
  {
    std::lock_guard lock(command_mu_);
    if (dead_ || !launched_) return Fail("the zygote is gone");
    int fds[4] = {control->second.Get(), channel->second.Get(), init_child.Get(), options.egress_fd};
    const size_t nfds = options.session ? (network ? 4 : 3) : 2;
    if (!SendWithFds(launched_->ch.report_read.Get(), &spec, sizeof spec, fds, nfds)) {
      dead_ = true;
      return FailErrno("send a spawn command to the zygote");
    }
  }
  control->second.Reset();
  channel->second.Reset();
  init_child.Reset();

  std::unique_ptr<WarmChild> child(new WarmChild());
  child->options_ = options;
  child->options_.egress_fd = -1;  // the caller's, not held past this call
  child->layers_ = launched_->layers;
  child->enforcement_ = launched_->enforcement;
  const auto deadline = Clock::now() + kSpawnTimeout;
  int ctl = control->first.Get();
  wire::Header hello{};
  pid_t pid = -1;
  if (!WaitReadable(ctl, deadline) || !ReadHeaderWithPid(ctl, hello, pid)) {
    return Fail("the zygote did not fork a child (is it alive?); log: " + RecentLog());
  }
  if (hello.kind == wire::Kind::kSetupFailed) return Fail(ControlFailure(hello));
  if (hello.kind != wire::Kind::kHello || pid <= 0) return Fail("warm child: unexpected first message");
  child->pid_ = pid;
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) return FailErrno("pidfd_open of the warm child");
  child->pidfd_.Reset(pidfd);
  child->control_ = std::move(control->first);
  child->channel_ = std::move(channel->first);

  auto cg = Cgroup::Create(NextCgroupName(), ChildCgroupLimits(l));
  if (!cg) return std::unexpected(Context("warm child cgroup", cg.error()));
  child->cgroup_ = std::move(*cg);
  if (auto s = child->cgroup_->AddProcess(pid); !s) return std::unexpected(s.error());
  wire::Header go{.kind = wire::Kind::kGo};
  if (!SendWireHeader(ctl, &go, sizeof go)) return FailErrno("start the warm child");

  // Ready: one byte on the channel. Failure: 'F' and text there, or a setup failure on control.
  int chan = child->channel_.Get();
  pid_t kernel = pid;  // a one-shot child is its code's process
  for (;;) {
    struct pollfd p[2] = {{.fd = chan, .events = POLLIN, .revents = 0},
                          {.fd = ctl, .events = POLLIN, .revents = 0}};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return Fail("the warm child did not become ready in time");
    if (::poll(p, 2, static_cast<int>(std::min<int64_t>(left, 1000))) < 0 && errno != EINTR)
      return FailErrno("poll");
    if (p[0].revents != 0) {
      char buf[256] = {};
      pid_t sender = -1;
      ssize_t n = options.session ? RecvWithPid(chan, buf, sizeof buf - 1, sender)
                                  : ::recv(chan, buf, sizeof buf - 1, 0);
      if (n == 1 && buf[0] == 'R') {
        if (options.session) kernel = sender;
        break;
      }
      if (n > 1 && buf[0] == 'F') return Fail(std::string("warm child setup failed at ") + (buf + 1));
      return Fail("the warm child ended before it was ready");
    }
    if (p[1].revents != 0) {
      wire::Header h{};
      if (!wire::ReadExact(ctl, &h, sizeof h)) return Fail("the warm child ended during setup");
      if (h.kind == wire::Kind::kSetupFailed) return Fail(ControlFailure(h));
      // kExited: the code's process died; its 'F' text (if any) is on the channel.
    }
  }
  int kernel_pidfd = child->pidfd_.Get();
  if (options.session) {
    // The ready byte came from the kernel, before any code ran: its pid is the kernel's, and
    // the kernel is the init's child (checked again once held by a pidfd, so not a reused pid).
    int off = 0;
    (void)::setsockopt(chan, SOL_SOCKET, SO_PASSCRED, &off, sizeof off);
    auto held = HoldKernel(pid, kernel);
    if (!held) return std::unexpected(held.error());
    child->kernel_pidfd_ = std::move(*held);
    kernel_pidfd = child->kernel_pidfd_.Get();
    child->init_ = std::make_shared<InitLink>(std::move(init_host));
  }
  child->kernel_pid_ = kernel;
  auto code = CodeProcess::Open(kernel, kernel_pidfd);
  if (!code) return std::unexpected(Context("warm child", code.error()));
  child->code_ = std::move(*code);
  child->alive_ = true;
  return child;
}

}  // namespace execbox::jail
