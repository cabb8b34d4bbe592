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

namespace execbox::jail {
namespace {

using Clock = std::chrono::steady_clock;

// Groups live in a subtree of their own so that a sweep after a crash only ever looks at
// execbox's groups. On cgroup v2 this process's own group must hand memory and pids down to that
// subtree, which the kernel refuses while the group holds processes (the "no internal processes"
// rule, root excepted); in a delegated group this process then moves itself into the leaf kLeaf
// next to kSubtree, as runc, crun and systemd's delegation docs do:
//   <own>/supervisor  this process          <own>/execbox/<pid>-<n>  one group per run
constexpr std::string_view kSubtree = "execbox";
constexpr std::string_view kLeaf = "supervisor";
constexpr std::array<std::string_view, 3> kV1Controllers = {"memory", "pids", "cpuacct"};
// Processes may fork while they are killed; pids.max bounds how long that can go on. The kill
// loop blocks its caller (Cgroup::KillAll, ~Cgroup, SweepStaleCgroups) for at most this long.
constexpr auto kKillDeadline = std::chrono::seconds(2);
// rmdir fails with EBUSY until the last member is gone; after this the sweep takes over.
constexpr auto kRmdirDeadline = std::chrono::seconds(1);

constexpr const char* kPermissionFix =
    "run as root or delegate a cgroup v2 subtree, e.g. systemd-run --user --scope -p Delegate=yes";

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

// The directory of `path` (as /proc/self/cgroup names it) under a mount of its hierarchy. In a
// container the mount may show only a subtree, whose root is a prefix of the path.
std::optional<std::string> LocateDir(const CgroupMount& mount, const std::string& path) {
  if (mount.root == "/") return path == "/" ? mount.mount_point : mount.mount_point + path;
  if (path == mount.root) return mount.mount_point;
  if (path.starts_with(mount.root + "/")) return mount.mount_point + path.substr(mount.root.size());
  return std::nullopt;
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

// ---------------------------------------------------------------------------------------------
// cgroup v2

std::vector<std::string_view> Words(const std::string& text) {
  std::vector<std::string_view> words;
  for (auto w : Split(text, ' ')) {
    while (!w.empty() && w.back() == '\n') w.remove_suffix(1);
    if (!w.empty()) words.push_back(w);
  }
  return words;
}

constexpr std::array<std::string_view, 2> kV2Controllers = {"memory", "pids"};

// Says why `dir` lacks a controller we need: never enabled on v2 at all, or not handed down.
Status CheckV2Controllers(const std::string& mount_point, const std::string& dir) {
  auto have = ReadFile(dir + "/cgroup.controllers");
  if (!have) return std::unexpected(have.error());
  auto at_root = ReadFile(mount_point + "/cgroup.controllers");
  for (auto c : kV2Controllers) {
    if (Contains(Words(*have), c)) continue;
    if (!at_root || !Contains(Words(*at_root), c)) {
      return Fail("cgroup v2 at " + mount_point + " has no " + std::string(c) +
                  " controller (the host runs it on cgroup v1 or the kernel lacks it)");
    }
    return Fail("cgroup v2 group " + dir + " was not given the " + std::string(c) +
                " controller by its parent (delegate a subtree with memory and pids, e.g. systemd-run "
                "--user --scope -p Delegate=yes)");
  }
  return {};
}

// Writes a control file, returning 0 or the errno, which the caller turns into advice.
int WriteControl(const std::string& path, std::string_view data) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.Valid()) return errno;
  if (::write(fd.Get(), data.data(), data.size()) < 0) return errno;
  return 0;
}

// The outcome of asking for controllers in a group's cgroup.subtree_control.
struct SubtreeRequest {
  std::string file;
  std::string request;  // "+memory +pids"; empty when all were enabled already
  int err = 0;          // of the write; 0 when it worked or was not needed
};

Expected<SubtreeRequest> RequestControllers(const std::string& dir,
                                            const std::vector<std::string>& controllers) {
  SubtreeRequest r{dir + "/cgroup.subtree_control", "", 0};
  auto enabled = ReadFile(r.file);
  if (!enabled) return std::unexpected(enabled.error());
  for (const auto& c : controllers) {
    if (!Contains(Words(*enabled), c)) r.request += (r.request.empty() ? "+" : " +") + c;
  }
  if (!r.request.empty()) r.err = WriteControl(r.file, r.request);
  return r;
}

// "cannot enable ...: write(file, "+memory +pids"): strerror", without advice.
std::string RequestFailure(const std::string& dir, const SubtreeRequest& r) {
  return "cannot enable " + r.request + " for the children of " + dir + ": write(" + r.file + ", \"" +
         r.request + "\"): " + std::strerror(r.err);
}

std::vector<std::string> V2ControllerNames() { return {kV2Controllers.begin(), kV2Controllers.end()}; }

// Hands memory and pids down to the children of `dir`, a group that holds no process.
Status EnableV2Controllers(const std::string& dir) {
  auto r = RequestControllers(dir, V2ControllerNames());
  if (!r) return std::unexpected(r.error());
  if (r->err == 0) return {};
  std::string why = RequestFailure(dir, *r);
  if (r->err == EBUSY) {
    why +=
        " (the group holds processes, and cgroup v2 gives controllers only to the children of a "
        "group without processes; execbox moves itself into a leaf child only out of a delegated "
        "group other than the root of its cgroup namespace, so run it from one, e.g. systemd-run "
        "--scope -p Delegate=yes, or as root in the root cgroup)";
  } else if (r->err == EACCES || r->err == EPERM || r->err == EROFS) {
    why += std::string(" (") + kPermissionFix + ")";
  }
  return Fail(why);
}

}  // namespace

// Exposed (without a header declaration) for the unit test, which runs them on a throwaway
// subtree with a forked child standing in for this process.
namespace cgroup_internal {

// Moves the thread group `pid` (writing it to cgroup.procs moves every thread) out of the
// cgroup v2 group `own_dir` into its leaf child `own_dir`/supervisor (made if missing), so that
// `own_dir` may hand controllers down. Refuses, changing nothing, unless `own_dir` is a non-root
// v2 domain group (which also keeps it off v1 hierarchies and the root) whose only member is
// `pid`; other processes that share the group are never moved. If some other process turns up
// in `own_dir` meanwhile, `pid` is moved back and the leaf removed again if this call made it.
Status MoveToLeaf(const std::string& own_dir, pid_t pid) {
  // Only non-root v2 groups have cgroup.type: neither v1 directories nor a hierarchy's root.
  auto type = ReadFile(own_dir + "/cgroup.type", 64);
  if (!type) {
    return Fail(own_dir + " is not a non-root cgroup v2 group (" + type.error().message +
                "); execbox moves itself only out of a delegated cgroup v2 group");
  }
  while (!type->empty() && type->back() == '\n') type->pop_back();
  if (*type != "domain") {
    return Fail(own_dir + " is a cgroup v2 group of type '" + *type +
                "', not 'domain'; execbox does not split it");
  }
  std::string self = std::to_string(pid);
  auto others = [&](const std::vector<pid_t>& members) {
    std::string list;
    for (pid_t p : members) {
      if (p != pid) list += (list.empty() ? "" : ", ") + std::to_string(p);
    }
    return list;
  };
  auto share = [&](const std::string& list) {
    return "other processes share " + own_dir + " with pid " + self + " (" + list +
           "); execbox moves only itself into a leaf group, so start it alone in its delegated "
           "group (a unit or scope of its own with Delegate=yes)";
  };
  auto members = ReadMembers(own_dir);
  if (!members) return std::unexpected(Context("listing the members of " + own_dir, members.error()));
  if (std::find(members->begin(), members->end(), pid) == members->end()) {
    return Fail("pid " + self + " is not a member of " + own_dir);
  }
  if (std::string list = others(*members); !list.empty()) return Fail(share(list));

  std::string leaf = own_dir + "/" + std::string(kLeaf);
  bool made = ::mkdir(leaf.c_str(), 0755) == 0;
  if (!made && errno != EEXIST) {
    int err = errno;
    std::string why = "mkdir(" + leaf + "): " + std::strerror(err);
    if (err == EACCES || err == EPERM || err == EROFS) why += std::string(" (") + kPermissionFix + ")";
    return Fail(why);
  }
  auto drop_leaf = [&] {
    if (made) ::rmdir(leaf.c_str());
  };
  if (int err = WriteControl(leaf + "/cgroup.procs", self); err != 0) {
    drop_leaf();
    std::string why =
        "moving pid " + self + " into " + leaf + ": write(" + leaf + "/cgroup.procs): " + std::strerror(err);
    if (err == EACCES || err == EPERM) {
      why += " (moving between groups needs write access to " + own_dir + "/cgroup.procs: " + kPermissionFix +
             ")";
    }
    return Fail(why);
  }
  // A process that joined between the check and the move (forked by another member, or moved
  // in) would still be in the way: put things back as they were.
  auto left = ReadMembers(own_dir);
  if (left && left->empty()) return {};
  std::string why =
      left ? share(others(*left)) : Context("listing the members of " + own_dir, left.error()).message;
  if (int err = WriteControl(own_dir + "/cgroup.procs", self); err != 0) {
    why += "; moving pid " + self + " back from " + leaf + " failed: " + std::strerror(err);
  } else {
    drop_leaf();
  }
  return Fail(why);
}

// Hands `controllers` down from `own_dir`, the group holding `pid`. If the kernel refuses with
// EBUSY because the group holds processes, moves `pid` into the leaf (MoveToLeaf) and asks again;
// if that still fails, `pid` goes back where it was. Returns whether `pid` now sits in the leaf.
Expected<bool> EnableControllersMovingToLeaf(const std::string& own_dir, pid_t pid,
                                             const std::vector<std::string>& controllers) {
  auto first = RequestControllers(own_dir, controllers);
  if (!first) return std::unexpected(first.error());
  if (first->err == 0) return false;
  std::string why = RequestFailure(own_dir, *first);
  if (first->err != EBUSY) {
    if (first->err == EACCES || first->err == EPERM || first->err == EROFS) {
      why += std::string(" (") + kPermissionFix + ")";
    }
    return Fail(why);
  }
  std::string leaf = own_dir + "/" + std::string(kLeaf);
  why +=
      " (the group holds processes, and cgroup v2 gives controllers only to the children of a group "
      "without processes)";
  if (auto moved = MoveToLeaf(own_dir, pid); !moved) {
    return Fail(why + "; moving this process into " + leaf + " instead failed: " + moved.error().message);
  }
  auto second = RequestControllers(own_dir, controllers);
  if (second && second->err == 0) return true;
  std::string again = second ? RequestFailure(own_dir, *second) : second.error().message;
  std::string back;
  if (int err = WriteControl(own_dir + "/cgroup.procs", std::to_string(pid)); err != 0) {
    back = "; moving it back failed too: " + std::string(std::strerror(err));
  }
  return Fail(why + "; after moving this process into " + leaf + ": " + again + back);
}

}  // namespace cgroup_internal

namespace {

// Makes and removes one group to learn what the kernel offers there.
Status ProbeV2(CgroupSupport& s) {
  std::string probe = s.base + "/" + ProbeName();
  if (auto made = MakeDir(probe, true); !made) return made;
  bool has_limits = Exists(probe + "/memory.max") && Exists(probe + "/pids.max");
  s.memory_peak = Exists(probe + "/memory.peak");
  s.swap_limit = Exists(probe + "/memory.swap.max");
  RemoveDir(probe, Clock::now() + kRmdirDeadline);
  if (!has_limits) return Fail("cgroup v2 group " + probe + " has no memory.max or pids.max");
  return {};
}

// `moved_to_leaf` says whether this process moved itself, also when a later step failed.
Expected<CgroupSupport> TryV2(const std::vector<CgroupMount>& mounts, const std::vector<OwnCgroup>& own,
                              bool& moved_to_leaf) {
  const CgroupMount* mount = nullptr;
  for (const auto& m : mounts) {
    if (m.v2 && !mount) mount = &m;
  }
  if (!mount) return Fail("no cgroup2 filesystem is mounted (mount -t cgroup2 none /sys/fs/cgroup)");
  const OwnCgroup* line = nullptr;
  for (const auto& o : own) {
    if (o.hierarchy_id == "0" && o.controllers.empty()) line = &o;
  }
  if (!line) return Fail("/proc/self/cgroup has no cgroup v2 line (0::)");
  auto own_dir = LocateOwnDir(mounts, true, "", line->path);
  if (!own_dir) {
    return Fail("this process's cgroup v2 group " + line->path + " is outside every cgroup2 mount");
  }
  if (auto s = CheckV2Controllers(mount->mount_point, *own_dir); !s) return std::unexpected(s.error());
  // The root of the (namespace's) hierarchy is left alone: the real root has no "no internal
  // processes" rule, and a namespace root is the container's business.
  if (line->path == "/") {
    if (auto s = EnableV2Controllers(*own_dir); !s) return std::unexpected(s.error());
  } else {
    auto moved = cgroup_internal::EnableControllersMovingToLeaf(*own_dir, ::getpid(), V2ControllerNames());
    if (!moved) return std::unexpected(moved.error());
    moved_to_leaf = *moved;
  }
  CgroupSupport support;
  support.tier = CgroupTier::kV2;
  support.moved_to_leaf = moved_to_leaf;
  support.base = *own_dir + "/" + std::string(kSubtree);
  Status rest = MakeDir(support.base, true);
  if (rest) rest = EnableV2Controllers(support.base);
  if (rest) rest = ProbeV2(support);
  if (!rest) {
    std::string note;
    if (moved_to_leaf) {
      note = " (this process had already moved itself into " + *own_dir + "/" + std::string(kLeaf) + ")";
    }
    return Fail(rest.error().message + note);
  }
  return support;
}

// ---------------------------------------------------------------------------------------------
// cgroup v1

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
  return support;
}

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

// The first of `dirs` that holds `file` (v1 spreads the files over one dir per hierarchy).
std::optional<std::string> FindFile(const std::vector<std::string>& dirs, const std::string& file) {
  for (const auto& dir : dirs) {
    if (std::string path = dir + "/" + file; Exists(path)) return path;
  }
  return std::nullopt;
}

Status WriteLimit(const std::string& path, uint64_t value) { return WriteFile(path, std::to_string(value)); }

Status ApplyV2Limits(const std::string& dir, const CgroupLimits& limits, const CgroupSupport& s) {
  if (limits.memory_bytes > 0) {
    if (auto st = WriteLimit(dir + "/memory.max", limits.memory_bytes); !st) return st;
  }
  // No swap: a group that may swap outlives its memory limit slowly instead of failing fast.
  if (s.swap_limit) {
    if (auto st = WriteFile(dir + "/memory.swap.max", "0"); !st) return st;
  }
  if (limits.max_pids > 0) return WriteLimit(dir + "/pids.max", limits.max_pids);
  return {};
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
