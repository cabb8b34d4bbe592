#include "jail/session_root.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "jail/child_fs.h"
#include "jail/doctor.h"

namespace execbox::jail {
namespace {

// Where the new root is put together: over the zygote's /tmp, which the child mounts afresh
// anyway once the new root is in place.
constexpr const char* kStage = "/tmp";
constexpr const char* kUpper = "/tmp/upper";
constexpr const char* kOverlayWork = "/tmp/work";
constexpr const char* kNewRoot = "/tmp/root";
// The upper layer again, bound read-only: what a snapshot of the session copies (the agent
// reads it through a descriptor; nothing can write through that mount).
constexpr const char* kLayerView = "/tmp/layer";

// The mount points on the root tmpfs (the mounts whose parent is the root mount: what must be
// bound again, recursively so that what is mounted beneath them comes along, in the new root):
// each entry whose device is not the root's. Found by walking the root tmpfs, which holds only
// what the jail's plan made there, rather than from /proc, which a container may mask.
bool RootChildren(int dirfd, const std::string& path, dev_t root_dev, int depth, std::vector<std::string>& out) {
  if (depth > 32) {
    errno = ELOOP;
    return false;
  }
  int listing = ::dup(dirfd);
  DIR* dir = listing >= 0 ? ::fdopendir(listing) : nullptr;
  if (dir == nullptr) {
    if (listing >= 0) ::close(listing);
    return false;
  }
  bool ok = true;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      ok = false;
      break;
    }
    const std::string inside = path + "/" + name;
    if (st.st_dev != root_dev) {
      out.push_back(inside);
    } else if (S_ISDIR(st.st_mode)) {
      int child = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      ok = child >= 0 && RootChildren(child, inside, root_dev, depth + 1, out);
      if (child >= 0) ::close(child);
      if (!ok) break;
    }
  }
  ::closedir(dir);
  return ok;
}

bool RootChildren(std::vector<std::string>& out) {
  int root = ::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return false;
  struct stat st {};
  bool ok = ::fstat(root, &st) == 0 && RootChildren(root, "", st.st_dev, 0, out);
  ::close(root);
  return ok;
}

int MountOverlay(const char* lower) {
  std::string options = std::string("lowerdir=") + lower + ",upperdir=" + kUpper + ",workdir=" + kOverlayWork;
  // In a user namespace the overlay keeps its own attributes as user.overlay.* (userxattr);
  // a kernel or a mounter without it takes the options alone.
  if (::mount("overlay", kNewRoot, "overlay", MS_NOSUID | MS_NODEV, (options + ",userxattr").c_str()) == 0) {
    return 0;
  }
  if (errno != EINVAL) return -1;
  return ::mount("overlay", kNewRoot, "overlay", MS_NOSUID | MS_NODEV, options.c_str());
}

}  // namespace

const char* MountSessionRoot(uint64_t bytes, uint64_t inodes, const char* work_dir, int* layer) noexcept {
  *layer = -1;
  std::vector<std::string> children;
  if (!RootChildren(children)) return "find the root's mount points";

  char options[160];
  std::snprintf(options, sizeof options, "size=%llu,nr_inodes=%llu,mode=0755",
                static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(inodes));
  if (::mount("tmpfs", kStage, "tmpfs", MS_NOSUID | MS_NODEV, options) != 0) return "mount the root's upper layer";
  for (const char* dir : {kUpper, kOverlayWork, kNewRoot, kLayerView}) {
    if (::mkdir(dir, 0755) != 0) return "make the root's layer directories";
  }
  if (MountOverlay("/") != 0) {
    // A kernel without overlayfs in user namespaces (before 5.11, or a container that refuses
    // it): the session keeps the read-only root, as `execbox doctor` says.
    if (::umount2(kStage, MNT_DETACH) != 0) return "take the root's upper layer away";
    return nullptr;
  }
  if (::mount(kUpper, kLayerView, nullptr, MS_BIND, nullptr) != 0 ||
      ::mount(nullptr, kLayerView, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
               nullptr) != 0) {
    return "bind the root's layer read-only";
  }
  *layer = ::open(kLayerView, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (*layer < 0) return "open the root's layer";

  // The home and /tmp are mounted afresh in the new root; everything else comes as it was.
  const std::string home = work_dir;
  for (const std::string& point : children) {
    if (point == kStage || point == home) continue;
    const std::string target = std::string(kNewRoot) + point;
    if (::mount(point.c_str(), target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      return "bind a mount into the new root";
    }
    // Read-only, /dev above all: the zygote's /dev tmpfs is every child's, and a session
    // writes beneath / (Landlock's session plan). Its nodes are written all the same (a
    // mount's flag guards the directory only). The procfs stays as it is: the code's own is
    // mounted over it.
    if (point == "/proc") continue;
    if (::mount(nullptr, target.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | LockedFlags(target.c_str()),
                nullptr) != 0) {
      return "make a bound mount read-only";
    }
  }

  // The old root goes to the new root's /tmp, and from there out of this namespace.
  const std::string put_old = std::string(kNewRoot) + kStage;
  if (::syscall(SYS_pivot_root, kNewRoot, put_old.c_str()) != 0) return "pivot_root into the overlay root";
  if (::chdir("/") != 0) return "chdir to the overlay root";
  // The layer's descriptor keeps its read-only mount; nothing else of the old root stays.
  if (::umount2(kStage, MNT_DETACH) != 0) return "detach the zygote's root";
  return nullptr;
}

}  // namespace execbox::jail

namespace execbox::jail {

Check SessionRootCheck() {
  Check c{.layer = "session root (overlayfs)", .required = false};
  c.fix = "Linux 5.11 or later with overlayfs (CONFIG_OVERLAY_FS, modprobe overlay); in a container, allow mount";
  // Prepared before the fork: the child does not allocate.
  const std::string uid_map = "0 " + std::to_string(::getuid()) + " 1";
  const std::string gid_map = "0 " + std::to_string(::getgid()) + " 1";
  char stage[] = "/tmp/execbox-doctor-XXXXXX";
  if (::mkdtemp(stage) == nullptr) {
    c.detail = std::string("not tried: cannot make a directory in /tmp (") + std::strerror(errno) + ")";
    c.fix = "make /tmp writable for this user";
    return c;
  }
  const std::string base = stage;
  const std::string lower = base + "/l", upper = base + "/u", work = base + "/w", merged = base + "/m";
  const std::string lower_file = lower + "/f", merged_file = merged + "/f", merged_new = merged + "/g";
  const std::string options = "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work;
  const std::string with_userxattr = options + ",userxattr";
  auto write_file = [](const char* path, const std::string& text) {
    int fd = ::open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    return ok;
  };
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) ::_exit(errno);
    if (!write_file("/proc/self/setgroups", "deny") || !write_file("/proc/self/uid_map", uid_map) ||
        !write_file("/proc/self/gid_map", gid_map)) {
      ::_exit(errno != 0 ? errno : EPERM);
    }
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ::_exit(errno);
    if (::mount("tmpfs", stage, "tmpfs", 0, "size=1m") != 0) ::_exit(errno);
    for (const std::string* dir : {&lower, &upper, &work, &merged}) {
      if (::mkdir(dir->c_str(), 0755) != 0) ::_exit(errno);
    }
    int fd = ::open(lower_file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) ::_exit(errno);
    ::close(fd);
    if (::mount("overlay", merged.c_str(), "overlay", 0, with_userxattr.c_str()) != 0 &&
        (errno != EINVAL || ::mount("overlay", merged.c_str(), "overlay", 0, options.c_str()) != 0)) {
      ::_exit(errno);
    }
    fd = ::open(merged_new.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) ::_exit(errno);
    ::close(fd);
    if (::unlink(merged_file.c_str()) != 0) ::_exit(errno);
    ::_exit(0);
  }
  int status = 0;
  if (pid > 0) ::waitpid(pid, &status, 0);
  ::rmdir(stage);
  const int err = pid < 0 ? errno : WIFEXITED(status) ? WEXITSTATUS(status) : 255;
  c.ok = err == 0;
  c.detail = c.ok ? "a user namespace mounted an overlay over a tmpfs, wrote and removed through it: a "
                    "session's root is writable"
                  : std::string("refused (") + std::strerror(err) +
                        "): a session's root stays read-only; its home, /tmp and /dev/shm are writable";
  return c;
}

}  // namespace execbox::jail
