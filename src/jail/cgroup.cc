#include "jail/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
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
#include "jail/cgroup_internal.h"

namespace execbox::jail {

// The helpers this file shares with cgroup_fs.cc, cgroup_v1.cc and cgroup_v2.cc.
using namespace cgroup_internal;  // NOLINT(google-build-using-namespace)

namespace {

CgroupSupport Detect() {
  auto mounts = ReadCgroupMounts();
  auto own = ReadOwnCgroups();
  CgroupSupport none;
  if (!mounts || !own) {
    none.why_not = !mounts ? mounts.error().message : own.error().message;
    return none;
  }
  bool moved_to_leaf = false;
  auto v2 = TryV2(*mounts, *own, moved_to_leaf);
  if (v2) return *v2;
  std::string why_v2 = "cgroup v2: " + v2.error().message;
  auto v1 = TryV1(*mounts, *own);
  if (v1) {
    v1->why_not = why_v2;
    v1->moved_to_leaf = moved_to_leaf;
    return *v1;
  }
  none.why_not = why_v2 + "; cgroup v1: " + v1.error().message;
  none.moved_to_leaf = moved_to_leaf;
  return none;
}

std::vector<std::string> Bases(const CgroupSupport& s) {
  if (s.tier == CgroupTier::kV2) return {s.base};
  if (s.tier == CgroupTier::kV1) return s.v1_bases;
  return {};
}

Status CheckGroupName(const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos || name.size() > 200) {
    return Fail("cgroup name '" + name + "' must be 1-200 bytes without '/' and not '.' or '..'");
  }
  return {};
}

// The owner pid of a group named "<pid>-...", or nothing for names execbox did not make.
std::optional<pid_t> OwnerPid(std::string_view name) {
  size_t digits = 0;
  while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') ++digits;
  if (digits == 0 || digits >= name.size() || name[digits] != '-') return std::nullopt;
  auto pid = ParseU64(name.substr(0, digits));
  if (!pid || *pid == 0 || *pid > static_cast<uint64_t>(INT32_MAX)) return std::nullopt;
  return static_cast<pid_t>(*pid);
}

bool Alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

std::vector<std::string> StaleGroups(const std::string& base) {
  std::vector<std::string> stale;
  DIR* dir = ::opendir(base.c_str());
  if (!dir) return stale;
  while (struct dirent* entry = ::readdir(dir)) {
    if (entry->d_type != DT_DIR && entry->d_type != DT_UNKNOWN) continue;
    auto owner = OwnerPid(entry->d_name);
    if (owner && !Alive(*owner)) stale.push_back(base + "/" + entry->d_name);
  }
  ::closedir(dir);
  return stale;
}

}  // namespace

const char* TierName(CgroupTier tier) {
  switch (tier) {
    case CgroupTier::kNone:
      return "none";
    case CgroupTier::kV1:
      return "cgroup-v1";
    case CgroupTier::kV2:
      return "cgroup-v2";
  }
  return "none";
}

const CgroupSupport& DetectCgroups() {
  static const CgroupSupport support = Detect();
  return support;
}

Expected<std::unique_ptr<Cgroup>> Cgroup::Create(const std::string& name, const CgroupLimits& limits) {
  const CgroupSupport& support = DetectCgroups();
  if (support.tier == CgroupTier::kNone) return Fail("cgroups unavailable: " + support.why_not);
  if (auto s = CheckGroupName(name); !s) return std::unexpected(s.error());
  // From here on, the destructor of `group` removes whatever was made if a step fails.
  std::unique_ptr<Cgroup> group(new Cgroup());
  group->tier_ = support.tier;
  for (const auto& base : Bases(support)) {
    std::string dir = base + "/" + name;
    if (auto s = MakeDir(dir, false); !s) {
      return std::unexpected(Context("creating cgroup " + name, s.error()));
    }
    group->dirs_.push_back(dir);
  }
  Status limited = support.tier == CgroupTier::kV2 ? ApplyV2Limits(group->dirs_.front(), limits, support)
                                                   : ApplyV1Limits(group->dirs_, limits);
  if (!limited) return std::unexpected(Context("setting limits of cgroup " + name, limited.error()));
  return group;
}

Cgroup::~Cgroup() {
  KillAll();
  auto deadline = Clock::now() + kRmdirDeadline;
  for (const auto& dir : dirs_) RemoveDir(dir, deadline);
}

Status Cgroup::AddProcess(pid_t pid) {
  for (const auto& dir : dirs_) {
    if (auto s = WriteFile(dir + "/cgroup.procs", std::to_string(pid)); !s) {
      return std::unexpected(Context("moving pid " + std::to_string(pid) + " into a cgroup", s.error()));
    }
  }
  return {};
}

UniqueFd Cgroup::OpenForClone() const {
  if (tier_ != CgroupTier::kV2 || dirs_.empty()) return UniqueFd();
  return UniqueFd(::open(dirs_.front().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
}

CgroupUsage Cgroup::ReadUsage() const {
  CgroupUsage usage;
  if (dirs_.empty()) return usage;
  auto number = [this](const std::string& file) -> uint64_t {
    auto path = FindFile(dirs_, file);
    return path ? ReadNumber(*path).value_or(0) : 0;
  };
  auto keyed = [this](const std::string& file, std::string_view key) -> uint64_t {
    auto path = FindFile(dirs_, file);
    return path ? ReadKeyed(*path, key).value_or(0) : 0;
  };
  if (tier_ == CgroupTier::kV2) {
    usage.cpu_ns = keyed("cpu.stat", "usage_usec") * 1000;
    usage.peak_memory_bytes = number("memory.peak");
    usage.oom_kills = keyed("memory.events", "oom_kill");
  } else {
    usage.cpu_ns = number("cpuacct.usage");
    usage.peak_memory_bytes = number("memory.max_usage_in_bytes");
    usage.oom_kills = keyed("memory.oom_control", "oom_kill");  // reported since Linux 4.13
  }
  usage.pids_peak = number("pids.peak");
  return usage;
}

Status Cgroup::SetLimits(const CgroupLimits& limits) {
  if (dirs_.empty()) return {};
  return tier_ == CgroupTier::kV2 ? ApplyV2Limits(dirs_.front(), limits, DetectCgroups())
                                  : ApplyV1Limits(dirs_, limits);
}

void Cgroup::SetCpuWeight(uint32_t weight) {
  if (dirs_.empty() || !DetectCgroups().cpu_weight) return;
  weight = std::clamp(weight, kMinCpuWeight, kMaxCpuWeight);
  if (tier_ == CgroupTier::kV2) {
    (void)WriteFile(dirs_.front() + "/cpu.weight", std::to_string(weight));
  } else if (auto shares = FindFile(dirs_, "cpu.shares")) {
    // v1's default is 1024 shares and its floor 2.
    (void)WriteFile(*shares, std::to_string(std::max<uint64_t>(2, uint64_t{weight} * 1024 / 100)));
  }
}

void Cgroup::ResetPeak() {
  // v1: max_usage_in_bytes restarts from the current usage; v2: memory.peak takes a write
  // since Linux 6.12 (older kernels refuse it and the peak stays the group's lifetime peak).
  const char* file = tier_ == CgroupTier::kV2 ? "memory.peak" : "memory.max_usage_in_bytes";
  if (auto path = FindFile(dirs_, file)) (void)WriteFile(*path, "0");
}

void Cgroup::KillAll() {
  if (dirs_.empty()) return;
  // cgroup.kill (Linux 5.14) kills the whole group at once, even members forking meanwhile; the
  // loop then only waits for them to be gone, or does the whole job on kernels without it.
  if (tier_ == CgroupTier::kV2) {
    if (std::string kill_file = dirs_.front() + "/cgroup.kill"; Exists(kill_file)) {
      (void)WriteFile(kill_file, "1");
    }
  }
  KillUntilEmpty(dirs_);
}

void SweepStaleCgroups() {
  for (const auto& base : Bases(DetectCgroups())) {
    for (const auto& dir : StaleGroups(base)) {
      if (std::string kill_file = dir + "/cgroup.kill"; Exists(kill_file)) (void)WriteFile(kill_file, "1");
      KillUntilEmpty({dir});
      RemoveDir(dir, Clock::now() + kRmdirDeadline);
    }
  }
}

}  // namespace execbox::jail
