// Caps per caller (an API key's [[keys]] entry, or the server's defaults for it): sessions open,
// executions queued, processes running in its sessions, bytes of session state kept. The gate
// checks them (gate_caps.cc); a request past one is refused with a "too many" refusal naming
// the cap, its value and the caller's use, on every transport.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "engine/net_policy.h"
#include "engine/refusal.h"

namespace execbox::engine {

// Unset: the server's default (GateOptions::key_defaults).
struct KeyCaps {
  std::optional<size_t> max_sessions;               // sessions open at once
  std::optional<size_t> max_queued;                 // executions waiting for a running slot
  std::optional<size_t> max_processes;              // processes running in its sessions
  std::optional<uint64_t> max_session_state_bytes;  // kept snapshots of its sessions' state
  // The widest network its requests may ask for, within the server's [network] (whose deny
  // entries apply too); unset: the server's.
  std::optional<NetPolicy> network;

  // Each unset cap taken from `defaults`.
  KeyCaps Or(const KeyCaps& defaults) const;
};

// The server defaults when its configuration says nothing ([admission] in the TOML file).
KeyCaps DefaultKeyCaps();

// What a caller holds now, for the caps and for /metrics.
struct KeyUse {
  size_t running = 0, queued = 0;
  size_t sessions = 0, processes = 0;
  uint64_t session_state_bytes = 0;
};

// The refusal for a caller at its cap: `cap` is the configuration's name ("max_sessions"),
// `unit` what is counted ("sessions open").
Refusal OverCap(RefusalReason reason, const std::string& caller, const char* cap, uint64_t limit,
                uint64_t in_use, const std::string& unit);

// Things a caller has asked for and not yet got (a session being made, a process starting):
// counted with what it holds, so that two requests at once cannot both pass the last place.
class Reservations {
 public:
  class Held {
   public:
    Held() = default;
    Held(Held&& other) noexcept;
    Held& operator=(Held&&) = delete;
    ~Held();

   private:
    friend class Reservations;
    Held(Reservations* owner, std::string caller) : owner_(owner), caller_(std::move(caller)) {}
    Reservations* owner_ = nullptr;
    std::string caller_;
  };
  // A place when `in_use` (read now, without the pending ones) plus those pending is under
  // `limit`; nullopt with the total otherwise.
  template <typename Count>
  std::optional<Held> Take(const std::string& caller, uint64_t limit, Count in_use, uint64_t* total) {
    std::lock_guard lock(mu_);
    auto it = pending_.find(caller);
    *total = static_cast<uint64_t>(in_use()) + (it == pending_.end() ? 0 : it->second);
    if (*total >= limit) return std::nullopt;
    ++pending_[caller];
    return Held(this, caller);
  }

 private:
  void Release(const std::string& caller);
  std::mutex mu_;
  std::map<std::string, uint64_t> pending_;
};

}  // namespace execbox::engine
