// Where sessions are kept across restarts of the server: one sealed snapshot file per session
// (sealed_snapshot.h) in a directory of the server's own, mode 0700. Without a directory the
// store keeps nothing, and its key lives only as long as the process (for exports).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "engine/sealed_snapshot.h"

namespace execbox::engine {

// Whether `id` is shaped as the engine's session ids are ("s_" and hex, then "." and an
// instance name): a name safe in a path of the state dir. Nothing else is a session's file.
bool IsSessionId(std::string_view id);

class SessionStore {
 public:
  // `dir` "": nothing is kept. Otherwise the directory is made (0700) or checked (a directory,
  // owned by this user; its mode is set to 0700), and its key read or made (snapshot.key).
  static Expected<std::unique_ptr<SessionStore>> Open(const std::string& dir);
  bool durable() const { return !dir_.empty(); }
  const SnapshotKey& key() const { return key_; }

  // Replaces the session's file at once (a new file renamed over it): a crash leaves the old
  // file or the new one, never half of either. Nothing when not durable.
  execbox::Status Save(const std::string& id, std::string_view sealed);
  void Remove(const std::string& id);
  // A file that cannot be taken back: renamed to "<name>.refused" (kept for the operator, never
  // read again), with the reason on stderr.
  void Refuse(const std::string& id, const std::string& why);

  struct Saved {
    std::string id;  // from the file's name
    Expected<std::string> sealed;
  };
  std::vector<Saved> LoadAll();

 private:
  SessionStore() = default;
  std::string PathOf(const std::string& id) const;
  std::string dir_;
  SnapshotKey key_;
};

}  // namespace execbox::engine
