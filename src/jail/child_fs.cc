#include "jail/child_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "jail/wire.h"

namespace execbox::jail {
namespace {

StepError Err(const char* step) noexcept { return StepError{step, errno}; }

StepError WriteWhole(const char* path, const char* data, size_t size, mode_t mode) noexcept {
  int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return Err("create file in the jail root");
  bool ok = wire::WriteExact(fd, data, size) || size == 0;
  ::close(fd);
  if (!ok) return Err("write file in the jail root");
  return {};
}

StepError RunMountOp(const MountOp& op, int64_t& without) noexcept {
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
    case Kind::kBindWritable:
      if (::mount(op.source, op.target, nullptr, MS_BIND, nullptr) != 0) return Err("bind mount");
      if (::mount(nullptr, op.target, nullptr,
                  MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | LockedFlags(op.target), nullptr) != 0) {
        return Err("remount writable bind nosuid");
      }
      return {};
    case Kind::kBindDevice:
      if (::mount(op.source, op.target, nullptr, MS_BIND, nullptr) != 0) return Err("bind device");
      if (::mount(nullptr, op.target, nullptr,
                  MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC | LockedFlags(op.target), nullptr) != 0) {
        return Err("remount device nosuid");
      }
      return {};
    case Kind::kProc: {
      int mounted = MountProcIfAllowed(op.target);
      if (mounted < 0) return Err("mount proc");
      if (mounted == 0) without |= wire::kWithoutProc;
      return {};
    }
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
      // execbox's own entries (a session's installed packages) are not the code's output.
      if (depth == 0 && std::strncmp(name, kPrivatePrefix, sizeof kPrivatePrefix - 1) == 0) continue;
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

void SendFileResult(int control, int err, const char* what) noexcept {
  wire::Header h{.kind = wire::Kind::kFileResult, .a = err};
  wire::CopyText(h.text, sizeof h.text, what);
  (void)wire::WriteExact(control, &h, sizeof h);
}

// `path` beneath `dirfd`, resolved without following any symbolic link (the last component
// included), without ".." leaving `dirfd`, and without crossing a mount point.
int OpenBeneath(int dirfd, const char* path, int flags) noexcept {
  struct open_how how {};
  how.flags = static_cast<uint64_t>(flags | O_NOFOLLOW | O_CLOEXEC);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  long fd = ::syscall(SYS_openat2, dirfd, path, &how, sizeof how);
  if (fd >= 0 || (errno != ENOSYS && errno != EPERM)) return static_cast<int>(fd);
  // No openat2 (before Linux 5.6, or filtered): one component at a time, none followed. The
  // path is plain (no "..", checked by the caller), so it cannot climb out.
  char parts[4096];
  size_t len = std::strlen(path);
  if (len >= sizeof parts) {
    errno = ENAMETOOLONG;
    return -1;
  }
  std::memcpy(parts, path, len + 1);
  int dir = dirfd;
  char* name = parts;
  for (char* p = parts; *p != '\0'; ++p) {
    if (*p != '/') continue;
    *p = '\0';
    int next = ::openat(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int err = errno;
    if (dir != dirfd) ::close(dir);
    if (next < 0) {
      errno = err;  // ENOTDIR: a symbolic link or a file where a directory should be
      return -1;
    }
    dir = next;
    name = p + 1;
  }
  int fd2 = ::openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC);
  int err = errno;
  if (dir != dirfd) ::close(dir);
  errno = err;
  return fd2;
}

// Why an open beneath the work dir failed, in words.
const char* OpenFailure(int err) noexcept {
  switch (err) {
    case ENOENT:
      return "no such file";
    case ELOOP:
      return "a symbolic link (not followed)";
    case ENOTDIR:
      return "a parent on the path is not a directory (or is a symbolic link)";
    case EXDEV:
      return "the path leaves the work dir";
    case EACCES:
      return "permission denied (the code changed the file's mode)";
    case EAGAIN:
      return "the code holds a lease on the file";
    default:
      return "cannot open the file";
  }
}

}  // namespace

bool PlainRelativePath(const char* path, size_t len) noexcept {
  if (len == 0 || len >= 4096 || std::memchr(path, '\0', len) != nullptr) return false;
  size_t start = 0;
  while (start <= len) {
    size_t end = start;
    while (end < len && path[end] != '/') ++end;
    size_t part = end - start;
    if (part == 0) return false;  // absolute, "a//b" or a trailing slash
    if (path[start] == '.' && (part == 1 || (part == 2 && path[start + 1] == '.'))) return false;
    start = end + 1;
  }
  return true;
}

void SendOneFile(int control, int workfd, const char* path, uint64_t max_bytes) noexcept {
  if (!PlainRelativePath(path, std::strlen(path)))
    return SendFileResult(control, EINVAL, "not a plain relative path");
  // Looked at through O_PATH first: a FIFO or device is never opened (opening a FIFO to read
  // would wake a writer the code left waiting on it).
  int probe = OpenBeneath(workfd, path, O_PATH);
  if (probe < 0) return SendFileResult(control, errno, OpenFailure(errno));
  struct stat st {};
  bool looked = ::fstat(probe, &st) == 0;
  ::close(probe);
  if (looked && S_ISLNK(st.st_mode)) return SendFileResult(control, ELOOP, OpenFailure(ELOOP));
  if (!looked || !S_ISREG(st.st_mode)) return SendFileResult(control, ENOENT, "not a regular file");
  // The code may swap the entry meanwhile: O_NONBLOCK so that nothing can make the open wait
  // (a FIFO, a lease), and the descriptor itself is checked again.
  int fd = OpenBeneath(workfd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return SendFileResult(control, errno, OpenFailure(errno));
  struct stat fst {};
  if (::fstat(fd, &fst) != 0 || !S_ISREG(fst.st_mode)) {
    ::close(fd);
    return SendFileResult(control, ENOENT, "not a regular file");
  }
  if (static_cast<uint64_t>(fst.st_size) > max_bytes) {
    ::close(fd);
    return SendFileResult(control, EFBIG, "larger than the most bytes asked for");
  }
  // The size is taken once: a file that changes under the read cannot break the framing; the
  // result then says it changed.
  uint64_t size = static_cast<uint64_t>(fst.st_size);
  wire::Header h{.kind = wire::Kind::kFileData, .b = static_cast<int64_t>(size)};
  if (!wire::WriteExact(control, &h, sizeof h)) {
    ::close(fd);
    return;
  }
  bool changed = false;
  char buf[65536];
  for (uint64_t left = size; left > 0;) {
    size_t want = left > sizeof buf ? sizeof buf : static_cast<size_t>(left);
    ssize_t n = ::read(fd, buf, want);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {  // shrunk meanwhile
      changed = true;
      std::memset(buf, 0, want);
      n = static_cast<ssize_t>(want);
    }
    if (!wire::WriteExact(control, buf, static_cast<size_t>(n))) {
      ::close(fd);
      return;
    }
    left -= static_cast<uint64_t>(n);
  }
  struct stat after {};
  if (::read(fd, buf, 1) != 0 || ::fstat(fd, &after) != 0 || after.st_size != fst.st_size ||
      after.st_mtim.tv_sec != fst.st_mtim.tv_sec || after.st_mtim.tv_nsec != fst.st_mtim.tv_nsec) {
    changed = true;
  }
  ::close(fd);
  if (changed) return SendFileResult(control, EAGAIN, "the file changed while it was read");
  SendFileResult(control, 0, "");
}

Received ReceiveOneFile(int control, int workfd, const char* path, int64_t size,
                        struct stat* written) noexcept {
  char parts[4096];
  size_t len = std::strlen(path);
  if (!PlainRelativePath(path, len) || len >= sizeof parts) {
    if (!Discard(control, size)) return Received::kBrokenOff;
    SendFileResult(control, EINVAL, "not a plain relative path");
    return Received::kRefused;
  }
  std::memcpy(parts, path, len + 1);
  int err = 0;
  const char* what = nullptr;
  // The parents, made where missing and each opened (never followed) before the next.
  int dir = workfd;
  char* leaf = parts;
  for (char* p = parts; *p != '\0' && what == nullptr; ++p) {
    if (*p != '/') continue;
    *p = '\0';
    if (::mkdirat(dir, leaf, 0755) != 0 && errno != EEXIST) {
      err = errno;
      what = "cannot create a parent directory";
      break;
    }
    int next = OpenBeneath(dir, leaf, O_PATH | O_DIRECTORY);
    if (next < 0) {
      err = errno;
      what = err == ELOOP     ? "a parent on the path is a symbolic link (not followed)"
             : err == ENOTDIR ? "a parent on the path is not a directory (or is a symbolic link)"
                              : "cannot open a parent directory";
      break;
    }
    if (dir != workfd) ::close(dir);
    dir = next;
    leaf = p + 1;
  }
  // A new file beside the target (O_EXCL: never an entry the code made), renamed over it.
  char temp[64];
  int fd = -1;
  static unsigned counter = 0;
  for (int i = 0; what == nullptr && fd < 0 && i < 64; ++i) {
    std::snprintf(temp, sizeof temp, ".execbox-upload-%d-%u", static_cast<int>(::getpid()), ++counter);
    fd = ::openat(dir, temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) {
      err = errno;
      what = "cannot create the file";
    }
  }
  if (what == nullptr && fd < 0) {
    err = EEXIST;
    what = "cannot create the file";
  }
  char buf[65536];
  bool broken = false;
  for (int64_t left = size; left > 0;) {
    size_t n = left > static_cast<int64_t>(sizeof buf) ? sizeof buf : static_cast<size_t>(left);
    if (!wire::ReadExact(control, buf, n)) {
      broken = true;
      break;
    }
    if (what == nullptr && !wire::WriteExact(fd, buf, n)) {
      err = errno;
      what =
          err == ENOSPC || err == EFBIG || err == EDQUOT ? "the work dir is full" : "cannot write the file";
    }
    left -= static_cast<int64_t>(n);
  }
  bool renamed = false;
  if (!broken && what == nullptr) {
    renamed = ::renameat(dir, temp, dir, leaf) == 0;
    if (!renamed) {
      err = errno;
      what = err == EISDIR || err == ENOTEMPTY || err == EEXIST ? "a directory is at the path"
                                                                : "cannot put the file in place";
    }
  }
  bool ok = renamed;
  if (ok && ::fstat(fd, written) != 0) *written = {};
  if (fd >= 0 && !renamed) ::unlinkat(dir, temp, 0);
  if (fd >= 0) ::close(fd);
  if (dir != workfd) ::close(dir);
  if (broken) return Received::kBrokenOff;
  if (ok) {
    SendFileResult(control, 0, "");
    return Received::kWritten;
  }
  SendFileResult(control, err != 0 ? err : EIO, what != nullptr ? what : "cannot write the file");
  return Received::kRefused;
}

int MountProc(const char* target) noexcept {
  // subset=pid (Linux 5.8+) leaves out host facts such as cpuinfo, meminfo and sysctls.
  constexpr unsigned long kFlags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
  if (::mount("proc", target, "proc", kFlags, "subset=pid") == 0) return 0;
  if (errno == EINVAL && ::mount("proc", target, "proc", kFlags, nullptr) == 0) return 0;
  return -1;
}

// A remount inside a user namespace must keep the flags the host locked on the original mount,
// or the kernel refuses it.
unsigned long LockedFlags(const char* path) noexcept {
  struct statfs sf {};
  if (::statfs(path, &sf) != 0) return 0;
  unsigned long f = 0;
  // A read-only source stays read-only (systemd's PrivateDevices= gives a read-only /dev; a
  // device node on it is still written to, the mount's flag guards the directory only).
  if (sf.f_flags & ST_RDONLY) f |= MS_RDONLY;
  if (sf.f_flags & ST_NOSUID) f |= MS_NOSUID;
  if (sf.f_flags & ST_NODEV) f |= MS_NODEV;
  if (sf.f_flags & ST_NOEXEC) f |= MS_NOEXEC;
  if (sf.f_flags & ST_NOATIME) f |= MS_NOATIME;
  if (sf.f_flags & ST_NODIRATIME) f |= MS_NODIRATIME;
  if (sf.f_flags & ST_RELATIME) f |= MS_RELATIME;
  return f;
}

int MountProcIfAllowed(const char* target) noexcept {
  if (MountProc(target) == 0) return 1;
  return errno == EPERM ? 0 : -1;
}

StepError BuildFilesystem(const ChildPlan& plan, int64_t& without) noexcept {
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return Err("make / private");
  for (const MountOp& op : plan.mounts) {
    if (StepError e = RunMountOp(op, without)) return e;
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
  int workfd = ::open(plan.work_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (workfd < 0) return;
  SendOutputsBeneath(plan, workfd, filter);
  ::close(workfd);
}

void SendOutputsBeneath(const ChildPlan& plan, int workfd, const FileFilter* filter) noexcept {
  // A descriptor of its own: the walk reads the directory from its start.
  int dirfd = ::openat(workfd, ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dirfd < 0) return;
  Walk w{.plan = plan, .filter = filter};
  WalkDir(w, dirfd, 0, 0);
  ::close(dirfd);
}

}  // namespace execbox::jail
