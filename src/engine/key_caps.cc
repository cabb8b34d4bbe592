#include "engine/key_caps.h"

#include <utility>

namespace execbox::engine {

KeyCaps KeyCaps::Or(const KeyCaps& d) const {
  return KeyCaps{.max_sessions = max_sessions ? max_sessions : d.max_sessions,
                 .max_queued = max_queued ? max_queued : d.max_queued,
                 .max_processes = max_processes ? max_processes : d.max_processes,
                 .max_session_state_bytes =
                     max_session_state_bytes ? max_session_state_bytes : d.max_session_state_bytes,
                 .network = network ? network : d.network};
}

KeyCaps DefaultKeyCaps() {
  return KeyCaps{.max_sessions = 16,
                 .max_queued = 32,
                 .max_processes = 64,
                 .max_session_state_bytes = uint64_t{1024} << 20};
}

Refusal OverCap(RefusalReason reason, const std::string& caller, const char* cap, uint64_t limit,
                uint64_t in_use, const std::string& unit) {
  Refusal refusal = MakeRefusal(reason,
                                "key '" + caller + "' is at its cap " + cap + " = " + std::to_string(limit) +
                                    " (" + std::to_string(in_use) + " " + unit + "); retry when it has fewer",
                                {{"cap", cap}, {"key", caller}, {"limit", limit}, {"in_use", in_use}});
  refusal.retry_after_seconds = 1;
  return refusal;
}

Reservations::Held::Held(Held&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), caller_(std::move(other.caller_)) {}

Reservations::Held::~Held() {
  if (owner_ != nullptr) owner_->Release(caller_);
}

void Reservations::Release(const std::string& caller) {
  std::lock_guard lock(mu_);
  auto it = pending_.find(caller);
  if (it == pending_.end()) return;
  if (--it->second == 0) pending_.erase(it);
}

}  // namespace execbox::engine
