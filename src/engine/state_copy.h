// A session's state copied as data, not as a process (docs/design.md, "Sessions are copied
// as state"): a snapshot made inside the session's own sandbox by its agent (the user's globals
// through cloudpickle, and the work dir's files), carried by the host as opaque bytes, and
// restored inside a fresh child. The host never unpickles: it reads only the agent's summary
// (names, what was left out), which is JSON.
#pragma once

#include <atomic>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

#include "engine/result.h"
#include "jail/zygote.h"

namespace execbox::engine {

struct StateCopyFailure {
  enum class Kind {
    kRefused,   // the agent said why (the snapshot does not fit in the work dir, ...): for the user
    kLost,      // the child's process ended (a limit, a crash): the session's state is gone
    kInternal,  // the exchange failed; the message is for the server's log
  };
  Kind kind;
  std::string message;
  std::string lost_reason;  // kLost: "timeout", "memory_limit", ... as a session reply says it
};

template <typename T>
using StateCopyExpected = std::expected<T, StateCopyFailure>;

struct Snapshot {
  std::string blob;                // the agent's snapshot file, never parsed by the host
  std::vector<std::string> names;  // the globals it holds
  std::vector<LeftOut> left_out;   // what it could not hold
  uint64_t files = 0;
};

struct Restored {
  std::vector<std::string> names;
  std::vector<LeftOut> left_out;  // not restored: what the snapshot could not hold, and what failed now
  uint64_t files = 0;
};

// Makes a snapshot of a live session child, under its limits (the snapshot file must fit in
// its work dir; the pickling runs under its memory and time limits). The child lives on.
StateCopyExpected<Snapshot> TakeSnapshot(jail::WarmChild& child, const jail::Limits& limits,
                                         const std::atomic<bool>* cancel);

// Restores `blob` into a fresh session child (nothing run in it yet), under its limits.
StateCopyExpected<Restored> RestoreSnapshot(jail::WarmChild& child, const jail::Limits& limits,
                                            std::string_view blob, const std::atomic<bool>* cancel);

}  // namespace execbox::engine
