// Host side of warm execution: a long-lived jail whose process is a zygote worker, and the
// isolated children it forks ahead of demand (see zygote_loop.h for the child side).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <expected>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "base/unique_fd.h"
#include "jail/cgroup.h"
#include "jail/done_check.h"
#include "jail/init_link.h"
#include "jail/sandbox.h"

namespace execbox::jail {

struct Launched;

// Why a session file could not be read or written (WarmChild::GetFile, PutFile).
struct FileFailure {
  enum class Kind {
    kNotFound,  // missing, not a regular file, or a symbolic link on the path
    kTooLarge,  // past the most bytes asked for; for a write, the work dir is full
    kRefused,   // anything else the zygote refused (a directory at the path, a parent that is
                // a file or a symbolic link, permissions the code changed, ...)
    kEnded,     // the child's code process had ended before the request: its work dir is gone
    kBroken,    // the exchange with the zygote failed; the child is killed
  };
  Kind kind;
  std::string message;
};
template <typename T>
using FileExpected = std::expected<T, FileFailure>;

// Where the CPU of children went, added up by their owner (a pool) as each child ends; read
// from each child's own cgroup, so the kernel's work for it (faults, its exit) is in it too.
struct ChildCpuTally {
  std::atomic<uint64_t> children{0};      // ended after at least one execution
  std::atomic<uint64_t> setup_ns{0};      // from its cgroup's start to the first request: isolation, warm-up
  std::atomic<uint64_t> execution_ns{0};  // the executions (and, for a session, what ran between them)
  std::atomic<uint64_t> exit_ns{0};       // after the last execution until the group was empty: the exit
};

struct WarmChildOptions {
  Limits limits;
  FileCollection collect;
  bool session = false;                      // one process serves many executions, in order
  std::shared_ptr<ChildCpuTally> cpu_tally;  // optional: where the child adds its CPU as it ends
  // A session's network through the host (engine/egress_proxy.h): the connector (the caller's,
  // open until Spawn returns; the child gets a copy) and the port of the relay in the sandbox.
  // -1: the session has no network.
  int egress_fd = -1;
  uint16_t egress_port = 0;
  // True for a child prepared ahead of demand: it runs a throwaway execution before its first
  // request, paying its copy-on-write faults then. False for one a request waits for, on whose
  // path that would only add work (WarmChildSpec::prewarm).
  bool prewarm = true;
};

// One isolated child, locked down and waiting for code. Not thread-safe: one execution at a time.
class WarmChild {
 public:
  ~WarmChild();  // kills whatever is left of the tree and removes its cgroup
  WarmChild(const WarmChild&) = delete;
  WarmChild& operator=(const WarmChild&) = delete;

  // Hands `request` (the agent's JSON) over with fresh stdin/stdout/stderr/report pipes and
  // watches it under `limits` like a cold run. `limits` may differ from the spawn-time ones
  // only in wall time, CPU time, memory, processes and output (the rest is fixed at spawn).
  // A one-shot child is used up after this; a session child lives on unless it died.
  // `files` kNote (a session's snapshot or restore, whose files are the host's doing): the work
  // dir is noted as it is and no file comes back, now or from the next execution unless it
  // changes them.
  enum class FilesAfter { kSend, kNote };
  Expected<Outcome> Execute(std::string_view request, const std::string& stdin_data, const Limits& limits,
                            const RunHooks& hooks, FilesAfter files = FilesAfter::kSend);
  // A session child, between executions: the zygote (trusted; it holds the child's work dir
  // by descriptor from outside the child's mount namespace) writes or reads one file of it.
  // `path` is relative to the work dir and plain (ValidateRelativeName). Nothing is followed
  // that the code planted: a symbolic link at any component, a FIFO, a device; a write
  // replaces what is at the path (a file, a symbolic link) rather than writing through it. The
  // code's state is untouched, and an uploaded file is not reported as written by the next
  // execution unless that changes it.
  // Any failure but kEnded and kBroken leaves the child alive; those two mark it dead.
  FileExpected<void> PutFile(const std::string& path, std::string_view content);
  FileExpected<std::string> GetFile(const std::string& path, uint64_t max_bytes);
  // False once the code's process has ended (or was never usable).
  bool alive() const { return alive_; }
  // Checks the child is still there (its sockets not hung up), without waiting; false also
  // marks it dead. For a pool about to hand it out.
  bool Probe();
  // Private and proportional memory of the code's process (from /proc/<pid>/smaps_rollup),
  // 0 when unknown. For benchmarks and the session list.
  struct Memory {
    uint64_t private_bytes = 0, pss_bytes = 0;
  };
  Memory ReadMemory() const;
  // A session child's init (session_init.h): starts and signals the session's processes, and
  // reports their ends and the kernel's. Null for a one-shot child. Shared: the owner's poller
  // reads it, and the session's processes live as long as this child does.
  std::shared_ptr<InitLink> init() const { return init_; }
  // A session child whose kernel ended while its init lives (Execute does this itself after a
  // stop; a caller whose Probe found the kernel gone between executions asks): kills the
  // kernel if it still runs, waits for the init's report of its end, and has the init fork a
  // new one on a fresh channel. The sandbox, its files and processes stay; the code's state
  // does not. Alive again on success.
  Status RestartKernel();

 private:
  friend class Zygote;
  WarmChild() = default;
  // Reads the zygote's reply to a file request: the content (a read) and the kFileResult.
  FileExpected<std::string> FileReply(const std::string& path, bool reading, uint64_t max_bytes,
                                      std::chrono::steady_clock::time_point deadline);
  FileFailure Broken(std::string message);
  WarmChildOptions options_;
  pid_t pid_ = -1;  // host pid of the child: the code's process, or a session's init
  UniqueFd pidfd_;
  pid_t kernel_pid_ = -1;  // host pid of the code's process (a session's kernel: the init's child)
  UniqueFd kernel_pidfd_;  // a session's kernel
  std::shared_ptr<InitLink> init_;
  UniqueFd control_, channel_;
  CodeProcess code_;  // what confirms a done marker (done_check.h)
  std::unique_ptr<Cgroup> cgroup_;
  Layers layers_;
  Enforcement enforcement_;
  bool alive_ = false;
  // CPU of the child's cgroup when its first execution began and when its last one ended.
  uint64_t cpu_at_first_request_ns_ = 0, cpu_at_last_end_ns_ = 0;
  bool executed_ = false;
  uint32_t cpu_weight_ = kDefaultCpuWeight;  // what the group was last given (a new group has the default)
};

class Zygote {
 public:
  // Starts `policy` (which must have zygote set) and waits until the worker says it is warm.
  static Expected<std::unique_ptr<Zygote>> Start(const Policy& policy, std::chrono::milliseconds timeout);
  ~Zygote();  // ends the worker's jail: every child it forked dies with it
  Zygote(const Zygote&) = delete;
  Zygote& operator=(const Zygote&) = delete;

  // Forks and isolates one child; returns once it is locked down and waiting. Thread-safe.
  Expected<std::unique_ptr<WarmChild>> Spawn(const WarmChildOptions& options);
  // False once the worker has died or failed to fork.
  bool Alive();
  // The worker's own cgroup, read once: its CPU so far (the zygote's forks, file collections
  // and reaping; its children run in cgroups of their own from their first message on) and
  // the most memory it has held (the warm interpreter). Zeros when unknown.
  CgroupUsage Usage();
  // What the worker said when it became warm (preload failures), and its last log lines.
  std::string ready_message() const { return ready_message_; }
  std::string RecentLog() const;

 private:
  Zygote() = default;
  void DrainLogs();
  std::unique_ptr<Launched> launched_;
  std::mutex command_mu_;
  std::string ready_message_;
  mutable std::mutex log_mu_;
  std::string log_;
  std::thread log_thread_;
  UniqueFd log_stop_read_, log_stop_write_;
  bool dead_ = false;
};

}  // namespace execbox::jail
