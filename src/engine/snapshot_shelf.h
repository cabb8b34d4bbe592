// Snapshots the server keeps by id and name until they are deleted (E2B's snapshots; Sessions::
// Shelve): each a session's state, sealed as an export is (sealed_snapshot.h), so that new
// sessions are made from it (Sessions::Import) as long as it is kept, also after the session
// ended. With a state dir they are files in its "snapshots" directory (a restart takes them
// back); without one they last as long as the server. The sealed bytes name their owner; the
// shelf only keeps them, its caller checks the seal (Sessions::Open).
//
// Layout: "<id>.snapshot" (the sealed export) and "<id>.meta" (JSON: names, source, created),
// each replaced at once (a new file renamed over it).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"

namespace execbox::engine {

struct ShelvedSnapshot {
  std::string id;                  // "snap_" and hex, made here
  std::string owner;               // the key whose session it is (as sealed in it)
  std::string source;              // the session it was taken of
  std::vector<std::string> names;  // at most one, given at its creation
  std::chrono::system_clock::time_point created;
  std::shared_ptr<const std::string> sealed;
  uint64_t bytes() const { return sealed ? sealed->size() : 0; }
};

class SnapshotShelf {
 public:
  // `dir` "": kept in memory only. Otherwise made (0700) if missing, and what it holds read
  // back: `owner_of` checks each file's seal and says whose it is (an error refuses the file,
  // renamed "<name>.refused" and left for the operator).
  using OwnerOf = std::function<Expected<std::string>(std::string_view sealed)>;
  static Expected<std::unique_ptr<SnapshotShelf>> Open(const std::string& dir, const OwnerOf& owner_of);

  // A name: 1 to 128 printable ASCII characters, no spaces; an error saying why otherwise.
  static execbox::Status CheckName(const std::string& name);

  // Keeps `sealed` as a new snapshot of `owner`'s, or, when `name` is one of `owner`'s
  // snapshots' already, as that snapshot's new content (its id stays: E2B's rebuild of a named
  // template). Written to the directory before it is answered.
  Expected<ShelvedSnapshot> Put(const std::string& owner, const std::string& source,
                                const std::optional<std::string>& name, std::string sealed);
  // `owner`'s snapshot whose id or name is `id_or_name`.
  std::optional<ShelvedSnapshot> Find(const std::string& owner, const std::string& id_or_name) const;
  // `owner`'s snapshots, oldest first.
  std::vector<ShelvedSnapshot> List(const std::string& owner) const;
  // False when `owner` has no such snapshot.
  bool Remove(const std::string& owner, const std::string& id_or_name);
  // Bytes kept for each owner (counted against max_session_state_mb with its sessions' state).
  uint64_t BytesOf(const std::string& owner) const;
  std::map<std::string, uint64_t> Bytes() const;
  size_t CountOf(const std::string& owner) const;

 private:
  SnapshotShelf() = default;
  execbox::Status Write(const ShelvedSnapshot& snapshot) const;
  const ShelvedSnapshot* FindLocked(const std::string& owner, const std::string& id_or_name) const;

  std::string dir_;
  mutable std::mutex mu_;
  std::map<std::string, ShelvedSnapshot> snapshots_;  // by id
};

}  // namespace execbox::engine
