// Admission control: a bounded number of executions run at once and a bounded number wait;
// past both a request is refused at once (retry later), never dropped later. Per caller: a
// token-bucket rate, a cap on its executions running or waiting and one on those waiting. A
// freed slot goes to the callers in turn (fair_queue.h), each caller's oldest first. Only the
// gate uses it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "engine/fair_queue.h"
#include "engine/key_caps.h"
#include "engine/refusal.h"

namespace execbox::engine {

// Who asks: an API key over HTTP, or the local user of the CLI and of MCP over stdio.
struct Caller {
  std::string id;              // shown in logs, metrics and the audit log; never a secret
  size_t max_concurrent = 8;   // executions of this caller running or queued at once
  double rate_per_second = 0;  // sustained executions per second (token bucket); <= 0: no limit
  double burst = 40;           // ... with this many at once
  KeyCaps caps;                // unset ones: the server's defaults (the gate fills them in)
};

class Admission;

// A slot, running or queued; released when destroyed.
class Ticket {
 public:
  Ticket() = default;
  Ticket(Ticket&& other) noexcept;
  Ticket& operator=(Ticket&& other) noexcept;
  ~Ticket();
  bool queued() const { return waiting_seq_.has_value(); }
  // The caller had nothing else running or queued when this was reserved: a light caller, for
  // whom the pool keeps a prepared child (ExecuteOptions::light).
  bool light() const { return light_; }

 private:
  friend class Admission;
  Ticket(Admission* admission, std::string caller_id)
      : admission_(admission), caller_id_(std::move(caller_id)) {}
  Admission* admission_ = nullptr;
  std::string caller_id_;
  std::optional<uint64_t> waiting_seq_;  // set while queued, not yet running
  bool light_ = false;
  bool overflow_ = false;  // holds the light callers' extra slot, not one of max_running
};

class Admission {
 public:
  // `light_slots`: beyond max_running, this many extra slots run at once for callers with
  // nothing else running or queued, when every slot is taken: a key that floods fills the slots
  // and the queue, and another key's single request still starts at once instead of waiting
  // for one of the flood's executions to end. Bounded, so many light callers queue like the
  // rest; the queue is never served from them.
  Admission(size_t max_running, size_t max_queue, size_t light_slots = 0);
  // Never blocks: a running ticket, a queued one, or the refusal ("rate-limited",
  // "key-concurrency", "key-queue" (caller.caps.max_queued; unset: no cap of its own),
  // "queue-full", "shutting-down"). A refused request takes no rate token.
  Refused<Ticket> Reserve(const Caller& caller);
  // Turns a queued ticket into a running one ("shutting-down" on Close, "cancelled" when
  // `cancel` is set meanwhile; the ticket then leaves the queue when destroyed).
  Refused<void> Wait(Ticket& ticket, const std::atomic<bool>* cancel);
  // Wakes every waiter with "shutting-down" and refuses new entries (graceful shutdown).
  void Close();
  bool closed() const;

  size_t running() const;
  size_t queued() const;
  // The CPU weight of a running ticket's execution (ExecuteOptions::cpu_weight): the default
  // shared by the caller's executions running now, each of n getting 1/n (at least the minimum).
  // So while CPUs are contended a caller gets about as much of them as any other, however many
  // of its executions run. Fixed when asked, as the execution starts.
  uint32_t CpuWeight(const Ticket& ticket) const;
  // Each caller's executions running and queued now (callers with none left out).
  std::map<std::string, KeyUse> Use() const;

 private:
  friend class Ticket;
  void Leave(const std::string& caller_id, std::optional<uint64_t> waiting_seq, bool overflow);
  // Hands free running slots to waiters, in turn (under mu_).
  void Dispatch();
  // A caller's executions running now (granted ones count), of `active` running or waiting (under mu_).
  size_t RunningOf(const std::string& caller_id, size_t active) const;
  struct Bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point refilled;
    size_t active = 0;  // running or waiting
  };
  mutable std::mutex mu_;
  std::condition_variable freed_;
  size_t max_running_, max_queue_, light_slots_;
  size_t running_ = 0, queued_ = 0;
  size_t overflow_running_ = 0;  // in the light callers' slots
  bool closed_ = false;
  std::map<std::string, Bucket> callers_;
  // Waiters by caller, served in turn; a new request never overtakes the queue. A waiter given a
  // slot moves to granted_ (counted in running_) until its Wait sees it.
  FairQueue waiting_;
  std::set<uint64_t> granted_;
  uint64_t next_seq_ = 0;
};

// The refusal every front end gives while the server is shutting down.
Refusal ShuttingDown();

}  // namespace execbox::engine
