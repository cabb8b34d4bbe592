// The supervisor's side of a live execution: output, report, control messages and limits.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>

#include "jail/launch.h"
#include "jail/wire.h"

namespace execbox::jail {

constexpr uint64_t kReportCap = 64ull << 20;
// After asking the tree's parent to stop, how long before it is killed outright.
constexpr auto kStopGrace = std::chrono::seconds(2);

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

// One byte from a session's code process: 'D' ends the execution. Anything else is the code
// writing to its own channel, and changes nothing; EOF means the process is gone (the keeper
// reports how it ended).
void Watch::ReadDone() {
  char bytes[512];
  ssize_t n = ::read(spec_.done_fd, bytes, sizeof bytes);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    done_open_ = false;
    return;
  }
  if (std::memchr(bytes, 'D', static_cast<size_t>(n)) != nullptr && !exited_) report_done_ = true;
}

void Watch::Stop(Ending reason) {
  if (stop_reason_ || exited_) return;
  stop_reason_ = reason;
  wire::Header h{.kind = wire::Kind::kStop};
  SendWireHeader(ch_.control_host.Get(), &h, sizeof h);
  kill_at_ = Clock::now() + kStopGrace;
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
    return;
  }
  if (out_.report.size() + static_cast<size_t>(n) > kReportCap) {
    out_.report_truncated = true;
    return;
  }
  out_.report.append(buf, static_cast<size_t>(n));
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
      if (!collecting_) return Abandon("unexpected message from the keeper");
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
  if (spec_.kill_tree) spec_.kill_tree();
}

void Watch::CheckLimits() {
  auto now = Clock::now();
  if (kill_at_ && now >= *kill_at_) {
    if (spec_.kill_tree) spec_.kill_tree();
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
    if (spec_.done_fd >= 0 && done_open_ && !collecting_) {
      fds[n++] = {.fd = spec_.done_fd, .events = POLLIN, .revents = 0};
    }
    bool output_open = ch_.stdout_read.Valid() || ch_.stderr_read.Valid() || ch_.report_read.Valid();
    if (!control_open_ && !output_open) break;
    if (report_done_ && !collecting_) {
      DrainOutput();
      ended_at_ = Clock::now();
      break;
    }

    auto now = Clock::now();
    auto wake = std::min(deadline_, now + std::chrono::milliseconds(100));
    if (kill_at_) wake = std::min(wake, *kill_at_);
    int timeout = static_cast<int>(
        std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count()));
    if (::poll(fds, static_cast<nfds_t>(n), timeout) < 0 && errno != EINTR) break;
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
  }
  if (ended_at_ == Clock::time_point{}) ended_at_ = Clock::now();
}

void Watch::Collect() {
  if (!control_open_ || exited_) return;
  wire::Header h{.kind = wire::Kind::kCollect};
  if (!SendWireHeader(ch_.control_host.Get(), &h, sizeof h)) return;
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
