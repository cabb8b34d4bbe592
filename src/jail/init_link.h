// The host's end of a session's init (session_init.h): asks it to start and signal processes,
// and reads what it reports. The init runs inside the sandbox, so nothing it says is trusted:
// every message is checked for its frame, size and values, text is cut to printable ASCII, a
// descriptor is kept only where one is due (a pty's master, checked to be one), and a stream
// that breaks these rules is closed for good. Thread-safe: a poller reads while other threads
// start processes and a warm child waits for the kernel's end.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/unique_fd.h"

namespace execbox::jail {

// A process to start in the session.
struct ProcessStart {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH unless it has a '/'
  std::vector<std::string> env;   // NAME=value, over the sandbox's base environment
  std::string cwd;                // "" for the work dir; relative to the work dir
  bool pty = false;               // a pseudo-terminal of rows x cols is stdin, stdout and stderr
  uint16_t rows = 24, cols = 80;
  // Pipes (without pty): the process's ends. stdin_read -1: stdin is /dev/null.
  int stdout_write = -1, stderr_write = -1, stdin_read = -1;
};

struct InitEvent {
  enum class Kind { kStarted, kStartFailed, kExited, kKernelEnded };
  Kind kind = Kind::kExited;
  uint32_t id = 0;      // kStarted, kStartFailed: the start's
  pid_t pid = 0;        // kStarted, kExited: in the session's pid namespace
  int value = 0;        // kStartFailed: an errno; kExited, kKernelEnded: a wait status
  std::string step;     // kStartFailed: what failed
  UniqueFd pty_master;  // kStarted of a pty start
};

class InitLink {
 public:
  explicit InitLink(UniqueFd socket);
  InitLink(const InitLink&) = delete;
  InitLink& operator=(const InitLink&) = delete;

  // Readable when messages wait, when events were read but not taken yet (by a warm child
  // waiting for its kernel's end, say: a poller is not left asleep over them), or once the
  // init's end closed: for a poller. An epoll descriptor over the socket and a notice.
  int fd() const { return ready_.Get(); }

  // Asks for a process; the answer is a kStarted or kStartFailed event with this `id`.
  // Fails when the request is too large for the init (init_wire::kMaxPayload) or the init is gone.
  Status Start(uint32_t id, const ProcessStart& start);
  // Sends `signal` to the process group led by `pid` (a process this link started, still running).
  Status Signal(pid_t pid, int signal);

  // Once the kernel has ended (kernel_status): asks the init for a new one, on `channel` (the
  // kernel's end of a fresh channel; the init takes a copy). The new kernel's end is reported
  // like the first one's.
  Status NewKernel(int channel);

  // Reads every message waiting, never blocking, into the events. False once nothing more can
  // come: the init's end closed, or it broke the protocol (the link is then closed for good).
  bool Receive();
  std::vector<InitEvent> TakeEvents();
  bool closed();
  // The kernel's wait status, once the init reported it.
  std::optional<int> kernel_status();
  // Waits until the init's report of the kernel's end has been read or its end has closed, at
  // most `timeout` (0: one look, reading what waits).
  std::optional<int> AwaitKernelStatus(std::chrono::milliseconds timeout);

 private:
  bool ReceiveLocked();
  bool Accept(const void* frame, size_t size, std::vector<UniqueFd>& fds);

  UniqueFd socket_;
  UniqueFd queued_;  // an eventfd: events are waiting in events_
  UniqueFd ready_;   // epoll over socket_ and queued_
  std::mutex send_mu_;
  std::mutex mu_;  // what follows
  std::deque<InitEvent> events_;
  std::optional<int> kernel_status_;
  bool closed_ = false;
};

}  // namespace execbox::jail
