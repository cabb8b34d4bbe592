// Host side of one warm child (WarmChild, declared in zygote.h): hands it requests and watches
// them with the same Watch as a cold run, and between a session's executions asks the zygote
// for the work dir's files. The zygote that forks it is in zygote.cc.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>

#include "base/io.h"
#include "jail/launch.h"
#include "jail/warm_host.h"
#include "jail/wire.h"
#include "jail/zygote.h"

namespace execbox::jail {
namespace {

// A session file request: the zygote answers at once (it never waits on what the code made),
// so only a wedged or dead zygote runs into this.
constexpr auto kFileTimeout = std::chrono::seconds(60);

bool WaitWritable(int fd, Clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    struct pollfd p = {.fd = fd, .events = POLLOUT, .revents = 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

// Exactly `size` bytes over a (blocking) stream socket, waiting no later than `deadline`.
bool RecvExactBy(int fd, void* data, size_t size, Clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = ::recv(fd, p, size, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) return false;
    if (errno != EINTR && !WaitReadable(fd, deadline)) return false;
  }
  return true;
}

bool SendExactBy(int fd, const void* data, size_t size, Clock::time_point deadline) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::send(fd, p, size, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) return false;
    if (errno != EINTR && !WaitWritable(fd, deadline)) return false;
  }
  return true;
}

// What the zygote's errno means to the caller.
FileFailure::Kind FileFailureKind(int err, bool reading) {
  using K = FileFailure::Kind;
  if (reading) {
    switch (err) {
      case ENOENT:
      case ENOTDIR:
      case ELOOP:
      case EXDEV:
      case EISDIR:
      case ENXIO:
        return K::kNotFound;
      case EFBIG:
        return K::kTooLarge;
      default:
        return K::kRefused;
    }
  }
  return err == ENOSPC || err == EFBIG || err == EDQUOT ? K::kTooLarge : K::kRefused;
}

}  // namespace

// ---- WarmChild ----

WarmChild::~WarmChild() {
  control_.Reset();  // the zygote kills the child when its control socket closes
  channel_.Reset();
  if (pidfd_.Valid()) {
    ::syscall(SYS_pidfd_send_signal, pidfd_.Get(), SIGKILL, nullptr, 0);
  }
  if (cgroup_ && executed_ && options_.cpu_tally) {
    cgroup_->KillAll();  // what the group's removal does first: its exit is then counted
    uint64_t total = std::max(cgroup_->ReadUsage().cpu_ns, cpu_at_last_end_ns_);
    ChildCpuTally& t = *options_.cpu_tally;
    t.setup_ns += cpu_at_first_request_ns_;
    t.execution_ns += cpu_at_last_end_ns_ - std::min(cpu_at_last_end_ns_, cpu_at_first_request_ns_);
    t.exit_ns += total - cpu_at_last_end_ns_;
    ++t.children;
  }
  cgroup_.reset();  // kills what is left and removes the group
}

Expected<Outcome> WarmChild::Execute(std::string_view request, const std::string& stdin_data,
                                     const Limits& limits, const RunHooks& hooks, FilesAfter files) {
  const auto handed_at = Clock::now();
  if (!alive_) return Fail("this warm child is no longer alive");
  if (auto s = ValidateLimits(limits); !s) return std::unexpected(s.error());
  if (!options_.session) alive_ = false;  // one execution only
  if (limits.memory_bytes != options_.limits.memory_bytes ||
      limits.max_processes != options_.limits.max_processes) {
    if (auto s = cgroup_->SetLimits(ChildCgroupLimits(limits)); !s) return std::unexpected(s.error());
    options_.limits.memory_bytes = limits.memory_bytes;
    options_.limits.max_processes = limits.max_processes;
  }
  if (const uint32_t weight = hooks.cpu_weight != 0 ? hooks.cpu_weight : kDefaultCpuWeight;
      weight != cpu_weight_) {
    cgroup_->SetCpuWeight(weight);  // a session's next execution may be another caller's share
    cpu_weight_ = weight;
  }
  auto made = MakeChannels(true, false, false);
  if (!made) return std::unexpected(made.error());
  Channels& ch = *made;
  cgroup_->ResetPeak();
  CgroupUsage base = cgroup_->ReadUsage();
  if (!executed_) cpu_at_first_request_ns_ = cpu_at_last_end_ns_ = base.cpu_ns;
  executed_ = true;

  uint64_t length = request.size();
  unsigned char header[8];
  for (int i = 0; i < 8; ++i) header[i] = static_cast<unsigned char>(length >> (8 * i));
  int fds[4] = {ch.stdin_read.Get(), ch.stdout_write.Get(), ch.stderr_write.Get(), ch.report_write.Get()};
  if (!SendWithFds(channel_.Get(), header, sizeof header, fds, 4) || !SendBytes(channel_.Get(), request)) {
    alive_ = false;
    return FailErrno("hand the request to the warm child");
  }
  for (UniqueFd* fd : {&ch.stdin_read, &ch.stdout_write, &ch.stderr_write, &ch.report_write}) fd->Reset();
  ch.control_host = std::move(control_);

  Outcome out;
  out.stdout_capture = Capture(limits.output_bytes);
  out.stderr_capture = Capture(limits.output_bytes);
  out.layers = layers_;
  if (init_) out.layers.landlock_tcp = false;  // a session's child (warm_child_setup.cc, SessionServers)
  out.enforcement = enforcement_;
  Cgroup* cgroup = cgroup_.get();
  int control = ch.control_host.Get();
  int pidfd = pidfd_.Get();
  // A session's stop ends its kernel alone; its init kills what the kernel left and says so.
  std::function<void()> stop_code;
  std::function<std::optional<int>()> code_ended;
  if (init_ && kernel_pidfd_.Valid()) {
    stop_code = [kernel = kernel_pidfd_.Get()] {
      ::syscall(SYS_pidfd_send_signal, kernel, SIGKILL, nullptr, 0);
    };
    code_ended = [init = init_.get()] { return init->AwaitKernelStatus(std::chrono::milliseconds(0)); };
  }
  WatchSpec spec{.limits = &limits,
                 .stdin_data = &stdin_data,
                 .max_file_bytes = options_.collect.max_file_bytes,
                 .hooks = &hooks,
                 .cgroup = cgroup,
                 .kill_tree =
                     [control, pidfd, cgroup] {
                       ::shutdown(control, SHUT_WR);
                       ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
                       cgroup->KillAll();
                     },
                 .stop_code = std::move(stop_code),
                 .code_ended = std::move(code_ended),
                 .done_fd = options_.session ? channel_.Get() : -1,
                 .report_end_claims_done = !options_.session,
                 .check_done = [this] { return code_.Check(options_.session); },
                 .base = base};
  Watch watch(spec, ch, out);
  watch.Loop();
  // A session's kernel that ended alone (stopped, or it exited) leaves the sandbox with what it
  // wrote: those files are this execution's, not the next one's.
  if ((watch.report_done() || watch.kernel_ended_alone()) &&
      (options_.collect.enabled || files == FilesAfter::kNote)) {
    watch.Collect(files == FilesAfter::kSend);
  }
  control_ = std::move(ch.control_host);
  // The zygote saw the init exit: how the kernel ended is the init's to say (it said so before
  // it exited). An init killed outright (a stop, the whole group killed) said nothing: its own
  // status stands.
  if (init_ && watch.exited() && !watch.kernel_ended_alone()) {
    if (auto status = init_->AwaitKernelStatus(std::chrono::seconds(1))) watch.OverrideWaitStatus(*status);
  }
  if (!options_.session || !watch.report_done() || watch.stop_reason()) alive_ = false;
  out.ended_by_report = watch.report_done() && !watch.stop_reason();

  CgroupUsage now = cgroup_->ReadUsage();
  cpu_at_last_end_ns_ = std::max(now.cpu_ns, cpu_at_first_request_ns_);
  CgroupUsage delta = now;
  delta.cpu_ns = now.cpu_ns - std::min(now.cpu_ns, base.cpu_ns);
  delta.oom_kills = now.oom_kills - std::min(now.oom_kills, base.oom_kills);
  out.usage.setup_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(watch.started_at() - handed_at).count());
  out.usage.wall_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(watch.ended_at() - watch.started_at()).count());
  out.usage.cpu_ms = delta.cpu_ns / 1'000'000;
  out.usage.peak_memory_bytes = now.peak_memory_bytes;
  out.usage.pids_peak = now.pids_peak;
  ClassifyEnding(limits, watch, delta, out);
  // The kernel ended and the sandbox lives: a new kernel, so the session keeps its machine.
  if (watch.kernel_ended_alone()) {
    if (auto restarted = RestartKernel(); restarted) {
      out.kernel_restarted = true;
    } else {
      std::fprintf(stderr, "execbox: a session's kernel was not restarted: %s\n",
                   restarted.error().message.c_str());
    }
  }
  // A used-up child is ended by its destructor (killed, its cgroup removed): off the request's
  // path when the owner hands it to a background reaper (Pool::Retire).
  return out;
}

FileFailure WarmChild::Broken(std::string message) {
  alive_ = false;  // the stream is no longer framed: this child is done
  if (pidfd_.Valid()) ::syscall(SYS_pidfd_send_signal, pidfd_.Get(), SIGKILL, nullptr, 0);
  return {FileFailure::Kind::kBroken, std::move(message)};
}

FileExpected<std::string> WarmChild::FileReply(const std::string& path, bool reading, uint64_t max_bytes,
                                               Clock::time_point deadline) {
  int ctl = control_.Get();
  std::string content;
  bool have_data = false;
  for (;;) {
    wire::Header h{};
    if (!RecvExactBy(ctl, &h, sizeof h, deadline)) {
      return std::unexpected(
          Broken(Clock::now() >= deadline ? "the zygote did not answer in time" : "the zygote ended"));
    }
    switch (h.kind) {
      case wire::Kind::kExited:
        // The code's process had ended before the request (the zygote then sends kDone and
        // closes the socket without reading it): the work dir went with it.
        alive_ = false;
        return std::unexpected(FileFailure{FileFailure::Kind::kEnded,
                                           "the session's process had ended; its state and files are gone"});
      case wire::Kind::kFileData:
        if (!reading || have_data || h.b < 0 || static_cast<uint64_t>(h.b) > max_bytes) {
          return std::unexpected(Broken("unexpected file data from the zygote"));
        }
        content.resize(static_cast<size_t>(h.b));
        if (!RecvExactBy(ctl, content.data(), content.size(), deadline)) {
          return std::unexpected(Broken("the file's content broke off"));
        }
        have_data = true;
        break;
      case wire::Kind::kFileResult: {
        if (h.a == 0) {
          if (reading && !have_data) return std::unexpected(Broken("the zygote sent no content"));
          return content;
        }
        h.text[sizeof h.text - 1] = '\0';
        int err = static_cast<int>(h.a);
        return std::unexpected(FileFailure{FileFailureKind(err, reading),
                                           path + ": " + h.text + " (" + std::strerror(err) + ")"});
      }
      default:
        return std::unexpected(Broken("unexpected message from the zygote"));
    }
  }
}

FileExpected<std::string> WarmChild::GetFile(const std::string& path, uint64_t max_bytes) {
  if (!alive_ || !options_.session || !control_.Valid()) {
    return std::unexpected(FileFailure{FileFailure::Kind::kEnded, "the session's process has ended"});
  }
  if (auto valid = ValidateRelativeName(path); !valid) {
    return std::unexpected(FileFailure{FileFailure::Kind::kRefused, valid.error().message});
  }
  const auto deadline = Clock::now() + kFileTimeout;
  wire::Header h{.kind = wire::Kind::kReadFile,
                 .a = static_cast<int64_t>(path.size()),
                 .b = static_cast<int64_t>(std::min<uint64_t>(max_bytes, INT64_MAX))};
  int ctl = control_.Get();
  if (!SendExactBy(ctl, &h, sizeof h, deadline) || !SendExactBy(ctl, path.data(), path.size(), deadline)) {
    // A child that had ended was reported first.
    auto why = FileReply(path, true, max_bytes, std::min(deadline, Clock::now() + std::chrono::seconds(1)));
    if (!why && why.error().kind == FileFailure::Kind::kEnded) return why;
    return std::unexpected(Broken("could not ask the zygote for the file"));
  }
  return FileReply(path, true, max_bytes, deadline);
}

FileExpected<void> WarmChild::PutFile(const std::string& path, std::string_view content) {
  if (!alive_ || !options_.session || !control_.Valid()) {
    return std::unexpected(FileFailure{FileFailure::Kind::kEnded, "the session's process has ended"});
  }
  if (auto valid = ValidateRelativeName(path); !valid) {
    return std::unexpected(FileFailure{FileFailure::Kind::kRefused, valid.error().message});
  }
  const auto deadline = Clock::now() + kFileTimeout;
  wire::Header h{.kind = wire::Kind::kWriteFile,
                 .a = static_cast<int64_t>(path.size()),
                 .b = static_cast<int64_t>(content.size())};
  int ctl = control_.Get();
  if (!SendExactBy(ctl, &h, sizeof h, deadline) || !SendExactBy(ctl, path.data(), path.size(), deadline) ||
      !SendExactBy(ctl, content.data(), content.size(), deadline)) {
    auto why = FileReply(path, false, 0, std::min(deadline, Clock::now() + std::chrono::seconds(1)));
    if (!why && why.error().kind == FileFailure::Kind::kEnded) return std::unexpected(why.error());
    return std::unexpected(Broken("could not send the file to the zygote"));
  }
  auto reply = FileReply(path, false, 0, deadline);
  if (!reply) return std::unexpected(reply.error());
  return {};
}

bool WarmChild::Probe() {
  if (!alive_) return false;
  struct pollfd p[2] = {{.fd = channel_.Get(), .events = POLLRDHUP, .revents = 0},
                        {.fd = control_.Get(), .events = POLLRDHUP, .revents = 0}};
  if (::poll(p, 2, 0) > 0 && ((p[0].revents | p[1].revents) & (POLLHUP | POLLRDHUP | POLLERR)) != 0) {
    alive_ = false;
  }
  return alive_;
}

WarmChild::Memory WarmChild::ReadMemory() const {
  Memory m;
  if (!alive_ || !cgroup_) return m;
  auto rollup = ReadFile("/proc/" + std::to_string(kernel_pid_) + "/smaps_rollup", 1 << 16);
  if (!rollup) return m;
  auto field = [&](std::string_view key) -> uint64_t {
    size_t at = rollup->find(std::string(key) + ":");
    if (at == std::string::npos) return 0;
    at += key.size() + 1;
    while (at < rollup->size() && (*rollup)[at] == ' ') ++at;
    size_t end = rollup->find(' ', at);
    return ParseU64(rollup->substr(at, end - at)).value_or(0) * 1024;
  };
  m.pss_bytes = field("Pss");
  m.private_bytes = field("Private_Clean") + field("Private_Dirty");
  return m;
}

}  // namespace execbox::jail
