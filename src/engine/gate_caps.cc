// The caps per key (key_caps.h), checked by the gate for every transport: sessions open,
// processes running in them, kept session state. (Queued executions are Admission's.)
#include "engine/gate.h"

namespace execbox::engine {

Caller Gate::WithCaps(const Caller& caller) const {
  Caller resolved = caller;
  resolved.caps = caller.caps.Or(options_.key_defaults);
  return resolved;
}

Refused<Reservations::Held> Gate::SessionPlace(const Caller& caller) {
  const Caller c = WithCaps(caller);
  if (!c.caps.max_sessions || engine_.sessions() == nullptr) return Reservations::Held();
  uint64_t in_use = 0;
  auto held = session_places_.Take(
      c.id, *c.caps.max_sessions, [&] { return engine_.sessions()->UseOf(c.id).sessions; }, &in_use);
  if (!held)
    return std::unexpected(OverCap(RefusalReason::kKeySessions, c.id, "max_sessions", *c.caps.max_sessions,
                                   in_use, "sessions open or being made; close one"));
  return std::move(*held);
}

Refused<Reservations::Held> Gate::ProcessPlace(const Caller& caller) {
  const Caller c = WithCaps(caller);
  if (!c.caps.max_processes || engine_.sessions() == nullptr) return Reservations::Held();
  uint64_t in_use = 0;
  auto held = process_places_.Take(
      c.id, *c.caps.max_processes, [&] { return engine_.sessions()->UseOf(c.id).processes; }, &in_use);
  if (!held)
    return std::unexpected(OverCap(RefusalReason::kKeyProcesses, c.id, "max_processes", *c.caps.max_processes,
                                   in_use, "processes running in its sessions"));
  return std::move(*held);
}

Refused<void> Gate::StateRoom(const Caller& caller) {
  const Caller c = WithCaps(caller);
  if (!c.caps.max_session_state_bytes || engine_.sessions() == nullptr) return {};
  const uint64_t in_use = engine_.sessions()->UseOf(c.id).session_state_bytes;
  const uint64_t limit = *c.caps.max_session_state_bytes;
  if (in_use < limit) return {};
  constexpr uint64_t kMiB = 1ull << 20;
  Refusal refusal = OverCap(RefusalReason::kKeySessionState, c.id, "max_session_state_mb", limit / kMiB,
                            (in_use + kMiB - 1) / kMiB, "MiB of session state kept; close or undo a session");
  refusal.extra["in_use_bytes"] = in_use;
  refusal.extra["limit_bytes"] = limit;
  return std::unexpected(std::move(refusal));
}

}  // namespace execbox::engine
