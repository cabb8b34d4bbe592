// The warm pool: N zygote workers, each with children forked and isolated ahead of demand.
// A background thread keeps the workers alive (a dead or failing one is replaced) and the
// prepared children topped up; a request takes a prepared child, or forks one on the spot
// from a warm worker when none matches, and never waits for a cold start while one is free.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "jail/zygote.h"
#include "runtime/worker.h"

namespace execbox::engine {

struct PoolOptions {
  size_t workers = 0;              // 0: one per two cores, at least one
  size_t prepared_per_worker = 2;  // children kept forked and locked down, per worker
  // Session children kept ready too, per worker: a session's creation, fork, undo or restore
  // then takes one instead of forking on demand (and its copy paths are already warm).
  size_t prepared_sessions_per_worker = 1;
  runtime::WorkerOptions worker;
  jail::Limits limits;  // prepared children are made for these (a request may change the limit
                        // schema's per-execution rows; any other difference forks a child anew)
  jail::FileCollection collect{.enabled = true};
  std::chrono::milliseconds worker_start_timeout{120'000};
};

struct PoolStats {
  size_t warm_workers = 0;
  size_t prepared = 0;           // one-shot children
  size_t prepared_sessions = 0;  // session children
  uint64_t workers_started = 0;
  uint64_t workers_replaced = 0;
  uint64_t spawned_on_demand = 0;
  // CPU, in ns: the live workers' zygotes (forks, collections, reaping; a replaced worker's is
  // gone), and the children that have ended after an execution, by phase (ChildCpuTally).
  uint64_t zygote_cpu_ns = 0;
  uint64_t children_ended = 0;
  uint64_t child_setup_ns = 0, child_execution_ns = 0, child_exit_ns = 0;
};

class Pool {
 public:
  // Starts the workers; returns once at least one is warm (an error if none could be).
  static Expected<std::unique_ptr<Pool>> Start(const PoolOptions& options);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // A child locked down and waiting, for an execution under `limits` (or a session).
  // `egress_fd` (a session's, else -1): the connector to the session's network proxy
  // (egress_proxy.h); such a child is always forked on demand, with its relay on
  // runtime::kEgressPort.
  Expected<std::unique_ptr<jail::WarmChild>> Acquire(const jail::Limits& limits, bool session, int egress_fd = -1);
  // Ends a used child in the background (kill, reap, remove its cgroup): a request need not
  // wait for an 85 MB process to be torn down.
  void Retire(std::unique_ptr<jail::WarmChild> child);
  PoolStats Stats();
  const PoolOptions& options() const { return options_; }

 private:
  explicit Pool(PoolOptions options) : options_(std::move(options)) {}
  struct Worker {
    std::unique_ptr<jail::Zygote> zygote;
    std::deque<std::unique_ptr<jail::WarmChild>> prepared;
    std::deque<std::unique_ptr<jail::WarmChild>> prepared_sessions;
    uint32_t failures = 0;
  };
  void Refill();
  bool Matches(const jail::Limits& limits) const;
  jail::WarmChildOptions ChildOptions(const jail::Limits& limits, bool session) const;
  // A warm zygote to fork from (round robin); null when none is alive.
  jail::Zygote* PickWorker();

  PoolOptions options_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::vector<std::shared_ptr<Worker>> workers_;
  size_t next_ = 0;
  bool stopping_ = false;
  PoolStats stats_;
  std::shared_ptr<jail::ChildCpuTally> cpu_tally_ = std::make_shared<jail::ChildCpuTally>();
  std::thread refill_;
  std::deque<std::unique_ptr<jail::WarmChild>> retiring_;
  std::condition_variable retire_wake_;
  std::thread retire_;
};

}  // namespace execbox::engine
