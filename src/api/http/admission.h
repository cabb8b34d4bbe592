// Admission control: a bounded number of executions run at once and a bounded number wait;
// past both a request is refused at once with 429 and Retry-After, never dropped later.
// Per key: a token-bucket rate and a cap on its executions running or waiting.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <expected>
#include <map>
#include <optional>
#include <mutex>
#include <set>
#include <string>

#include "api/http/config.h"
#include "api/http/problem.h"

namespace execbox::api {

class Admission;

// A running slot; released when destroyed.
class Ticket {
 public:
  Ticket() = default;
  Ticket(Ticket&& other) noexcept;
  Ticket& operator=(Ticket&& other) noexcept;
  ~Ticket();

 private:
  friend class Admission;
  Ticket(Admission* admission, std::string key_id) : admission_(admission), key_id_(std::move(key_id)) {}
  Admission* admission_ = nullptr;
  std::string key_id_;
  std::optional<uint64_t> waiting_seq_;  // set while queued, not yet running
};

class Admission {
 public:
  Admission(size_t max_running, size_t max_queue);
  // Checks the key's rate and concurrency, then takes a running slot, waiting in the queue
  // when all are taken. 429 when the key is over its rate or concurrency or the queue is full;
  // 503 when Close() was called or `cancel` was set while waiting.
  std::expected<Ticket, Problem> Enter(const ApiKey& key, const std::atomic<bool>* cancel = nullptr);
  // Enter in two steps, so that a refusal is decided on the caller's thread, at once: Reserve
  // never blocks (a running ticket, a queued one, or the 429); Wait turns a queued ticket into a
  // running one (503 on Close or cancel; the ticket then leaves the queue when destroyed).
  std::expected<Ticket, Problem> Reserve(const ApiKey& key);
  std::expected<void, Problem> Wait(Ticket& ticket, const std::atomic<bool>* cancel);
  // Wakes every waiter with 503 and refuses new entries (graceful shutdown).
  void Close();

  size_t running() const;
  size_t queued() const;

 private:
  friend class Ticket;
  void Leave(const std::string& key_id, std::optional<uint64_t> waiting_seq);
  struct Bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point refilled;
    size_t active = 0;  // running or waiting
  };
  mutable std::mutex mu_;
  std::condition_variable freed_;
  size_t max_running_, max_queue_;
  size_t running_ = 0, queued_ = 0;
  bool closed_ = false;
  std::map<std::string, Bucket> keys_;
  // Waiters in arrival order (sequence numbers): a freed slot goes to the oldest, and a new
  // request never overtakes the queue.
  std::set<uint64_t> waiting_;
  uint64_t next_seq_ = 0;
};

}  // namespace execbox::api
