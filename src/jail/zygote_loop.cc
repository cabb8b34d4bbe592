// The zygote's side of warm children: one loop that forks each child into a pid namespace of
// its own, reaps it, and answers the host for it (stop, exit status, files). A child is one
// process: no keeper per child, so a child costs one copy of the zygote's page tables and one
// exit, not two.
//
// The zygote's memory is inherited by every child it forks afterwards, and the code runs in
// those children. So what the zygote learns about one child's files never lands where a later
// child could read it: file names are kept in memory the kernel wipes in a fork
// (MADV_WIPEONFORK), and the stack a file operation used is cleared after it.
#include "jail/zygote_loop.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <memory_resource>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "jail/child_fs.h"
#include "jail/child_plan.h"
#include "jail/warm_child_setup.h"
#include "jail/wire.h"

namespace execbox::jail {
namespace {

void Send(int control, wire::Kind kind, int64_t a = 0, int64_t b = 0, int64_t c = 0,
          const char* text = nullptr) noexcept {
  wire::Header h{.kind = kind, .a = a, .b = b, .c = c};
  if (text != nullptr) wire::CopyText(h.text, sizeof h.text, text);
  (void)wire::WriteExact(control, &h, sizeof h);
}

// Pages that a forked child gets zeroed: what one child's files leave in the zygote is gone in
// every later child.
class WipedOnFork final : public std::pmr::memory_resource {
  static size_t Pages(size_t bytes) { return (bytes + 4095) & ~size_t{4095}; }
  void* do_allocate(size_t bytes, size_t) override {
    void* p = ::mmap(nullptr, Pages(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    if (::madvise(p, Pages(bytes), MADV_WIPEONFORK) != 0) {
      ::munmap(p, Pages(bytes));
      throw std::bad_alloc();
    }
    return p;
  }
  void do_deallocate(void* p, size_t bytes, size_t) override { ::munmap(p, Pages(bytes)); }
  bool do_is_equal(const std::pmr::memory_resource& o) const noexcept override { return this == &o; }
};
WipedOnFork g_wiped;

// The stack below the caller, cleared: a file operation's buffers (names, contents) stay there
// otherwise, and the next fork copies them. Larger than any file operation's frames. The whole
// pages inside are dropped (the next touch gets zeroes) rather than written: after a fork every
// page of the zygote is copy-on-write, so writing 512 KiB would copy 128 pages each time.
[[gnu::noinline]] void ClearStackBelow() {
  constexpr uintptr_t kPage = 4096;
  alignas(kPage) char stack[512 << 10];
  asm volatile("" : : "r"(stack) : "memory");
  auto begin = reinterpret_cast<uintptr_t>(stack);
  uintptr_t first = (begin + kPage - 1) & ~(kPage - 1), last = (begin + sizeof stack) & ~(kPage - 1);
  if (last <= first || ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) != 0) {
    first = last = begin;  // not dropped: written over below
  }
  ::explicit_bzero(stack, first - begin);
  ::explicit_bzero(reinterpret_cast<char*>(last), begin + sizeof stack - last);
  asm volatile("" : : "r"(stack) : "memory");
}

// What a session's work dir looked like at the last collection: a file goes back when it is
// new or any of these changed. No clock is compared, so coarse and fine-grained (multigrain)
// file timestamps both work.
struct FileStamp {
  ino_t ino;
  struct timespec mtime, ctime;
  off_t size;
  bool operator==(const FileStamp& o) const {
    return ino == o.ino && size == o.size && mtime.tv_sec == o.mtime.tv_sec &&
           mtime.tv_nsec == o.mtime.tv_nsec && ctime.tv_sec == o.ctime.tv_sec &&
           ctime.tv_nsec == o.ctime.tv_nsec;
  }
};

class ChangedFiles {
 public:
  ChangedFiles() : pool_(&g_wiped), last_(&pool_), now_(&pool_) {}

  // `send` false: the files are noted as they are, and none is sent (the host made them).
  void Collect(const ChildPlan& plan, int workfd, bool send) {
    now_.clear();
    FileFilter filter{this, send ? &ChangedFiles::Wanted : &ChangedFiles::NoteOnly};
    SendOutputsBeneath(plan, workfd, &filter);
    last_.swap(now_);
    now_.clear();
  }
  // A file the host put in place between executions: not the code's doing, so it goes back
  // only once the code changes it.
  void Uploaded(const char* path, const struct stat& st) { Note(last_, path, st); }

 private:
  using Stamps = std::pmr::map<std::pmr::string, FileStamp, std::less<>>;
  static void Note(Stamps& stamps, const char* path, const struct stat& st) {
    if (stamps.size() >= (1u << 16)) return;
    FileStamp stamp{st.st_ino, st.st_mtim, st.st_ctim, st.st_size};
    // Built in place, in the wiped pool: no temporary copy of the name on the heap.
    auto [it, added] =
        stamps.emplace(std::piecewise_construct, std::forward_as_tuple(path), std::forward_as_tuple(stamp));
    if (!added) it->second = stamp;
  }
  static bool NoteOnly(void* context, const char* path, const struct stat& st) {
    Note(static_cast<ChangedFiles*>(context)->now_, path, st);
    return false;
  }
  static bool Wanted(void* context, const char* path, const struct stat& st) {
    auto* self = static_cast<ChangedFiles*>(context);
    Note(self->now_, path, st);
    auto it = self->last_.find(std::string_view(path));
    return it == self->last_.end() ||
           !(it->second == FileStamp{st.st_ino, st.st_mtim, st.st_ctim, st.st_size});
  }
  std::pmr::unsynchronized_pool_resource pool_;
  Stamps last_, now_;
};

// One child, as the zygote keeps it from its fork to its reaping.
struct Child {
  WarmChildSpec spec{};
  int control = -1;  // to the host; -1 once it went away or failed
  int link = -1;     // from the child until it hands over its work dir
  int workfd = -1;   // the child's work dir (its tmpfs, held from outside its namespace)
  std::unique_ptr<ChangedFiles> changed;
  bool collected = false;  // the host took the files with kCollect: none go again at the end
  ChildPlan Plan() const {
    ChildPlan plan;
    plan.control = control;
    plan.max_files = spec.max_files;
    plan.max_file_bytes = spec.max_file_bytes;
    return plan;
  }
};

void CloseAll(Child& c) {
  for (int* fd : {&c.control, &c.link, &c.workfd}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

// One kReadFile or kWriteFile from the host, between a session's executions. False when the
// request itself is malformed or the host went away mid-request: the stream is no longer framed.
bool ServeFile(Child& c, const wire::Header& h) {
  char path[4096];
  if (h.a <= 0 || h.a >= static_cast<int64_t>(sizeof path) || h.b < 0) return false;
  if (!wire::ReadExact(c.control, path, static_cast<size_t>(h.a))) return false;
  path[h.a] = '\0';
  if (std::strlen(path) != static_cast<size_t>(h.a)) path[0] = '\0';  // a NUL inside: refused below
  if (h.kind == wire::Kind::kReadFile) {
    SendOneFile(c.control, c.workfd, path, static_cast<uint64_t>(h.b));
    return true;
  }
  struct stat st {};
  Received r = ReceiveOneFile(c.control, c.workfd, path, h.b, &st);
  if (r == Received::kWritten) c.changed->Uploaded(path, st);
  return r != Received::kBrokenOff;
}

// A message from the host about child `pid`, once it has set itself up.
void ServeHost(pid_t pid, Child& c) {
  wire::Header h{};
  // Without a work dir (the child failed before handing it over) only a stop makes sense.
  bool ok = wire::ReadExact(c.control, &h, sizeof h) && (c.changed != nullptr || h.kind == wire::Kind::kStop);
  if (ok && h.kind == wire::Kind::kStop) {
    ::kill(pid, SIGKILL);  // pid 1 of its namespace: the kernel kills the rest
  } else if (ok && h.kind == wire::Kind::kCollect) {
    c.changed->Collect(c.Plan(), c.workfd, h.a != 1);
    c.collected = true;
    Send(c.control, wire::Kind::kCollected);
  } else if (ok && (h.kind == wire::Kind::kReadFile || h.kind == wire::Kind::kWriteFile)) {
    ok = ServeFile(c, h);
  } else if (ok) {
    ok = false;  // nothing else is the host's to send now
  }
  if (!ok) {  // the host is gone, or the stream is no longer framed: the tree goes (fail closed)
    ::kill(pid, SIGKILL);
    ::close(c.control);
    c.control = -1;
  }
}

// The child's work dir, handed over once it is mounted: from now on the host's messages on
// control are the zygote's to answer.
void ReceiveWorkDir(Child& c) {
  char cbuf[CMSG_SPACE(sizeof(int))];
  char byte = 0;
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof cbuf;
  ssize_t n = ::recvmsg(c.link, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  struct cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  if (n == 1 && cm != nullptr && cm->cmsg_type == SCM_RIGHTS && cm->cmsg_len == CMSG_LEN(sizeof(int))) {
    std::memcpy(&c.workfd, CMSG_DATA(cm), sizeof(int));
    c.changed = std::make_unique<ChangedFiles>();
  }
  // Handed over, or the child failed before (it said why to the host): either way, done.
  ::close(c.link);
  c.link = -1;
}

// The child ended: the host hears how, then (a one-shot) its files.
void Finish(Child& c, int status, const struct rusage& ru) {
  if (c.control >= 0) {
    // The child was pid 1 of its namespace: the kernel killed and reaped the rest, and its
    // usage includes them.
    int64_t cpu_us =
        (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000LL + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
    Send(c.control, wire::Kind::kExited, status, cpu_us, ru.ru_maxrss);
    if (c.spec.session == 0 && c.spec.collect != 0 && c.workfd >= 0 && !c.collected)
      SendOutputsBeneath(c.Plan(), c.workfd, nullptr);
    Send(c.control, wire::Kind::kDone);
  }
  CloseAll(c);
}

// Receives one command: the spec and exactly two descriptors, three for a session (its
// init's socket), four for a session with network (its connector). False on EOF or a broken
// socket.
bool ReceiveCommand(int command_fd, WarmChildSpec& spec, int& control, int& channel, int& init, int& egress,
                    bool& valid) {
  char cbuf[CMSG_SPACE(sizeof(int) * 4)];
  struct iovec iov = {.iov_base = &spec, .iov_len = sizeof spec};
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof cbuf;
  ssize_t n;
  do {
    n = ::recvmsg(command_fd, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  int fds[4];
  int nfds = 0;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count && nfds < 4; ++i)
      std::memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
  }
  const bool network = spec.egress_port != 0;
  valid = n == static_cast<ssize_t>(sizeof spec) && spec.magic == kWarmSpawnMagic &&
          (!network || (spec.session != 0 && spec.egress_port >= 1024 && spec.egress_port <= 65535)) &&
          nfds == (spec.session != 0 ? 3 : 2) + (network ? 1 : 0) && (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == 0;
  if (!valid) {
    for (int i = 0; i < nfds; ++i) ::close(fds[i]);
    return true;
  }
  control = fds[0];
  channel = fds[1];
  init = nfds >= 3 ? fds[2] : -1;
  egress = nfds == 4 ? fds[3] : -1;
  return true;
}

class Zygote {
 public:
  Zygote(int command_fd, int self_pidfd, int sigfd, const ZygoteSetup& setup)
      : command_fd_(command_fd), self_pidfd_(self_pidfd), sigfd_(sigfd), setup_(setup) {}

  [[noreturn]] void Serve() {
    std::vector<struct pollfd> fds;
    std::vector<pid_t> owners;
    for (;;) {
      fds.assign({{.fd = command_fd_, .events = POLLIN, .revents = 0},
                  {.fd = sigfd_, .events = POLLIN, .revents = 0}});
      owners.assign(2, 0);
      for (auto& [pid, c] : children_) {
        int fd = c.link >= 0 ? c.link : c.control;
        if (fd < 0) continue;
        fds.push_back({.fd = fd, .events = POLLIN, .revents = 0});
        owners.push_back(pid);
      }
      if (::poll(fds.data(), fds.size(), -1) < 0) {
        if (errno == EINTR) continue;
        ::_exit(1);
      }
      // The host's messages before the exits: a kCollect the host sent when the code's process
      // began to exit is answered as kCollected, before that exit is reported.
      for (size_t i = 2; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        auto it = children_.find(owners[i]);
        if (it == children_.end()) continue;
        Child& c = it->second;
        if (c.link >= 0 && fds[i].fd == c.link) {
          ReceiveWorkDir(c);
        } else if (c.control >= 0 && fds[i].fd == c.control) {
          ServeHost(it->first, c);
          ClearStackBelow();
        }
      }
      if (fds[1].revents != 0) Reap();
      if (fds[0].revents != 0) Command();
    }
  }

 private:
  void Command() {
    WarmChildSpec spec{};
    int control = -1, channel = -1, init = -1, egress = -1;
    bool valid = false;
    if (!ReceiveCommand(command_fd_, spec, control, channel, init, egress, valid)) ::_exit(0);  // the host is gone
    if (!valid) {
      std::fputs("execbox-worker: ignored a malformed spawn command\n", stderr);
      return;
    }
    Spawn(spec, control, channel, init, egress);
  }

  void Spawn(const WarmChildSpec& spec, int control, int channel, int init, int egress) {
    int link[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, link) != 0) {
      Send(control, wire::Kind::kSetupFailed, errno, 0, 0, "socketpair");
      for (int fd : {control, channel, init, egress}) {
        if (fd >= 0) ::close(fd);
      }
      return;
    }
    // The next fork lands in a new pid namespace as its pid 1; the zygote goes back to its own
    // right after, so this child's namespace is its alone.
    if (::unshare(CLONE_NEWPID) != 0) {
      Send(control, wire::Kind::kSetupFailed, errno, 0, 0, "unshare the pid namespace");
      for (int fd : {control, channel, init, egress, link[0], link[1]}) {
        if (fd >= 0) ::close(fd);
      }
      return;
    }
    if (setup_.before_fork != nullptr) setup_.before_fork();
    pid_t pid = ::fork();
    if (pid == 0) {
      if (setup_.after_fork_child != nullptr) setup_.after_fork_child();
      ::close(link[0]);
      RunChild(spec, control, channel, init, egress, link[1], setup_);
    }
    int err = errno;
    if (setup_.after_fork_parent != nullptr) setup_.after_fork_parent();
    // Without this every later child would be forked into that first one's namespace.
    if (::setns(self_pidfd_, CLONE_NEWPID) != 0) {
      std::perror("execbox-worker: setns back to the zygote's pid namespace");
      ::_exit(1);
    }
    ::close(channel);
    if (init >= 0) ::close(init);
    if (egress >= 0) ::close(egress);
    ::close(link[1]);
    if (pid < 0) {
      Send(control, wire::Kind::kSetupFailed, err, 0, 0, "fork the child");
      ::close(control);
      ::close(link[0]);
      return;
    }
    Child& c = children_[pid];
    c.spec = spec;
    c.control = control;
    c.link = link[0];
  }

  void Reap() {
    struct signalfd_siginfo si;
    while (::read(sigfd_, &si, sizeof si) > 0) {
    }
    for (;;) {
      int status = 0;
      struct rusage ru {};
      pid_t pid = ::wait4(-1, &status, WNOHANG | __WALL, &ru);
      if (pid <= 0) return;
      auto it = children_.find(pid);
      if (it == children_.end()) continue;
      Finish(it->second, status, ru);
      ClearStackBelow();
      children_.erase(it);
    }
  }

  int command_fd_, self_pidfd_, sigfd_;
  const ZygoteSetup& setup_;
  std::map<pid_t, Child> children_;
};

}  // namespace

void CollapseIntoHugePages() {
#ifdef MADV_COLLAPSE
  constexpr int kCollapse = MADV_COLLAPSE;
#else
  constexpr int kCollapse = 25;  // Linux 6.1; older C libraries lack the name
#endif
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  FILE* maps = std::fopen("/proc/self/maps", "re");
  if (maps == nullptr) return;
  // Read first, advise after: collapsing changes the mappings being read.
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
  char line[512];
  while (std::fgets(line, sizeof line, maps) != nullptr) {
    unsigned long start = 0, end = 0, offset = 0, inode = 0;
    char perms[5] = {}, dev[16] = {}, name[256] = {};
    int n =
        std::sscanf(line, "%lx-%lx %4s %lx %15s %lu %255s", &start, &end, perms, &offset, dev, &inode, name);
    if (n < 6 || std::strcmp(perms, "rw-p") != 0 || inode != 0) continue;
    if (n == 7 && std::strcmp(name, "[heap]") != 0) continue;  // [stack], [vvar], ...: left alone
    uintptr_t first = (start + kHuge - 1) & ~(kHuge - 1), last = end & ~(kHuge - 1);
    if (last > first) ranges.emplace_back(first, last);
  }
  std::fclose(maps);
  for (auto [first, last] : ranges) (void)::madvise(reinterpret_cast<void*>(first), last - first, kCollapse);
}

void ServeZygote(int command_fd, const ZygoteReady& ready, const ZygoteSetup& setup) {
  ::signal(SIGPIPE, SIG_IGN);
  // Not dumpable: nothing in the jail may ptrace the zygote or read its memory through /proc.
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  ZygoteReady answer = ready;
  // The zygote's own pid namespace, to return to after forking each child into a new one.
  int self_pidfd = static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0));
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  int sigfd = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (answer.ok != 0 && (self_pidfd < 0 || sigfd < 0)) {
    answer.ok = 0;
    std::snprintf(answer.message, sizeof answer.message,
                  "the zygote needs pidfd_open and signalfd (Linux 5.8): %s", std::strerror(errno));
  }
  if (::send(command_fd, &answer, sizeof answer, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof answer))
    ::_exit(1);
  if (answer.ok == 0) ::_exit(1);
  static Zygote zygote(command_fd, self_pidfd, sigfd, setup);
  zygote.Serve();
}

}  // namespace execbox::jail
