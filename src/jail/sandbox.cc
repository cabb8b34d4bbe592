// Host side of a run: prepares the plan, clones the jail's init into fresh namespaces, feeds
// it, watches the limits and collects what happened.
#include "jail/sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <memory>
#include <mutex>
#include <optional>

#include "base/io.h"
#include "jail/cgroup.h"
#include "jail/child_plan.h"
#include "jail/wire.h"

namespace execbox::jail {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kReportCap = 64ull << 20;
// After asking init to stop, how long before it is killed outright.
constexpr auto kStopGrace = std::chrono::seconds(2);
constexpr uid_t kHostNobody = 65534;

const Expected<SeccompProgram>& SharedSeccomp() {
  static const Expected<SeccompProgram> program = CompileSeccompProgram();
  return program;
}

// Inside, only policy.uid/gid exist. As root the code maps to the host's nobody; as a user, to
// that user (the only id an unprivileged process may map).
Status WriteIdMaps(pid_t pid, const Policy& p, bool root) {
  std::string proc = "/proc/" + std::to_string(pid);
  uid_t host_uid = root ? kHostNobody : ::geteuid();
  gid_t host_gid = root ? kHostNobody : ::getegid();
  if (!root) {
    if (auto s = WriteFile(proc + "/setgroups", "deny"); !s) return s;
  }
  if (auto s = WriteFile(proc + "/uid_map", std::to_string(p.uid) + " " + std::to_string(host_uid) + " 1");
      !s) {
    return s;
  }
  return WriteFile(proc + "/gid_map", std::to_string(p.gid) + " " + std::to_string(host_gid) + " 1");
}

bool SendHeader(int fd, const wire::Header& h) {
  return ::send(fd, &h, sizeof h, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof h);
}

bool SendBytes(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Kills and reaps the init if the run is abandoned half-way.
struct InitGuard {
  pid_t pid = -1;
  ~InitGuard() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, __WALL);
    }
  }
};

struct Channels {
  UniqueFd stdin_read, stdin_write, stdout_read, stdout_write, stderr_read, stderr_write;
  UniqueFd report_read, report_write, control_host, control_child;
};

Expected<Channels> MakeChannels(bool report) {
  Channels c;
  auto pipe = [](UniqueFd& r, UniqueFd& w) -> Status {
    auto p = MakePipe();
    if (!p) return std::unexpected(p.error());
    r = std::move(p->first);
    w = std::move(p->second);
    return {};
  };
  if (auto s = pipe(c.stdin_read, c.stdin_write); !s) return std::unexpected(s.error());
  if (auto s = pipe(c.stdout_read, c.stdout_write); !s) return std::unexpected(s.error());
  if (auto s = pipe(c.stderr_read, c.stderr_write); !s) return std::unexpected(s.error());
  if (report) {
    if (auto s = pipe(c.report_read, c.report_write); !s) return std::unexpected(s.error());
  }
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return FailErrno("socketpair");
  c.control_host.Reset(sv[0]);
  c.control_child.Reset(sv[1]);
  ::fcntl(c.stdin_write.Get(), F_SETFL, O_NONBLOCK);
  return c;
}

// The supervisor's view of one run while it is live.
class Watch {
 public:
  Watch(const Policy& policy, const RunHooks& hooks, Cgroup* cgroup, pid_t init, Channels& ch, Outcome& out)
      : policy_(policy), hooks_(hooks), cgroup_(cgroup), init_(init), ch_(ch), out_(out) {}

  void Loop();
  std::optional<Ending> stop_reason() const { return stop_reason_; }
  bool exited() const { return exited_; }
  int wait_status() const { return wait_status_; }
  uint64_t tree_cpu_us() const { return tree_cpu_us_; }
  uint64_t tree_maxrss_kib() const { return tree_maxrss_kib_; }
  Clock::time_point started_at() const { return started_at_; }
  Clock::time_point ended_at() const { return ended_at_; }
  bool setup_failed() const { return setup_failed_; }

 private:
  void Stop(Ending reason);
  void ReadOutput(UniqueFd& fd, Stream stream);
  void ReadReport();
  void WriteStdin();
  void ReadControl();
  void CheckLimits();
  void Abandon(const char* why);
  void KillTree();

  const Policy& policy_;
  const RunHooks& hooks_;
  Cgroup* cgroup_;
  pid_t init_;
  Channels& ch_;
  Outcome& out_;
  size_t stdin_sent_ = 0;
  bool control_open_ = true;
  bool exited_ = false;
  bool setup_failed_ = false;
  int wait_status_ = 0;
  uint64_t tree_cpu_us_ = 0;
  uint64_t tree_maxrss_kib_ = 0;
  std::optional<Ending> stop_reason_;
  std::optional<Clock::time_point> kill_at_;
  Clock::time_point started_at_ = Clock::now();
  Clock::time_point ended_at_{};
  Clock::time_point deadline_ = started_at_ + policy_.limits.wall_time;
};

void Watch::Stop(Ending reason) {
  if (stop_reason_ || exited_) return;
  stop_reason_ = reason;
  wire::Header h{.kind = wire::Kind::kStop};
  SendHeader(ch_.control_host.Get(), h);
  kill_at_ = Clock::now() + kStopGrace;
}

void Watch::ReadOutput(UniqueFd& fd, Stream stream) {
  char buf[65536];
  ssize_t n = ::read(fd.Get(), buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    fd.Reset();
    return;
  }
  std::string_view data(buf, static_cast<size_t>(n));
  Capture& cap = stream == Stream::kStdout ? out_.stdout_capture : out_.stderr_capture;
  if (hooks_.on_output) hooks_.on_output(stream, data);
  cap.Append(data);
  if (cap.total_bytes() > policy_.limits.output_bytes * policy_.limits.output_kill_factor) {
    Stop(Ending::kOutputLimit);
  }
}

void Watch::ReadReport() {
  char buf[65536];
  ssize_t n = ::read(ch_.report_read.Get(), buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    ch_.report_read.Reset();
    return;
  }
  if (out_.report.size() + static_cast<size_t>(n) > kReportCap) {
    out_.report_truncated = true;
    return;
  }
  out_.report.append(buf, static_cast<size_t>(n));
}

void Watch::WriteStdin() {
  const std::string& data = policy_.stdin_data;
  while (stdin_sent_ < data.size()) {
    ssize_t n = ::write(ch_.stdin_write.Get(), data.data() + stdin_sent_, data.size() - stdin_sent_);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) break;  // EPIPE: the code closed its stdin
    stdin_sent_ += static_cast<size_t>(n);
  }
  ch_.stdin_write.Reset();
}

void Watch::ReadControl() {
  int fd = ch_.control_host.Get();
  wire::Header h{};
  if (!wire::ReadExact(fd, &h, sizeof h)) {
    control_open_ = false;
    if (!exited_) ended_at_ = Clock::now();
    return;
  }
  switch (h.kind) {
    case wire::Kind::kStarted:
      started_at_ = Clock::now();
      deadline_ = started_at_ + policy_.limits.wall_time;
      break;
    case wire::Kind::kSetupFailed:
      setup_failed_ = true;
      h.text[sizeof h.text - 1] = '\0';
      out_.message =
          std::string("jail setup failed at '") + h.text + "': " + std::strerror(static_cast<int>(h.a));
      break;
    case wire::Kind::kExited:
      exited_ = true;
      ended_at_ = Clock::now();
      wait_status_ = static_cast<int>(h.a);
      tree_cpu_us_ = static_cast<uint64_t>(h.b);
      tree_maxrss_kib_ = static_cast<uint64_t>(h.c);
      break;
    case wire::Kind::kOutputFile: {
      std::string name(static_cast<size_t>(std::clamp<int64_t>(h.a, 0, 4096)), '\0');
      std::string content;
      bool ok = h.a > 0 && h.a <= 4096 && h.b >= 0 &&
                static_cast<uint64_t>(h.b) <= policy_.collect.max_file_bytes &&
                wire::ReadExact(fd, name.data(), name.size());
      if (ok) {
        content.resize(static_cast<size_t>(h.b));
        ok = wire::ReadExact(fd, content.data(), content.size());
      }
      if (!ok) return Abandon("file collection broke off");
      if (auto valid = ValidateRelativeName(name); !valid) {
        out_.skipped_files.push_back(name + ": " + valid.error().message);
      } else {
        out_.files.push_back({std::move(name), std::move(content)});
      }
      break;
    }
    case wire::Kind::kSkippedFile: {
      std::string name(static_cast<size_t>(std::clamp<int64_t>(h.a, 0, 4096)), '\0');
      if (!wire::ReadExact(fd, name.data(), name.size())) return Abandon("file collection broke off");
      h.text[sizeof h.text - 1] = '\0';
      out_.skipped_files.push_back(name + ": " + h.text);
      break;
    }
    case wire::Kind::kDone:
      control_open_ = false;
      break;
    default:
      return Abandon("unexpected message from the jail's init");
  }
}

// The control stream is no longer framed. The init may be blocked writing to it: kill the
// whole namespace, or the supervisor's wait for the init would never end.
void Watch::Abandon(const char* why) {
  control_open_ = false;
  if (out_.message.empty()) out_.message = why;
  KillTree();
}

// Killing the init ends its pid namespace; the cgroup catches anything half-way through.
void Watch::KillTree() {
  ::kill(init_, SIGKILL);
  if (cgroup_ != nullptr) cgroup_->KillAll();
}

void Watch::CheckLimits() {
  auto now = Clock::now();
  if (kill_at_ && now >= *kill_at_) {
    KillTree();
    kill_at_.reset();
  }
  if (exited_ || setup_failed_) return;
  if (now >= deadline_) Stop(Ending::kWallTimeout);
  if (cgroup_ != nullptr) {
    CgroupUsage u = cgroup_->ReadUsage();
    if (u.cpu_ns / 1'000'000 >= static_cast<uint64_t>(policy_.limits.cpu_time.count()))
      Stop(Ending::kCpuTimeout);
    if (u.oom_kills > 0) Stop(Ending::kMemoryLimit);
  }
}

void Watch::Loop() {
  WriteStdin();
  for (;;) {
    struct pollfd fds[5];
    int n = 0;
    auto add = [&](const UniqueFd& fd, short events) {
      if (fd.Valid()) fds[n++] = {.fd = fd.Get(), .events = events, .revents = 0};
    };
    add(ch_.stdout_read, POLLIN);
    add(ch_.stderr_read, POLLIN);
    add(ch_.report_read, POLLIN);
    if (control_open_) add(ch_.control_host, POLLIN);
    add(ch_.stdin_write, POLLOUT);
    bool output_open = ch_.stdout_read.Valid() || ch_.stderr_read.Valid() || ch_.report_read.Valid();
    if (!control_open_ && !output_open) break;

    auto now = Clock::now();
    auto wake = std::min(deadline_, now + std::chrono::milliseconds(100));
    if (kill_at_) wake = std::min(wake, *kill_at_);
    int timeout = static_cast<int>(
        std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count()));
    if (::poll(fds, static_cast<nfds_t>(n), timeout) < 0 && errno != EINTR) break;
    for (int i = 0; i < n; ++i) {
      if (fds[i].revents == 0) continue;
      int fd = fds[i].fd;
      if (fd == ch_.stdout_read.Get())
        ReadOutput(ch_.stdout_read, Stream::kStdout);
      else if (fd == ch_.stderr_read.Get())
        ReadOutput(ch_.stderr_read, Stream::kStderr);
      else if (fd == ch_.report_read.Get())
        ReadReport();
      else if (fd == ch_.control_host.Get())
        ReadControl();
      else if (fd == ch_.stdin_write.Get())
        WriteStdin();
    }
    CheckLimits();
  }
  if (ended_at_ == Clock::time_point{}) ended_at_ = Clock::now();
}

Status SendInputs(int fd, const Policy& policy) {
  if (!SendHeader(fd, {.kind = wire::Kind::kGo})) return FailErrno("start the jail's init");
  for (const InputFile& f : policy.inputs) {
    wire::Header h{.kind = wire::Kind::kInputFile,
                   .a = static_cast<int64_t>(f.name.size()),
                   .b = static_cast<int64_t>(f.content.size())};
    if (!SendHeader(fd, h) || !SendBytes(fd, f.name) || !SendBytes(fd, f.content)) {
      return FailErrno("send input file " + f.name);
    }
  }
  if (!SendHeader(fd, {.kind = wire::Kind::kInputsDone})) return FailErrno("start the code");
  return {};
}

void Classify(const Policy& policy, const Watch& w, const CgroupUsage& cg, Outcome& out) {
  int st = w.wait_status();
  if (WIFEXITED(st)) out.exit_code = WEXITSTATUS(st);
  if (WIFSIGNALED(st)) out.signal = WTERMSIG(st);
  if (w.setup_failed()) {
    out.ending = Ending::kSetupFailed;
  } else if (w.stop_reason()) {
    out.ending = *w.stop_reason();
    if (out.signal == 0) out.signal = SIGKILL;
  } else if (cg.oom_kills > 0) {
    out.ending = Ending::kMemoryLimit;
  } else if (out.signal == SIGXCPU ||
             (out.signal == SIGKILL &&
              out.usage.cpu_ms >= static_cast<uint64_t>(policy.limits.cpu_time.count()))) {
    out.ending = Ending::kCpuTimeout;
  } else if (!w.exited()) {
    out.ending = Ending::kSetupFailed;
    if (out.message.empty()) out.message = "the jail's init ended before the code did";
  } else {
    out.ending = WIFSIGNALED(st) ? Ending::kSignaled : Ending::kExited;
  }
}

void FillLayers(const ChildPlan& plan, const Cgroup* cg, Outcome& out) {
  Layers& l = out.layers;
  l.user_ns = l.pid_ns = l.mount_ns = l.net_ns = l.ipc_ns = l.uts_ns = l.cgroup_ns = true;
  l.seccomp = l.no_new_privs = l.capabilities_dropped = true;
  l.landlock_abi = plan.landlock.abi;
  std::string tier = cg != nullptr ? TierName(cg->tier()) : "rlimit";
  l.cgroup = cg != nullptr ? TierName(cg->tier()) : "none";
  out.enforcement.memory = tier;
  out.enforcement.processes = cg != nullptr ? tier + "+rlimit" : "rlimit";
  out.enforcement.cpu_time = cg != nullptr ? tier + "+rlimit" : "rlimit";
}

std::string NextCgroupName() {
  static std::atomic<uint64_t> counter{0};
  return std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
}

}  // namespace

const char* EndingName(Ending e) {
  switch (e) {
    case Ending::kExited:
      return "exited";
    case Ending::kSignaled:
      return "signaled";
    case Ending::kWallTimeout:
      return "wall_timeout";
    case Ending::kCpuTimeout:
      return "cpu_timeout";
    case Ending::kMemoryLimit:
      return "memory_limit";
    case Ending::kOutputLimit:
      return "output_limit";
    case Ending::kSetupFailed:
      return "setup_failed";
  }
  return "unknown";
}

Expected<Outcome> Run(const Policy& policy, const RunHooks& hooks) {
  const auto run_started = Clock::now();
  static std::once_flag once;
  std::call_once(once, [] {
    ::signal(SIGPIPE, SIG_IGN);  // a code that closes its stdin must not kill the supervisor
    SweepStaleCgroups();
  });
  if (auto s = Validate(policy); !s) return std::unexpected(s.error());
  const auto& seccomp = SharedSeccomp();
  if (!seccomp) return std::unexpected(Context("seccomp", seccomp.error()));

  std::unique_ptr<Cgroup> cgroup;
  const CgroupSupport& support = DetectCgroups();
  if (support.tier != CgroupTier::kNone) {
    auto cg = Cgroup::Create(NextCgroupName(), {.memory_bytes = policy.limits.memory_bytes,
                                                .max_pids = policy.limits.max_processes + 1});
    if (!cg) return std::unexpected(Context("cgroup", cg.error()));
    cgroup = std::move(*cg);
  } else if (!policy.allow_rlimit_fallback) {
    return Fail("cgroups are unavailable (" + support.why_not + ") and the rlimit fallback is not allowed");
  }

  auto plan = BuildChildPlan(policy, cgroup == nullptr);
  if (!plan) return std::unexpected(plan.error());
  auto channels = MakeChannels(policy.report_channel);
  if (!channels) return std::unexpected(channels.error());
  Channels& ch = *channels;
  const bool root = ::geteuid() == 0;
  plan->seccomp = &*seccomp;
  plan->clear_groups = root;
  plan->control = ch.control_child.Get();
  plan->stdin_read = ch.stdin_read.Get();
  plan->stdout_write = ch.stdout_write.Get();
  plan->stderr_write = ch.stderr_write.Get();
  plan->report_write = ch.report_write.Valid() ? ch.report_write.Get() : -1;

  Outcome out;
  out.stdout_capture = Capture(policy.limits.output_bytes);
  out.stderr_capture = Capture(policy.limits.output_bytes);
  FillLayers(*plan, cgroup.get(), out);

  constexpr unsigned long kFlags =
      CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS;
  // Raw clone: like fork, but no atfork handlers run in the child (they may take locks).
  pid_t pid = static_cast<pid_t>(::syscall(SYS_clone, kFlags | SIGCHLD, nullptr, nullptr, nullptr, 0));
  if (pid == 0) RunInit(*plan);
  if (pid < 0) {
    return FailErrno("clone(user, pid, mount, net, ipc, uts namespaces) — see `execbox doctor`");
  }
  InitGuard guard{pid};
  for (UniqueFd* fd :
       {&ch.stdin_read, &ch.stdout_write, &ch.stderr_write, &ch.report_write, &ch.control_child}) {
    fd->Reset();
  }
  if (auto s = WriteIdMaps(pid, policy, root); !s)
    return std::unexpected(Context("user namespace", s.error()));
  if (cgroup) {
    if (auto s = cgroup->AddProcess(pid); !s) return std::unexpected(Context("cgroup", s.error()));
  }
  if (auto s = SendInputs(ch.control_host.Get(), policy); !s) {
    // The init may have failed already; the watch below reads why.
    out.message = s.error().message;
  }

  Watch watch(policy, hooks, cgroup.get(), pid, ch, out);
  watch.Loop();
  struct rusage init_usage {};
  ::wait4(pid, nullptr, __WALL, &init_usage);
  guard.pid = -1;

  CgroupUsage cg = cgroup ? cgroup->ReadUsage() : CgroupUsage{};
  out.usage.setup_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(watch.started_at() - run_started).count());
  out.usage.wall_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(watch.ended_at() - watch.started_at()).count());
  out.usage.cpu_ms = cgroup ? cg.cpu_ns / 1'000'000 : watch.tree_cpu_us() / 1000;
  out.usage.peak_memory_bytes =
      cg.peak_memory_bytes > 0 ? cg.peak_memory_bytes : watch.tree_maxrss_kib() * 1024;
  out.usage.pids_peak = cg.pids_peak;
  Classify(policy, watch, cg, out);
  return out;
}

}  // namespace execbox::jail
