// The warm pool: zygote workers of two kinds, each with children forked and isolated ahead of
// demand. Full workers preload the scientific stack and serve anything (sessions too); lean
// workers preload only the agent and common standard library modules, and serve one-shot code
// that imports nothing else (engine/zygote_choice.h): a fork of a zygote a quarter the size
// costs a fraction of the CPU. A background thread keeps the workers alive (a dead or failing
// one is replaced) and the prepared children topped up, more of them for a kind in use than
// for one idle; a request takes a prepared child, or forks one on the spot from a warm worker
// when none matches, and never waits for a cold start while one is free.
#pragma once

#include <atomic>
#include <chrono>
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

// Which zygote a child comes from.
enum class ZygoteKind { kFull, kLean };
const char* ZygoteKindName(ZygoteKind kind);  // "full", "lean"

struct PoolOptions {
  size_t workers = 0;              // full workers; 0: one per two cores, at least one
  size_t lean_workers = 1;         // lean workers; 0: none (every request goes to a full one)
  size_t prepared_per_worker = 2;  // children kept forked and locked down, per worker in use
  // A worker whose kind no request has asked for in this long keeps one prepared child, not
  // prepared_per_worker: an idle kind's children hold memory and their forks took CPU.
  std::chrono::milliseconds idle_after{60'000};
  // Session children kept ready too, per worker: a session's creation, fork, undo or restore
  // then takes one instead of forking on demand (and its copy paths are already warm).
  size_t prepared_sessions_per_worker = 1;
  // Session requests back to back (an agent forking a session to try alternatives) raise that
  // to the size of the last burst, spread over the full workers, up to this many per worker,
  // until idle_after has passed without such a burst: the next burst then takes prepared
  // children, where otherwise each request after the first forks its child while it waits.
  size_t max_prepared_sessions_per_worker = 8;  // each ~6 MB private (docs/performance.md)
  runtime::WorkerOptions worker;              // the full workers' (the lean ones' derive from it)
  uint64_t lean_memory_bytes = 256ull << 20;  // a lean zygote's own cgroup (~30 MB used)
  jail::Limits limits;  // prepared children are made for these (a request may change the limit
                        // schema's per-execution rows; any other difference forks a child anew)
  jail::FileCollection collect{.enabled = true};
  std::chrono::milliseconds worker_start_timeout{120'000};
};

struct PoolStats {
  size_t warm_workers = 0;       // full workers alive
  size_t lean_workers = 0;       // lean workers alive
  size_t prepared = 0;           // one-shot children of full workers
  size_t lean_prepared = 0;      // one-shot children of lean workers
  size_t prepared_sessions = 0;  // session children (full workers only)
  size_t prepared_sessions_target = 0;  // how many the live full workers aim to hold now
  // How many one-shot children the live workers of each kind aim to hold now (PreparedTarget).
  size_t prepared_target = 0, lean_prepared_target = 0;
  // Children handed out, by the kind of zygote they came from (one-shot and session); a request
  // for a lean child with no lean worker alive gets a full one, counted as full.
  uint64_t served_full = 0, served_lean = 0;
  // The most memory each kind's zygote held (the largest of its live workers), 0 when unknown.
  uint64_t full_zygote_peak_bytes = 0, lean_zygote_peak_bytes = 0;
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
  // runtime::kEgressPort. `kind`: the zygote it should come from (sessions: always full); a
  // lean request falls back to a full worker when no lean one is alive. `light`: the caller has
  // nothing else running (ExecuteOptions::light); others leave the last prepared one-shot child
  // of the kind (kKeptForLight) and fork one on demand, so that under one key's flood another
  // key's single request still finds a child ready.
  static constexpr size_t kKeptForLight = 1;
  Expected<std::unique_ptr<jail::WarmChild>> Acquire(const jail::Limits& limits, bool session,
                                                     int egress_fd = -1, ZygoteKind kind = ZygoteKind::kFull,
                                                     bool light = true);
  // Whether a lean worker is configured (a request routed to one may still get a full child).
  bool has_lean() const { return options_.lean_workers > 0; }
  // Ends a used child in the background (kill, reap, remove its cgroup): a request need not
  // wait for an 85 MB process to be torn down.
  void Retire(std::unique_ptr<jail::WarmChild> child);
  PoolStats Stats();
  const PoolOptions& options() const { return options_; }

 private:
  explicit Pool(PoolOptions options) : options_(std::move(options)) {}
  struct Worker {
    ZygoteKind kind = ZygoteKind::kFull;
    std::unique_ptr<jail::Zygote> zygote;
    std::deque<std::unique_ptr<jail::WarmChild>> prepared;
    std::deque<std::unique_ptr<jail::WarmChild>> prepared_sessions;
    uint32_t failures = 0;
  };
  void Refill();
  bool Matches(const jail::Limits& limits) const;
  jail::WarmChildOptions ChildOptions(const jail::Limits& limits, bool session) const;
  Expected<std::unique_ptr<jail::Zygote>> StartWorker(ZygoteKind kind) const;
  // How many one-shot children a worker of `kind` keeps prepared now. Under mu_.
  size_t PreparedTarget(ZygoteKind kind, std::chrono::steady_clock::time_point now) const;
  // How many session children a full worker keeps prepared now. Under mu_.
  size_t SessionTarget(std::chrono::steady_clock::time_point now) const;

  PoolOptions options_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::vector<std::shared_ptr<Worker>> workers_;
  std::vector<ZygoteKind> slot_kinds_;  // workers_[i]'s kind, fixed at start (full ones first)
  // When a child of each kind (indexed by ZygoteKind) was last asked for (at first: the start).
  std::chrono::steady_clock::time_point last_asked_[2]{};
  // When session children were asked for, oldest first: those of the last idle_after, at most
  // kMaxSessionAsks of them.
  std::deque<std::chrono::steady_clock::time_point> session_asks_;
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
