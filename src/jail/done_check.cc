#include "jail/done_check.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/io.h"

namespace execbox::jail {
namespace {

constexpr unsigned kPfExiting = 0x4;               // PF_EXITING in task->flags: the thread is in do_exit
constexpr uint64_t kSigkillBit = 1ull << (9 - 1);  // SIGKILL in a SigPnd mask
constexpr int kChannelFd = 3;

std::atomic<bool> g_fallback_for_testing{false};

// A small /proc file relative to `dir`: its length, or -errno.
ssize_t ReadAt(int dir, const char* path, char* buf, size_t cap) {
  int fd = ::openat(dir, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  ssize_t n;
  do {
    n = ::read(fd, buf, cap - 1);
  } while (n < 0 && errno == EINTR);
  int err = errno;
  ::close(fd);
  if (n < 0) return -err;
  buf[n] = '\0';
  return n;
}

bool Gone(int err) { return err == ENOENT || err == ESRCH; }

// The fields of a stat line after "pid (comm) ": the comm may hold spaces and parentheses.
const char* AfterComm(const char* stat) {
  const char* close = std::strrchr(stat, ')');
  return close != nullptr && close[1] == ' ' ? close + 2 : nullptr;
}

// Field `index` (0: the state) of a stat line after the comm.
const char* StatField(const char* fields, int index) {
  for (int i = 0; i < index && fields != nullptr; ++i) {
    fields = std::strchr(fields, ' ');
    if (fields != nullptr) ++fields;
  }
  return fields;
}

// The thread ids listed under `dir`/task; empty with `gone` set when the process has gone.
std::vector<pid_t> Threads(int dir, bool& gone) {
  std::vector<pid_t> tids;
  gone = false;
  int fd = ::openat(dir, "task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    gone = Gone(errno);
    return tids;
  }
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return tids;
  }
  while (struct dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long tid = std::strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && tid > 0) tids.push_back(static_cast<pid_t>(tid));
  }
  ::closedir(d);
  gone = tids.empty();  // a reaped process lists no thread
  return tids;
}

// One thread will never run user code again: it is in do_exit, a zombie, or has SIGKILL
// pending (what exit_group and a fatal signal give every other thread of the group).
bool Dying(int dir, pid_t tid) {
  char path[64], buf[4096];
  std::snprintf(path, sizeof path, "task/%d/stat", static_cast<int>(tid));
  ssize_t n = ReadAt(dir, path, buf, sizeof buf);
  if (n < 0) return Gone(static_cast<int>(-n));
  const char* fields = AfterComm(buf);
  if (fields == nullptr) return false;
  if (fields[0] == 'Z' || fields[0] == 'X' || fields[0] == 'x') return true;
  const char* flags = StatField(fields, 6);
  if (flags != nullptr && (std::strtoul(flags, nullptr, 10) & kPfExiting) != 0) return true;
  std::snprintf(path, sizeof path, "task/%d/status", static_cast<int>(tid));
  n = ReadAt(dir, path, buf, sizeof buf);
  if (n < 0) return Gone(static_cast<int>(-n));
  const char* pending = std::strstr(buf, "\nSigPnd:");
  return pending != nullptr && (std::strtoull(pending + 8, nullptr, 16) & kSigkillBit) != 0;
}

}  // namespace

void UseDoneCheckFallbackForTesting(bool on) { g_fallback_for_testing = on; }

Expected<CodeProcess> CodeProcess::Open(pid_t pid, int pidfd) {
  CodeProcess p;
  std::string dir = "/proc/" + std::to_string(pid);
  p.dir_.Reset(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!p.dir_.Valid()) return FailErrno("open " + dir);
  char link[64], fd_path[16];
  std::snprintf(fd_path, sizeof fd_path, "fd/%d", kChannelFd);
  ssize_t n = ::readlinkat(p.dir_.Get(), fd_path, link, sizeof link - 1);
  unsigned long long ino = 0;
  if (n > 0) {
    link[n] = '\0';
    if (std::sscanf(link, "socket:[%llu]", &ino) != 1) ino = 0;
  }
  p.channel_ino_ = static_cast<ino_t>(ino);
  // The pid could have been reused before the open: the process the pidfd names (taken when
  // the pid was fresh) must still be alive, so /proc/<pid> is still it.
  if (::syscall(SYS_pidfd_send_signal, pidfd, 0, nullptr, 0) != 0) {
    return Fail("the code's process ended during its setup");
  }
  p.pid_ = pid;
  return p;
}

bool CodeProcess::Exiting() const {
  // The main thread first: while it still runs (the common "not yet") one look is enough.
  if (!Dying(dir_.Get(), pid_)) return false;
  bool gone = false;
  std::vector<pid_t> before = Threads(dir_.Get(), gone);
  if (gone) return true;
  if (before.empty()) return false;
  // Only the main thread, already dying, was left: a dying thread starts no other (clone fails
  // with a fatal signal pending, and nothing in do_exit clones), so none can appear.
  if (before.size() == 1 && before[0] == pid_) return true;
  for (pid_t tid : before) {
    if (tid != pid_ && !Dying(dir_.Get(), tid)) return false;
  }
  // A thread that started one more before it began to die: the newcomer was not looked at.
  std::vector<pid_t> after = Threads(dir_.Get(), gone);
  for (pid_t tid : after) {
    bool seen = false;
    for (pid_t b : before) seen |= b == tid;
    if (!seen) return false;
  }
  return true;
}

std::optional<bool> CodeProcess::BlockedOnChannel() const {
  if (channel_ino_ == 0) return std::nullopt;
  char link[64];
  char fd_path[16];
  std::snprintf(fd_path, sizeof fd_path, "fd/%d", kChannelFd);
  ssize_t n = ::readlinkat(dir_.Get(), fd_path, link, sizeof link - 1);
  if (n < 0) return errno == EACCES || errno == EPERM ? std::nullopt : std::optional(false);
  link[n] = '\0';
  char want[64];
  std::snprintf(want, sizeof want, "socket:[%" PRIu64 "]", static_cast<uint64_t>(channel_ino_));
  if (std::strcmp(link, want) != 0) return false;  // the code put something else at fd 3
  // "nr arg0 ... sp pc" of a blocked main thread; "running" while it runs.
  char sc[256];
  ssize_t m = ReadAt(dir_.Get(), "syscall", sc, sizeof sc);
  if (m < 0) return m == -EACCES || m == -EPERM ? std::nullopt : std::optional(false);
  char* end = nullptr;
  long nr = std::strtol(sc, &end, 10);
  if (end == sc || *end != ' ') return false;
  unsigned long long fd = std::strtoull(end + 1, nullptr, 16);
  return nr == SYS_recvmsg && fd == kChannelFd;
}

// Weaker than BlockedOnChannel (it cannot tell which wait the thread is in), but still the
// kernel's word: the thread is in an interruptible sleep and its run time has not moved.
bool CodeProcess::AsleepAndIdle() {
  char path[64], buf[4096];
  std::snprintf(path, sizeof path, "task/%d/stat", static_cast<int>(pid_));
  ssize_t n = ReadAt(dir_.Get(), path, buf, sizeof buf);
  const char* fields = n > 0 ? AfterComm(buf) : nullptr;
  std::snprintf(path, sizeof path, "task/%d/schedstat", static_cast<int>(pid_));
  char sched[128];
  ssize_t m = ReadAt(dir_.Get(), path, sched, sizeof sched);
  if (fields == nullptr || m <= 0) return false;
  uint64_t runtime = std::strtoull(sched, nullptr, 10);
  auto now = std::chrono::steady_clock::now();
  bool idle = fields[0] == 'S' && last_look_ != std::chrono::steady_clock::time_point{} &&
              runtime == last_runtime_ns_ && now - last_look_ >= std::chrono::milliseconds(1);
  // Where the kernel names the wait (wchan takes read access only, not the attach access
  // syscall needs, which Yama's ptrace_scope 1 gives ancestors alone), it must be a read on a
  // unix stream socket: a main thread asleep in time.sleep() or a lock after a forged 'D' is not
  // the agent parked. "0": not named (no access, or running).
  if (idle) {
    std::snprintf(path, sizeof path, "task/%d/wchan", static_cast<int>(pid_));
    char wchan[128];
    ssize_t w = ReadAt(dir_.Get(), path, wchan, sizeof wchan);
    if (w > 0 && std::strcmp(wchan, "0") != 0 && std::strncmp(wchan, "unix_stream", 11) != 0) idle = false;
  }
  if (runtime != last_runtime_ns_ || fields[0] != 'S' ||
      last_look_ == std::chrono::steady_clock::time_point{}) {
    last_runtime_ns_ = runtime;
    last_look_ = now;
  }
  return idle;
}

DoneCheck CodeProcess::Check(bool session) {
  if (!dir_.Valid()) return DoneCheck::kNotYet;
  if (!session) return Exiting() ? DoneCheck::kConfirmed : DoneCheck::kNotYet;
  std::optional<bool> parked = g_fallback_for_testing ? std::nullopt : BlockedOnChannel();
  if (!parked) parked = AsleepAndIdle();
  if (*parked) return DoneCheck::kConfirmed;
  return Exiting() ? DoneCheck::kEnding : DoneCheck::kNotYet;
}

}  // namespace execbox::jail
