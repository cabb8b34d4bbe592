// Everything the jail's init and the code's process need, prepared on the host before clone
// as plain C data, so that nothing between clone and exec allocates or takes a lock.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <deque>
#include <string>
#include <vector>

#include "base/error.h"
#include "jail/landlock.h"
#include "jail/policy.h"
#include "jail/seccomp_filter.h"

namespace execbox::jail {

// One step of building the jail's filesystem. Paths are absolute, under the staging root.
struct MountOp {
  enum class Kind { kDir, kTmpfs, kBindReadOnly, kBindWritable, kBindDevice, kProc, kSymlink, kFile };
  Kind kind;
  const char* target = nullptr;
  const char* source = nullptr;  // bind: host path; symlink: link text; tmpfs: options
  const char* data = nullptr;    // kFile content
  size_t size = 0;               // kFile content length
  mode_t mode = 0755;
};

struct ResourceLimit {
  int resource;
  rlim_t soft;
  rlim_t hard;
};

struct ChildPlan {
  // The staging root: a tmpfs mounted here becomes "/" after pivot_root.
  const char* staging_root = "/tmp";
  const char* old_root = "/tmp/.old-root";
  const char* old_root_inside = "/.old-root";
  std::vector<MountOp> mounts;

  const char* hostname = nullptr;
  const char* work_dir = nullptr;
  bool clear_groups = false;  // root on the host: drop supplementary groups inside
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<char*> argv;  // null-terminated
  std::vector<char*> envp;  // null-terminated
  std::vector<ResourceLimit> rlimits;
  LandlockPlan landlock;
  const SeccompProgram* seccomp = nullptr;
  bool collect_files = false;
  // Policy::zygote: exec with these capabilities (ambient) and no seccomp/Landlock/no_new_privs.
  bool zygote = false;
  uint64_t zygote_capabilities = 0;
  uint32_t max_files = 0;
  uint64_t max_file_bytes = 0;

  // Descriptors as numbered in the child right after clone.
  int control = -1;  // stream socket to the supervisor
  int stdin_read = -1;
  int stdout_write = -1;
  int stderr_write = -1;
  int report_write = -1;  // -1 when the policy has no report channel
  int egress = -1;        // Policy::egress_fd: placed at kEgressFd; lo is brought up

  // Owns every string the pointers above refer to (a deque keeps addresses stable).
  std::deque<std::string> strings;
  const char* Keep(std::string s) { return strings.emplace_back(std::move(s)).c_str(); }
};

// Builds the plan from a policy: the mount steps, argv/envp, rlimits. `rlimit_memory` says
// memory has no cgroup behind it and must be bounded with RLIMIT_DATA.
Expected<ChildPlan> BuildChildPlan(const Policy& policy, bool rlimit_memory);

// The init process (pid 1 in the new pid namespace). Never returns.
[[noreturn]] void RunInit(const ChildPlan& plan) noexcept;

}  // namespace execbox::jail
