#include "jail/init_link.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include "jail/session_init.h"
#include "jail/warm_host.h"

namespace execbox::jail {
namespace {

using init_wire::Header;
using init_wire::Op;

using Clock = std::chrono::steady_clock;

// More events than any session makes between two reads: an init that floods is broken.
constexpr size_t kMaxQueuedEvents = 4096;
// The init reads at once; only a wedged init makes a send wait this long.
constexpr auto kSendTimeout = std::chrono::seconds(5);
constexpr pid_t kMaxPid = 4 * 1024 * 1024;  // PID_MAX_LIMIT

bool SendFrame(int sock, const std::string& frame, const int* fds, size_t nfds) {
  const auto deadline = Clock::now() + kSendTimeout;
  for (;;) {
    errno = 0;  // a short send (never, on SOCK_SEQPACKET) leaves errno as it was: a failure
    if (SendWithFds(sock, frame.data(), frame.size(), fds, nfds, MSG_DONTWAIT)) return true;
    if (errno != EAGAIN) return false;  // EINTR is retried inside
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    struct pollfd p = {.fd = sock, .events = POLLOUT, .revents = 0};
    (void)::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 100)));
  }
}

// What the init says a step was, as text the host can show: printable ASCII, cut at its end.
std::string Printable(const char* text, size_t size) {
  std::string out;
  for (size_t i = 0; i < size && text[i] != '\0'; ++i) {
    char c = text[i];
    out += c >= 0x20 && c < 0x7f ? c : '?';
  }
  return out;
}

// A pty's master, as the devpts instance hands it out (/dev/pts/ptmx is character device 5:2).
bool IsPtyMaster(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 5 && minor(st.st_rdev) == 2;
}

}  // namespace

InitLink::InitLink(UniqueFd socket)
    : socket_(std::move(socket)),
      queued_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      ready_(::epoll_create1(EPOLL_CLOEXEC)) {
  // Without the two (out of descriptors), fd() is the socket alone: a poller still hears the
  // init, only not the events another reader left.
  struct epoll_event ev {};
  ev.events = EPOLLIN;
  if (!queued_.Valid() || !ready_.Valid() ||
      ::epoll_ctl(ready_.Get(), EPOLL_CTL_ADD, socket_.Get(), &ev) != 0 ||
      ::epoll_ctl(ready_.Get(), EPOLL_CTL_ADD, queued_.Get(), &ev) != 0) {
    queued_.Reset();
    ready_.Reset(::fcntl(socket_.Get(), F_DUPFD_CLOEXEC, 0));
  }
}

Status InitLink::Start(uint32_t id, const ProcessStart& start) {
  if (start.argv.empty() || start.argv[0].empty()) return Fail("no program to start");
  Header h{.op = Op::kStart, .id = id};
  h.flags = start.pty ? init_wire::kPty : (start.stdin_read >= 0 ? init_wire::kStdinPipe : 0);
  h.rows = start.rows;
  h.cols = start.cols;
  h.argc = static_cast<uint32_t>(start.argv.size());
  h.envc = static_cast<uint32_t>(start.env.size());
  if (start.argv.size() + start.env.size() > init_wire::kMaxStrings) {
    return Fail("too many arguments and environment entries (at most " +
                std::to_string(init_wire::kMaxStrings) + " together)");
  }
  std::string payload;
  for (const auto* list : {&start.argv, &start.env}) {
    for (const std::string& s : *list) {
      if (s.find('\0') != std::string::npos) return Fail("an argument or environment entry holds a NUL");
      payload += s;
      payload += '\0';
    }
  }
  if (start.cwd.find('\0') != std::string::npos) return Fail("the working directory holds a NUL");
  payload += start.cwd;
  payload += '\0';
  if (payload.size() > init_wire::kMaxPayload) {
    return Fail("the command, its environment and working directory take " + std::to_string(payload.size()) +
                " bytes, more than " + std::to_string(init_wire::kMaxPayload));
  }
  h.payload = static_cast<uint32_t>(payload.size());
  std::string frame(reinterpret_cast<const char*>(&h), sizeof h);
  frame += payload;
  int fds[3];
  size_t nfds = 0;
  if (!start.pty) {
    if (start.stdout_write < 0 || start.stderr_write < 0) return Fail("no output pipes to start with");
    fds[nfds++] = start.stdout_write;
    fds[nfds++] = start.stderr_write;
    if (start.stdin_read >= 0) fds[nfds++] = start.stdin_read;
  }
  std::lock_guard lock(send_mu_);
  if (!SendFrame(socket_.Get(), frame, fds, nfds))
    return FailErrno("ask the session's init to start a process");
  return {};
}

Status InitLink::Signal(pid_t pid, int signal) {
  if (pid < 2 || signal < 1 || signal > 64) return Fail("no such process or signal");
  Header h{.op = Op::kSignal, .pid = pid, .value = signal};
  std::string frame(reinterpret_cast<const char*>(&h), sizeof h);
  std::lock_guard lock(send_mu_);
  if (!SendFrame(socket_.Get(), frame, nullptr, 0)) return FailErrno("ask the session's init to signal");
  return {};
}

Status InitLink::NewKernel(int channel) {
  {
    std::lock_guard lock(mu_);
    if (!kernel_status_) return Fail("the session's kernel has not ended");
    kernel_status_.reset();  // the next kKernelEnded is the new kernel's
  }
  Header h{.op = Op::kNewKernel};
  std::string frame(reinterpret_cast<const char*>(&h), sizeof h);
  std::lock_guard lock(send_mu_);
  if (!SendFrame(socket_.Get(), frame, &channel, 1))
    return FailErrno("ask the session's init for a new kernel");
  return {};
}

bool InitLink::Receive() {
  std::lock_guard lock(mu_);
  return ReceiveLocked();
}

bool InitLink::ReceiveLocked() {
  while (!closed_) {
    alignas(Header) char frame[sizeof(Header) + 1];
    char cbuf[CMSG_SPACE(sizeof(int) * 4)];
    struct iovec iov = {.iov_base = frame, .iov_len = sizeof frame};
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf;
    msg.msg_controllen = sizeof cbuf;
    ssize_t n = ::recvmsg(socket_.Get(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    std::vector<UniqueFd> fds;
    for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        fds.emplace_back(fd);
      }
    }
    if (n <= 0 || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 ||
        !Accept(frame, static_cast<size_t>(n), fds)) {
      closed_ = true;  // the end, or a stream that broke the rules: nothing more is read
    }
  }
  if (!events_.empty() && queued_.Valid()) {
    const uint64_t one = 1;
    (void)!::write(queued_.Get(), &one, sizeof one);
  }
  return !closed_;
}

bool InitLink::Accept(const void* data, size_t size, std::vector<UniqueFd>& fds) {
  if (size != sizeof(Header) || events_.size() >= kMaxQueuedEvents) return false;
  Header h;
  std::memcpy(&h, data, sizeof h);
  if (h.magic != init_wire::kMagic || h.payload != 0) return false;
  InitEvent e;
  e.id = h.id;
  e.pid = h.pid;
  e.value = h.value;
  const bool pid_valid = h.pid >= 2 && h.pid <= kMaxPid;
  switch (h.op) {
    case Op::kStarted:
      if (!pid_valid || fds.size() > 1) return false;
      e.kind = InitEvent::Kind::kStarted;
      if (fds.size() == 1) {
        if (!IsPtyMaster(fds[0].Get())) return false;
        e.pty_master = std::move(fds[0]);
      }
      break;
    case Op::kStartFailed:
      if (!fds.empty()) return false;
      e.kind = InitEvent::Kind::kStartFailed;
      e.value = std::clamp(h.value, 0, 4095);
      e.step = Printable(h.step, sizeof h.step);
      break;
    case Op::kExited:
      if (!pid_valid || !fds.empty()) return false;
      e.kind = InitEvent::Kind::kExited;
      break;
    case Op::kKernelEnded:
      if (!fds.empty() || kernel_status_) return false;
      e.kind = InitEvent::Kind::kKernelEnded;
      kernel_status_ = h.value;
      break;
    default:
      return false;
  }
  events_.push_back(std::move(e));
  return true;
}

std::vector<InitEvent> InitLink::TakeEvents() {
  std::lock_guard lock(mu_);
  if (queued_.Valid()) {
    uint64_t count = 0;
    (void)!::read(queued_.Get(), &count, sizeof count);
  }
  std::vector<InitEvent> out(std::make_move_iterator(events_.begin()),
                             std::make_move_iterator(events_.end()));
  events_.clear();
  return out;
}

bool InitLink::closed() {
  std::lock_guard lock(mu_);
  return closed_;
}

std::optional<int> InitLink::kernel_status() {
  std::lock_guard lock(mu_);
  return kernel_status_;
}

std::optional<int> InitLink::AwaitKernelStatus(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      ReceiveLocked();
      if (kernel_status_ || closed_) return kernel_status_;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return std::nullopt;
    // Short looks: a poller may take the bytes this poll waits for.
    struct pollfd p = {.fd = socket_.Get(), .events = POLLIN, .revents = 0};
    (void)::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 10)));
  }
}

}  // namespace execbox::jail
