// A session's processes as their callers reach them (session_processes.h): list, look, write,
// close stdin, signal, resize, read and wait. Starting and the init's reports are in
// session_processes.cc.
#include <poll.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstring>

#include "engine/session_process_record.h"
#include "engine/session_processes.h"

namespace execbox::engine {
namespace {

using Clock = std::chrono::steady_clock;

// A write waits this long for a process that does not read its input.
constexpr auto kWriteTimeout = std::chrono::seconds(10);

// write(2) without SIGPIPE for this process (the server ignores it; a test binary may not):
// blocked in this thread for the call, and a SIGPIPE it raised is taken back.
ssize_t WriteQuietly(int fd, const char* data, size_t size) {
  sigset_t pipe_only, old;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  ssize_t n = ::write(fd, data, size);
  int err = errno;
  if (n < 0 && err == EPIPE) {
    struct timespec zero {};
    (void)sigtimedwait(&pipe_only, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = err;
  return n;
}

}  // namespace

std::optional<int> SignalNumber(std::string_view name) {
  std::string upper;
  for (char c : name) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (!upper.empty() &&
      std::all_of(upper.begin(), upper.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (upper.size() > 2) return std::nullopt;
    int n = std::stoi(upper);
    return n >= 1 && n <= 64 ? std::optional(n) : std::nullopt;
  }
  if (upper.starts_with("SIG")) upper.erase(0, 3);
  for (int sig = 1; sig < 32; ++sig) {
    const char* abbrev = ::sigabbrev_np(sig);
    if (abbrev != nullptr && upper == abbrev) return sig;
  }
  return std::nullopt;
}

std::vector<ProcessInfo> SessionProcesses::List() {
  Lock lock(mu_);
  std::vector<ProcessInfo> out;
  for (const auto& [pid, r] : records_) out.push_back(InfoOf(*r));
  std::sort(out.begin(), out.end(),
            [](const ProcessInfo& a, const ProcessInfo& b) { return a.started < b.started; });
  return out;
}

ProcessExpected<ProcessInfo> SessionProcesses::Get(int32_t pid) {
  Lock lock(mu_);
  auto r = Find(pid);
  if (!r) return NoProcess(pid);
  return InfoOf(*r);
}

ProcessExpected<void> SessionProcesses::Write(int32_t pid, std::string_view data) {
  if (data.size() > limits_.max_write_bytes) {
    return ProcessFailed(ProcessError::kInvalid,
                         "one write takes at most " + std::to_string(limits_.max_write_bytes) + " bytes");
  }
  std::shared_ptr<Record> r;
  std::shared_ptr<UniqueFd> fd;
  {
    Lock lock(mu_);
    r = Find(pid);
    if (!r) return NoProcess(pid);
    if (!r->running)
      return ProcessFailed(ProcessError::kNotRunning, "process " + std::to_string(pid) + " has ended");
    if (!r->input)
      return ProcessFailed(ProcessError::kNoStdin,
                           "process " + std::to_string(pid) +
                               " has no stdin to write to (started without `stdin`, or closed)");
    fd = r->input;
  }
  std::lock_guard one_writer(r->write_mu);
  const auto deadline = Clock::now() + kWriteTimeout;
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = WriteQuietly(fd->Get(), data.data() + done, data.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN && Clock::now() < deadline) {
      struct pollfd p = {.fd = fd->Get(), .events = POLLOUT, .revents = 0};
      (void)::poll(&p, 1, 100);
      continue;
    }
    std::string written = std::to_string(done) + " of " + std::to_string(data.size()) + " bytes were written";
    if (n < 0 && errno == EAGAIN)
      return ProcessFailed(ProcessError::kNoStdin,
                           "process " + std::to_string(pid) + " is not reading its input; " + written);
    return ProcessFailed(ProcessError::kNoStdin,
                         "process " + std::to_string(pid) + " closed its input; " + written);
  }
  return {};
}

ProcessExpected<void> SessionProcesses::CloseStdin(int32_t pid) {
  Lock lock(mu_);
  auto r = Find(pid);
  if (!r) return NoProcess(pid);
  if (r->pty)
    return ProcessFailed(ProcessError::kNoStdin,
                         "a pty's input cannot be closed; write \"\\u0004\" (Ctrl-D) to end it");
  if (!r->running)
    return ProcessFailed(ProcessError::kNotRunning, "process " + std::to_string(pid) + " has ended");
  if (!r->input)
    return ProcessFailed(ProcessError::kNoStdin, "process " + std::to_string(pid) + " has no stdin open");
  r->input.reset();  // a write in flight holds its own reference: the pipe closes after it
  return {};
}

ProcessExpected<void> SessionProcesses::Signal(int32_t pid, int signal) {
  Lock lock(mu_);
  auto r = Find(pid);
  if (!r) return NoProcess(pid);
  if (!r->running)
    return ProcessFailed(ProcessError::kNotRunning, "process " + std::to_string(pid) + " has ended");
  if (r->link != link_.get() || !link_)
    return ProcessFailed(ProcessError::kSessionEnded, "the session's sandbox has ended");
  if (auto sent = link_->Signal(pid, signal); !sent)
    return ProcessFailed(ProcessError::kSessionEnded, sent.error().message);
  return {};
}

ProcessExpected<void> SessionProcesses::Resize(int32_t pid, uint16_t rows, uint16_t cols) {
  if (rows < 1 || rows > 1000 || cols < 1 || cols > 1000)
    return ProcessFailed(ProcessError::kInvalid, "a pty's rows and cols are 1 to 1000");
  Lock lock(mu_);
  auto r = Find(pid);
  if (!r) return NoProcess(pid);
  if (!r->pty) return ProcessFailed(ProcessError::kNotPty, "process " + std::to_string(pid) + " has no pty");
  if (!r->running)
    return ProcessFailed(ProcessError::kNotRunning, "process " + std::to_string(pid) + " has ended");
  struct winsize ws {};
  ws.ws_row = rows;
  ws.ws_col = cols;
  // The kernel tells the pty's foreground process group (SIGWINCH).
  if (::ioctl(r->pty_master->Get(), TIOCSWINSZ, &ws) != 0)
    return ProcessFailed(ProcessError::kNotRunning, "the pty is gone: " + std::string(std::strerror(errno)));
  r->rows = rows;
  r->cols = cols;
  return {};
}

ProcessExpected<std::unique_ptr<SessionProcesses::Follower>> SessionProcesses::Follow(int32_t pid,
                                                                                      uint64_t from) {
  Lock lock(mu_);
  auto r = Find(pid);
  if (!r) return NoProcess(pid);
  const uint64_t id = ++next_follower_;
  r->followers[id] = from;
  return std::unique_ptr<Follower>(new Follower(weak_from_this(), r, id));
}

SessionProcesses::Follower::~Follower() {
  if (auto table = table_.lock()) table->Unfollow(*this);
}

void SessionProcesses::Unfollow(Follower& follower) {
  Lock lock(mu_);
  auto r = follower.record_.lock();
  if (!r) return;
  r->followers.erase(follower.id_);
  if (Find(r->pid) == r) Advance(*r);
}

ProcessExpected<SessionProcesses::Output> SessionProcesses::Read(int32_t pid, uint64_t from, size_t max_bytes,
                                                                 std::optional<Clock::time_point> wait_until,
                                                                 const std::atomic<bool>* cancel,
                                                                 Follower* follower) {
  Lock lock(mu_);
  auto r = Find(pid);
  if (!r) return NoProcess(pid);
  if (wait_until) {
    while (r->log.end() <= from && r->running && !(cancel != nullptr && *cancel) &&
           Clock::now() < *wait_until)
      changed_.wait_until(lock, std::min(*wait_until, Clock::now() + std::chrono::milliseconds(200)));
  }
  Output out{.read = r->log.Read(from, max_bytes), .info = InfoOf(*r)};
  if (follower != nullptr && follower->record_.lock() == r) {
    r->followers[follower->id_] = out.read.next_offset;
    Advance(*r);
  }
  return out;
}

ProcessExpected<ProcessInfo> SessionProcesses::Wait(int32_t pid, Clock::time_point until,
                                                    const std::atomic<bool>* cancel) {
  Lock lock(mu_);
  auto r = Find(pid);
  if (!r) return NoProcess(pid);
  while (r->running && !(cancel != nullptr && *cancel) && Clock::now() < until)
    changed_.wait_until(lock, std::min(until, Clock::now() + std::chrono::milliseconds(200)));
  return InfoOf(*r);
}

size_t SessionProcesses::running() {
  Lock lock(mu_);
  size_t count = pending_.size();
  for (const auto& [pid, r] : records_) count += r->running ? 1 : 0;
  return count;
}

}  // namespace execbox::engine
