#include "engine/pool.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "engine/limit_schema.h"
#include "runtime/python_program.h"

namespace execbox::engine {
namespace {

// Worker failures in a row before a worker is replaced rather than retried.
constexpr uint32_t kMaxWorkerFailures = 3;
// Session requests at most this far apart count as one burst (SessionTarget).
constexpr auto kSessionBurstGap = std::chrono::seconds(5);
constexpr size_t kMaxSessionAsks = 256;
constexpr auto kSessionRefillQuiet = std::chrono::milliseconds(300);

}  // namespace

const char* ZygoteKindName(ZygoteKind kind) { return kind == ZygoteKind::kLean ? "lean" : "full"; }

Expected<std::unique_ptr<jail::Zygote>> Pool::StartWorker(ZygoteKind kind) const {
  const runtime::WorkerOptions worker =
      kind == ZygoteKind::kLean ? runtime::LeanWorkerOptions(options_.worker, options_.lean_memory_bytes)
                                : options_.worker;
  auto policy = runtime::MakeWorkerPolicy(worker);
  if (!policy) return std::unexpected(policy.error());
  auto zygote = jail::Zygote::Start(*policy, options_.worker_start_timeout);
  // A worker that could not preload a module (or found threads it cannot fork) still serves;
  // say so, or every child silently lacks what the configuration promised.
  if (zygote && !(*zygote)->ready_message().empty()) {
    std::fprintf(stderr, "execbox: %s warm worker started with warnings: %s\n", ZygoteKindName(kind),
                 (*zygote)->ready_message().c_str());
  }
  return zygote;
}

Expected<std::unique_ptr<Pool>> Pool::Start(const PoolOptions& options) {
  std::unique_ptr<Pool> pool(new Pool(options));
  PoolOptions& o = pool->options_;
  if (o.workers == 0) {
    long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
    o.workers = static_cast<size_t>(std::max(1L, cores / 2));
  }
  if (auto s = jail::ValidateLimits(o.limits); !s) return std::unexpected(s.error());
  // A start can fail for a passing reason on a loaded host (the jail's init dying early): try
  // three times before calling the warm path unavailable. The last error is the one reported.
  // Only the first full worker is waited for; the refill thread starts the rest (lean ones too).
  auto first = pool->StartWorker(ZygoteKind::kFull);
  for (int attempt = 2; !first && attempt <= 3; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    first = pool->StartWorker(ZygoteKind::kFull);
  }
  if (!first) return std::unexpected(Context("starting a warm worker", first.error()));
  auto w = std::make_shared<Worker>();
  w->zygote = std::move(*first);
  pool->workers_.push_back(std::move(w));
  pool->workers_.resize(o.workers + o.lean_workers);
  pool->slot_kinds_.assign(o.workers, ZygoteKind::kFull);
  pool->slot_kinds_.resize(o.workers + o.lean_workers, ZygoteKind::kLean);
  // Both kinds count as in use from the start: the first requests find their children ready.
  pool->last_asked_[0] = pool->last_asked_[1] = std::chrono::steady_clock::now();
  pool->stats_.workers_started = 1;
  pool->refill_ = std::thread([p = pool.get()] { p->Refill(); });
  pool->retire_ = std::thread([p = pool.get()] {
    std::unique_lock lock(p->mu_);
    for (;;) {
      p->retire_wake_.wait(lock, [p] { return p->stopping_ || !p->retiring_.empty(); });
      if (p->retiring_.empty()) return;  // stopping, and nothing left to end
      auto child = std::move(p->retiring_.front());
      p->retiring_.pop_front();
      lock.unlock();
      child.reset();
      lock.lock();
    }
  });
  return pool;
}

Pool::~Pool() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  retire_wake_.notify_all();
  if (refill_.joinable()) refill_.join();
  if (retire_.joinable()) retire_.join();
  workers_.clear();  // children first (each Worker's deque), then the zygote's jail
}

// A prepared child serves a request whose limits it was made with where they cannot change:
// the limit schema's rows fixed at creation, and the limits no request sets (the tmpfs sizes,
// inodes, open files). The per-execution rows are applied to the child for each execution.
bool Pool::Matches(const jail::Limits& l) const {
  const jail::Limits& d = options_.limits;
  for (const auto& spec : LimitTable()) {
    if (spec.scope == LimitScope::kChildCreation && spec.get(l) != spec.get(d)) return false;
  }
  return l.tmp_bytes == d.tmp_bytes && l.shm_bytes == d.shm_bytes && l.inodes == d.inodes &&
         l.open_files == d.open_files;
}

jail::WarmChildOptions Pool::ChildOptions(const jail::Limits& limits, bool session) const {
  return {.limits = limits, .collect = options_.collect, .session = session, .cpu_tally = cpu_tally_};
}

Expected<std::unique_ptr<jail::WarmChild>> Pool::Acquire(const jail::Limits& limits, bool session,
                                                         int egress_fd, ZygoteKind kind, bool light) {
  if (session) kind = ZygoteKind::kFull;  // a session may import anything, later
  std::shared_ptr<Worker> from;
  {
    std::lock_guard lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    last_asked_[static_cast<int>(kind)] = now;
    if (session) {
      session_asks_.push_back(now);
      while (!session_asks_.empty() &&
             (session_asks_.size() > kMaxSessionAsks || now - session_asks_.front() > options_.idle_after)) {
        session_asks_.pop_front();
      }
    }
    auto alive_of = [&](ZygoteKind k) {
      for (auto& w : workers_) {
        if (w && w->zygote && w->kind == k) return true;
      }
      return false;
    };
    if (kind == ZygoteKind::kLean && !alive_of(kind)) kind = ZygoteKind::kFull;
    auto count = [&] { ++(kind == ZygoteKind::kLean ? stats_.served_lean : stats_.served_full); };
    // A prepared child has no network: one with a connector is made for it.
    // The last prepared one-shot children of the kind are the light callers' (kKeptForLight).
    size_t prepared_of_kind = 0;
    for (auto& w : workers_) {
      if (w && w->kind == kind) prepared_of_kind += w->prepared.size();
    }
    const bool may_take = session || light || prepared_of_kind > kKeptForLight;
    if (egress_fd < 0 && may_take && Matches(limits)) {
      for (size_t i = 0; i < workers_.size(); ++i) {
        auto& w = workers_[(next_ + i) % workers_.size()];
        if (!w || w->kind != kind) continue;
        auto& ready = session ? w->prepared_sessions : w->prepared;
        while (!ready.empty()) {
          auto child = std::move(ready.front());
          ready.pop_front();
          if (!child->Probe()) continue;
          next_ = (next_ + i + 1) % workers_.size();
          count();
          // No refill yet: forking the next child now would compete for the CPU with this
          // request. Retire() (when the request is done) or the next timer tick starts it.
          return child;
        }
      }
    }
    ++stats_.spawned_on_demand;
    for (size_t i = 0; i < workers_.size() && !from; ++i) {
      auto& w = workers_[(next_ + i) % workers_.size()];
      if (w && w->zygote && w->kind == kind) from = w;
    }
    if (from) {
      next_ = (next_ + 1) % workers_.size();
      count();
    }
  }
  wake_.notify_all();
  if (!from) return Fail("no warm worker is alive (they are being restarted)");
  jail::WarmChildOptions options = ChildOptions(limits, session);
  options.prewarm = false;  // the request is waiting for it
  if (egress_fd >= 0) {
    options.egress_fd = egress_fd;
    options.egress_port = runtime::kEgressPort;
  }
  auto child = from->zygote->Spawn(options);
  if (!child) {
    std::lock_guard lock(mu_);
    ++from->failures;
  }
  return child;
}

size_t Pool::PreparedTarget(ZygoteKind kind, std::chrono::steady_clock::time_point now) const {
  const auto asked = last_asked_[static_cast<int>(kind)];
  const bool in_use = now - asked < options_.idle_after;
  return in_use ? options_.prepared_per_worker : std::min<size_t>(options_.prepared_per_worker, 1);
}

size_t Pool::SessionTarget(std::chrono::steady_clock::time_point now) const {
  // The largest burst of the last idle_after: a run of requests each within kSessionBurstGap of
  // the one before. A steady trickle (one every minute) stays at the base.
  size_t burst = 0, run = 0;
  std::chrono::steady_clock::time_point previous{};
  for (const auto& asked : session_asks_) {
    if (now - asked > options_.idle_after) continue;
    run = run > 0 && asked - previous <= kSessionBurstGap ? run + 1 : 1;
    burst = std::max(burst, run);
    previous = asked;
  }
  const size_t full = options_.workers;  // the full slots (Start fixed it, at least one)
  const size_t base = options_.prepared_sessions_per_worker;
  const size_t per_worker = full > 0 ? (burst + full - 1) / full : 0;
  return std::max(base, std::min(per_worker, options_.max_prepared_sessions_per_worker));
}

void Pool::Retire(std::unique_ptr<jail::WarmChild> child) {
  {
    std::lock_guard lock(mu_);
    retiring_.push_back(std::move(child));
  }
  retire_wake_.notify_one();
  wake_.notify_all();  // the request is done: time to prepare the next child
}

PoolStats Pool::Stats() {
  std::lock_guard lock(mu_);
  PoolStats s = stats_;
  const auto now = std::chrono::steady_clock::now();
  for (auto& w : workers_) {
    if (!w || !w->zygote) continue;
    const bool lean = w->kind == ZygoteKind::kLean;
    ++(lean ? s.lean_workers : s.warm_workers);
    (lean ? s.lean_prepared_target : s.prepared_target) += PreparedTarget(w->kind, now);
    (lean ? s.lean_prepared : s.prepared) += w->prepared.size();
    s.prepared_sessions += w->prepared_sessions.size();
    if (!lean) s.prepared_sessions_target += SessionTarget(now);
    const jail::CgroupUsage usage = w->zygote->Usage();
    s.zygote_cpu_ns += usage.cpu_ns;
    uint64_t& peak = lean ? s.lean_zygote_peak_bytes : s.full_zygote_peak_bytes;
    peak = std::max(peak, usage.peak_memory_bytes);
  }
  s.children_ended = cpu_tally_->children;
  s.child_setup_ns = cpu_tally_->setup_ns;
  s.child_execution_ns = cpu_tally_->execution_ns;
  s.child_exit_ns = cpu_tally_->exit_ns;
  return s;
}

void Pool::Refill() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    bool worked = false;
    for (size_t i = 0; i < workers_.size() && !stopping_; ++i) {
      std::shared_ptr<Worker> w = workers_[i];
      bool dead = !w || !w->zygote || w->failures >= kMaxWorkerFailures;
      if (!dead) {
        lock.unlock();
        dead = !w->zygote->Alive();
        lock.lock();
      }
      if (dead) {
        // Replace it. Its prepared children die with its jail.
        bool replacing = w != nullptr;
        workers_[i].reset();
        lock.unlock();
        w.reset();
        auto z = StartWorker(slot_kinds_[i]);
        lock.lock();
        if (!z) {
          std::fprintf(stderr, "execbox: %s warm worker failed to start: %s\n",
                       ZygoteKindName(slot_kinds_[i]), z.error().message.c_str());
          wake_.wait_for(lock, std::chrono::seconds(2));
          continue;
        }
        auto fresh = std::make_shared<Worker>();
        fresh->kind = slot_kinds_[i];
        fresh->zygote = std::move(*z);
        workers_[i] = fresh;
        ++stats_.workers_started;
        if (replacing) ++stats_.workers_replaced;
        worked = true;
        continue;
      }
      std::erase_if(w->prepared, [](const auto& c) { return !c->alive(); });
      std::erase_if(w->prepared_sessions, [](const auto& c) { return !c->alive(); });
      // One-shot children first: executions are the common request. Sessions come from full
      // workers only.
      const size_t target = PreparedTarget(w->kind, std::chrono::steady_clock::now());
      while (w->prepared.size() > target) {  // a kind gone idle gives back what it held
        retiring_.push_back(std::move(w->prepared.back()));
        w->prepared.pop_back();
        retire_wake_.notify_one();
      }
      const size_t sessions =
          w->kind == ZygoteKind::kFull ? SessionTarget(std::chrono::steady_clock::now()) : 0;
      while (w->prepared_sessions.size() > sessions) {  // the burst is over
        retiring_.push_back(std::move(w->prepared_sessions.back()));
        w->prepared_sessions.pop_back();
        retire_wake_.notify_one();
      }
      const bool session = w->prepared.size() >= target;
      if (session && w->prepared_sessions.size() >= sessions) continue;
      // In a burst, while session children remain, the next request is likely to come soon:
      // forking one more now would take CPU from it. The gap after the burst refills them.
      if (session && !w->prepared_sessions.empty() && !session_asks_.empty() &&
          std::chrono::steady_clock::now() - session_asks_.back() < kSessionRefillQuiet) {
        continue;
      }
      lock.unlock();
      auto child = w->zygote->Spawn(ChildOptions(options_.limits, session));
      lock.lock();
      if (child) {
        (session ? w->prepared_sessions : w->prepared).push_back(std::move(*child));
        w->failures = 0;
        worked = true;
      } else {
        ++w->failures;
        std::fprintf(stderr, "execbox: warm child failed: %s\n", child.error().message.c_str());
      }
    }
    if (!worked) wake_.wait_for(lock, std::chrono::milliseconds(100));
  }
}

}  // namespace execbox::engine
