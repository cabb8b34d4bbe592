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
#include <mutex>
#include <set>
#include <string>

#include "api/config.h"
#include "api/problem.h"

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
};

class Admission {
 public:
  Admission(size_t max_running, size_t max_queue);
  // Checks the key's rate and concurrency, then takes a running slot, waiting in the queue
  // when all are taken. 429 when the key is over its rate or concurrency or the queue is full;
  // 503 when Close() was called or `cancel` was set while waiting.
  std::expected<Ticket, Problem> Enter(const ApiKey& key, const std::atomic<bool>* cancel = nullptr);
  // Wakes every waiter with 503 and refuses new entries (graceful shutdown).
  void Close();

  size_t running() const;
  size_t queued() const;

 private:
  friend class Ticket;
  void Leave(const std::string& key_id);
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
