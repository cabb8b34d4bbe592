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
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>

#include "base/io.h"
#include "jail/cgroup.h"
#include "jail/child_plan.h"
#include "jail/launch.h"
#include "jail/wire.h"

namespace execbox::jail {

uid_t CodeHostUid() { return ::geteuid() == 0 ? kHostNobody : ::geteuid(); }
gid_t CodeHostGid() { return ::geteuid() == 0 ? kHostNobody : ::getegid(); }

namespace {

// struct clone_args of <linux/sched.h> up to `cgroup` (CLONE_ARGS_SIZE_VER2), spelled out here
// because that header's CLONE_* macros collide with glibc's <sched.h>.
struct CloneArgs {
  uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size,
      cgroup;
};
constexpr uint64_t kCloneIntoCgroup = 0x200000000ULL;

// clone3 like fork (no new stack: the child returns here on a copy of this one), with the child
// born in the cgroup v2 group `group_fd`. -1 with errno where the kernel lacks clone3 or
// CLONE_INTO_CGROUP (before 5.7) or refuses the group; the caller then clones and moves.
pid_t CloneIntoCgroup(unsigned long flags, int group_fd) {
  CloneArgs args{};
  args.flags = flags | kCloneIntoCgroup;
  args.exit_signal = SIGCHLD;
  args.cgroup = static_cast<uint64_t>(group_fd);
  return static_cast<pid_t>(::syscall(SYS_clone3, &args, sizeof args));
}

const Expected<SeccompProgram>& SharedSeccomp(bool loopback_tcp) {
  static const Expected<SeccompProgram> program = CompileSeccompProgram();
  static const Expected<SeccompProgram> with_loopback = CompileSeccompProgram(true);
  return loopback_tcp ? with_loopback : program;
}

// Inside, only policy.uid/gid exist. As root the code maps to the host's nobody; as a user, to
// that user (the only id an unprivileged process may map).
Status WriteIdMaps(pid_t pid, const Policy& p, bool root) {
  std::string proc = "/proc/" + std::to_string(pid);
  uid_t host_uid = CodeHostUid();
  gid_t host_gid = CodeHostGid();
  if (!root) {
    if (auto s = WriteFile(proc + "/setgroups", "deny"); !s) return s;
  }
  if (auto s = WriteFile(proc + "/uid_map", std::to_string(p.uid) + " " + std::to_string(host_uid) + " 1");
      !s) {
    return s;
  }
  return WriteFile(proc + "/gid_map", std::to_string(p.gid) + " " + std::to_string(host_gid) + " 1");
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

}  // namespace

void ApplyStartFlags(int64_t without, Layers& layers) {
  layers.hostname = (without & wire::kWithoutHostname) == 0;
  layers.proc = (without & wire::kWithoutProc) == 0;
}

static bool SendHeader(int fd, const wire::Header& h) { return SendWireHeader(fd, &h, sizeof h); }

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

std::string NextCgroupName() {
  static std::atomic<uint64_t> counter{0};
  return std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
}

Expected<Channels> MakeChannels(bool report, bool report_socket, bool control) {
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
  int sv[2];
  if (report && report_socket) {
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return FailErrno("socketpair");
    c.report_read.Reset(sv[0]);
    c.report_write.Reset(sv[1]);
  } else if (report) {
    if (auto s = pipe(c.report_read, c.report_write); !s) return std::unexpected(s.error());
  }
  if (control) {
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return FailErrno("socketpair");
    c.control_host.Reset(sv[0]);
    c.control_child.Reset(sv[1]);
  }
  ::fcntl(c.stdin_write.Get(), F_SETFL, O_NONBLOCK);
  return c;
}

Launched::~Launched() {
  if (init > 0) {
    ::kill(init, SIGKILL);
    ::waitpid(init, nullptr, __WALL);
  }
}

Launched::Launched(Launched&& o) noexcept
    : init(std::exchange(o.init, -1)),
      cgroup(std::move(o.cgroup)),
      ch(std::move(o.ch)),
      layers(std::move(o.layers)),
      enforcement(std::move(o.enforcement)),
      started(o.started) {}

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
    case Ending::kCancelled:
      return "cancelled";
    case Ending::kSetupFailed:
      return "setup_failed";
    case Ending::kForgedDone:
      return "forged_done";
  }
  return "unknown";
}

Expected<Launched> Launch(const Policy& policy) {
  static std::once_flag once;
  std::call_once(once, [] {
    ::signal(SIGPIPE, SIG_IGN);  // a code that closes its stdin must not kill the supervisor
    SweepStaleCgroups();
  });
  Launched l;
  l.started = Clock::now();
  if (auto s = Validate(policy); !s) return std::unexpected(s.error());
  const auto& seccomp = SharedSeccomp(policy.egress_fd >= 0);
  if (!seccomp) return std::unexpected(Context("seccomp", seccomp.error()));

  const CgroupSupport& support = DetectCgroups();
  if (support.tier != CgroupTier::kNone) {
    auto cg = Cgroup::Create(NextCgroupName(), {.memory_bytes = policy.limits.memory_bytes,
                                                .max_pids = policy.limits.max_processes + 1});
    if (!cg) return std::unexpected(Context("cgroup", cg.error()));
    l.cgroup = std::move(*cg);
  } else if (!policy.allow_rlimit_fallback) {
    return Fail("cgroups are unavailable (" + support.why_not + ") and the rlimit fallback is not allowed");
  }

  auto plan = BuildChildPlan(policy, l.cgroup == nullptr);
  if (!plan) return std::unexpected(plan.error());
  auto channels = MakeChannels(policy.report_channel || policy.zygote, policy.zygote, true);
  if (!channels) return std::unexpected(channels.error());
  l.ch = std::move(*channels);
  Channels& ch = l.ch;
  const bool root = ::geteuid() == 0;
  plan->seccomp = &*seccomp;
  plan->clear_groups = root;
  plan->control = ch.control_child.Get();
  plan->stdin_read = ch.stdin_read.Get();
  plan->stdout_write = ch.stdout_write.Get();
  plan->stderr_write = ch.stderr_write.Get();
  plan->report_write = ch.report_write.Valid() ? ch.report_write.Get() : -1;
  plan->egress = policy.egress_fd;
  plan->landlock.tcp_port = policy.egress_fd >= 0 ? policy.egress_port : 0;
  Outcome shape;
  FillLayers(*plan, l.cgroup.get(), shape);
  l.layers = shape.layers;
  l.enforcement = shape.enforcement;

  constexpr unsigned long kFlags =
      CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS;
  // On cgroup v2 the init is born in its group (clone3 with CLONE_INTO_CGROUP, Linux 5.7): no
  // move afterwards, and nothing it does is ever counted outside the group.
  bool born_in_group = false;
  pid_t pid = -1;
  if (UniqueFd group = l.cgroup ? l.cgroup->OpenForClone() : UniqueFd(); group.Valid()) {
    pid = CloneIntoCgroup(kFlags, group.Get());
    if (pid == 0) RunInit(*plan);
    born_in_group = pid > 0;
  }
  // Raw clone: like fork, but no atfork handlers run in the child (they may take locks).
  if (pid < 0) pid = static_cast<pid_t>(::syscall(SYS_clone, kFlags | SIGCHLD, nullptr, nullptr, nullptr, 0));
  if (pid == 0) RunInit(*plan);
  if (pid < 0) {
    return FailErrno("clone(user, pid, mount, net, ipc, uts namespaces) — see `execbox doctor`");
  }
  l.init = pid;
  for (UniqueFd* fd :
       {&ch.stdin_read, &ch.stdout_write, &ch.stderr_write, &ch.report_write, &ch.control_child}) {
    fd->Reset();
  }
  if (auto s = WriteIdMaps(pid, policy, root); !s) {
    // A container that dropped these (docker/podman --cap-drop ALL) stops every run here.
    const bool refused = s.error().message.ends_with(std::strerror(EPERM));
    return std::unexpected(
        Context(root && refused
                    ? "user namespace (as root, mapping the code to nobody needs CAP_SETUID and CAP_SETGID: "
                      "a container must keep them, e.g. --cap-add SETUID,SETGID, or run execbox as a "
                      "non-root user)"
                    : "user namespace",
                s.error()));
  }
  if (l.cgroup && !born_in_group) {
    if (auto s = l.cgroup->AddProcess(pid); !s) return std::unexpected(Context("cgroup", s.error()));
  }
  return l;
}

Expected<Outcome> Run(const Policy& policy, const RunHooks& hooks) {
  auto launched = Launch(policy);
  if (!launched) return std::unexpected(launched.error());
  Launched& l = *launched;
  if (l.cgroup && hooks.cpu_weight != 0) l.cgroup->SetCpuWeight(hooks.cpu_weight);
  Channels& ch = l.ch;
  Outcome out;
  out.stdout_capture = Capture(policy.limits.output_bytes);
  out.stderr_capture = Capture(policy.limits.output_bytes);
  out.layers = l.layers;
  out.enforcement = l.enforcement;
  if (auto s = SendInputs(ch.control_host.Get(), policy); !s) {
    // The init may have failed already; the watch below reads why.
    out.message = s.error().message;
  }

  Cgroup* cgroup = l.cgroup.get();
  const pid_t init = l.init;
  WatchSpec spec{.limits = &policy.limits,
                 .stdin_data = &policy.stdin_data,
                 .max_file_bytes = policy.collect.max_file_bytes,
                 .hooks = &hooks,
                 .cgroup = cgroup,
                 // Killing the init ends its pid namespace; the cgroup catches anything half-way.
                 .kill_tree = [init, cgroup] {
                   ::kill(init, SIGKILL);
                   if (cgroup != nullptr) cgroup->KillAll();
                 }};
  Watch watch(spec, ch, out);
  watch.Loop();
  ::waitpid(l.init, nullptr, __WALL);
  l.init = -1;

  CgroupUsage cg = cgroup ? cgroup->ReadUsage() : CgroupUsage{};
  out.usage.setup_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(watch.started_at() - l.started).count());
  out.usage.wall_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(watch.ended_at() - watch.started_at()).count());
  out.usage.cpu_ms = cgroup ? cg.cpu_ns / 1'000'000 : watch.tree_cpu_us() / 1000;
  out.usage.peak_memory_bytes =
      cg.peak_memory_bytes > 0 ? cg.peak_memory_bytes : watch.tree_maxrss_kib() * 1024;
  out.usage.pids_peak = cg.pids_peak;
  ClassifyEnding(policy.limits, watch, cg, out);
  return out;
}

}  // namespace execbox::jail
