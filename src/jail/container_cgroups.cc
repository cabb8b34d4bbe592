#include "jail/container_cgroups.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/io.h"

namespace execbox::jail {
namespace {

constexpr const char* kCgroupRoot = "/sys/fs/cgroup";
constexpr long kCgroup2Magic = 0x63677270;  // CGROUP2_SUPER_MAGIC

ContainerCgroups outcome;

// The steps, in order; a failure is reported as (step, errno).
enum Step : int { kNone, kPipe, kForkHelper, kUnshare, kMapIds, kMountPrivate, kMountCgroup, kWriteGroup };

const char* StepName(int step) {
  switch (step) {
    case kPipe:
      return "pipe";
    case kForkHelper:
      return "fork a helper";
    case kUnshare:
      return "unshare(user, mount, cgroup namespaces)";
    case kMapIds:
      return "map the ids of the new user namespace";
    case kMountPrivate:
      return "make the mounts private";
    case kMountCgroup:
      return "mount cgroup2 at /sys/fs/cgroup";
    case kWriteGroup:
      return "make a group in the container's group";
    default:
      return "?";
  }
}

const char* StepFix(int step) {
  switch (step) {
    case kUnshare:
      return " (the container's seccomp profile refuses user namespaces: "
             "docs/deploy.md, \"Container image\")";
    case kMapIds:
      return " (the container must keep CAP_SETUID, CAP_SETGID and CAP_SETFCAP, which Docker, podman and "
             "containerd give by default: mapping the container's root into a user namespace needs them)";
    case kMountCgroup:
    case kWriteGroup:
      return " (an AppArmor or SELinux policy may refuse it)";
    default:
      return "";
  }
}

// "inside outside count" lines of an id map -> the same ids mapped to themselves.
std::string IdentityOf(const std::string& map) {
  std::string out;
  size_t start = 0;
  while (start < map.size()) {
    size_t end = map.find('\n', start);
    if (end == std::string::npos) end = map.size();
    char inside[32] = {}, outside[32] = {}, count[32] = {};
    if (std::sscanf(map.substr(start, end - start).c_str(), "%31s %31s %31s", inside, outside, count) == 3) {
      out += std::string(inside) + " " + inside + " " + count + "\n";
    }
    start = end + 1;
  }
  return out;
}

// Why the situation does not apply, or "" when it does.
std::string NotApplicable() {
  if (const char* off = std::getenv("EXECBOX_CONTAINER_CGROUPS"); off != nullptr && std::string(off) == "0")
    return "turned off";
  if (::geteuid() != 0) return "not root";
  struct statfs fs {};
  if (::statfs(kCgroupRoot, &fs) != 0 || fs.f_type != kCgroup2Magic) return "no cgroup2 at /sys/fs/cgroup";
  struct statvfs vfs {};
  if (::statvfs(kCgroupRoot, &vfs) != 0 || (vfs.f_flag & ST_RDONLY) == 0) return "/sys/fs/cgroup is writable";
  return "";
}

// The id maps' text, prepared before any fork.
struct Maps {
  std::string uids, gids;
};

struct Failure {
  int step = kNone;
  int err = 0;
};

// Writes `text` to /proc/<pid>/<name>; 0 or errno.
int WriteMap(pid_t pid, const char* name, const std::string& text) noexcept {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/%s", static_cast<int>(pid), name);
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  int err = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) ? 0 : errno;
  ::close(fd);
  return err;
}

// Moves the calling process into its own user, mount and cgroup namespaces, maps every id to
// itself through a helper still outside, and mounts a writable cgroup2 at /sys/fs/cgroup.
// With `probe`, also makes and removes a group there, to prove writes work. The process has
// one thread here, so the forked helper may use what the parent prepared; it allocates nothing.
Failure Enter(const Maps& maps, bool probe) noexcept {
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) return {kPipe, errno};
  const pid_t self = ::getpid();
  const pid_t helper = ::fork();
  if (helper < 0) {
    const int err = errno;
    ::close(ready[0]);
    ::close(ready[1]);
    return {kForkHelper, err};
  }
  if (helper == 0) {
    ::close(ready[1]);
    char byte = 0;
    if (::read(ready[0], &byte, 1) != 1) ::_exit(EPIPE);
    int err = WriteMap(self, "uid_map", maps.uids);
    if (err == 0) err = WriteMap(self, "gid_map", maps.gids);
    ::_exit(err);
  }
  ::close(ready[0]);
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWCGROUP) != 0) {
    const int err = errno;
    ::close(ready[1]);
    ::waitpid(helper, nullptr, 0);
    return {kUnshare, err};
  }
  (void)!::write(ready[1], "x", 1);
  ::close(ready[1]);
  int status = 0;
  ::waitpid(helper, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return {kMapIds, WIFEXITED(status) ? WEXITSTATUS(status) : 0};
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) return {kMountPrivate, errno};
  // The kernel refuses a mount of the same filesystem and root right on top of itself (EBUSY),
  // and the container's read-only mount cannot be taken away (it is locked in this namespace):
  // an empty tmpfs goes between the two.
  constexpr unsigned long kFlags = MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RELATIME;
  if (::mount("tmpfs", kCgroupRoot, "tmpfs", kFlags, "size=4k,mode=0755") != 0) return {kMountCgroup, errno};
  if (::mount("cgroup2", kCgroupRoot, "cgroup2", kFlags, nullptr) != 0) return {kMountCgroup, errno};
  if (probe) {
    char group[64];
    std::snprintf(group, sizeof group, "%s/execbox-probe-%d", kCgroupRoot, static_cast<int>(::getpid()));
    if (::mkdir(group, 0755) != 0) return {kWriteGroup, errno};
    ::rmdir(group);
  }
  return {};
}

ContainerCgroups Take() {
  if (!NotApplicable().empty()) return {};
  (void)ExecutablePath();  // read while /proc/self/exe still names a path in this mount namespace
  auto uid_map = ReadFile("/proc/self/uid_map");
  auto gid_map = ReadFile("/proc/self/gid_map");
  if (!uid_map || !gid_map) return {.entered = false, .detail = "cannot read this process's id maps"};
  const Maps maps{IdentityOf(*uid_map), IdentityOf(*gid_map)};
  // First in a throwaway child: entering a user namespace cannot be undone, and a process left
  // in one whose ids are not mapped could not run a jail at all.
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0)
    return {.entered = false, .detail = "pipe: " + std::string(std::strerror(errno))};
  const pid_t probe = ::fork();
  const int fork_error = errno;
  if (probe == 0) {
    ::close(report[0]);
    Failure f = Enter(maps, true);
    (void)!::write(report[1], &f, sizeof f);
    ::_exit(0);
  }
  ::close(report[1]);
  Failure tried{kForkHelper, fork_error};
  if (probe > 0) {
    if (::read(report[0], &tried, sizeof tried) != static_cast<ssize_t>(sizeof tried))
      tried = {kForkHelper, EPIPE};
    ::waitpid(probe, nullptr, 0);
  }
  ::close(report[0]);
  Failure f = tried.step == kNone ? Enter(maps, false) : tried;
  if (f.step != kNone) {
    return {
        .entered = false,
        .detail = std::string("the container's cgroup filesystem is read-only, and taking a writable view "
                              "of it failed at '") +
                  StepName(f.step) + "': " + std::strerror(f.err) + StepFix(f.step)};
  }
  return {.entered = true,
          .detail =
              "the container's group, through a writable cgroup2 mounted in execbox's own user, mount and "
              "cgroup namespaces"};
}

}  // namespace

const ContainerCgroups& TakeContainerCgroups() {
  static const bool done = [] {
    outcome = Take();
    return true;
  }();
  (void)done;
  return outcome;
}

const ContainerCgroups& ContainerCgroupsOutcome() { return outcome; }

}  // namespace execbox::jail
