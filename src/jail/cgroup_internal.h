// Internal to the jail layer: what the cgroup files share. cgroup.cc: detection, the group
// itself and the sweep; cgroup_fs.cc: control files and where the hierarchies are mounted;
// cgroup_v2.cc and cgroup_v1.cc: each tier's probe and limits.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "jail/cgroup.h"

namespace execbox::jail::cgroup_internal {

using Clock = std::chrono::steady_clock;

// Groups live in a subtree of their own so that a sweep after a crash only ever looks at
// execbox's groups. On cgroup v2 this process's own group must hand memory and pids down to that
// subtree, which the kernel refuses while the group holds processes (the "no internal processes"
// rule, root excepted); in a delegated group this process then moves itself into the leaf kLeaf
// next to kSubtree, as runc, crun and systemd's delegation docs do:
//   <own>/supervisor  this process          <own>/execbox/<pid>-<n>  one group per run
inline constexpr std::string_view kSubtree = "execbox";
inline constexpr std::string_view kLeaf = "supervisor";
// Processes may fork while they are killed; pids.max bounds how long that can go on. The kill
// loop blocks its caller (Cgroup::KillAll, ~Cgroup, SweepStaleCgroups) for at most this long.
inline constexpr auto kKillDeadline = std::chrono::seconds(2);
// rmdir fails with EBUSY until the last member is gone; after this the sweep takes over.
inline constexpr auto kRmdirDeadline = std::chrono::seconds(1);

inline constexpr const char* kPermissionFix =
    "run as root or delegate a cgroup v2 subtree, e.g. systemd-run --user --scope -p Delegate=yes";

// ---- cgroup_fs.cc: control files (reads never fail loudly: a missing file is "not reported")

std::vector<std::string_view> Split(std::string_view text, char sep);
bool Contains(const std::vector<std::string_view>& words, std::string_view word);
bool Exists(const std::string& path);
// A control file holding one number; "max" and missing files give nothing.
std::optional<uint64_t> ReadNumber(const std::string& path);
// The value of the "key value" line of a flat-keyed control file such as cpu.stat.
std::optional<uint64_t> ReadKeyed(const std::string& path, std::string_view key);
Expected<std::vector<pid_t>> ReadMembers(const std::string& dir);
// The members of a group; none when it cannot be read (gone already, say).
std::vector<pid_t> ReadProcs(const std::string& dir);
Status MakeDir(const std::string& path, bool exist_ok);
// SIGKILLs every member of the groups until none is left, for at most kKillDeadline.
void KillUntilEmpty(const std::vector<std::string>& dirs);
// Removes a group directory, waiting out the EBUSY that lasts until its last member is gone.
bool RemoveDir(const std::string& dir, Clock::time_point deadline);
// The first of `dirs` that holds `file` (v1 spreads the files over one dir per hierarchy).
std::optional<std::string> FindFile(const std::vector<std::string>& dirs, const std::string& file);
Status WriteLimit(const std::string& path, uint64_t value);

// ---- cgroup_fs.cc: where the hierarchies are and where this process sits in them

struct CgroupMount {
  std::string root;  // the part of the hierarchy mounted there (containers show a subtree)
  std::string mount_point;
  bool v2 = false;
  std::vector<std::string> options;  // v1: the controllers, among other super options
};

struct OwnCgroup {
  std::string hierarchy_id;
  std::vector<std::string> controllers;  // empty for the v2 line "0::/path"
  std::string path;
};

Expected<std::vector<CgroupMount>> ReadCgroupMounts();
Expected<std::vector<OwnCgroup>> ReadOwnCgroups();
std::optional<std::string> LocateOwnDir(const std::vector<CgroupMount>& mounts, bool v2,
                                        std::string_view controller, const std::string& path);
// A probe group is named like a real one ("<pid>-...") so that a crash mid-probe is swept.
std::string ProbeName();

// ---- cgroup_v2.cc

// `moved_to_leaf` says whether this process moved itself, also when a later step failed.
Expected<CgroupSupport> TryV2(const std::vector<CgroupMount>& mounts, const std::vector<OwnCgroup>& own,
                              bool& moved_to_leaf);
Status ApplyV2Limits(const std::string& dir, const CgroupLimits& limits, const CgroupSupport& s);
// Also run by the unit test on a throwaway subtree, with a forked child standing in for this
// process (see cgroup_v2.cc).
Status MoveToLeaf(const std::string& own_dir, pid_t pid);
Expected<bool> EnableControllersMovingToLeaf(const std::string& own_dir, pid_t pid,
                                             const std::vector<std::string>& controllers);

// ---- cgroup_v1.cc

Expected<CgroupSupport> TryV1(const std::vector<CgroupMount>& mounts, const std::vector<OwnCgroup>& own);
Status ApplyV1Limits(const std::vector<std::string>& dirs, const CgroupLimits& limits);

}  // namespace execbox::jail::cgroup_internal
