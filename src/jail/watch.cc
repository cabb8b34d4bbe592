// The supervisor's side of a live execution: output, report, control messages and limits.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <thread>

#include "jail/launch.h"
#include "jail/wire.h"

namespace execbox::jail {

constexpr uint64_t kReportCap = 64ull << 20;
namespace {
std::atomic<int64_t> g_collect_delay_ms{0};  // DelayCollectForTesting
}  // namespace
// After asking the tree's parent to stop, how long before it is killed outright.
constexpr auto kStopGrace = std::chrono::seconds(2);
// How long after a 'D' the kernel may take to show the agent parked or exiting. The agent gets
// there within microseconds; the slack is for a loaded host, or a thread of the code that holds
// the GIL in one long C call (that rare session is then lost as if forged).
constexpr auto kDoneCheckWindow = std::chrono::seconds(2);
// While a 'D' is being checked, the time between looks: a quarter of the time waited so far,
// within these bounds. The agent parks a few microseconds after its 'D' once it has a CPU;
// sleeping between looks (not spinning) leaves this CPU to it when both share one.
constexpr auto kFirstDoneLookGap = std::chrono::microseconds(50);
constexpr auto kLastDoneLookGap = std::chrono::milliseconds(5);

bool SendWireHeader(int fd, const void* header, size_t size) {
  return ::send(fd, header, size, MSG_NOSIGNAL) == static_cast<ssize_t>(size);
}

bool SendBytes(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

Watch::Watch(const WatchSpec& spec, Channels& ch, Outcome& out)
    : spec_(spec), ch_(ch), out_(out), deadline_(started_at_ + spec.limits->wall_time) {}

// The agent closed its report: what it wrote to stdout/stderr before is already in the pipes.
// Takes that, without waiting for writers that outlive the execution (a session's threads).
void Watch::DrainOutput() {
  for (UniqueFd* fd : {&ch_.stdout_read, &ch_.stderr_read, &ch_.report_read}) {
    while (fd->Valid()) {
      struct pollfd p = {.fd = fd->Get(), .events = POLLIN, .revents = 0};
      if (::poll(&p, 1, 0) <= 0) break;
      if (fd == &ch_.report_read) {
        ReadReport();
      } else {
        ReadOutput(*fd, fd == &ch_.stdout_read ? Stream::kStdout : Stream::kStderr);
      }
    }
    fd->Reset();
  }
}

// Bytes from a warm child's code process: a 'D' ends the execution once CheckDoneClaim
// confirms it. Anything else is the code writing to its own channel, and changes nothing; EOF
// means the process is gone (the zygote reports how it ended).
// Bytes with a 'D' are peeked, and taken only once the claim is settled: taking them frees
// their buffer, which wakes a reader of the sender's socket (write space), so an agent already
// parked in recvmsg would be runnable again, not seen parked, until it next gets a CPU.
void Watch::ReadDone() {
  char bytes[512];
  ssize_t n = ::recv(spec_.done_fd, bytes, sizeof bytes, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    done_open_ = false;
    return;
  }
  bool marker = std::memchr(bytes, 'D', static_cast<size_t>(n)) != nullptr;
  if (!marker || exited_ || report_done_ || done_claim_void_) {
    (void)::recv(spec_.done_fd, bytes, static_cast<size_t>(n), MSG_DONTWAIT);
    return;
  }
  done_claimed_at_ = Clock::now();
  CheckDoneClaim();
}

// What is on the channel once a 'D' was believed: the agent has parked, so only what the
// code's own threads may still write follows (bounded here; the next execution reads the rest).
void Watch::TakeDone() {
  char bytes[65536];
  for (int i = 0; i < 64; ++i) {
    if (::recv(spec_.done_fd, bytes, sizeof bytes, MSG_DONTWAIT) <= 0) return;
  }
}

namespace {
// The agent's report ends with its exit event ({"type":"exit","code":N}, compact JSON), written
// just before its os._exit.
bool EndsWithExitEvent(std::string_view report) {
  if (report.size() < 2 || report.back() != '\n') return false;
  report.remove_suffix(1);
  size_t start = report.rfind('\n');
  std::string_view last = start == std::string_view::npos ? report : report.substr(start + 1);
  return last.starts_with("{\"type\":\"exit\",\"code\":");
}
}  // namespace

// A one-shot child's report ended: the agent's os._exit closes it (the process is then already
// exiting), or the code closed it, or the process was killed. Believed only after the agent's
// exit event (a process killed before it says nothing of how it ended: its wait status does),
// and checked like a 'D'.
void Watch::ClaimDoneAtReportEnd() {
  if (!spec_.report_end_claims_done || exited_ || report_done_ || done_claim_void_ || done_claimed_at_)
    return;
  if (out_.report_truncated || !EndsWithExitEvent(out_.report)) return;
  done_claimed_at_ = Clock::now();
  claimed_by_report_end_ = true;
  CheckDoneClaim();
}

// The code runs in the agent's process and can write the 'D' itself (to the session's init,
// which relays it): it is believed only when the kernel shows the process doing what the agent
// does next (check_done). A 'D' not followed by that within kDoneCheckWindow was the code's:
// the tree is stopped and the execution ends as kForgedDone, never as ok. A report's end not
// followed by the exit is the code's doing too, and only voided: the exit or a limit ends it.
void Watch::CheckDoneClaim() {
  if (!done_claimed_at_ || exited_ || stop_reason_) return;
  DoneCheck c = spec_.check_done ? spec_.check_done() : DoneCheck::kNotYet;
  if (c == DoneCheck::kConfirmed) {
    done_claimed_at_.reset();
    report_done_ = true;
    if (spec_.done_fd >= 0) TakeDone();
  } else if (c == DoneCheck::kEnding) {
    done_claimed_at_.reset();  // the zygote's kExited, not the marker, ends this execution
    done_claim_void_ = true;
  } else if (Clock::now() - *done_claimed_at_ >= kDoneCheckWindow) {
    done_claimed_at_.reset();
    done_claim_void_ = true;
    if (!claimed_by_report_end_) Stop(Ending::kForgedDone);
  }
}

void Watch::Stop(Ending reason) {
  if (stop_reason_ || exited_) return;
  stop_reason_ = reason;
  if (spec_.stop_code) {
    spec_.stop_code();
  } else {
    wire::Header h{.kind = wire::Kind::kStop};
    SendWireHeader(ch_.control_host.Get(), &h, sizeof h);
  }
  kill_at_ = Clock::now() + kStopGrace;
}

void Watch::KillTree() {
  tree_killed_ = true;
  if (spec_.kill_tree) spec_.kill_tree();
}

// A session's kernel ends, its init lives: the kernel's status is the init's to say. Asked only
// once the output is closed (the loop ends on nothing sooner): no look at the init's link per
// chunk of output, and a process holding the output open past the kernel's end leaves the
// limits in force (the deadline, then the stop's kill) instead of a loop that never ends.
void Watch::CheckKernelEnded() {
  if (kernel_ended_ || exited_ || !spec_.code_ended) return;
  if (ch_.stdout_read.Valid() || ch_.stderr_read.Valid() || ch_.report_read.Valid()) return;
  if (auto status = spec_.code_ended()) {
    kernel_ended_ = exited_ = true;
    report_done_ = false;
    kill_at_.reset();  // a stop's kernel ended as asked: the machine is not killed
    wait_status_ = *status;
    ended_at_ = Clock::now();
  }
}

void Watch::ReadOutput(UniqueFd& fd, Stream stream) {
  char buf[65536];
  ssize_t n = ::read(fd.Get(), buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    fd.Reset();
    return;
  }
  std::string_view data(buf, static_cast<size_t>(n));
  Capture& cap = stream == Stream::kStdout ? out_.stdout_capture : out_.stderr_capture;
  if (spec_.hooks != nullptr && spec_.hooks->on_output) spec_.hooks->on_output(stream, data);
  cap.Append(data);
  if (cap.total_bytes() > spec_.limits->output_bytes * spec_.limits->output_kill_factor) {
    Stop(Ending::kOutputLimit);
  }
}

void Watch::ReadReport() {
  char buf[65536];
  ssize_t n = ::read(ch_.report_read.Get(), buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    ch_.report_read.Reset();
    ClaimDoneAtReportEnd();
    return;
  }
  if (out_.report.size() + static_cast<size_t>(n) > kReportCap) {
    out_.report_truncated = true;
    return;
  }
  out_.report.append(buf, static_cast<size_t>(n));
  if (spec_.hooks != nullptr && spec_.hooks->on_report) spec_.hooks->on_report(std::string_view(buf, n));
}

void Watch::WriteStdin() {
  const std::string& data = *spec_.stdin_data;
  while (stdin_sent_ < data.size()) {
    ssize_t n = ::write(ch_.stdin_write.Get(), data.data() + stdin_sent_, data.size() - stdin_sent_);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) break;  // EPIPE: the code closed its stdin
    stdin_sent_ += static_cast<size_t>(n);
  }
  ch_.stdin_write.Reset();
}

void Watch::ReadControl() {
  int fd = ch_.control_host.Get();
  wire::Header h{};
  if (!wire::ReadExact(fd, &h, sizeof h)) {
    control_open_ = false;
    if (!exited_) ended_at_ = Clock::now();
    return;
  }
  switch (h.kind) {
    case wire::Kind::kStarted:
      ApplyStartFlags(h.b, out_.layers);
      started_at_ = Clock::now();
      deadline_ = started_at_ + spec_.limits->wall_time;
      break;
    case wire::Kind::kSetupFailed:
      setup_failed_ = true;
      h.text[sizeof h.text - 1] = '\0';
      out_.message =
          std::string("jail setup failed at '") + h.text + "': " + std::strerror(static_cast<int>(h.a));
      break;
    case wire::Kind::kExited:
      exited_ = true;
      report_done_ = false;
      ended_at_ = Clock::now();
      wait_status_ = static_cast<int>(h.a);
      tree_cpu_us_ = static_cast<uint64_t>(h.b);
      tree_maxrss_kib_ = static_cast<uint64_t>(h.c);
      break;
    case wire::Kind::kOutputFile: {
      std::string name(static_cast<size_t>(std::clamp<int64_t>(h.a, 0, 4096)), '\0');
      std::string content;
      bool ok = h.a > 0 && h.a <= 4096 && h.b >= 0 && static_cast<uint64_t>(h.b) <= spec_.max_file_bytes &&
                wire::ReadExact(fd, name.data(), name.size());
      if (ok) {
        content.resize(static_cast<size_t>(h.b));
        ok = wire::ReadExact(fd, content.data(), content.size());
      }
      if (!ok) return Abandon("file collection broke off");
      if (auto valid = ValidateRelativeName(name); !valid) {
        out_.skipped_files.push_back(name + ": " + valid.error().message);
      } else {
        out_.files.push_back({std::move(name), std::move(content)});
      }
      break;
    }
    case wire::Kind::kSkippedFile: {
      std::string name(static_cast<size_t>(std::clamp<int64_t>(h.a, 0, 4096)), '\0');
      if (!wire::ReadExact(fd, name.data(), name.size())) return Abandon("file collection broke off");
      h.text[sizeof h.text - 1] = '\0';
      out_.skipped_files.push_back(name + ": " + h.text);
      break;
    }
    case wire::Kind::kDone:
      control_open_ = false;
      break;
    case wire::Kind::kCollected:
      if (!collecting_) return Abandon("unexpected message from the zygote");
      control_open_ = false;
      break;
    default:
      return Abandon("unexpected message from the jail's init");
  }
}

// The control stream is no longer framed. The init may be blocked writing to it: kill the
// whole namespace, or the supervisor's wait for the init would never end.
void Watch::Abandon(const char* why) {
  control_open_ = false;
  if (out_.message.empty()) out_.message = why;
  KillTree();
}

void Watch::CheckLimits() {
  auto now = Clock::now();
  if (kill_at_ && now >= *kill_at_) {
    KillTree();
    kill_at_.reset();
  }
  if (exited_ || setup_failed_) return;
  if (now >= deadline_) Stop(Ending::kWallTimeout);
  auto set = [](const std::atomic<bool>* flag) { return flag != nullptr && flag->load(); };
  if (spec_.hooks != nullptr && (set(spec_.hooks->cancel) || set(spec_.hooks->cancel_too))) {
    Stop(Ending::kCancelled);
  }
  if (spec_.cgroup != nullptr) {
    CgroupUsage u = spec_.cgroup->ReadUsage();
    if ((u.cpu_ns - std::min(u.cpu_ns, spec_.base.cpu_ns)) / 1'000'000 >=
        static_cast<uint64_t>(spec_.limits->cpu_time.count()))
      Stop(Ending::kCpuTimeout);
    if (u.oom_kills > spec_.base.oom_kills) Stop(Ending::kMemoryLimit);
  }
}

void Watch::Loop() {
  WriteStdin();
  for (;;) {
    struct pollfd fds[6];
    int n = 0;
    auto add = [&](const UniqueFd& fd, short events) {
      if (fd.Valid()) fds[n++] = {.fd = fd.Get(), .events = events, .revents = 0};
    };
    add(ch_.stdout_read, POLLIN);
    add(ch_.stderr_read, POLLIN);
    add(ch_.report_read, POLLIN);
    if (control_open_) add(ch_.control_host, POLLIN);
    add(ch_.stdin_write, POLLOUT);
    // Not while a 'D' (left unread) is being checked, or after it was not believed.
    if (spec_.done_fd >= 0 && done_open_ && !collecting_ && !done_claimed_at_ && !done_claim_void_) {
      fds[n++] = {.fd = spec_.done_fd, .events = POLLIN, .revents = 0};
    }
    bool output_open = ch_.stdout_read.Valid() || ch_.stderr_read.Valid() || ch_.report_read.Valid();
    // Collecting ends on kCollected (or the zygote gone), a kernel that ended alone or not.
    if ((!control_open_ || (kernel_ended_ && !collecting_)) && !output_open) break;
    if (report_done_ && !collecting_) {
      DrainOutput();
      ended_at_ = Clock::now();
      break;
    }

    auto now = Clock::now();
    Clock::time_point wake = std::min(deadline_, now + std::chrono::milliseconds(100));
    if (kill_at_) wake = std::min(wake, *kill_at_);
    if (done_claimed_at_) {
      auto gap =
          std::clamp<Clock::duration>((now - *done_claimed_at_) / 4, kFirstDoneLookGap, kLastDoneLookGap);
      wake = std::min(wake, now + gap);
    }
    auto left =
        std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(wake - now).count());
    struct timespec timeout = {.tv_sec = static_cast<time_t>(left / 1'000'000'000),
                               .tv_nsec = static_cast<long>(left % 1'000'000'000)};
    if (::ppoll(fds, static_cast<nfds_t>(n), &timeout, nullptr) < 0 && errno != EINTR) break;
    for (int i = 0; i < n; ++i) {
      if (fds[i].revents == 0) continue;
      int fd = fds[i].fd;
      if (fd == ch_.stdout_read.Get())
        ReadOutput(ch_.stdout_read, Stream::kStdout);
      else if (fd == ch_.stderr_read.Get())
        ReadOutput(ch_.stderr_read, Stream::kStderr);
      else if (fd == ch_.report_read.Get())
        ReadReport();
      else if (fd == ch_.control_host.Get())
        ReadControl();
      else if (fd == ch_.stdin_write.Get())
        WriteStdin();
      else if (fd == spec_.done_fd)
        ReadDone();
    }
    CheckLimits();
    CheckKernelEnded();
    CheckDoneClaim();
  }
  if (ended_at_ == Clock::time_point{}) ended_at_ = Clock::now();
}

void DelayCollectForTesting(std::chrono::milliseconds delay) { g_collect_delay_ms = delay.count(); }

void Watch::Collect(bool send) {
  if (!control_open_ || (exited_ && !kernel_ended_alone())) return;
  if (int64_t delay = g_collect_delay_ms; delay > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(delay));
  wire::Header h{.kind = wire::Kind::kCollect, .a = send ? 0 : 1};
  // A send that fails is still followed by the reading: a one-shot child can end between its
  // 'D' and this request, and the zygote then sends its exit and files unasked and closes the
  // socket (EPIPE here), with all of that still waiting to be read.
  (void)SendWireHeader(ch_.control_host.Get(), &h, sizeof h);
  collecting_ = true;
  Loop();
  collecting_ = false;
}

void ClassifyEnding(const Limits& limits, const Watch& w, const CgroupUsage& cg, Outcome& out) {
  int st = w.wait_status();
  if (WIFEXITED(st)) out.exit_code = WEXITSTATUS(st);
  if (WIFSIGNALED(st)) out.signal = WTERMSIG(st);
  if (w.setup_failed()) {
    out.ending = Ending::kSetupFailed;
  } else if (w.stop_reason() == Ending::kForgedDone && cg.oom_kills > 0) {
    out.ending = Ending::kMemoryLimit;  // what the kernel decided stands over the forgery
    if (out.signal == 0) out.signal = SIGKILL;
  } else if (w.stop_reason()) {
    out.ending = *w.stop_reason();
    if (out.signal == 0) out.signal = SIGKILL;
  } else if (cg.oom_kills > 0) {
    out.ending = Ending::kMemoryLimit;
  } else if (out.signal == SIGXCPU ||
             (out.signal == SIGKILL && out.usage.cpu_ms >= static_cast<uint64_t>(limits.cpu_time.count()))) {
    out.ending = Ending::kCpuTimeout;
  } else if (w.report_done()) {
    out.ending = Ending::kExited;  // a session execution: the process lives on
  } else if (!w.exited()) {
    out.ending = Ending::kSetupFailed;
    if (out.message.empty()) out.message = "the jail's init ended before the code did";
  } else {
    out.ending = WIFSIGNALED(st) ? Ending::kSignaled : Ending::kExited;
  }
}

}  // namespace execbox::jail
