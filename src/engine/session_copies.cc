// Sessions copied as state (sessions.h): checkpoints and undo, fork, the state dir that keeps
// sessions across restarts, pause and resume, and export/import. The session's own life (create, execute,
// files, close) is in sessions.cc.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "engine/limit_schema.h"
#include "engine/session_record.h"
#include "engine/sessions.h"

namespace execbox::engine {

void Sessions::Checkpoint(Session& s) {
  s.undo.reset();
  auto taken = TakeSnapshot(*s.child, s.limits, &s.deleting);
  if (taken) {
    s.undo = std::move(*taken);
    s.checkpoint_failure.clear();
    Persist(s, SealedSession::State::kCheckpoint, s.undo->blob);
    return;
  }
  // The execution goes ahead without a checkpoint; Undo says why there is none.
  if (taken.error().kind == StateCopyFailure::Kind::kInternal) {
    std::fprintf(stderr, "execbox: session %s: checkpoint failed: %s\n", s.id.c_str(),
                 taken.error().message.c_str());
    s.checkpoint_failure = "the checkpoint could not be made (an internal error)";
  } else {
    s.checkpoint_failure = CopyFailure(&s, taken.error()).message;
  }
}

SessionFailure Sessions::CopyFailure(Session* s, const StateCopyFailure& failure) {
  using K = StateCopyFailure::Kind;
  switch (failure.kind) {
    case K::kRefused:
      return {SessionError::kStateNotCopied, failure.message};
    case K::kLost:
      if (s != nullptr) Lost(*s, failure.lost_reason.c_str());
      return {SessionError::kStateNotCopied, failure.message + "; the session's state is lost"};
    case K::kInternal:
      break;
  }
  return Internal(failure.message);
}

SessionExpected<StateCopied> Sessions::Fork(const std::string& owner, const std::string& id) {
  auto s = Find(owner, id);
  if (!s) return std::unexpected(NotFound(id));
  Snapshot snapshot;
  {
    std::lock_guard run(s->run_mu);
    if (s->closed) return std::unexpected(NotFound(id));
    auto taken = SnapshotNow(*s, "fork");
    if (!taken) return std::unexpected(taken.error());
    snapshot = std::move(*taken);
  }
  return NewFromSnapshot(owner, s->limits, s->checkpoint, snapshot.blob, s->network);
}

SessionExpected<Snapshot> Sessions::SnapshotNow(Session& s, const char* what) {
  RestoreSaved(s);
  s.last_used = std::chrono::system_clock::now();
  if (!s.child || !s.child->alive()) {
    return std::unexpected(SessionFailure{
        SessionError::kStateNotCopied,
        "the session's process has ended (" + (s.lost_reason.empty() ? "exited" : s.lost_reason) +
            ") and its state with it: there is nothing to " + what + " until it runs again"});
  }
  auto taken = TakeSnapshot(*s.child, s.limits, &s.deleting);
  if (!taken) return std::unexpected(CopyFailure(&s, taken.error()));
  return std::move(*taken);
}

SessionExpected<StateCopied> Sessions::NewFromSnapshot(const std::string& owner, const jail::Limits& limits,
                                                       bool checkpoint, std::string_view blob,
                                                       const SessionNetwork& network) {
  auto created = Create(owner, limits, checkpoint, network);
  if (!created) return std::unexpected(created.error());
  auto copy = Find(owner, created->id);
  if (!copy) return std::unexpected(NotFound(created->id));  // deleted the moment it was made
  std::unique_lock run(copy->run_mu);
  auto restored = RestoreSnapshot(*copy->child, copy->limits, blob, &copy->deleting);
  if (!restored) {
    SessionFailure failure = CopyFailure(nullptr, restored.error());
    run.unlock();
    Close(copy->id);
    return std::unexpected(failure);
  }
  copy->last_used = std::chrono::system_clock::now();
  return StateCopied{.info = InfoOf(*copy), .left_out = std::move(restored->left_out)};
}

SealedSession Sessions::HeaderOf(const Session& s, SealedSession::State state) {
  // A checkpoint is taken as an execution begins: the file counts that execution as run (a
  // restart after a kill then says its changes are lost), the state holds the ones before it.
  const bool checkpoint = state == SealedSession::State::kCheckpoint;
  return SealedSession{
      .owner = s.owner,
      .id = s.id,
      .limits = s.limits,
      .checkpoint = s.checkpoint,
      .generation = s.generation,
      .executions = s.executions + (checkpoint ? 1 : 0),
      .created_unix = std::chrono::system_clock::to_time_t(s.created),
      .last_used_unix = std::chrono::system_clock::to_time_t(s.last_used),
      .state = state,
      .included = state == SealedSession::State::kEmpty ? 0 : s.executions,
      .paused = s.paused.load(),
      .network = s.network.policy ? std::optional<NetPolicy>(*s.network.policy) : std::nullopt};
}

void Sessions::Persist(Session& s, SealedSession::State state, std::string_view body) {
  if (!store_ || !store_->durable()) return;
  if (auto saved = store_->Save(s.id, Seal(HeaderOf(s, state), body, store_->key())); !saved) {
    std::fprintf(stderr, "execbox: session %s not saved: %s\n", s.id.c_str(), saved.error().message.c_str());
  }
}

void Sessions::RestoreSaved(Session& s) {
  if (!s.saved) return;
  Unsealed saved = std::move(*s.saved);
  s.saved.reset();
  auto child = AcquireChild(s);
  if (!child) {
    std::fprintf(stderr, "execbox: session %s not restored: %s\n", s.id.c_str(),
                 child.error().message.c_str());
    Lost(s, "restore_failed");
    return;
  }
  auto restored = RestoreSnapshot(**child, s.limits, saved.body, &s.deleting);
  if (!restored) {
    std::fprintf(stderr, "execbox: session %s not restored: %s\n", s.id.c_str(),
                 restored.error().message.c_str());
    pool_.Retire(std::move(*child));
    Lost(s, "restore_failed");
    return;
  }
  s.child = std::move(*child);
  Rebind(s);
  s.restored = true;
  const uint64_t included = saved.session.included;
  s.restored_note =
      included >= s.executions
          ? (s.paused ? "the session was paused; the state as of its pause was restored"
                      : "the server restarted; the state after the session's last execution was restored")
          : "the server stopped without saving; the state as of execution " + std::to_string(included) +
                " of " + std::to_string(s.executions) +
                " was restored (what the later executions changed is lost)";
  s.restored_left_out = std::move(restored->left_out);
  if (const int64_t expires = s.expires_ns.load(); s.paused && expires != 0) {
    // The clock starts again where the pause stopped it (or later, when set later meanwhile); one
    // paused at its expiry has its whole lifetime again.
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    const auto left =
        s.left_at_pause.count() > 0 ? s.left_at_pause : std::chrono::nanoseconds(s.lifetime_ns.load());
    s.expires_ns =
        std::max(expires, std::chrono::duration_cast<std::chrono::nanoseconds>(now + left).count());
  }
  s.paused = false;
}

SessionExpected<bool> Sessions::Pause(const std::string& owner, const std::string& id) {
  auto s = Find(owner, id);
  if (!s) return std::unexpected(NotFound(id));
  std::lock_guard run(s->run_mu);
  if (s->closed) return std::unexpected(NotFound(id));
  if (s->paused) return false;
  if (s->saved) {  // taken back after a restart and not used since: its state is kept already
    s->paused = true;
    Persist(*s, SealedSession::State::kSaved, s->saved->body);  // ... now as paused
  } else {
    auto taken = SnapshotNow(*s, "pause");
    if (!taken) return std::unexpected(taken.error());
    s->paused = true;
    Persist(*s, SealedSession::State::kSaved, taken->blob);
    s->saved =
        Unsealed{.session = HeaderOf(*s, SealedSession::State::kSaved), .body = std::move(taken->blob)};
    // Its processes end with its child: what they wrote is in the work dir, and so in the state.
    pool_.Retire(std::move(s->child));
    s->child.reset();
    Rebind(*s);
  }
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const int64_t expires = s->expires_ns.load();
  s->left_at_pause = expires == 0
                         ? std::chrono::nanoseconds(0)
                         : std::max(std::chrono::nanoseconds(expires) - now, std::chrono::nanoseconds(0));
  CountState(*s);
  return true;
}

SessionExpected<bool> Sessions::Resume(const std::string& owner, const std::string& id) {
  auto s = Find(owner, id);
  if (!s) return std::unexpected(NotFound(id));
  std::lock_guard run(s->run_mu);
  if (s->closed) return std::unexpected(NotFound(id));
  if (!s->saved) return false;
  s->last_used = std::chrono::system_clock::now();
  RestoreSaved(*s);  // a failed restore leaves it running empty; its next reply says so
  CountState(*s);
  return true;
}

execbox::Status Sessions::Open() {
  auto store = SessionStore::Open(options_.state_dir);
  if (!store) return std::unexpected(store.error());
  store_ = std::move(*store);
  // Kept snapshots (Shelve): each taken back only under this server's seal, as its owner's.
  auto shelf = SnapshotShelf::Open(store_->durable() ? options_.state_dir + "/snapshots" : "",
                                   [this](std::string_view sealed) -> Expected<std::string> {
                                     auto unsealed = Unseal(sealed, store_->key(), pool_.options().limits);
                                     if (!unsealed) return std::unexpected(unsealed.error());
                                     if (unsealed->session.owner.empty())
                                       return Fail("the snapshot names no owner");
                                     return unsealed->session.owner;
                                   });
  if (!shelf) return std::unexpected(shelf.error());
  shelf_ = std::move(*shelf);
  for (auto& saved : store_->LoadAll()) {
    if (!saved.sealed) {
      store_->Refuse(saved.id, saved.sealed.error().message);
      continue;
    }
    auto unsealed = Unseal(*saved.sealed, store_->key(), pool_.options().limits);
    if (!unsealed) {
      store_->Refuse(saved.id, unsealed.error().message);
      continue;
    }
    if (unsealed->session.id != saved.id || unsealed->session.owner.empty()) {
      store_->Refuse(saved.id, "the file's name and the session in it differ");
      continue;
    }
    if (InstanceOfId(saved.id) != options_.instance) {
      std::fprintf(stderr, "execbox: session file %s.session left alone: it names another instance\n",
                   saved.id.c_str());
      continue;
    }
    if (!Adopt(saved.id, std::move(*unsealed))) {
      std::fprintf(stderr, "execbox: session file %s.session left alone: %zu sessions are the most\n",
                   saved.id.c_str(), options_.max_sessions);
    }
  }
  return {};
}

bool Sessions::Adopt(const std::string& id, Unsealed unsealed) {
  auto s = std::make_shared<Session>();
  const SealedSession& h = unsealed.session;
  s->id = id;
  s->owner = h.owner;
  s->limits = h.limits;
  s->checkpoint = h.checkpoint;
  s->generation = h.generation;
  s->executions = h.executions;
  s->created = std::chrono::system_clock::from_time_t(h.created_unix);
  s->last_used = std::chrono::system_clock::now();  // its idle time starts again with the server
  if (h.state == SealedSession::State::kEmpty || unsealed.body.empty()) {
    s->next_reply_lost = true;
    s->lost_reason = "server_restarted";
    ++s->generation;
  } else {
    s->paused = h.paused;  // paused before the restart: paused still
    s->saved = std::move(unsealed);
  }
  std::lock_guard lock(mu_);
  if (sessions_.size() >= options_.max_sessions) return false;
  sessions_[id] = std::move(s);
  return true;
}

size_t Sessions::SaveAll() {
  if (!store_ || !store_->durable()) return 0;
  std::vector<std::shared_ptr<Session>> all;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, s] : sessions_) all.push_back(s);
  }
  size_t saved = 0;
  for (auto& s : all) {
    std::lock_guard run(s->run_mu);
    if (s->closed || s->saved) continue;  // untouched since the restart: its file is as it was
    if (!s->child || !s->child->alive()) {
      Persist(*s, SealedSession::State::kEmpty, "");
      continue;
    }
    auto taken = TakeSnapshot(*s->child, s->limits, &s->deleting);
    if (!taken) {
      // Its file keeps what it had (its creation, or its last checkpoint).
      std::fprintf(stderr, "execbox: session %s not saved at shutdown: %s\n", s->id.c_str(),
                   taken.error().message.c_str());
      continue;
    }
    Persist(*s, SealedSession::State::kSaved, taken->blob);
    ++saved;
  }
  return saved;
}

SessionExpected<Sessions::Exported> Sessions::Export(const std::string& owner, const std::string& id) {
  auto s = Find(owner, id);
  if (!s) return std::unexpected(NotFound(id));
  std::lock_guard run(s->run_mu);
  if (s->closed) return std::unexpected(NotFound(id));
  if (!store_) return std::unexpected(Internal("sessions were not opened"));
  // A paused session's state is what it keeps: sealed as it is, the session left paused.
  if (s->paused && s->saved && s->saved->session.state != SealedSession::State::kEmpty) {
    SealedSession header = HeaderOf(*s, SealedSession::State::kSaved);
    header.paused = false;  // what is made from it runs
    return Exported{.sealed = Seal(header, s->saved->body, store_->key())};
  }
  auto taken = SnapshotNow(*s, "export");
  if (!taken) return std::unexpected(taken.error());
  return Exported{.sealed = Seal(HeaderOf(*s, SealedSession::State::kSaved), taken->blob, store_->key()),
                  .left_out = std::move(taken->left_out)};
}

SessionExpected<Unsealed> Sessions::OpenExport(std::string_view sealed) const {
  if (!store_) return std::unexpected(Internal("sessions were not opened"));
  auto unsealed = Unseal(sealed, store_->key(), pool_.options().limits);
  if (!unsealed) return std::unexpected(SessionFailure{SessionError::kBadSnapshot, unsealed.error().message});
  return std::move(*unsealed);
}

SessionExpected<StateCopied> Sessions::Import(const std::string& owner, Unsealed exported, const jail::Limits& maxima,
                                              const SessionNetwork& network) {
  const SealedSession& h = exported.session;
  if (h.owner != owner) {
    return std::unexpected(SessionFailure{
        SessionError::kNotYours,
        "this snapshot is of another key's session: only the key that exported it can import it"});
  }
  for (const auto& spec : LimitTable()) {
    if (spec.get(h.limits) > spec.get(maxima)) {
      return std::unexpected(SessionFailure{SessionError::kBadSnapshot,
                                            "the snapshot's session has " + std::string(spec.name) + " " +
                                                std::to_string(static_cast<uint64_t>(spec.Value(h.limits))) +
                                                ", above this server's maximum of " +
                                                std::to_string(static_cast<uint64_t>(spec.Value(maxima)))});
    }
  }
  if (h.network.has_value() != (network.policy != nullptr)) {
    return std::unexpected(Internal("the snapshot's network and the one given for it differ"));
  }
  if (h.state == SealedSession::State::kEmpty || exported.body.empty()) {
    auto created = Create(owner, h.limits, h.checkpoint, network);
    if (!created) return std::unexpected(created.error());
    return StateCopied{.info = std::move(*created), .left_out = {}};
  }
  return NewFromSnapshot(owner, h.limits, h.checkpoint, exported.body, network);
}

SessionExpected<StateCopied> Sessions::Undo(const std::string& owner, const std::string& id) {
  auto s = Find(owner, id);
  if (!s) return std::unexpected(NotFound(id));
  std::lock_guard run(s->run_mu);
  if (s->closed) return std::unexpected(NotFound(id));
  RestoreSaved(*s);
  s->last_used = std::chrono::system_clock::now();
  if (!s->checkpoint) {
    return std::unexpected(
        SessionFailure{SessionError::kNothingToUndo, "undo needs a session created with checkpoint: true"});
  }
  if (!s->undo) {
    return std::unexpected(
        SessionFailure{SessionError::kNothingToUndo,
                       s->checkpoint_failure.empty()
                           ? "nothing to undo: no execution since the session was created or last undone"
                           : "no checkpoint from before the last execution: " + s->checkpoint_failure});
  }
  auto child = AcquireChild(*s);
  if (!child)
    return std::unexpected(Internal("could not start a child for the undo: " + child.error().message));
  auto restored = RestoreSnapshot(**child, s->limits, s->undo->blob, &s->deleting);
  if (!restored) {
    pool_.Retire(std::move(*child));
    return std::unexpected(CopyFailure(nullptr, restored.error()));
  }
  if (s->child) pool_.Retire(std::move(s->child));
  s->child = std::move(*child);
  Rebind(*s);
  s->undo.reset();
  s->next_reply_lost = false;  // the state is the checkpoint's, as the reply says
  s->lost_reason.clear();
  return StateCopied{.info = InfoOf(*s), .left_out = std::move(restored->left_out)};
}

}  // namespace execbox::engine
