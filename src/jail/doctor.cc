#include "jail/doctor.h"

#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "base/io.h"
#include "jail/cgroup.h"
#include "jail/landlock.h"
#include "jail/sandbox.h"
#include "jail/seccomp_filter.h"

namespace execbox::jail {
namespace {

// Runs `probe` in a forked child; returns 0 or the errno it failed with.
template <typename Probe>
int InChild(Probe probe) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(probe());
  if (pid < 0) return errno;
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 255;
}

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
  c.fix =
      "a container masks parts of /proc: run it with an unmasked /proc (e.g. --security-opt "
      "systempaths=unconfined) or run on the host";
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
  int err = InChild([&p] {
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
    return LoadSeccompProgram(p);
  });
  c.ok = err == 0;
  c.detail = c.ok ? "filters load (" + std::to_string(p.allowlist.size() + p.argument_checks.size()) +
                        " BPF instructions)"
                  : std::string("loading failed: ") + std::strerror(err);
  c.fix = "the kernel needs CONFIG_SECCOMP_FILTER; in a container, allow the seccomp syscall";
  return c;
}

Check Landlock() {
  int abi = LandlockAbi();
  Check c{.layer = "Landlock", .ok = abi > 0, .required = false};
  c.detail = abi > 0 ? "ABI " + std::to_string(abi) : "not available";
  c.fix = "boot with lsm=...,landlock (CONFIG_SECURITY_LANDLOCK); the mount namespace still confines writes";
  return c;
}

Check Cgroups() {
  const CgroupSupport& s = DetectCgroups();
  Check c{.layer = "cgroups", .ok = s.tier != CgroupTier::kNone, .required = false};
  c.detail = TierName(s.tier);
  if (s.tier == CgroupTier::kV2) c.detail += " at " + s.base;
  if (s.tier == CgroupTier::kV1) c.detail += " (memory, pids, cpuacct)";
  if (!s.why_not.empty()) c.detail += "; " + s.why_not;
  c.fix =
      "run as root, or delegate a cgroup v2 subtree to this user (systemd-run --user --scope -p "
      "Delegate=yes execbox ...); without it limits fall back to rlimits";
  return c;
}

Check Rlimits() {
  int err = InChild([] {
    struct rlimit rl {
      .rlim_cur = 1 << 20, .rlim_max = 1 << 20
    };
    return ::setrlimit(RLIMIT_FSIZE, &rl) == 0 ? 0 : errno;
  });
  return {.layer = "rlimits", .ok = err == 0, .detail = err == 0 ? "setrlimit works" : std::strerror(err)};
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
  checks.push_back(Seccomp());
  checks.push_back(Landlock());
  checks.push_back(Cgroups());
  checks.push_back(Rlimits());
  checks.push_back(WholeJail());
  return checks;
}

}  // namespace execbox::jail
