#include "engine/admission.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "jail/cgroup.h"

namespace execbox::engine {

namespace {

Refusal TooMany(RefusalReason reason, std::string detail, long retry_after) {
  Refusal refusal = MakeRefusal(reason, std::move(detail));
  refusal.retry_after_seconds = static_cast<int>(std::max(retry_after, 1L));
  return refusal;
}

std::string Rate(double per_second) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", per_second);
  return buf;
}

}  // namespace

Refusal ShuttingDown() {
  Refusal refusal =
      MakeRefusal(RefusalReason::kShuttingDown, "the server is shutting down and accepts no new executions");
  refusal.retry_after_seconds = 5;
  return refusal;
}

Ticket::Ticket(Ticket&& other) noexcept
    : admission_(std::exchange(other.admission_, nullptr)),
      caller_id_(std::move(other.caller_id_)),
      waiting_seq_(std::exchange(other.waiting_seq_, std::nullopt)),
      light_(other.light_),
      overflow_(std::exchange(other.overflow_, false)) {}

Ticket& Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    if (admission_ != nullptr) admission_->Leave(caller_id_, waiting_seq_, overflow_);
    admission_ = std::exchange(other.admission_, nullptr);
    caller_id_ = std::move(other.caller_id_);
    waiting_seq_ = std::exchange(other.waiting_seq_, std::nullopt);
    light_ = other.light_;
    overflow_ = std::exchange(other.overflow_, false);
  }
  return *this;
}

Ticket::~Ticket() {
  if (admission_ != nullptr) admission_->Leave(caller_id_, waiting_seq_, overflow_);
}

Admission::Admission(size_t max_running, size_t max_queue, size_t light_slots)
    : max_running_(std::max<size_t>(max_running, 1)), max_queue_(max_queue), light_slots_(light_slots) {}

Refused<Ticket> Admission::Reserve(const Caller& caller) {
  std::lock_guard lock(mu_);
  if (closed_) return std::unexpected(ShuttingDown());

  // Rate: a token bucket per caller, full on first use. A rate of 0 or less means no limit.
  // The token is taken only when the request is admitted: a refusal costs the caller nothing.
  const auto now = std::chrono::steady_clock::now();
  const bool fresh = callers_.find(caller.id) == callers_.end();
  Bucket& bucket = callers_[caller.id];
  if (caller.rate_per_second > 0) {
    const double burst = std::max(caller.burst, 1.0);
    if (fresh) {
      bucket.tokens = burst;
    } else {
      const double elapsed = std::chrono::duration<double>(now - bucket.refilled).count();
      bucket.tokens = std::min(burst, bucket.tokens + elapsed * caller.rate_per_second);
    }
    bucket.refilled = now;
    if (bucket.tokens < 1) {
      const double wait = (1 - bucket.tokens) / caller.rate_per_second;
      const auto retry = static_cast<long>(std::min(std::ceil(wait), 86400.0));
      return std::unexpected(TooMany(RefusalReason::kRateLimited,
                                     "caller '" + caller.id + "' is over its rate of " +
                                         Rate(caller.rate_per_second) + " executions per second",
                                     retry));
    }
  }

  // This caller's executions running or waiting (0 is treated as 1).
  const size_t max_concurrent = std::max<size_t>(caller.max_concurrent, 1);
  if (bucket.active >= max_concurrent) {
    Refusal refusal =
        TooMany(RefusalReason::kKeyConcurrency,
                "caller '" + caller.id + "' already has " + std::to_string(bucket.active) +
                    " executions running or queued (its limit is " + std::to_string(max_concurrent) + ")",
                1);
    refusal.extra = {
        {"cap", "max_concurrent"}, {"key", caller.id}, {"limit", max_concurrent}, {"in_use", bucket.active}};
    return std::unexpected(std::move(refusal));
  }

  // A free slot with nobody waiting: run now. Else a caller with nothing running or queued may
  // take a light caller's slot, if one is free.
  const bool light = bucket.active == 0;
  const bool overflow =
      !(running_ < max_running_ && waiting_.empty()) && light && overflow_running_ < light_slots_;
  const bool run_now = (running_ < max_running_ && waiting_.empty()) || overflow;
  if (!run_now && caller.caps.max_queued && waiting_.size(caller.id) >= *caller.caps.max_queued) {
    const size_t mine = waiting_.size(caller.id);
    return std::unexpected(OverCap(RefusalReason::kKeyQueue, caller.id, "max_queued", *caller.caps.max_queued,
                                   mine, "executions queued"));
  }
  if (!run_now && queued_ >= max_queue_) {
    return std::unexpected(TooMany(RefusalReason::kQueueFull,
                                   std::to_string(running_) + " executions are running and " +
                                       std::to_string(queued_) + " are queued (the limits); retry later",
                                   1));
  }
  if (caller.rate_per_second > 0) bucket.tokens -= 1;
  ++bucket.active;
  if (run_now) {
    ++(overflow ? overflow_running_ : running_);
    Ticket ticket(this, caller.id);
    ticket.light_ = light;
    ticket.overflow_ = overflow;
    return ticket;
  }
  Ticket ticket(this, caller.id);
  ticket.light_ = light;
  ticket.waiting_seq_ = next_seq_++;
  waiting_.Push(caller.id, *ticket.waiting_seq_);
  ++queued_;
  return ticket;
}

Refused<void> Admission::Wait(Ticket& ticket, const std::atomic<bool>* cancel) {
  if (!ticket.waiting_seq_) return {};
  std::unique_lock lock(mu_);
  const uint64_t seq = *ticket.waiting_seq_;
  while (true) {
    // Given a slot by Dispatch (already counted as running): run.
    if (granted_.erase(seq) > 0) break;
    if (closed_) return std::unexpected(ShuttingDown());  // the ticket's destructor dequeues it
    if (cancel != nullptr && cancel->load()) {
      return Refuse(RefusalReason::kCancelled, "the request was cancelled while waiting for a slot");
    }
    freed_.wait_for(lock, std::chrono::milliseconds(100));
  }
  ticket.waiting_seq_.reset();
  return {};
}

void Admission::Dispatch() {
  if (closed_) return;  // the queued are told "shutting-down", not given slots
  bool granted = false;
  while (running_ < max_running_) {
    auto next = waiting_.Pop();
    if (!next) break;
    granted_.insert(next->second);
    --queued_;
    ++running_;
    granted = true;
  }
  if (granted) freed_.notify_all();
}

void Admission::Close() {
  {
    std::lock_guard lock(mu_);
    closed_ = true;
  }
  freed_.notify_all();
}

bool Admission::closed() const {
  std::lock_guard lock(mu_);
  return closed_;
}

size_t Admission::running() const {
  std::lock_guard lock(mu_);
  return running_ + overflow_running_;
}

size_t Admission::queued() const {
  std::lock_guard lock(mu_);
  return queued_;
}

size_t Admission::RunningOf(const std::string& caller_id, size_t active) const {
  return active - std::min(waiting_.size(caller_id), active);
}

uint32_t Admission::CpuWeight(const Ticket& ticket) const {
  std::lock_guard lock(mu_);
  auto it = callers_.find(ticket.caller_id_);
  const size_t running = it == callers_.end() ? 0 : RunningOf(it->first, it->second.active);
  const size_t share = std::max<size_t>(running, 1);
  return static_cast<uint32_t>(std::max<size_t>(jail::kDefaultCpuWeight / share, jail::kMinCpuWeight));
}

std::map<std::string, KeyUse> Admission::Use() const {
  std::lock_guard lock(mu_);
  std::map<std::string, KeyUse> use;
  for (const auto& [id, bucket] : callers_) {
    if (bucket.active == 0) continue;
    use[id] = KeyUse{.running = RunningOf(id, bucket.active), .queued = waiting_.size(id)};
  }
  return use;
}

void Admission::Leave(const std::string& caller_id, std::optional<uint64_t> waiting_seq, bool overflow) {
  std::lock_guard lock(mu_);
  if (overflow) {
    if (overflow_running_ > 0) --overflow_running_;
  } else if (waiting_seq) {
    if (granted_.erase(*waiting_seq) > 0) {  // given a slot it never used
      if (running_ > 0) --running_;
    } else if (waiting_.Remove(caller_id, *waiting_seq) && queued_ > 0) {  // still queued: it never ran
      --queued_;
    }
  } else if (running_ > 0) {
    --running_;
  }
  auto it = callers_.find(caller_id);
  if (it != callers_.end() && it->second.active > 0) --it->second.active;
  Dispatch();
  freed_.notify_all();
}

}  // namespace execbox::engine
