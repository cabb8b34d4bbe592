// Snapshots kept by name (sessions.h, Shelve; snapshot_shelf.h): a session's export, shelved.
#include "engine/session_record.h"
#include "engine/sessions.h"

namespace execbox::engine {

SessionExpected<ShelvedSnapshot> Sessions::Shelve(const std::string& owner, const std::string& id,
                                                  const std::optional<std::string>& name) {
  if (!shelf_) return std::unexpected(SessionFailure{SessionError::kInternal, "sessions were not opened"});
  if (name) {
    if (auto ok = SnapshotShelf::CheckName(*name); !ok)
      return std::unexpected(SessionFailure{SessionError::kInvalid, ok.error().message});
  }
  const bool replaces = name && shelf_->Find(owner, *name);
  if (!replaces && shelf_->CountOf(owner) >= kMaxShelvedPerOwner) {
    return std::unexpected(SessionFailure{
        SessionError::kFull,
        std::to_string(kMaxShelvedPerOwner) + " snapshots are the most a key keeps: delete one"});
  }
  auto exported = Export(owner, id);
  if (!exported) return std::unexpected(exported.error());
  auto kept = shelf_->Put(owner, id, name, std::move(exported->sealed));
  if (!kept)
    return std::unexpected(
        SessionFailure{SessionError::kInternal, "keep a snapshot: " + kept.error().message});
  return std::move(*kept);
}

std::vector<ShelvedSnapshot> Sessions::Shelved(const std::string& owner) {
  return shelf_ ? shelf_->List(owner) : std::vector<ShelvedSnapshot>{};
}

SessionExpected<Unsealed> Sessions::OpenShelved(const std::string& owner,
                                                const std::string& id_or_name) const {
  auto kept = shelf_ ? shelf_->Find(owner, id_or_name) : std::nullopt;
  if (!kept) {
    return std::unexpected(SessionFailure{
        SessionError::kNoSnapshot, "no snapshot " + id_or_name.substr(0, 100) + " is kept for this key"});
  }
  return OpenExport(*kept->sealed);
}

bool Sessions::Unshelve(const std::string& owner, const std::string& id_or_name) {
  return shelf_ && shelf_->Remove(owner, id_or_name);
}

}  // namespace execbox::engine
