#include "jail/proc_sessions.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace execbox::jail {
namespace {

bool Kept(pid_t session, const pid_t* keep, size_t keep_count) {
  for (size_t i = 0; i < keep_count; ++i) {
    if (keep[i] > 0 && keep[i] == session) return true;
  }
  return false;
}

// The session of process `pid` and whether it is still running, from /proc/<pid>/stat: "pid
// (comm) state ppid pgrp session ...", comm being anything (the last ')' ends it).
bool ReadSession(int proc_fd, const char* pid, pid_t* session, bool* running) {
  char path[32];
  size_t n = std::strlen(pid);
  if (n > 10) return false;
  std::memcpy(path, pid, n);
  std::memcpy(path + n, "/stat", 6);
  int fd = ::openat(proc_fd, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char stat[1024];
  ssize_t got = ::read(fd, stat, sizeof stat - 1);
  ::close(fd);
  if (got <= 0) return false;
  stat[got] = '\0';
  char* p = std::strrchr(stat, ')');
  if (p == nullptr || p[1] != ' ') return false;
  const char state = p[2];
  *running = state != 'Z' && state != 'X' && state != 'x';
  p += 3;
  for (int field = 0; field < 3; ++field) {  // ppid, pgrp, then the session
    while (*p == ' ') ++p;
    long value = 0;
    bool digits = false;
    while (*p >= '0' && *p <= '9') {
      value = value * 10 + (*p++ - '0');
      digits = true;
      if (value > (1L << 30)) return false;
    }
    if (!digits) return false;
    if (field == 2) *session = static_cast<pid_t>(value);
  }
  return true;
}

}  // namespace

bool KillOutsideSessions(int proc_fd, const pid_t* keep, size_t keep_count) noexcept {
  if (proc_fd < 0) return false;
  struct Dirent {
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[1];
  };
  for (int look = 0; look < 64; ++look) {
    bool killed = false;
    if (::lseek(proc_fd, 0, SEEK_SET) != 0) return false;
    alignas(8) char buf[8192];
    for (;;) {
      long n = ::syscall(SYS_getdents64, proc_fd, buf, sizeof buf);
      if (n < 0) return false;
      if (n == 0) break;
      for (long at = 0; at < n;) {
        const Dirent* d = reinterpret_cast<const Dirent*>(buf + at);
        at += d->reclen;
        if (d->name[0] < '1' || d->name[0] > '9') continue;
        pid_t pid = static_cast<pid_t>(std::strtol(d->name, nullptr, 10));
        pid_t session = 0;
        bool running = false;
        if (pid <= 1 || !ReadSession(proc_fd, d->name, &session, &running) || !running ||
            Kept(session, keep, keep_count))
          continue;
        if (::kill(pid, SIGKILL) == 0) killed = true;
      }
    }
    if (!killed) return true;
    // The killed ones become zombies (not running) once scheduled: on a busy host that takes a
    // while, so the looks wait longer each time (about 3 s in all).
    ::usleep(std::min<useconds_t>(1000u << std::min(look, 6), 50'000));
  }
  return false;
}

}  // namespace execbox::jail
