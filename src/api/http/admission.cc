#include "api/http/admission.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace execbox::api {

namespace {

Problem TooMany(std::string type, std::string title, std::string detail, long retry_after) {
  return Problem{.status = 429,
                 .type = std::move(type),
                 .title = std::move(title),
                 .detail = std::move(detail),
                 .headers = {{"Retry-After", std::to_string(std::max(retry_after, 1L))}}};
}

Problem ShuttingDown() {
  return Problem{.status = 503,
                 .type = "shutting-down",
                 .title = "Shutting down",
                 .detail = "the server is shutting down and accepts no new executions"};
}

}  // namespace

Ticket::Ticket(Ticket&& other) noexcept
    : admission_(std::exchange(other.admission_, nullptr)),
      key_id_(std::move(other.key_id_)),
      waiting_seq_(std::exchange(other.waiting_seq_, std::nullopt)) {}

Ticket& Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    if (admission_ != nullptr) admission_->Leave(key_id_, waiting_seq_);
    admission_ = std::exchange(other.admission_, nullptr);
    key_id_ = std::move(other.key_id_);
    waiting_seq_ = std::exchange(other.waiting_seq_, std::nullopt);
  }
  return *this;
}

Ticket::~Ticket() {
  if (admission_ != nullptr) admission_->Leave(key_id_, waiting_seq_);
}

Admission::Admission(size_t max_running, size_t max_queue)
    : max_running_(std::max<size_t>(max_running, 1)), max_queue_(max_queue) {}

std::expected<Ticket, Problem> Admission::Reserve(const ApiKey& key) {
  std::lock_guard lock(mu_);
  if (closed_) return std::unexpected(ShuttingDown());

  // Rate: a token bucket per key id, full on first use. A rate of 0 or less means no limit.
  // The token is taken only when the request is admitted: a refusal costs the key nothing.
  const auto now = std::chrono::steady_clock::now();
  const bool fresh = keys_.find(key.id) == keys_.end();
  Bucket& bucket = keys_[key.id];
  if (key.rate_per_second > 0) {
    const double burst = std::max(key.burst, 1.0);
    if (fresh) {
      bucket.tokens = burst;
    } else {
      const double elapsed = std::chrono::duration<double>(now - bucket.refilled).count();
      bucket.tokens = std::min(burst, bucket.tokens + elapsed * key.rate_per_second);
    }
    bucket.refilled = now;
    if (bucket.tokens < 1) {
      const double wait = (1 - bucket.tokens) / key.rate_per_second;
      const auto retry = static_cast<long>(std::min(std::ceil(wait), 86400.0));
      return std::unexpected(TooMany("rate-limited", "Rate limit exceeded",
                                     "key '" + key.id + "' is over its rate of " +
                                         std::to_string(key.rate_per_second) + " requests per second",
                                     retry));
    }
  }

  // This key's executions running or waiting (0 is treated as 1).
  const size_t max_concurrent = std::max<size_t>(key.max_concurrent, 1);
  if (bucket.active >= max_concurrent) {
    return std::unexpected(TooMany("key-concurrency", "Too many concurrent executions",
                                   "key '" + key.id + "' already has " + std::to_string(bucket.active) +
                                       " executions running or queued (its limit is " +
                                       std::to_string(max_concurrent) + ")",
                                   1));
  }

  // A free slot with nobody waiting: run now.
  const bool run_now = running_ < max_running_ && waiting_.empty();
  if (!run_now && queued_ >= max_queue_) {
    return std::unexpected(TooMany("queue-full", "Server busy",
                                   std::to_string(running_) + " executions are running and " +
                                       std::to_string(queued_) + " are queued (the limits); retry later",
                                   1));
  }
  if (key.rate_per_second > 0) bucket.tokens -= 1;
  ++bucket.active;
  if (run_now) {
    ++running_;
    return Ticket(this, key.id);
  }
  Ticket ticket(this, key.id);
  ticket.waiting_seq_ = next_seq_++;
  waiting_.insert(*ticket.waiting_seq_);
  ++queued_;
  return ticket;
}

std::expected<void, Problem> Admission::Wait(Ticket& ticket, const std::atomic<bool>* cancel) {
  if (!ticket.waiting_seq_) return {};
  std::unique_lock lock(mu_);
  const uint64_t seq = *ticket.waiting_seq_;
  while (true) {
    if (closed_) return std::unexpected(ShuttingDown());  // the ticket's destructor dequeues it
    if (cancel != nullptr && cancel->load()) {
      return std::unexpected(Problem{.status = 503,
                                     .type = "cancelled",
                                     .title = "Cancelled",
                                     .detail = "the request was cancelled while waiting for a slot"});
    }
    if (running_ < max_running_ && *waiting_.begin() == seq) break;
    freed_.wait_for(lock, std::chrono::milliseconds(100));
  }
  waiting_.erase(seq);
  ticket.waiting_seq_.reset();
  --queued_;
  ++running_;
  // More than one slot may have been freed: let the next waiter look too.
  freed_.notify_all();
  return {};
}

std::expected<Ticket, Problem> Admission::Enter(const ApiKey& key, const std::atomic<bool>* cancel) {
  auto ticket = Reserve(key);
  if (!ticket) return ticket;
  if (auto waited = Wait(*ticket, cancel); !waited) return std::unexpected(waited.error());
  return ticket;
}

void Admission::Close() {
  {
    std::lock_guard lock(mu_);
    closed_ = true;
  }
  freed_.notify_all();
}

size_t Admission::running() const {
  std::lock_guard lock(mu_);
  return running_;
}

size_t Admission::queued() const {
  std::lock_guard lock(mu_);
  return queued_;
}

void Admission::Leave(const std::string& key_id, std::optional<uint64_t> waiting_seq) {
  {
    std::lock_guard lock(mu_);
    if (waiting_seq) {
      waiting_.erase(*waiting_seq);  // still queued: it never ran
      if (queued_ > 0) --queued_;
    } else if (running_ > 0) {
      --running_;
    }
    auto it = keys_.find(key_id);
    if (it != keys_.end() && it->second.active > 0) --it->second.active;
  }
  freed_.notify_all();
}

}  // namespace execbox::api
