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
#include "base/unique_fd.h"

namespace execbox::jail {

enum class CgroupTier { kNone, kV1, kV2 };
const char* TierName(CgroupTier tier);

struct CgroupLimits {
  uint64_t memory_bytes = 0;  // hard limit, swap disabled where the kernel allows
  uint32_t max_pids = 0;      // processes + threads
};

// A group's share of the CPU when CPUs are contended, as cgroup v2's cpu.weight counts it: the
// default is 100, and two busy groups of weight 100 and 50 get 2/3 and 1/3. (v1: cpu.shares, the
// weight * 1024 / 100.) Idle CPU time is never held back: a weight is no limit.
inline constexpr uint32_t kDefaultCpuWeight = 100;
inline constexpr uint32_t kMinCpuWeight = 1;
inline constexpr uint32_t kMaxCpuWeight = 10000;

struct CgroupUsage {
  uint64_t cpu_ns = 0;
  uint64_t peak_memory_bytes = 0;  // 0 when the kernel does not report a peak
  uint64_t oom_kills = 0;          // from the cgroup's own event counters
  uint64_t pids_peak = 0;          // 0 when not reported
};

// What this process can use, found by trying (creating and removing a probe group).
struct CgroupSupport {
  CgroupTier tier = CgroupTier::kNone;
  std::string base;                   // v2: dir under which groups are made; v1: "" (see bases)
  std::vector<std::string> v1_bases;  // v1: memory, pids, cpuacct dirs to make groups under
  std::string why_not;                // when tier is kNone (or v1), what stopped the better tier
  bool memory_peak = false;
  bool swap_limit = false;
  // The groups take a CPU weight (v2: the cpu controller was handed down; v1: a cpu hierarchy
  // is mounted where this process may make groups). Without it groups still work, unweighted.
  bool cpu_weight = false;
  // v2: this process's own group held it (a systemd unit or scope with Delegate=yes), so it moved
  // itself into the leaf "<own>/supervisor" to let <own> hand memory and pids down to "<own>/execbox".
  // Also set when a later v2 step failed after the move (why_not then says so).
  bool moved_to_leaf = false;
};

// Cached after the first call. On cgroup v2 the first call may move this process (never any
// other) into "<own>/supervisor": only out of a delegated group other than the root of its
// cgroup namespace, and only when this process is the group's sole member.
const CgroupSupport& DetectCgroups();

class Cgroup {
 public:
  // Makes a new group named `name` with the limits set. Name it "<owner-pid>-<n>", the owner being
  // this process: SweepStaleCgroups removes only groups named so whose owner is gone.
  static Expected<std::unique_ptr<Cgroup>> Create(const std::string& name, const CgroupLimits& limits);
  // Kills what is left and removes the group (every hierarchy); may block up to 2 s in the kill
  // loop (see KillAll) and 1 s more waiting for rmdir.
  ~Cgroup();
  Cgroup(const Cgroup&) = delete;
  Cgroup& operator=(const Cgroup&) = delete;

  CgroupTier tier() const { return tier_; }
  // Moves a process into the group (all hierarchies).
  Status AddProcess(pid_t pid);
  // v2: the group's directory, for clone3(CLONE_INTO_CGROUP) to start a child inside the group
  // instead of moving it there afterwards. Invalid on v1, which has no such thing, or when the
  // directory cannot be opened (the caller then clones and moves, as before).
  UniqueFd OpenForClone() const;
  CgroupUsage ReadUsage() const;
  // Changes the memory and process limits of a live group.
  Status SetLimits(const CgroupLimits& limits);
  // Sets the group's CPU weight (clamped to kMinCpuWeight..kMaxCpuWeight). Does nothing where the
  // groups take no weight (CgroupSupport::cpu_weight); a failed write leaves the weight as it was.
  void SetCpuWeight(uint32_t weight);
  // Starts the peak-memory counter again where the kernel allows it.
  void ResetPeak();
  // SIGKILLs every process in the group. v2 writes cgroup.kill where the kernel has it (5.14+);
  // then, and on v1 alone (no freezer), SIGKILLs the members again and again until the group
  // stays empty, pids.max bounding how many forks can race the kill. Blocks the calling thread
  // until the group is empty, at most 2 s.
  void KillAll();

 private:
  Cgroup() = default;
  CgroupTier tier_ = CgroupTier::kNone;
  std::vector<std::string> dirs_;  // v2: one; v1: one per controller hierarchy
};

// Removes groups left behind by execbox processes that no longer exist (after a crash): those
// named "<owner-pid>-..." whose owner is gone. May block up to 3 s per group still holding members.
void SweepStaleCgroups();

}  // namespace execbox::jail
