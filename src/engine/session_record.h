// Inside Sessions (sessions.cc, session_copies.cc): one session as the engine keeps it, and the
// failures both files make. Not for anyone else.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/egress_proxy.h"
#include "engine/session_processes.h"
#include "engine/sessions.h"

namespace execbox::engine {

struct Sessions::Session {
  std::string id;
  std::string owner;                       // both set before the session is published, then never written
  jail::Limits limits;                     // what the child was made with
  // Its network (set before the session is published): the proxy every child of it is given a
  // connector to, which outlives them (declared before `child`, so destroyed after it).
  SessionNetwork network;
  std::unique_ptr<EgressProxy> egress;
  std::mutex run_mu;                       // one execution at a time, in order of arrival
  std::unique_ptr<jail::WarmChild> child;  // changed only with Rebind after (its processes follow it)
  // Its processes besides the kernel: bound to the child's init, used without run_mu.
  const std::shared_ptr<SessionProcesses> processes = std::make_shared<SessionProcesses>();
  uint64_t generation = 0;
  uint64_t executions = 0;
  bool next_reply_lost = false;  // the state was lost; say so in the next reply too
  std::string lost_reason;
  bool files_kept = false;  // with next_reply_lost: only the kernel restarted (Result's files_kept)
  std::chrono::system_clock::time_point created, last_used;
  bool closed = false;
  std::atomic<bool> deleting{false};  // Delete stops a running execution rather than wait for it
  // SetExpiry's time (system_clock, ns since the epoch); 0: none, the idle TTL applies. Atomic:
  // set while an execution runs, read by the sweep.
  std::atomic<int64_t> expires_ns{0};
  bool checkpoint = false;         // set before the session is published
  std::optional<Snapshot> undo;    // the state before the last execution
  std::string checkpoint_failure;  // why there is none, when the last checkpoint failed
  std::optional<Unsealed> saved;   // taken back after a restart, or paused: restored on first use
  // `saved` is there because of Pause, not a restart. Written under run_mu, read by List too.
  std::atomic<bool> paused{false};
  // While paused its expiry's clock stands still: what was left of it then (0: no expiry).
  std::chrono::nanoseconds left_at_pause{0};
  // Paused rather than closed at its expiry (E2B's autoPause), and the lifetime it was last
  // given (ns; 0: none), which a session paused at its expiry is given again when it comes back.
  std::atomic<bool> pause_at_expiry{false};
  std::atomic<int64_t> lifetime_ns{0};
  bool restored = false;           // ... which the next reply says, with what did not come back
  std::string restored_note;
  std::vector<LeftOut> restored_left_out;
  // Bytes of state the server keeps for it (its checkpoint, a state taken back and not yet
  // restored): counted whenever run_mu is free (session_use.cc), read at any time.
  std::atomic<uint64_t> state_bytes{0};
};

inline SessionFailure Internal(std::string message) { return {SessionError::kInternal, std::move(message)}; }
inline SessionFailure NotFound(const std::string& id) {
  return {SessionError::kNotFound, "no session " + id};
}

}  // namespace execbox::engine
