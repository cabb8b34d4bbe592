// cgroup v1: one group per controller hierarchy (memory, pids, cpuacct, and cpu where it may be
// used), and the limits.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "base/io.h"
#include "base/unique_fd.h"
#include "jail/cgroup.h"
#include "jail/cgroup_internal.h"

namespace execbox::jail::cgroup_internal {
namespace {

constexpr std::array<std::string_view, 3> kV1Controllers = {"memory", "pids", "cpuacct"};

Expected<std::string> V1Base(const std::vector<CgroupMount>& mounts, const std::vector<OwnCgroup>& own,
                             std::string_view controller) {
  const OwnCgroup* line = nullptr;
  for (const auto& o : own) {
    for (const auto& c : o.controllers) {
      if (c == controller) line = &o;
    }
  }
  std::string name(controller);
  if (!line) return Fail("no cgroup v1 hierarchy has the " + name + " controller");
  auto own_dir = LocateOwnDir(mounts, false, controller, line->path);
  if (!own_dir) return Fail("the cgroup v1 " + name + " hierarchy is not mounted where this process sees it");
  std::string base = *own_dir + "/" + std::string(kSubtree);
  if (auto s = MakeDir(base, true); !s) return std::unexpected(s.error());
  return base;
}

Status ProbeV1(CgroupSupport& s) {
  std::vector<std::string> made;
  Status result;
  for (const auto& base : s.v1_bases) {
    std::string probe = base + "/" + ProbeName();
    if (result = MakeDir(probe, true); !result) break;
    made.push_back(probe);
  }
  bool memory = false;
  bool pids = false;
  bool cpu = false;
  for (const auto& dir : made) {
    memory = memory || Exists(dir + "/memory.limit_in_bytes");
    pids = pids || Exists(dir + "/pids.max");
    cpu = cpu || Exists(dir + "/cpuacct.usage");
    s.memory_peak = s.memory_peak || Exists(dir + "/memory.max_usage_in_bytes");
    s.swap_limit = s.swap_limit || Exists(dir + "/memory.memsw.limit_in_bytes");
    s.cpu_weight = s.cpu_weight || Exists(dir + "/cpu.shares");  // cpu mounted with one of them
  }
  auto deadline = Clock::now() + kRmdirDeadline;
  for (const auto& dir : made) RemoveDir(dir, deadline);
  if (!result) return result;
  if (!memory || !pids || !cpu) {
    return Fail("cgroup v1 groups under " + s.v1_bases.front() +
                " lack memory.limit_in_bytes, pids.max or cpuacct.usage");
  }
  return {};
}

// The cpu controller on a hierarchy of its own, for CPU weights (Cgroup::SetCpuWeight). Best
// effort: without it the groups work, unweighted.
void AddCpuHierarchy(const std::vector<CgroupMount>& mounts, const std::vector<OwnCgroup>& own,
                     CgroupSupport& s) {
  auto base = V1Base(mounts, own, "cpu");
  if (!base) return;
  std::string probe = *base + "/" + ProbeName();
  if (!MakeDir(probe, true)) return;
  const bool weighted = Exists(probe + "/cpu.shares");
  RemoveDir(probe, Clock::now() + kRmdirDeadline);
  if (!weighted) return;
  s.v1_bases.push_back(*base);
  s.cpu_weight = true;
}

}  // namespace

Expected<CgroupSupport> TryV1(const std::vector<CgroupMount>& mounts, const std::vector<OwnCgroup>& own) {
  CgroupSupport support;
  support.tier = CgroupTier::kV1;
  for (auto controller : kV1Controllers) {
    auto base = V1Base(mounts, own, controller);
    if (!base) return std::unexpected(base.error());
    // Controllers mounted together (say memory,cpuacct) share one directory.
    bool seen = false;
    for (const auto& b : support.v1_bases) seen = seen || b == *base;
    if (!seen) support.v1_bases.push_back(*base);
  }
  if (auto s = ProbeV1(support); !s) return std::unexpected(s.error());
  if (!support.cpu_weight) AddCpuHierarchy(mounts, own, support);
  return support;
}

Status ApplyV1Limits(const std::vector<std::string>& dirs, const CgroupLimits& limits) {
  if (limits.memory_bytes > 0) {
    auto limit = FindFile(dirs, "memory.limit_in_bytes");
    if (!limit) return Fail("no memory.limit_in_bytes in the new cgroup v1 groups");
    // memory+swap may never be below memory alone (equal means no swap at all): when the limit
    // goes up, memory+swap goes up first; when it goes down, memory goes down first.
    auto memsw = FindFile(dirs, "memory.memsw.limit_in_bytes");
    auto current = ReadFile(*limit, 64);
    const bool raising = current && ParseU64(*current).value_or(0) < limits.memory_bytes;
    if (memsw && raising) {
      if (auto st = WriteLimit(*memsw, limits.memory_bytes); !st) return st;
    }
    if (auto st = WriteLimit(*limit, limits.memory_bytes); !st) return st;
    if (memsw && !raising) {
      if (auto st = WriteLimit(*memsw, limits.memory_bytes); !st) return st;
    }
  }
  // Only a preference (memsw already forbids swap); some kernels refuse it, which is harmless.
  if (auto swappiness = FindFile(dirs, "memory.swappiness")) (void)WriteFile(*swappiness, "0");
  if (limits.max_pids > 0) {
    auto pids = FindFile(dirs, "pids.max");
    if (!pids) return Fail("no pids.max in the new cgroup v1 groups");
    return WriteLimit(*pids, limits.max_pids);
  }
  return {};
}

}  // namespace execbox::jail::cgroup_internal
