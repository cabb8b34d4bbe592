// A session snapshot as the server keeps it (its state dir) and hands it out (export): the
// agent's snapshot file, opaque, behind a header saying whose session it was and how it was
// made, sealed with HMAC-SHA-256 under this server's snapshot key. The server takes back only
// what it sealed itself (or an instance sharing its key): a file that was changed, cut short,
// or sealed under another key is refused before any of it is used. The body is never parsed by
// the host; it is only ever restored inside a sandbox of the owner named in the header.
//
// Layout: "EXBSEAL1" | u32 header length | header JSON | u64 body length | body | 32-byte MAC
// (lengths little-endian; the MAC covers everything before it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "engine/net_policy.h"
#include "jail/policy.h"

namespace execbox::engine {

// The key snapshots are sealed with: 32 random bytes, kept in the state dir (mode 0600) so
// that sessions survive a restart; instances that share it can take each other's exports.
class SnapshotKey {
 public:
  // Reads `path`, or creates it (0600) with fresh random bytes when it does not exist.
  static Expected<SnapshotKey> LoadOrCreate(const std::string& path);
  // A key for this process only (a server without a state dir).
  static Expected<SnapshotKey> Ephemeral();
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

struct SealedSession {
  enum class State {
    kEmpty,      // no state was saved (the session was just made, or its process had ended)
    kSaved,      // its state after its last execution (a graceful shutdown, an export)
    kCheckpoint  // its checkpoint from before the execution it was last given
  };
  std::string owner;
  std::string id;
  jail::Limits limits;  // the limit table's rows; the rest are the pool's
  bool checkpoint = false;
  uint64_t generation = 0, executions = 0;
  int64_t created_unix = 0, last_used_unix = 0;
  State state = State::kEmpty;
  uint64_t included = 0;  // how many of its executions the state holds the effects of
  bool paused = false;    // kept by Sessions::Pause: a restart takes it back paused
  // Its network policy, as it was bounded where it ran; whoever takes it back bounds it again.
  std::optional<NetPolicy> network;
};

std::string Seal(const SealedSession& session, std::string_view body, const SnapshotKey& key);

struct Unsealed {
  SealedSession session;
  std::string body;
};
// `base`: the limits the table's rows are written over. The error is fit for a client (it
// says what is wrong with the file, never which key or path).
Expected<Unsealed> Unseal(std::string_view sealed, const SnapshotKey& key, const jail::Limits& base);

}  // namespace execbox::engine
