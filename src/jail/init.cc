// The jail's init: pid 1 of the new pid namespace. It builds the filesystem, starts the code,
// reaps every process, and when the code's main process ends (or the supervisor says stop)
// takes every other process in the namespace with it. Then it sends back the files.
//
// Everything here runs between clone and exec in a copy of a possibly multi-threaded
// process: it is allocation-free and lock-free, and reports only through the control socket.
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sys/socket.h>
#include <linux/securebits.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "jail/child_fs.h"
#include "jail/child_plan.h"
#include "jail/lockdown.h"
#include "jail/loopback.h"
#include "jail/wire.h"

namespace execbox::jail {
namespace {

// Descriptor numbers in the code's process, as the code sees them.
constexpr int kStdin = 0, kStdout = 1, kStderr = 2, kReport = 3;

struct ExecFailure {
  char step[64];
  int err;
};

void Send(const ChildPlan& plan, wire::Kind kind, int64_t a = 0, int64_t b = 0, int64_t c = 0,
          const char* text = nullptr) noexcept {
  wire::Header h{.kind = kind, .a = a, .b = b, .c = c};
  if (text != nullptr) wire::CopyText(h.text, sizeof h.text, text);
  (void)wire::WriteExact(plan.control, &h, sizeof h);
}

[[noreturn]] void FailSetup(const ChildPlan& plan, StepError e) noexcept {
  Send(plan, wire::Kind::kSetupFailed, e.err, 0, 0, e.step);
  ::_exit(1);
}

// Kills every other process in the namespace and reaps them all. Loops because a process can
// be half-way through fork when the first kill lands.
void KillAndReapAll(pid_t main_pid, int* main_status, struct rusage* main_usage) noexcept {
  for (;;) {
    ::kill(-1, SIGKILL);
    int status = 0;
    struct rusage ru {};
    pid_t p = ::wait4(-1, &status, __WALL, &ru);
    if (p < 0) {
      if (errno == EINTR) continue;
      return;  // ECHILD: nobody left
    }
    if (p == main_pid && main_status != nullptr) {
      *main_status = status;
      *main_usage = ru;
      main_status = nullptr;
    }
  }
}

// Moves `fds[i]` to descriptor `targets[i]` even when the sets overlap.
bool PlaceFds(const int* fds, const int* targets, int n) noexcept {
  int high[8];
  for (int i = 0; i < n; ++i) {
    high[i] = fds[i] < 0 ? -1 : ::fcntl(fds[i], F_DUPFD_CLOEXEC, 64);
    if (fds[i] >= 0 && high[i] < 0) return false;
  }
  for (int i = 0; i < n; ++i) {
    if (high[i] >= 0 && ::dup2(high[i], targets[i]) < 0) return false;
  }
  return true;
}

[[noreturn]] void ExecFail(int status_fd, const char* step) noexcept {
  ExecFailure f{};
  f.err = errno;
  wire::CopyText(f.step, sizeof f.step, step);
  (void)wire::WriteExact(status_fd, &f, sizeof f);
  ::_exit(127);
}

// The code's process: from init's child to the exec of argv[0], every restriction applied.
[[noreturn]] void RunCode(const ChildPlan& plan, int status_fd) noexcept {
  // Signals: init blocks SIGCHLD and the supervisor may ignore some; exec must not inherit either.
  ResetSignals();

  if (::setsid() < 0) ExecFail(status_fd, "setsid");
  // 0-2, then the report (3) and the egress connector (kEgressFd, which needs the report), then
  // the status pipe, closed by the exec.
  int fds[6] = {plan.stdin_read, plan.stdout_write, plan.stderr_write};
  int targets[6] = {kStdin, kStdout, kStderr};
  int n = 3;
  if (plan.report_write >= 0) {
    fds[n] = plan.report_write;
    targets[n++] = kReport;
    if (plan.egress >= 0) {
      fds[n] = plan.egress;
      targets[n++] = kEgressFd;
    }
  }
  const int status_target = n;
  fds[n] = status_fd;
  targets[n++] = status_target;
  if (!PlaceFds(fds, targets, n)) ExecFail(status_fd, "place descriptors");
  status_fd = status_target;
  if (::fcntl(status_fd, F_SETFD, FD_CLOEXEC) != 0) ExecFail(status_fd, "cloexec status pipe");
  ::close_range(static_cast<unsigned>(status_fd) + 1, ~0U, 0);

  if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) ExecFail(status_fd, "PR_SET_PDEATHSIG");
  for (const ResourceLimit& r : plan.rlimits) {
    struct rlimit rl {
      .rlim_cur = r.soft, .rlim_max = r.hard
    };
    if (::setrlimit(static_cast<__rlimit_resource>(r.resource), &rl) != 0) ExecFail(status_fd, "setrlimit");
  }
  ::umask(022);
  if (::chdir(plan.work_dir) != 0) ExecFail(status_fd, "chdir to the work dir");

  if (plan.zygote) {
    // A trusted zygote: it makes the namespaces and mounts of each child it forks, and
    // applies everything below to the child itself (jail/zygote_loop.h).
    if (int err = KeepAmbientCapabilities(plan.zygote_capabilities); err != 0) {
      errno = err;
      ExecFail(status_fd, "keep the zygote's capabilities");
    }
    ::execve(plan.argv[0], plan.argv.data(), plan.envp.data());
    ExecFail(status_fd, "execve");
  }
  if (const char* step = LockDown(plan.landlock, *plan.seccomp)) ExecFail(status_fd, step);
  ::execve(plan.argv[0], plan.argv.data(), plan.envp.data());
  ExecFail(status_fd, "execve");
}

// Waits for the code to exec; false (and the failure sent) when it did not. `without`: the
// optional steps the kernel refused (wire::kWithout*), told to the supervisor with kStarted.
bool AwaitExec(const ChildPlan& plan, int status_read, pid_t pid, int64_t without) noexcept {
  ExecFailure f{};
  if (!wire::ReadExact(status_read, &f, sizeof f)) {
    Send(plan, wire::Kind::kStarted, pid, without);
    return true;
  }
  Send(plan, wire::Kind::kSetupFailed, f.err, 0, 0, f.step);
  return false;
}

// Runs until the code's main process ends or the supervisor says stop.
// True when the main process was reaped here; false when told to stop first.
bool Supervise(const ChildPlan& plan, int sigfd, pid_t main_pid, int* status, struct rusage* usage) noexcept {
  struct pollfd fds[2] = {{.fd = plan.control, .events = POLLIN, .revents = 0},
                          {.fd = sigfd, .events = POLLIN, .revents = 0}};
  for (;;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (fds[0].revents != 0) {
      // kStop, or the supervisor is gone: either way the tree dies now.
      wire::Header h{};
      (void)wire::ReadExact(plan.control, &h, sizeof h);
      return false;
    }
    struct signalfd_siginfo si;
    (void)::read(sigfd, &si, sizeof si);
    for (;;) {
      int st = 0;
      struct rusage ru {};
      pid_t p = ::wait4(-1, &st, WNOHANG | __WALL, &ru);
      if (p <= 0) break;
      if (p == main_pid) {
        *status = st;
        *usage = ru;
        return true;
      }
    }
  }
}

// Closes every descriptor inherited from the supervisor but the plan's own: the supervisor's
// ends of the pipes (stdin's write end above all, or the code never sees EOF) and anything else.
void CloseInheritedFds(const ChildPlan& plan) noexcept {
  int keep[] = {plan.control, plan.stdin_read, plan.stdout_write, plan.stderr_write, plan.report_write, plan.egress};
  constexpr int n = sizeof keep / sizeof keep[0];
  for (int i = 1; i < n; ++i) {  // insertion sort: six numbers, no library call
    for (int j = i; j > 0 && keep[j - 1] > keep[j]; --j) {
      int t = keep[j];
      keep[j] = keep[j - 1];
      keep[j - 1] = t;
    }
  }
  unsigned next = 0;
  for (int fd : keep) {
    if (fd < 0) continue;
    if (static_cast<unsigned>(fd) > next) ::close_range(next, static_cast<unsigned>(fd) - 1, 0);
    next = static_cast<unsigned>(fd) + 1;
  }
  ::close_range(next, ~0U, 0);
}

}  // namespace

void RunInit(const ChildPlan& plan) noexcept {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  CloseInheritedFds(plan);
  ::umask(0);
  wire::Header go{};
  if (!wire::ReadExact(plan.control, &go, sizeof go) || go.kind != wire::Kind::kGo) ::_exit(1);

  // Raw system calls, not glibc's setgroups/setres[ug]id: in a process cloned from a threaded
  // supervisor, glibc still lists the parent's threads and signals each "to change its ids
  // too"; where the supervisor is pid 1 (a container's entry point) a listed thread id equals
  // this process's own pid 1 in its new namespace, and the wrapper waits for itself forever.
  if (plan.clear_groups && ::syscall(SYS_setgroups, 0, nullptr) != 0) FailSetup(plan, {"setgroups", errno});
  // Become the one mapped id (as host root the clone kept kuid 0, which has no name inside and
  // cannot own files). NO_SETUID_FIXUP keeps the namespace capabilities the setup still needs.
  if (::prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP, 0, 0, 0) != 0)
    FailSetup(plan, {"securebits", errno});
  if (::syscall(SYS_setresgid, plan.gid, plan.gid, plan.gid) != 0) FailSetup(plan, {"setresgid", errno});
  if (::syscall(SYS_setresuid, plan.uid, plan.uid, plan.uid) != 0) FailSetup(plan, {"setresuid", errno});
  if (::unshare(CLONE_NEWCGROUP) != 0) FailSetup(plan, {"unshare cgroup namespace", errno});
  // The name is cosmetic (the UTS namespace is private either way): a refusal is reported, not fatal.
  int64_t without = 0;
  if (::sethostname(plan.hostname, std::strlen(plan.hostname)) != 0) without |= wire::kWithoutHostname;
  if (plan.egress >= 0) {
    if (int err = BringLoopbackUp(); err != 0) FailSetup(plan, {"bring up the loopback interface", err});
  }
  if (StepError e = BuildFilesystem(plan, without)) FailSetup(plan, e);
  // Not dumpable: the code (same uid inside) cannot open /proc/1/* or ptrace this process.
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  if (StepError e = ReceiveInputs(plan)) FailSetup(plan, e);

  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  int sigfd = ::signalfd(-1, &chld, SFD_CLOEXEC);
  if (sigfd < 0) FailSetup(plan, {"signalfd", errno});
  int status_pipe[2];
  if (::pipe2(status_pipe, O_CLOEXEC) != 0) FailSetup(plan, {"pipe2", errno});

  // Raw clone rather than fork(): no atfork handlers, which may take locks.
  pid_t pid = static_cast<pid_t>(::syscall(SYS_clone, SIGCHLD, nullptr, nullptr, nullptr, 0));
  if (pid < 0) FailSetup(plan, {"fork the code's process", errno});
  if (pid == 0) {
    ::close(status_pipe[0]);
    RunCode(plan, status_pipe[1]);
  }
  ::close(status_pipe[1]);
  for (int fd : {plan.stdin_read, plan.stdout_write, plan.stderr_write, plan.report_write, plan.egress}) {
    if (fd >= 0) ::close(fd);
  }
  int status = 0;
  struct rusage usage {};
  bool started = AwaitExec(plan, status_pipe[0], pid, without);
  ::close(status_pipe[0]);
  bool reaped = started && Supervise(plan, sigfd, pid, &status, &usage);
  KillAndReapAll(pid, reaped ? nullptr : &status, &usage);
  if (!started) ::_exit(1);

  struct rusage all {};
  ::getrusage(RUSAGE_CHILDREN, &all);
  int64_t cpu_us =
      (all.ru_utime.tv_sec + all.ru_stime.tv_sec) * 1000000LL + all.ru_utime.tv_usec + all.ru_stime.tv_usec;
  Send(plan, wire::Kind::kExited, status, cpu_us, all.ru_maxrss);
  if (plan.collect_files) SendOutputs(plan);
  Send(plan, wire::Kind::kDone);
  ::_exit(0);
}

}  // namespace execbox::jail
