// Control files and where the cgroup hierarchies are mounted (see cgroup_internal.h).
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

// mountinfo writes space, tab, newline and backslash in paths as \ooo.
std::string Unescape(std::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      int code = 0;
      bool octal = true;
      for (size_t j = 1; j <= 3; ++j) {
        char c = field[i + j];
        if (c < '0' || c > '7') octal = false;
        code = code * 8 + (c - '0');
      }
      if (octal) {
        out.push_back(static_cast<char>(code));
        i += 3;
        continue;
      }
    }
    out.push_back(field[i]);
  }
  return out;
}

// The directory of `path` (as /proc/self/cgroup names it) under a mount of its hierarchy. In a
// container the mount may show only a subtree, whose root is a prefix of the path.
std::optional<std::string> LocateDir(const CgroupMount& mount, const std::string& path) {
  if (mount.root == "/") return path == "/" ? mount.mount_point : mount.mount_point + path;
  if (path == mount.root) return mount.mount_point;
  if (path.starts_with(mount.root + "/")) return mount.mount_point + path.substr(mount.root.size());
  return std::nullopt;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Small text and file helpers. Reads never fail loudly: a missing file means "not reported".

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(sep, start);
    if (end == std::string_view::npos) end = text.size();
    parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

bool Contains(const std::vector<std::string_view>& words, std::string_view word) {
  for (auto w : words) {
    if (w == word) return true;
  }
  return false;
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// A control file holding one number; "max" and missing files give nothing.
std::optional<uint64_t> ReadNumber(const std::string& path) {
  auto text = ReadFile(path, 4096);
  if (!text) return std::nullopt;
  return ParseU64(*text);
}

// The value of the "key value" line of a flat-keyed control file such as cpu.stat.
std::optional<uint64_t> ReadKeyed(const std::string& path, std::string_view key) {
  auto text = ReadFile(path, 1 << 16);
  if (!text) return std::nullopt;
  for (auto line : Split(*text, '\n')) {
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ' ') {
      return ParseU64(line.substr(key.size() + 1));
    }
  }
  return std::nullopt;
}

Expected<std::vector<pid_t>> ReadMembers(const std::string& dir) {
  auto text = ReadFile(dir + "/cgroup.procs");
  if (!text) return std::unexpected(text.error());
  std::vector<pid_t> pids;
  for (auto line : Split(*text, '\n')) {
    if (auto pid = ParseU64(line); pid && *pid > 0) pids.push_back(static_cast<pid_t>(*pid));
  }
  return pids;
}

// The members of a group; none when it cannot be read (gone already, say).
std::vector<pid_t> ReadProcs(const std::string& dir) {
  return ReadMembers(dir).value_or(std::vector<pid_t>{});
}

Status MakeDir(const std::string& path, bool exist_ok) {
  if (::mkdir(path.c_str(), 0755) == 0) return {};
  int err = errno;
  if (exist_ok && err == EEXIST) return {};
  if (err == EACCES || err == EPERM || err == EROFS) {
    return Fail("no permission to create " + path + ": " + std::strerror(err) + " (" + kPermissionFix + ")");
  }
  return FailErrno("mkdir(" + path + ")", err);
}

// SIGKILLs every member of the groups until none is left. A member may fork between the read
// and the kill, so this goes round until the groups stay empty or the deadline passes: it blocks
// the calling thread for up to kKillDeadline (2 s) when members keep reappearing (a fork race
// that pids.max bounds) or take long to exit (uninterruptible sleep, a large address space being
// torn down), polling every 0.5-20 ms. Left as is: callers are the end of a run and the sweep.
void KillUntilEmpty(const std::vector<std::string>& dirs) {
  auto deadline = Clock::now() + kKillDeadline;
  auto pause = std::chrono::microseconds(500);
  for (;;) {
    std::set<pid_t> members;
    for (const auto& dir : dirs) {
      for (pid_t pid : ReadProcs(dir)) members.insert(pid);
    }
    if (members.empty() || Clock::now() >= deadline) return;
    for (pid_t pid : members) ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(20));
  }
}

// Removes a group directory, waiting out the EBUSY that lasts until its last member is gone.
bool RemoveDir(const std::string& dir, Clock::time_point deadline) {
  auto pause = std::chrono::microseconds(500);
  for (;;) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return true;
    if (errno != EBUSY || Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(50));
  }
}

// ---------------------------------------------------------------------------------------------
// Where the hierarchies are and where this process sits in them.

Expected<std::vector<CgroupMount>> ReadCgroupMounts() {
  auto text = ReadFile("/proc/self/mountinfo");
  if (!text) return std::unexpected(text.error());
  std::vector<CgroupMount> mounts;
  for (auto line : Split(*text, '\n')) {
    auto fields = Split(line, ' ');
    // id parent dev root mount-point options [optional...] - fstype source super-options
    size_t dash = 6;
    while (dash < fields.size() && fields[dash] != "-") ++dash;
    if (dash + 3 >= fields.size()) continue;
    auto fstype = fields[dash + 1];
    if (fstype != "cgroup" && fstype != "cgroup2") continue;
    CgroupMount m{Unescape(fields[3]), Unescape(fields[4]), fstype == "cgroup2", {}};
    for (auto opt : Split(fields[dash + 3], ',')) m.options.emplace_back(opt);
    mounts.push_back(std::move(m));
  }
  return mounts;
}

Expected<std::vector<OwnCgroup>> ReadOwnCgroups() {
  auto text = ReadFile("/proc/self/cgroup");
  if (!text) return std::unexpected(text.error());
  std::vector<OwnCgroup> own;
  for (auto line : Split(*text, '\n')) {
    // id:controllers:path, and the path itself may hold ':'
    size_t first = line.find(':');
    if (first == std::string_view::npos) continue;
    size_t second = line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    OwnCgroup entry{std::string(line.substr(0, first)), {}, std::string(line.substr(second + 1))};
    auto list = line.substr(first + 1, second - first - 1);
    if (!list.empty()) {
      for (auto c : Split(list, ',')) entry.controllers.emplace_back(c);
    }
    own.push_back(std::move(entry));
  }
  return own;
}

std::optional<std::string> LocateOwnDir(const std::vector<CgroupMount>& mounts, bool v2,
                                        std::string_view controller, const std::string& path) {
  for (const auto& m : mounts) {
    if (m.v2 != v2) continue;
    if (!v2 && !Contains(std::vector<std::string_view>(m.options.begin(), m.options.end()), controller)) {
      continue;
    }
    if (auto dir = LocateDir(m, path)) return dir;
  }
  return std::nullopt;
}

// A probe group is named like a real one ("<pid>-...") so that a crash mid-probe is swept.
std::string ProbeName() { return std::to_string(::getpid()) + "-probe"; }

// The first of `dirs` that holds `file` (v1 spreads the files over one dir per hierarchy).
std::optional<std::string> FindFile(const std::vector<std::string>& dirs, const std::string& file) {
  for (const auto& dir : dirs) {
    if (std::string path = dir + "/" + file; Exists(path)) return path;
  }
  return std::nullopt;
}

Status WriteLimit(const std::string& path, uint64_t value) { return WriteFile(path, std::to_string(value)); }

}  // namespace execbox::jail::cgroup_internal
