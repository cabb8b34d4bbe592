// Per-execution control groups: limits, accounting and a kill switch for a whole tree.
// cgroup v2 where this process may use it, the v1 controllers (memory, pids, cpu/cpuacct)
// as the fallback; when neither can be used the caller falls back to rlimits and says so.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"

namespace execbox::jail {

enum class CgroupTier { kNone, kV1, kV2 };
const char* TierName(CgroupTier tier);

struct CgroupLimits {
  uint64_t memory_bytes = 0;  // hard limit, swap disabled where the kernel allows
  uint32_t max_pids = 0;      // processes + threads
};

struct CgroupUsage {
  uint64_t cpu_ns = 0;
  uint64_t peak_memory_bytes = 0;  // 0 when the kernel does not report a peak
  uint64_t oom_kills = 0;          // from the cgroup's own event counters
  uint64_t pids_peak = 0;          // 0 when not reported
};

// What this process can use, found by trying (creating and removing a probe group).
struct CgroupSupport {
  CgroupTier tier = CgroupTier::kNone;
  std::string base;  // v2: dir under which groups are made; v1: "" (see bases)
  std::vector<std::string> v1_bases;  // v1: memory, pids, cpuacct dirs to make groups under
  std::string why_not;  // when tier is kNone (or v1), what stopped the better tier
  bool memory_peak = false;
  bool swap_limit = false;
};

// Cached after the first call.
const CgroupSupport& DetectCgroups();

class Cgroup {
 public:
  // Makes a new group named `name` (e.g. "run-<pid>-<n>") with the limits set.
  static Expected<std::unique_ptr<Cgroup>> Create(const std::string& name, const CgroupLimits& limits);
  ~Cgroup();  // kills what is left and removes the group (every hierarchy)
  Cgroup(const Cgroup&) = delete;
  Cgroup& operator=(const Cgroup&) = delete;

  CgroupTier tier() const { return tier_; }
  // Moves a process into the group (all hierarchies).
  Status AddProcess(pid_t pid);
  CgroupUsage ReadUsage() const;
  // SIGKILLs every process in the group (cgroup.kill on v2, freeze + kill on v1).
  void KillAll();

 private:
  Cgroup() = default;
  CgroupTier tier_ = CgroupTier::kNone;
  std::vector<std::string> dirs_;  // v2: one; v1: one per controller hierarchy
};

// Removes groups left behind by execbox processes that no longer exist (after a crash).
void SweepStaleCgroups();

}  // namespace execbox::jail
