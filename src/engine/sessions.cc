#include "engine/sessions.h"

#include <cstdio>
#include <optional>
#include <string_view>

#include "base/random.h"
#include "engine/limit_schema.h"
#include "jail/policy.h"

namespace execbox::engine {
namespace {

// 128 random bits: a session id is a name that cannot be guessed (ownership is checked too);
// then the instance that holds it, where there are several.
Expected<std::string> NewSessionId(const std::string& instance) {
  auto hex = RandomHex(16);
  if (!hex) return std::unexpected(hex.error());
  return "s_" + *hex + (instance.empty() ? "" : "." + instance);
}

// Why a session's process ended: a limit by the status's own name, else it exited or crashed.
const char* LostReason(const Result& r) {
  switch (r.status) {
    case Status::kTimeout:
    case Status::kMemoryLimit:
    case Status::kOutputLimit:
    case Status::kKilled:
      return r.error && r.error->ename == "Cancelled" ? "cancelled" : StatusName(r.status);
    default:
      return "exited";  // os._exit(), a crash of the interpreter, ...
  }
}

SessionFailure Internal(std::string message) { return {SessionError::kInternal, std::move(message)}; }
SessionFailure Invalid(std::string message) { return {SessionError::kInvalid, std::move(message)}; }
SessionFailure RefusedFile(std::string message) { return {SessionError::kRefused, std::move(message)}; }

// "./a//b" -> "a/b": the plain form the zygote takes, or why the path cannot be one.
Expected<std::string> PlainPath(const std::string& path) {
  if (!path.empty() && path.front() == '/') return Fail("file path '" + path + "' is absolute");
  std::string plain;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string_view part(path.data() + start, end - start);
    if (!part.empty() && part != ".") {
      if (!plain.empty()) plain += '/';
      plain += part;
    }
    start = end + 1;
  }
  if (plain.empty()) return Fail("file path '" + path + "' names no file");
  if (auto valid = jail::ValidateRelativeName(plain); !valid) return std::unexpected(valid.error());
  return plain;
}
SessionFailure NotFound(const std::string& id) { return {SessionError::kNotFound, "no session " + id}; }

}  // namespace

execbox::Status ValidateInstanceName(const std::string& name) {
  auto ok = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; };
  bool valid = !name.empty() && name.size() <= 63 && name.front() != '-' && name.back() != '-';
  for (char c : name) valid = valid && ok(c);
  if (!valid) {
    return Fail("instance name '" + name.substr(0, 80) +
                "': expected 1-63 of a-z, 0-9 and '-', not starting or ending with '-'");
  }
  return {};
}

std::string InstanceOfId(const std::string& id) {
  size_t dot = id.rfind('.');
  return dot == std::string::npos ? "" : id.substr(dot + 1);
}

struct Sessions::Session {
  std::string id;
  std::string owner;    // both set before the session is published, then never written
  jail::Limits limits;  // what the child was made with
  std::mutex run_mu;    // one execution at a time, in order of arrival
  std::unique_ptr<jail::WarmChild> child;
  uint64_t generation = 0;
  uint64_t executions = 0;
  bool next_reply_lost = false;  // the state was lost; say so in the next reply too
  std::string lost_reason;
  std::chrono::system_clock::time_point created, last_used;
  bool closed = false;
  std::atomic<bool> deleting{false};  // Delete stops a running execution rather than wait for it
  bool checkpoint = false;            // set before the session is published
  std::optional<Snapshot> undo;       // the state before the last execution
  std::string checkpoint_failure;     // why there is none, when the last checkpoint failed
  std::optional<Unsealed> saved;      // taken back after a restart: restored on first use
  bool restored = false;              // ... which the next reply says, with what did not come back
  std::string restored_note;
  std::vector<LeftOut> restored_left_out;
};

Sessions::Sessions(Pool& pool, SessionOptions options) : pool_(pool), options_(options) {
  sweeper_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      wake_.wait_for(lock, std::chrono::seconds(5));
      if (stopping_) break;
      lock.unlock();
      SweepIdle();
      lock.lock();
    }
  });
}

Sessions::~Sessions() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (sweeper_.joinable()) sweeper_.join();
  std::map<std::string, std::shared_ptr<Session>> all;
  {
    std::lock_guard lock(mu_);
    all.swap(sessions_);
  }
  for (auto& [id, s] : all) {
    std::lock_guard run(s->run_mu);
    s->child.reset();
  }
}

std::shared_ptr<Sessions::Session> Sessions::Find(const std::string& owner, const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second->owner != owner) return nullptr;
  return it->second;
}

SessionInfo Sessions::InfoOf(Session& s) {
  SessionInfo info{.id = s.id,
                   .owner = s.owner,
                   .limits = s.limits,
                   .generation = s.generation,
                   .executions = s.executions,
                   .preserved = !s.next_reply_lost,
                   .lost_reason = s.lost_reason,
                   .created = s.created,
                   .last_used = s.last_used,
                   .checkpoint = s.checkpoint,
                   .can_undo = s.undo.has_value()};
  if (s.child) {
    auto m = s.child->ReadMemory();
    info.private_bytes = m.private_bytes;
    info.pss_bytes = m.pss_bytes;
  }
  return info;
}

SessionExpected<SessionInfo> Sessions::Create(const std::string& owner, const jail::Limits& limits,
                                              bool checkpoint) {
  auto id = NewSessionId(options_.instance);
  if (!id) return std::unexpected(Internal("could not make a session id: " + id.error().message));
  auto s = std::make_shared<Session>();
  s->id = std::move(*id);
  s->owner = owner;
  s->created = s->last_used = std::chrono::system_clock::now();
  s->limits = limits;
  s->checkpoint = checkpoint;
  {
    std::lock_guard lock(mu_);
    if (sessions_.size() >= options_.max_sessions) {
      return std::unexpected(SessionFailure{
          SessionError::kFull, "the maximum of " + std::to_string(options_.max_sessions) +
                                   " sessions is reached; delete one (or wait for an idle one to expire)"});
    }
    sessions_[s->id] = s;  // reserves the slot while the child is made
  }
  auto child = pool_.Acquire(s->limits, true);
  if (!child) {
    std::lock_guard lock(mu_);
    sessions_.erase(s->id);
    return std::unexpected(Internal("could not start the session: " + child.error().message));
  }
  std::lock_guard run(s->run_mu);
  s->child = std::move(*child);
  Persist(*s, SealedSession::State::kEmpty, "");
  return InfoOf(*s);
}

SessionExpected<Result> Sessions::Execute(const std::string& owner, const std::string& id,
                                          const runtime::PythonProgram& program,
                                          const ExecuteOptions& options) {
  auto s = Find(owner, id);
  if (!s) return std::unexpected(NotFound(id));
  std::lock_guard run(s->run_mu);
  if (s->closed) return std::unexpected(NotFound(id));
  RestoreSaved(*s);
  // Restart empty if the process is gone; the reply below says the state is gone
  // (next_reply_lost is already set).
  if (auto ok = EnsureChild(*s); !ok) return std::unexpected(ok.error());
  if (s->checkpoint) {
    Checkpoint(*s);
    if (auto ok = EnsureChild(*s); !ok) return std::unexpected(ok.error());
  }
  auto request = runtime::MakeRequest(program, true);
  if (!request) return std::unexpected(Invalid(request.error().message));
  jail::RunHooks hooks{.on_output = options.on_output, .cancel = options.cancel, .cancel_too = &s->deleting};
  auto outcome = s->child->Execute(*request, program.stdin_data, program.limits, hooks);
  s->last_used = std::chrono::system_clock::now();
  ++s->executions;
  if (!outcome) {
    s->child.reset();
    s->next_reply_lost = true;
    s->lost_reason = "internal_error";
    ++s->generation;
    return std::unexpected(Internal(outcome.error().message));
  }
  Result r = AssembleResult(program, program.limits, *outcome);
  r.engine = "session";
  r.session = SessionState{.id = s->id,
                           .generation = s->generation,
                           .preserved = !s->next_reply_lost,
                           .lost_reason = s->lost_reason};
  if (s->restored) {  // said once, in the first reply after the restart
    r.session->restored = true;
    r.session->restored_note = std::move(s->restored_note);
    r.session->not_restored = std::move(s->restored_left_out);
    s->restored = false;
  }
  if (s->child->alive()) {
    s->next_reply_lost = false;  // said once: from here on the new state is kept
    s->lost_reason.clear();
  } else {
    s->child.reset();
    s->lost_reason = LostReason(r);
    r.session->preserved = false;
    r.session->lost_reason = s->lost_reason;
    s->next_reply_lost = true;
    ++s->generation;
  }
  return r;
}

void Sessions::Lost(Session& s, const char* reason) {
  s.child.reset();
  s.next_reply_lost = true;
  s.lost_reason = reason;
  ++s.generation;
}

SessionExpected<void> Sessions::EnsureChild(Session& s) {
  if (s.child && s.child->alive()) return {};
  // Restart empty; the next execution's reply says the state is gone (next_reply_lost is set).
  auto child = pool_.Acquire(s.limits, true);
  if (!child) return std::unexpected(Internal("could not restart the session: " + child.error().message));
  s.child = std::move(*child);
  return {};
}

SessionExpected<void> Sessions::WriteFile(const std::string& owner, const std::string& id,
                                          const std::string& path, std::string content) {
  auto s = Find(owner, id);
  if (!s) return std::unexpected(NotFound(id));
  std::lock_guard run(s->run_mu);
  if (s->closed) return std::unexpected(NotFound(id));
  s->last_used = std::chrono::system_clock::now();
  auto plain = PlainPath(path);
  if (!plain) return std::unexpected(Invalid(plain.error().message));
  RestoreSaved(*s);
  if (content.size() > s->limits.work_dir_bytes) {
    return std::unexpected(
        SessionFailure{SessionError::kTooLarge, *plain + ": " + std::to_string(content.size()) +
                                                    " bytes is more than the work dir holds (" +
                                                    std::to_string(s->limits.work_dir_bytes) + " bytes)"});
  }
  for (int attempt = 0;; ++attempt) {
    if (auto ok = EnsureChild(*s); !ok) return ok;
    auto put = s->child->PutFile(*plain, content);
    s->last_used = std::chrono::system_clock::now();
    if (put) return {};
    using K = jail::FileFailure::Kind;
    switch (put.error().kind) {
      case K::kTooLarge:
        return std::unexpected(SessionFailure{SessionError::kTooLarge, put.error().message});
      case K::kEnded:
        // The process had ended between executions: restart it and write there, once.
        Lost(*s, "exited");
        if (attempt == 0) continue;
        return std::unexpected(Internal("could not write " + *plain + ": " + put.error().message));
      case K::kBroken:
        Lost(*s, "internal_error");
        return std::unexpected(Internal("could not write " + *plain + ": " + put.error().message));
      case K::kNotFound:
      case K::kRefused:
        return std::unexpected(RefusedFile("could not write " + put.error().message));
    }
  }
}

SessionExpected<std::string> Sessions::ReadFile(const std::string& owner, const std::string& id,
                                                const std::string& path, uint64_t max_bytes) {
  auto s = Find(owner, id);
  if (!s) return std::unexpected(NotFound(id));
  std::lock_guard run(s->run_mu);
  if (s->closed) return std::unexpected(NotFound(id));
  s->last_used = std::chrono::system_clock::now();
  auto plain = PlainPath(path);
  if (!plain) return std::unexpected(Invalid(plain.error().message));
  RestoreSaved(*s);
  if (!s->child || !s->child->alive()) {
    // The state was lost and the session not yet restarted: its work dir is empty.
    return std::unexpected(SessionFailure{SessionError::kFileNotFound,
                                          *plain + ": no such file (the session's state was lost)"});
  }
  auto got = s->child->GetFile(*plain, max_bytes);
  s->last_used = std::chrono::system_clock::now();
  if (got) return std::move(*got);
  using K = jail::FileFailure::Kind;
  switch (got.error().kind) {
    case K::kNotFound:
      return std::unexpected(SessionFailure{SessionError::kFileNotFound, got.error().message});
    case K::kTooLarge:
      return std::unexpected(SessionFailure{SessionError::kTooLarge, got.error().message});
    case K::kEnded:
      Lost(*s, "exited");
      return std::unexpected(SessionFailure{SessionError::kFileNotFound,
                                            *plain + ": no such file (" + got.error().message + ")"});
    case K::kBroken:
      Lost(*s, "internal_error");
      return std::unexpected(Internal("could not read " + *plain + ": " + got.error().message));
    case K::kRefused:
      break;
  }
  return std::unexpected(RefusedFile("could not read " + got.error().message));
}

SessionExpected<SessionInfo> Sessions::Info(const std::string& owner, const std::string& id) {
  auto s = Find(owner, id);
  if (!s) return std::unexpected(NotFound(id));
  std::lock_guard run(s->run_mu);
  return InfoOf(*s);
}

SessionExpected<jail::Limits> Sessions::CreatedWith(const std::string& owner, const std::string& id) {
  auto s = Find(owner, id);
  if (!s) return std::unexpected(NotFound(id));
  return s->limits;  // set before the session was published, never written again
}

std::vector<SessionInfo> Sessions::List(const std::string& owner) {
  std::vector<std::shared_ptr<Session>> all;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, s] : sessions_) {
      if (s->owner == owner) all.push_back(s);
    }
  }
  std::vector<SessionInfo> out;
  for (auto& s : all) {
    std::lock_guard run(s->run_mu);
    out.push_back(InfoOf(*s));
  }
  return out;
}

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
  s.checkpoint_failure = CopyFailure(&s, taken.error()).message;
  if (taken.error().kind == StateCopyFailure::Kind::kInternal) {
    s.checkpoint_failure = "the checkpoint could not be made (an internal error)";
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
  return NewFromSnapshot(owner, s->limits, s->checkpoint, snapshot.blob);
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
                                                       bool checkpoint, std::string_view blob) {
  auto created = Create(owner, limits, checkpoint);
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
  return SealedSession{.owner = s.owner,
                       .id = s.id,
                       .limits = s.limits,
                       .checkpoint = s.checkpoint,
                       .generation = s.generation,
                       .executions = s.executions + (checkpoint ? 1 : 0),
                       .created_unix = std::chrono::system_clock::to_time_t(s.created),
                       .last_used_unix = std::chrono::system_clock::to_time_t(s.last_used),
                       .state = state,
                       .included = state == SealedSession::State::kEmpty ? 0 : s.executions};
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
  auto child = pool_.Acquire(s.limits, true);
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
  s.restored = true;
  const uint64_t included = saved.session.included;
  s.restored_note = included >= s.executions
                        ? "the server restarted; the state after the session's last execution was restored"
                        : "the server stopped without saving; the state as of execution " +
                              std::to_string(included) + " of " + std::to_string(s.executions) +
                              " was restored (what the later executions changed is lost)";
  s.restored_left_out = std::move(restored->left_out);
}

execbox::Status Sessions::Open() {
  auto store = SessionStore::Open(options_.state_dir);
  if (!store) return std::unexpected(store.error());
  store_ = std::move(*store);
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
  auto taken = SnapshotNow(*s, "export");
  if (!taken) return std::unexpected(taken.error());
  return Exported{.sealed = Seal(HeaderOf(*s, SealedSession::State::kSaved), taken->blob, store_->key()),
                  .left_out = std::move(taken->left_out)};
}

SessionExpected<StateCopied> Sessions::Import(const std::string& owner, std::string_view sealed,
                                              const jail::Limits& maxima) {
  if (!store_) return std::unexpected(Internal("sessions were not opened"));
  auto unsealed = Unseal(sealed, store_->key(), pool_.options().limits);
  if (!unsealed) return std::unexpected(SessionFailure{SessionError::kBadSnapshot, unsealed.error().message});
  const SealedSession& h = unsealed->session;
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
  if (h.state == SealedSession::State::kEmpty || unsealed->body.empty()) {
    auto created = Create(owner, h.limits, h.checkpoint);
    if (!created) return std::unexpected(created.error());
    return StateCopied{.info = std::move(*created), .left_out = {}};
  }
  return NewFromSnapshot(owner, h.limits, h.checkpoint, unsealed->body);
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
  auto child = pool_.Acquire(s->limits, true);
  if (!child)
    return std::unexpected(Internal("could not start a child for the undo: " + child.error().message));
  auto restored = RestoreSnapshot(**child, s->limits, s->undo->blob, &s->deleting);
  if (!restored) {
    pool_.Retire(std::move(*child));
    return std::unexpected(CopyFailure(nullptr, restored.error()));
  }
  if (s->child) pool_.Retire(std::move(s->child));
  s->child = std::move(*child);
  s->undo.reset();
  s->next_reply_lost = false;  // the state is the checkpoint's, as the reply says
  s->lost_reason.clear();
  return StateCopied{.info = InfoOf(*s), .left_out = std::move(restored->left_out)};
}

SessionExpected<void> Sessions::Delete(const std::string& owner, const std::string& id) {
  if (!Find(owner, id)) return std::unexpected(NotFound(id));
  return Close(id);
}

SessionExpected<void> Sessions::Close(const std::string& id) {
  std::shared_ptr<Session> s;
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return std::unexpected(NotFound(id));
    s = it->second;
    sessions_.erase(it);
  }
  s->deleting = true;              // a running execution stops within ~100 ms ...
  std::lock_guard run(s->run_mu);  // ... and then its reply goes out
  s->closed = true;
  s->child.reset();  // kills the tree, removes the cgroup and with it every mount
  if (store_) store_->Remove(id);
  return {};
}

size_t Sessions::size() {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

size_t Sessions::SweepIdle() {
  auto now = std::chrono::system_clock::now();
  std::vector<std::string> idle;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, s] : sessions_) {
      std::unique_lock run(s->run_mu, std::try_to_lock);
      if (run.owns_lock() && now - s->last_used > options_.idle_ttl) idle.push_back(id);
    }
  }
  size_t closed = 0;
  for (const auto& id : idle) closed += Close(id).has_value() ? 1 : 0;
  return closed;
}

}  // namespace execbox::engine
