// cgroup v2: finding a group this process may hand controllers down from, and the limits.
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
        "group without processes; execbox moves itself into a leaf child only out of a group it "
        "holds alone, so run it from one, e.g. systemd-run --scope -p Delegate=yes, or as root in "
        "the root cgroup)";
  } else if (r->err == EACCES || r->err == EPERM || r->err == EROFS) {
    why += std::string(" (") + kPermissionFix + ")";
  }
  return Fail(why);
}

// Hands the cpu controller down from `own_dir` to the groups under `base` where it is offered,
// for CPU weights (Cgroup::SetCpuWeight). Best effort: groups work without it (ProbeV2 then finds
// no cpu.weight), and the kernel refuses it while a process in the way runs under a realtime policy.
void EnableCpuWhereOffered(const std::string& own_dir, const std::string& base) {
  for (const std::string& dir : {own_dir, base}) {
    auto offered = ReadFile(dir + "/cgroup.controllers");
    if (!offered || !Contains(Words(*offered), "cpu")) return;
    auto enabled = ReadFile(dir + "/cgroup.subtree_control");
    if (enabled && Contains(Words(*enabled), "cpu")) continue;
    if (WriteControl(dir + "/cgroup.subtree_control", "+cpu") != 0) return;
  }
}

// Makes and removes one group to learn what the kernel offers there.
Status ProbeV2(CgroupSupport& s) {
  std::string probe = s.base + "/" + ProbeName();
  if (auto made = MakeDir(probe, true); !made) return made;
  bool has_limits = Exists(probe + "/memory.max") && Exists(probe + "/pids.max");
  s.memory_peak = Exists(probe + "/memory.peak");
  s.swap_limit = Exists(probe + "/memory.swap.max");
  s.cpu_weight = Exists(probe + "/cpu.weight");
  RemoveDir(probe, Clock::now() + kRmdirDeadline);
  if (!has_limits) return Fail("cgroup v2 group " + probe + " has no memory.max or pids.max");
  return {};
}

}  // namespace

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
  // The real root has no "no internal processes" rule (and no cgroup.type file): controllers are
  // handed down at once. Any other group, a cgroup namespace's root included (a container's
  // group, jail/container_cgroups.h), is treated as a delegated one: this process moves itself
  // into the leaf when it is alone there.
  if (line->path == "/" && !Exists(*own_dir + "/cgroup.type")) {
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
  if (rest) EnableCpuWhereOffered(*own_dir, support.base);
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

}  // namespace execbox::jail::cgroup_internal
