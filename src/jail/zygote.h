// Host side of warm execution: a long-lived jail whose process is a zygote worker, and the
// isolated children it forks ahead of demand (see warm_child.h for the child side).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "base/unique_fd.h"
#include "jail/cgroup.h"
#include "jail/sandbox.h"

namespace execbox::jail {

struct Launched;

struct WarmChildOptions {
  Limits limits;
  FileCollection collect;
  bool session = false;  // one process serves many executions, in order
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
  Expected<Outcome> Execute(std::string_view request, const std::string& stdin_data, const Limits& limits,
                            const RunHooks& hooks);
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

 private:
  friend class Zygote;
  WarmChild() = default;
  WarmChildOptions options_;
  pid_t keeper_ = -1;  // host pid of the keeper
  UniqueFd keeper_pidfd_;
  UniqueFd control_, channel_;
  std::unique_ptr<Cgroup> cgroup_;
  Layers layers_;
  Enforcement enforcement_;
  bool alive_ = false;
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
