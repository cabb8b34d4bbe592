#include "jail/doctor.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "base/io.h"
#include "jail/cgroup.h"
#include "jail/container_cgroups.h"
#include "jail/landlock.h"
#include "jail/launch.h"
#include "jail/sandbox.h"
#include "jail/seccomp_filter.h"
#include "jail/session_root.h"

namespace execbox::jail {
namespace {

// Runs `probe` in a forked child; returns 0 or the errno it failed with. Probes run between
// fork and _exit, so they must not allocate.
template <typename Probe>
int InChild(Probe probe) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(probe());
  if (pid < 0) return errno;
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 255;
}

// Probe results above any errno: what a probe proved was not enforced.
constexpr int kNotEnforced = 200;

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string UserNsFix() {
  if (auto r = ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); r && Trim(*r) == "1") {
    return "Ubuntu's AppArmor blocks unprivileged user namespaces: sysctl -w "
           "kernel.apparmor_restrict_unprivileged_userns=0 (or run execbox as root)";
  }
  if (auto r = ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); r && Trim(*r) == "0") {
    return "sysctl -w kernel.unprivileged_userns_clone=1";
  }
  if (auto r = ReadFile("/proc/sys/user/max_user_namespaces"); r && Trim(*r) == "0") {
    return "sysctl -w user.max_user_namespaces=10000";
  }
  return "in a container, allow user namespaces (e.g. a seccomp profile that permits unshare/clone "
         "with CLONE_NEWUSER), or run on the host";
}

Check Namespace(const char* name, int flag) {
  int err = InChild([flag] { return ::unshare(CLONE_NEWUSER | flag) == 0 ? 0 : errno; });
  Check c{.layer = std::string(name) + " namespace", .ok = err == 0};
  c.detail = err == 0 ? "unshare works" : std::string("unshare failed: ") + std::strerror(err);
  if (err != 0) c.fix = UserNsFix();
  return c;
}

// Overmounts under /proc (as container runtimes add) stop a fresh proc mount in a user namespace.
Check ProcVisibility() {
  Check c{.layer = "/proc fully visible", .ok = true};
  std::ifstream mi("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mi, line)) {
    // Fields: id parent major:minor root mount-point ...
    size_t pos = 0;
    for (int i = 0; i < 4 && pos != std::string::npos; ++i) pos = line.find(' ', pos + 1);
    if (pos == std::string::npos) continue;
    std::string mount_point = line.substr(pos + 1, line.find(' ', pos + 1) - pos - 1);
    if (mount_point.rfind("/proc/", 0) == 0 && mount_point.rfind("/proc/sys/fs/binfmt_misc", 0) != 0) {
      c.ok = false;
      c.detail = "masked: " + mount_point;
    }
  }
  if (c.ok) c.detail = "no overmounts";
  if (!c.ok) c.detail += " (the sandbox's /proc will be empty: the kernel refuses a fresh one)";
  c.fix =
      "a container masks parts of /proc: to give the code a /proc of its own, run it with an unmasked "
      "/proc (podman/docker --security-opt systempaths=unconfined; Kubernetes procMount: Unmasked)";
  c.required = false;
  return c;
}

Check Seccomp() {
  Check c{.layer = "seccomp-bpf"};
  auto program = CompileSeccompProgram();
  if (!program) {
    c.detail = program.error().message;
    c.fix = "install libseccomp2 (Debian: libseccomp2)";
    return c;
  }
  const SeccompProgram& p = *program;
  // Two calls the filters refuse with EPERM (one from each program), that work without them:
  // a refusal proves the loaded filters are in force, not only that they loaded.
  int err = InChild([&p] {
    int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    bool inet = s >= 0;
    if (inet) ::close(s);
    char byte = 0;
    bool lock = ::mlock(&byte, 1) == 0;
    if (lock) ::munlock(&byte, 1);
    if (!inet && !lock) return kNotEnforced + 2;
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
    if (int e = LoadSeccompProgram(p); e != 0) return e;
    s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (inet && !(s < 0 && errno == EPERM)) return kNotEnforced;
    if (lock && !(::mlock(&byte, 1) != 0 && errno == EPERM)) return kNotEnforced + 1;
    return 0;
  });
  c.ok = err == 0;
  c.fix = "the kernel needs CONFIG_SECCOMP_FILTER; in a container, allow the seccomp syscall";
  if (c.ok) {
    c.detail = "filters load (" + std::to_string(p.allowlist.size() + p.argument_checks.size()) +
               " BPF instructions) and refuse socket(AF_INET) and mlock in a child";
  } else if (err == kNotEnforced || err == kNotEnforced + 1) {
    c.detail = std::string("the filters loaded but a child could still call ") +
               (err == kNotEnforced ? "socket(AF_INET)" : "mlock");
    c.fix = "the kernel does not apply the loaded filter: report it with `uname -a`";
  } else if (err == kNotEnforced + 2) {
    c.detail = "cannot prove the filters: socket(AF_INET) and mlock fail here even without them";
  } else {
    c.detail = std::string("loading failed: ") + std::strerror(err);
  }
  return c;
}

// Where the kernel has Landlock, a ruleset like the jail's (writes beneath one directory only)
// is applied in a child, which must then create a file there and be refused one elsewhere.
Check Landlock() {
  int abi = LandlockAbi();
  Check c{.layer = "Landlock", .required = false};
  c.fix = "boot with lsm=...,landlock (CONFIG_SECURITY_LANDLOCK); the mount namespace still confines writes";
  if (abi <= 0) {
    c.detail = "not available";
    return c;
  }
  char allowed[] = "/tmp/execbox-doctor-XXXXXX";
  char denied[] = "/tmp/execbox-doctor-XXXXXX";
  bool made_allowed = ::mkdtemp(allowed) != nullptr;
  bool made_denied = ::mkdtemp(denied) != nullptr;
  if (!made_allowed || !made_denied) {
    c.detail = "ABI " + std::to_string(abi) + ", not tried: cannot make a directory in /tmp (" +
               std::strerror(errno) + ")";
    c.fix = "make /tmp writable for this user";
  } else {
    LandlockPlan plan = MakeLandlockPlan({allowed}, {});
    std::string inside = std::string(allowed) + "/file", outside = std::string(denied) + "/file";
    int err = InChild([&] {
      if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
      if (int e = ApplyLandlock(plan); e != 0) return e;
      int in = ::open(inside.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (in < 0) return kNotEnforced + 1;
      ::close(in);
      int out = ::open(outside.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (out >= 0) return kNotEnforced;
      return errno == EACCES ? 0 : kNotEnforced;
    });
    c.ok = err == 0;
    if (c.ok) {
      c.detail = "ABI " + std::to_string(abi) + ": a child restricted to one directory wrote there and was " +
                 "refused a file elsewhere";
    } else if (err == kNotEnforced) {
      c.detail =
          "ABI " + std::to_string(abi) + ", but a restricted child created a file outside its directory";
      c.fix = "the kernel reports Landlock but does not enforce it: report it with `uname -a`";
    } else if (err == kNotEnforced + 1) {
      c.detail =
          "ABI " + std::to_string(abi) + ", but a restricted child could not write where it was allowed";
      c.fix = "the kernel's Landlock refuses what the ruleset allows: report it with `uname -a`";
    } else {
      c.detail = "ABI " + std::to_string(abi) + ", but applying a ruleset failed: " + std::strerror(err);
    }
    ::unlink(inside.c_str());
    ::unlink(outside.c_str());
  }
  if (made_allowed) ::rmdir(allowed);
  if (made_denied) ::rmdir(denied);
  return c;
}

// Forks a child, moves it into `cg` before it runs `probe`, and returns its wait status (-1
// when it could not be moved: `error` says why).
template <typename Probe>
int InGroup(Cgroup& cg, Probe probe, std::string& error) {
  int go[2];
  if (::pipe2(go, O_CLOEXEC) != 0) {
    error = std::string("pipe: ") + std::strerror(errno);
    return -1;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(go[1]);
    char byte;
    if (::read(go[0], &byte, 1) != 1) ::_exit(127);
    ::_exit(probe());
  }
  ::close(go[0]);
  if (pid < 0) {
    error = std::string("fork: ") + std::strerror(errno);
    ::close(go[1]);
    return -1;
  }
  auto moved = cg.AddProcess(pid);
  if (!moved) {
    error = "moving a process into it: " + moved.error().message;
  } else if (::write(go[1], "g", 1) != 1) {
    error = std::string("starting the probe: ") + std::strerror(errno);
  }
  ::close(go[1]);  // without the byte the child exits
  int status = 0;
  ::waitpid(pid, &status, 0);
  return error.empty() ? status : -1;
}

// In the group: forks until refused. 0 when a fork failed with EAGAIN before 16 did not.
int ForkUntilRefused() {
  pid_t kids[16];
  int n = 0, err = 0;
  for (; n < 16; ++n) {
    pid_t k = ::fork();
    if (k == 0) {
      ::pause();
      ::_exit(0);
    }
    if (k < 0) {
      err = errno;
      break;
    }
    kids[n] = k;
  }
  for (int i = 0; i < n; ++i) {
    ::kill(kids[i], SIGKILL);
    ::waitpid(kids[i], nullptr, 0);
  }
  return err == EAGAIN ? 0 : kNotEnforced;
}

// In the group: touches far more memory than its limit. Returns only if nothing stopped it.
int TouchPastTheLimit(size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return errno;
  for (size_t at = 0; at < bytes; at += 4096) static_cast<volatile char*>(p)[at] = 1;
  return kNotEnforced;
}

// The detected tier, proven: a group made with a memory and a process limit, a child moved in,
// each limit reached (a fork refused, an OOM kill counted in the group's events), the group
// removed. The same calls a run makes (Cgroup::Create, AddProcess, ReadUsage).
Check Cgroups() {
  const CgroupSupport& s = DetectCgroups();
  Check c{.layer = "cgroups", .required = false};
  c.detail = TierName(s.tier);
  if (s.tier == CgroupTier::kV2) c.detail += " at " + s.base;
  if (s.tier == CgroupTier::kV1) c.detail += " (memory, pids, cpuacct)";
  const std::string why_not = s.why_not.empty() ? "" : " (" + s.why_not + ")";
  c.fix =
      "run as root, or delegate a cgroup v2 subtree to this user (systemd-run --user --scope -p "
      "Delegate=yes execbox ...); without it limits fall back to rlimits";
  auto broken = [&](const std::string& what) {
    c.detail += ", but " + what + why_not;
    return c;
  };
  if (s.tier == CgroupTier::kNone) {
    c.detail += why_not;
    return c;
  }

  constexpr uint64_t kMemory = 32 << 20;
  constexpr uint32_t kPids = 4;
  auto cg = Cgroup::Create(NextCgroupName(), {.memory_bytes = kMemory, .max_pids = kPids});
  if (!cg) return broken("making a group failed: " + cg.error().message);
  std::string error;
  int forks = InGroup(**cg, ForkUntilRefused, error);
  if (forks == -1) return broken(error);
  if (!WIFEXITED(forks) || WEXITSTATUS(forks) != 0) {
    c.fix =
        "enable the pids controller for this hierarchy (cgroup v2: +pids in the parent's "
        "cgroup.subtree_control)";
    return broken("a process in a group limited to " + std::to_string(kPids) +
                  " processes forked 16 times (the pids limit is not enforced)");
  }
  int touched = InGroup(
      **cg, [] { return TouchPastTheLimit(8 * kMemory); }, error);
  if (touched == -1) return broken(error);
  uint64_t oom_kills = (*cg)->ReadUsage().oom_kills;
  if (!WIFSIGNALED(touched) || WTERMSIG(touched) != SIGKILL || oom_kills == 0) {
    c.fix =
        "enable the memory controller (cgroup v2: +memory in the parent's cgroup.subtree_control; "
        "v1: boot with cgroup_enable=memory, and swapaccount=1 where there is swap)";
    return broken("a process in a group limited to " + std::to_string(kMemory >> 20) + " MiB " +
                  (WIFSIGNALED(touched) ? "died of signal " + std::to_string(WTERMSIG(touched))
                                        : "touched " + std::to_string((8 * kMemory) >> 20) + " MiB") +
                  " and the group counted " + std::to_string(oom_kills) + " OOM kills");
  }
  c.ok = true;
  c.detail += ": a child in a new group was refused a fork past " + std::to_string(kPids) +
              " processes and OOM-killed past " + std::to_string(kMemory >> 20) +
              " MiB (counted in the group's events)" + why_not;
  return c;
}

// The limits the jail sets, each tried past its value in a child: a file written past
// RLIMIT_FSIZE (EFBIG), a descriptor past RLIMIT_NOFILE (EINVAL), a mapping past RLIMIT_DATA
// (ENOMEM, the memory limit where there are no cgroups). RLIMIT_CPU would cost a CPU second.
Check Rlimits() {
  int err = InChild([] {
    ::signal(SIGXFSZ, SIG_IGN);  // as in the jail: an error, not a death
    int fd = ::memfd_create("execbox-doctor", MFD_CLOEXEC);
    if (fd < 0) return errno;
    struct rlimit fsize {
      .rlim_cur = 4096, .rlim_max = 4096
    };
    if (::setrlimit(RLIMIT_FSIZE, &fsize) != 0) return errno;
    static char buf[8192];
    ssize_t first = ::write(fd, buf, sizeof buf);  // stops at the limit
    ssize_t past = ::write(fd, buf, 1);
    if (first != 4096 || past >= 0 || errno != EFBIG) return kNotEnforced;
    struct rlimit nofile {
      .rlim_cur = 16, .rlim_max = 16
    };
    if (::setrlimit(RLIMIT_NOFILE, &nofile) != 0) return errno;
    if (::fcntl(fd, F_DUPFD_CLOEXEC, 16) >= 0 || errno != EINVAL) return kNotEnforced + 1;
    constexpr size_t kData = 64 << 20;
    struct rlimit data {
      .rlim_cur = kData, .rlim_max = kData
    };
    if (::setrlimit(RLIMIT_DATA, &data) != 0) return errno;
    void* p = ::mmap(nullptr, 4 * kData, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED || errno != ENOMEM) return kNotEnforced + 2;
    return 0;
  });
  Check c{.layer = "rlimits", .ok = err == 0};
  const char* names[] = {"RLIMIT_FSIZE (a write past it succeeded)",
                         "RLIMIT_NOFILE (a descriptor past it opened)",
                         "RLIMIT_DATA (a mapping past it succeeded)"};
  if (c.ok) {
    c.detail =
        "a child was refused a write past RLIMIT_FSIZE, a descriptor past RLIMIT_NOFILE and a "
        "mapping past RLIMIT_DATA";
  } else if (err >= kNotEnforced && err <= kNotEnforced + 2) {
    c.detail = std::string("not enforced: ") + names[err - kNotEnforced];
    c.fix = "the kernel ignores a resource limit: report it with `uname -a`";
  } else {
    c.detail = std::string("setting a limit failed: ") + std::strerror(err);
    c.fix = "in a container, allow setrlimit/prlimit64";
  }
  return c;
}

// The whole jail, end to end: the only proof that pivot_root, proc and the rest work together.
Check WholeJail() {
  Policy p;
  p.argv = {"/usr/bin/true"};
  p.binds = {{.path = "/usr", .required = true}};
  p.root_links = {"/bin", "/lib", "/lib64"};
  p.limits.wall_time = std::chrono::seconds(20);
  Check c{.layer = "whole jail (pivot_root, proc, tmpfs, /usr/bin/true)"};
  auto out = Run(p);
  if (!out) {
    c.detail = out.error().message;
  } else if (out->ending != Ending::kExited || out->exit_code != 0) {
    c.detail = std::string(EndingName(out->ending)) + " " + out->message;
  } else {
    c.ok = true;
    c.detail = "ran in " + std::to_string(out->usage.wall_ms) + " ms, limits by " + out->enforcement.memory;
    // What a container may refuse; the jail goes on without it (jail/wire.h, kWithout*).
    if (!out->layers.proc)
      c.detail += "; without /proc (the kernel refused a fresh procfs: the code sees an empty /proc)";
    if (!out->layers.hostname) c.detail += "; hostname unchanged (sethostname was refused)";
  }
  c.fix = "see the failing layer above";
  return c;
}

}  // namespace

std::vector<Check> Diagnose() {
  std::vector<Check> checks;
  checks.push_back(Namespace("user", 0));
  checks.push_back(Namespace("pid", CLONE_NEWPID));
  checks.push_back(Namespace("mount", CLONE_NEWNS));
  checks.push_back(Namespace("net", CLONE_NEWNET));
  checks.push_back(Namespace("ipc", CLONE_NEWIPC));
  checks.push_back(Namespace("uts", CLONE_NEWUTS));
  checks.push_back(Namespace("cgroup", CLONE_NEWCGROUP));
  checks.push_back(ProcVisibility());
  // Taken at start-up (main), before this: say what happened where it applied.
  if (const ContainerCgroups& c = ContainerCgroupsOutcome(); !c.detail.empty()) {
    checks.push_back(Check{.layer = "cgroups in a container",
                           .ok = c.entered,
                           .required = false,
                           .detail = c.detail,
                           .fix =
                               "keep CAP_SETUID, CAP_SETGID and CAP_SETFCAP and allow unshare(CLONE_NEWUSER) "
                               "and mount in the container (docs/deploy.md, \"Container image\")"});
  }
  checks.push_back(Seccomp());
  checks.push_back(Landlock());
  checks.push_back(Cgroups());
  checks.push_back(Rlimits());
  checks.push_back(WholeJail());
  checks.push_back(SessionRootCheck());
  return checks;
}

}  // namespace execbox::jail
