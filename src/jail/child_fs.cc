#include "jail/child_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "jail/wire.h"

namespace execbox::jail {
namespace {

StepError Err(const char* step) noexcept { return StepError{step, errno}; }

// A read-only remount inside a user namespace must keep the flags the host locked on the
// original mount (nosuid, nodev, noexec, atime), or the kernel refuses it.
unsigned long LockedFlags(const char* path) noexcept {
  struct statfs sf {};
  if (::statfs(path, &sf) != 0) return 0;
  unsigned long f = 0;
  if (sf.f_flags & ST_NOSUID) f |= MS_NOSUID;
  if (sf.f_flags & ST_NODEV) f |= MS_NODEV;
  if (sf.f_flags & ST_NOEXEC) f |= MS_NOEXEC;
  if (sf.f_flags & ST_NOATIME) f |= MS_NOATIME;
  if (sf.f_flags & ST_NODIRATIME) f |= MS_NODIRATIME;
  if (sf.f_flags & ST_RELATIME) f |= MS_RELATIME;
  return f;
}

StepError WriteWhole(const char* path, const char* data, size_t size, mode_t mode) noexcept {
  int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return Err("create file in the jail root");
  bool ok = wire::WriteExact(fd, data, size) || size == 0;
  ::close(fd);
  if (!ok) return Err("write file in the jail root");
  return {};
}

StepError RunMountOp(const MountOp& op) noexcept {
  using Kind = MountOp::Kind;
  switch (op.kind) {
    case Kind::kDir:
      if (::mkdir(op.target, op.mode) != 0 && errno != EEXIST) return Err("mkdir in the jail root");
      return {};
    case Kind::kTmpfs: {
      unsigned long flags = MS_NOSUID | MS_NODEV;
      if (::mount("tmpfs", op.target, "tmpfs", flags, op.source) != 0) return Err("mount tmpfs");
      return {};
    }
    case Kind::kBindReadOnly:
      if (::mount(op.source, op.target, nullptr, MS_BIND | MS_REC, nullptr) != 0) return Err("bind mount");
      if (::mount(nullptr, op.target, nullptr,
                  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | LockedFlags(op.target),
                  nullptr) != 0) {
        return Err("remount bind read-only");
      }
      return {};
    case Kind::kBindDevice:
      if (::mount(op.source, op.target, nullptr, MS_BIND, nullptr) != 0) return Err("bind device");
      if (::mount(nullptr, op.target, nullptr,
                  MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC | LockedFlags(op.target), nullptr) != 0) {
        return Err("remount device nosuid");
      }
      return {};
    case Kind::kProc:
      if (MountProc(op.target) != 0) return Err("mount proc");
      return {};
    case Kind::kSymlink:
      if (::symlink(op.source, op.target) != 0 && errno != EEXIST) return Err("symlink in the jail root");
      return {};
    case Kind::kFile:
      return WriteWhole(op.target, op.data, op.size, op.mode);
  }
  return {};
}

// Creates the directories above `name` (relative to dirfd).
StepError MakeParents(int dirfd, char* name) noexcept {
  for (char* p = name; *p != '\0'; ++p) {
    if (*p != '/') continue;
    *p = '\0';
    int rc = ::mkdirat(dirfd, name, 0755);
    *p = '/';
    if (rc != 0 && errno != EEXIST) return Err("mkdir for an input file");
  }
  return {};
}

bool Discard(int fd, int64_t size) noexcept {
  char buf[4096];
  while (size > 0) {
    size_t n = size > static_cast<int64_t>(sizeof buf) ? sizeof buf : static_cast<size_t>(size);
    if (!wire::ReadExact(fd, buf, n)) return false;
    size -= static_cast<int64_t>(n);
  }
  return true;
}

StepError ReceiveOne(int control, int workfd, const wire::Header& h) noexcept {
  char name[4096];
  if (h.a <= 0 || h.a >= static_cast<int64_t>(sizeof name) || h.b < 0) {
    errno = EINVAL;
    return Err("input file header");
  }
  if (!wire::ReadExact(control, name, static_cast<size_t>(h.a))) return Err("read input file name");
  name[h.a] = '\0';
  if (StepError e = MakeParents(workfd, name)) {
    (void)Discard(control, h.b);
    return e;
  }
  int fd = ::openat(workfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    StepError e = Err("create input file");
    (void)Discard(control, h.b);
    return e;
  }
  char buf[65536];
  int64_t left = h.b;
  StepError result;
  while (left > 0) {
    size_t n = left > static_cast<int64_t>(sizeof buf) ? sizeof buf : static_cast<size_t>(left);
    if (!wire::ReadExact(control, buf, n)) {
      result = Err("read input file content");
      break;
    }
    if (!result && !wire::WriteExact(fd, buf, n)) result = Err("write input file (work dir full?)");
    left -= static_cast<int64_t>(n);
  }
  ::close(fd);
  return result;
}

struct Walk {
  const ChildPlan& plan;
  const FileFilter* filter = nullptr;  // null: every regular file goes
  uint32_t sent = 0;
  char path[4096] = {};
};

void SendSkipped(const ChildPlan& plan, const char* name, const char* why) noexcept {
  wire::Header h{.kind = wire::Kind::kSkippedFile};
  size_t len = std::strlen(name);
  h.a = static_cast<int64_t>(len);
  wire::CopyText(h.text, sizeof h.text, why);
  if (wire::WriteExact(plan.control, &h, sizeof h)) wire::WriteExact(plan.control, name, len);
}

void SendFile(Walk& w, int fd, uint64_t size) noexcept {
  if (w.sent >= w.plan.max_files) return SendSkipped(w.plan, w.path, "over the returned-file count limit");
  if (size > w.plan.max_file_bytes)
    return SendSkipped(w.plan, w.path, "larger than the returned-file size limit");
  ++w.sent;
  wire::Header h{.kind = wire::Kind::kOutputFile};
  size_t len = std::strlen(w.path);
  h.a = static_cast<int64_t>(len);
  h.b = static_cast<int64_t>(size);
  if (!wire::WriteExact(w.plan.control, &h, sizeof h) || !wire::WriteExact(w.plan.control, w.path, len))
    return;
  char buf[65536];
  uint64_t left = size;
  while (left > 0) {
    size_t want = left > sizeof buf ? sizeof buf : static_cast<size_t>(left);
    ssize_t n = ::read(fd, buf, want);
    if (n <= 0) {  // cannot happen for a regular file of a dead tree; keep the stream framed
      std::memset(buf, 0, want);
      n = static_cast<ssize_t>(want);
    }
    if (!wire::WriteExact(w.plan.control, buf, static_cast<size_t>(n))) return;
    left -= static_cast<uint64_t>(n);
  }
}

void WalkDir(Walk& w, int dirfd, size_t path_len, int depth) noexcept {
  char buf[4096];
  for (;;) {
    long n = ::syscall(SYS_getdents64, dirfd, buf, sizeof buf);
    if (n <= 0) return;
    for (long off = 0; off < n;) {
      auto* d = reinterpret_cast<struct dirent64*>(buf + off);
      off += d->d_reclen;
      const char* name = d->d_name;
      if (std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0) continue;
      size_t name_len = std::strlen(name);
      if (path_len + name_len + 2 >= sizeof w.path) continue;
      size_t len = path_len;
      if (len > 0) w.path[len++] = '/';
      std::memcpy(w.path + len, name, name_len + 1);
      struct stat st {};
      if (::fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (S_ISDIR(st.st_mode)) {
        if (depth >= 16) {
          SendSkipped(w.plan, w.path, "directory nested too deep");
        } else {
          int sub = ::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (sub >= 0) {
            WalkDir(w, sub, len + name_len, depth + 1);
            ::close(sub);
          }
        }
      } else if (S_ISLNK(st.st_mode)) {
        SendSkipped(w.plan, w.path, "symbolic link, not followed");
      } else if (!S_ISREG(st.st_mode)) {
        SendSkipped(w.plan, w.path, "not a regular file");
      } else {
        int fd = ::openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        struct stat fst {};
        if (fd >= 0 && ::fstat(fd, &fst) == 0 && S_ISREG(fst.st_mode) &&
            (w.filter == nullptr || w.filter->wanted(w.filter->context, w.path, fst))) {
          SendFile(w, fd, static_cast<uint64_t>(fst.st_size));
        }
        if (fd >= 0) ::close(fd);
      }
      w.path[path_len] = '\0';
    }
  }
}

}  // namespace

int MountProc(const char* target) noexcept {
  // subset=pid (Linux 5.8+) leaves out host facts such as cpuinfo, meminfo and sysctls.
  constexpr unsigned long kFlags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
  if (::mount("proc", target, "proc", kFlags, "subset=pid") == 0) return 0;
  if (errno == EINVAL && ::mount("proc", target, "proc", kFlags, nullptr) == 0) return 0;
  return -1;
}

StepError BuildFilesystem(const ChildPlan& plan) noexcept {
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return Err("make / private");
  for (const MountOp& op : plan.mounts) {
    if (StepError e = RunMountOp(op)) return e;
  }
  if (::mkdir(plan.old_root, 0700) != 0) return Err("mkdir old root");
  if (::syscall(SYS_pivot_root, plan.staging_root, plan.old_root) != 0) return Err("pivot_root");
  if (::chdir("/") != 0) return Err("chdir /");
  if (::umount2(plan.old_root_inside, MNT_DETACH) != 0) return Err("detach old root");
  if (::rmdir(plan.old_root_inside) != 0) return Err("rmdir old root");
  if (::mount(nullptr, "/", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0) {
    return Err("remount / read-only");
  }
  return {};
}

StepError ReceiveInputs(const ChildPlan& plan) noexcept {
  int workfd = ::open(plan.work_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (workfd < 0) return Err("open work dir");
  StepError result;
  for (;;) {
    wire::Header h{};
    if (!wire::ReadExact(plan.control, &h, sizeof h)) {
      result = Err("read from supervisor");
      break;
    }
    if (h.kind == wire::Kind::kInputsDone) break;
    if (h.kind != wire::Kind::kInputFile) {
      errno = EPROTO;
      result = Err("unexpected message before start");
      break;
    }
    if (StepError e = ReceiveOne(plan.control, workfd, h)) {
      if (!result) result = e;
    }
  }
  ::close(workfd);
  return result;
}

void SendOutputs(const ChildPlan& plan) noexcept { SendOutputsFiltered(plan, nullptr); }

void SendOutputsFiltered(const ChildPlan& plan, const FileFilter* filter) noexcept {
  int workfd = ::open(plan.work_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (workfd < 0) return;
  Walk w{.plan = plan, .filter = filter};
  WalkDir(w, workfd, 0, 0);
  ::close(workfd);
}

}  // namespace execbox::jail
