// A session's processes besides its Python kernel: commands, background servers, a `cat` fed
// stdin, a shell on a pseudo-terminal. They run in the session's sandbox (its namespaces,
// cgroup and limits), started by its init (jail/session_init.h), and outlive the request that
// started them: any later request of the session's owner lists them, reads their output from
// any offset (what is still held, then what comes, until they end), writes their stdin, signals
// them, resizes their pty, waits for them. They end with the session (close, expiry, kill, or
// the end of its kernel, which takes the whole sandbox with it).
//
// The host keeps each process's output in bounded buffers (OutputLog), filled by one poller
// thread for the whole engine (ProcessPoller); readers wait on the table, never on a pipe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <expected>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/process_output.h"
#include "engine/process_poller.h"
#include "jail/init_link.h"

namespace execbox::engine {

struct ProcessSpec {
  std::vector<std::string> argv;           // the program and its arguments (argv[0] looked up in PATH) ...
  std::string command;                     // ... or a shell command, run as /bin/bash -l -c COMMAND
  std::map<std::string, std::string> env;  // over the sandbox's base environment
  std::string cwd;                         // "" for the work dir; relative to the work dir
  bool pty = false;                        // a pseudo-terminal of rows x cols
  uint16_t rows = 24, cols = 80;
  bool stdin = false;  // pipes: a stdin to write to (else it is /dev/null); a pty always has one
  std::string tag;     // the client's name for it, listed back
};

struct ProcessInfo {
  int32_t pid = 0;  // as the sandbox sees it
  std::vector<std::string> argv;
  std::string command;  // set when started as a shell command
  std::string tag;
  bool pty = false;
  bool stdin_open = false;  // input may be written (a pipe not closed, or a pty)
  std::chrono::system_clock::time_point started;
  bool running = true;
  std::optional<std::chrono::system_clock::time_point> ended;
  std::optional<int> exit_code;  // it exited
  std::optional<int> signal;     // a signal ended it
  // "exit", "signal", or "session_end" (ended with its session: no status is known).
  std::string ended_by;
  uint64_t output_bytes = 0;    // written so far, all streams (the offset of the next byte)
  uint16_t rows = 0, cols = 0;  // a pty's size
};

enum class ProcessError {
  kNotFound,      // no such process in this session (or forgotten: too many ended since)
  kFull,          // the session has as many processes running as it may
  kNotRunning,    // it has ended
  kNoStdin,       // started without stdin, stdin closed, or a pty (close-stdin)
  kNotPty,        // resize of a process on pipes
  kInvalid,       // a malformed request (a size, an env name, a signal, too large)
  kStartFailed,   // the sandbox could not start it (no such program, a bad cwd, ...): says why
  kSessionEnded,  // the session's sandbox has ended (its kernel ended, or it closed)
  kInternal,
};

struct ProcessFailure {
  ProcessError kind;
  std::string message;
};
template <typename T>
using ProcessExpected = std::expected<T, ProcessFailure>;

struct ProcessLimits {
  size_t max_running = 32;           // per session
  size_t max_kept = 64;              // ended processes remembered per session, the oldest forgotten first
  size_t stream_bytes = 1 << 20;     // output kept per process and stream, the oldest dropped first
  size_t session_bytes = 32 << 20;   // output kept per session, ended processes' dropped first
  size_t max_write_bytes = 1 << 20;  // one write to stdin
};

// A signal by name ("SIGTERM", "TERM", any case) or number ("15"); nullopt for anything else.
std::optional<int> SignalNumber(std::string_view name);

class SessionProcesses : public std::enable_shared_from_this<SessionProcesses> {
 public:
  explicit SessionProcesses(ProcessLimits limits = {}) : limits_(limits) {}
  ~SessionProcesses();
  SessionProcesses(const SessionProcesses&) = delete;
  SessionProcesses& operator=(const SessionProcesses&) = delete;

  // The session's sandbox from now on (its child's init; null: none). Every process of the
  // one before has ended with it.
  void Bind(std::shared_ptr<jail::InitLink> link, ProcessPoller* poller);
  // A sandbox is bound and its init still answers.
  bool ready();
  // Processes running or starting now (a key's max_processes counts them).
  size_t running();

  class Follower;
  // With `follower`, the process is followed from its first byte (Follow): nothing it writes
  // before the caller reads is lost.
  ProcessExpected<ProcessInfo> Start(const ProcessSpec& spec, std::unique_ptr<Follower>* follower = nullptr);
  std::vector<ProcessInfo> List();
  ProcessExpected<ProcessInfo> Get(int32_t pid);
  // Waits (up to a few seconds) while the pipe or pty is full; kNoStdin once the process
  // closed its end.
  ProcessExpected<void> Write(int32_t pid, std::string_view data);
  ProcessExpected<void> CloseStdin(int32_t pid);
  ProcessExpected<void> Signal(int32_t pid, int signal);
  ProcessExpected<void> Resize(int32_t pid, uint16_t rows, uint16_t cols);

  struct Output {
    OutputRead read;
    ProcessInfo info;  // as it was when read: `running` false means no more output follows
  };
  // A reader that must not miss output (E2B's process streams carry no offsets to say what was
  // dropped): while it is attached, what it has not read yet is kept past the per-stream cap,
  // and once a stream is over the cap the process's output is no longer read (its writes
  // block, as on a pipe to a slow reader) until the reader moves on. Detached when destroyed.
  ProcessExpected<std::unique_ptr<Follower>> Follow(int32_t pid, uint64_t from);
  // What the output holds from `from` (at most `max_bytes`). With `wait_until`, first waits
  // until it holds something past `from`, the process has ended, `cancel` is set, or the time.
  // A `follower` of this process has then read up to the answer's next_offset.
  ProcessExpected<Output> Read(int32_t pid, uint64_t from, size_t max_bytes,
                               std::optional<std::chrono::steady_clock::time_point> wait_until = std::nullopt,
                               const std::atomic<bool>* cancel = nullptr, Follower* follower = nullptr);
  // Waits until the process ended (or `until`, or `cancel`); its info then.
  ProcessExpected<ProcessInfo> Wait(int32_t pid, std::chrono::steady_clock::time_point until,
                                    const std::atomic<bool>* cancel = nullptr);

 private:
  struct Record;
  struct Pending;
  using Lock = std::unique_lock<std::mutex>;

  void Dispatch(const jail::InitLink* link, std::vector<jail::InitEvent> events, bool closed);
  void Started(const jail::InitLink* link, jail::InitEvent& e, std::vector<ProcessPoller::Token>& drop);
  void Ended(Record& r, std::optional<int> status);
  void EndAllLocked(std::vector<ProcessPoller::Token>& drop);
  void Forget(std::vector<ProcessPoller::Token>& drop);
  void Appended(Record& r, OutputStream stream, std::string_view data);
  ProcessInfo InfoOf(const Record& r) const;
  // Output its followers have read is dropped down to the cap; its pipes are read again once
  // no stream is over it.
  void Advance(Record& r);
  void Unfollow(Follower& follower);
  std::shared_ptr<Record> Find(int32_t pid);
  void Unwatch(const std::vector<ProcessPoller::Token>& tokens);

  const ProcessLimits limits_;
  std::mutex mu_;
  std::condition_variable changed_;  // output, an end, a start answered, a new binding
  std::shared_ptr<jail::InitLink> link_;
  ProcessPoller* poller_ = nullptr;
  ProcessPoller::Token link_token_ = 0;
  uint32_t next_id_ = 0;
  std::map<uint32_t, std::shared_ptr<Pending>> pending_;  // starts waiting for their answer
  std::map<int32_t, std::shared_ptr<Record>> records_;    // by pid: the latest with it
  size_t buffered_ = 0;
  uint64_t next_follower_ = 0;
};

class SessionProcesses::Follower {
 public:
  ~Follower();
  Follower(const Follower&) = delete;
  Follower& operator=(const Follower&) = delete;

 private:
  friend class SessionProcesses;
  Follower(std::weak_ptr<SessionProcesses> table, std::weak_ptr<Record> record, uint64_t id)
      : table_(std::move(table)), record_(std::move(record)), id_(id) {}
  std::weak_ptr<SessionProcesses> table_;
  std::weak_ptr<Record> record_;
  uint64_t id_;
};

}  // namespace execbox::engine
