#include "engine/sessions.h"

#include <cstdio>
#include <optional>
#include <string_view>

#include "base/random.h"
#include "engine/limit_schema.h"
#include "engine/result_assembly.h"
#include "engine/session_record.h"
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
    Rebind(*s);
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
                   .can_undo = s.undo.has_value(),
                   .network = s.network.policy,
                   .paused = s.paused.load()};
  if (int64_t ns = s.expires_ns.load(); ns != 0)
    info.expires = std::chrono::system_clock::time_point(std::chrono::nanoseconds(ns));
  if (s.child) {
    auto m = s.child->ReadMemory();
    info.private_bytes = m.private_bytes;
    info.pss_bytes = m.pss_bytes;
  }
  return info;
}

Expected<std::unique_ptr<jail::WarmChild>> Sessions::AcquireChild(Session& s) {
  return pool_.Acquire(s.limits, true, s.egress ? s.egress->sandbox_fd() : -1);
}

SessionExpected<SessionInfo> Sessions::Create(const std::string& owner, const jail::Limits& limits,
                                              bool checkpoint, const SessionNetwork& network) {
  auto id = NewSessionId(options_.instance);
  if (!id) return std::unexpected(Internal("could not make a session id: " + id.error().message));
  auto s = std::make_shared<Session>();
  s->id = std::move(*id);
  s->owner = owner;
  s->created = s->last_used = std::chrono::system_clock::now();
  s->limits = limits;
  s->checkpoint = checkpoint;
  if (network.policy) {
    EgressLimits egress;
    if (network.max_connections != 0) egress.max_connections = network.max_connections;
    if (network.max_bytes != 0) egress.max_bytes = network.max_bytes;
    auto proxy = EgressProxy::Start(*network.policy, egress, network.hosts);
    if (!proxy) return std::unexpected(Internal("could not start the session's network proxy: " + proxy.error().message));
    s->network = network;
    s->egress = std::move(*proxy);
  }
  {
    std::lock_guard lock(mu_);
    if (sessions_.size() >= options_.max_sessions) {
      return std::unexpected(SessionFailure{
          SessionError::kFull, "the maximum of " + std::to_string(options_.max_sessions) +
                                   " sessions is reached; delete one (or wait for an idle one to expire)"});
    }
    sessions_[s->id] = s;  // reserves the slot while the child is made
  }
  auto child = AcquireChild(*s);
  if (!child) {
    std::lock_guard lock(mu_);
    sessions_.erase(s->id);
    return std::unexpected(Internal("could not start the session: " + child.error().message));
  }
  std::lock_guard run(s->run_mu);
  s->child = std::move(*child);
  Rebind(*s);
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
  // The kernel may have ended since the last execution (a process of the session killed it, a
  // thread called os._exit): the reply below says the state is gone.
  if (s->child && s->child->alive() && !s->child->Probe()) {
    if (s->child->RestartKernel()) {
      KernelRestarted(*s, "exited");
    } else {
      Lost(*s, "exited");
    }
  }
  // Restart empty if the process is gone; the reply below says the state is gone
  // (next_reply_lost is already set).
  if (auto ok = EnsureChild(*s); !ok) return std::unexpected(ok.error());
  if (s->checkpoint) {
    Checkpoint(*s);
    CountState(*s);  // held while the execution runs: the key's caps see it now
    if (auto ok = EnsureChild(*s); !ok) return std::unexpected(ok.error());
  }
  auto request = runtime::MakeRequest(program, true);
  if (!request) return std::unexpected(Invalid(request.error().message));
  jail::RunHooks hooks{.on_output = options.on_output,
                       .on_report = DisplayFeed(options),
                       .cancel = options.cancel,
                       .cancel_too = &s->deleting,
                       .cpu_weight = options.cpu_weight};
  auto outcome = s->child->Execute(*request, program.stdin_data, program.limits, hooks);
  s->last_used = std::chrono::system_clock::now();
  ++s->executions;
  if (!outcome) {
    s->child.reset();
    Rebind(*s);
    s->next_reply_lost = true;
    s->lost_reason = "internal_error";
    ++s->generation;
    return std::unexpected(Internal(outcome.error().message));
  }
  Result r = AssembleResult(program, program.limits, *outcome);
  r.engine = "session";
  // What the session's network did since the last execution's reply: this one's connections,
  // and those of its processes that ended meanwhile.
  if (s->egress) r.network = s->egress->Drain();
  r.session = SessionState{.id = s->id,
                           .generation = s->generation,
                           .preserved = !s->next_reply_lost,
                           .lost_reason = s->lost_reason,
                           .files_kept = s->next_reply_lost && s->files_kept};
  if (s->restored) {  // said once, in the first reply after the restart
    r.session->restored = true;
    r.session->restored_note = std::move(s->restored_note);
    r.session->not_restored = std::move(s->restored_left_out);
    s->restored = false;
  }
  if (outcome->kernel_restarted) {
    KernelRestarted(*s, LostReason(r));
    r.session->preserved = false;
    r.session->lost_reason = s->lost_reason;
    r.session->files_kept = true;
  } else if (s->child->alive()) {
    s->next_reply_lost = false;  // said once: from here on the new state is kept
    s->lost_reason.clear();
    s->files_kept = false;
  } else {
    s->child.reset();
    Rebind(*s);
    s->lost_reason = LostReason(r);
    r.session->preserved = false;
    r.session->lost_reason = s->lost_reason;
    s->next_reply_lost = true;
    s->files_kept = false;
    ++s->generation;
  }
  return r;
}

void Sessions::Rebind(Session& s) { s.processes->Bind(s.child ? s.child->init() : nullptr, &poller_); }

void Sessions::Lost(Session& s, const char* reason) {
  s.child.reset();
  Rebind(s);
  s.next_reply_lost = true;
  s.lost_reason = reason;
  s.files_kept = false;
  ++s.generation;
}

// The sandbox lives on with a new kernel: the state is gone, the files and processes not.
void Sessions::KernelRestarted(Session& s, const char* reason) {
  s.next_reply_lost = true;
  s.lost_reason = reason;
  s.files_kept = true;
  ++s.generation;
}

SessionExpected<void> Sessions::EnsureChild(Session& s) {
  if (s.child && s.child->alive()) return {};
  // Restart empty; the next execution's reply says the state is gone (next_reply_lost is set).
  auto child = AcquireChild(s);
  if (!child) return std::unexpected(Internal("could not restart the session: " + child.error().message));
  s.child = std::move(*child);
  Rebind(s);
  return {};
}

SessionExpected<Sessions::FileCall> Sessions::StartFileCall(const std::string& owner, const std::string& id,
                                                            const std::string& path) {
  auto s = Find(owner, id);
  if (!s) return std::unexpected(NotFound(id));
  std::unique_lock run(s->run_mu);
  if (s->closed) return std::unexpected(NotFound(id));
  s->last_used = std::chrono::system_clock::now();
  auto plain = PlainPath(path);
  if (!plain) return std::unexpected(Invalid(plain.error().message));
  RestoreSaved(*s);
  return FileCall{.session = std::move(s), .run = std::move(run), .path = std::move(*plain)};
}

SessionExpected<void> Sessions::WriteFile(const std::string& owner, const std::string& id,
                                          const std::string& path, std::string content) {
  auto call = StartFileCall(owner, id, path);
  if (!call) return std::unexpected(call.error());
  Session* s = call->session.get();
  const std::string& plain = call->path;
  if (content.size() > s->limits.work_dir_bytes) {
    return std::unexpected(
        SessionFailure{SessionError::kTooLarge, plain + ": " + std::to_string(content.size()) +
                                                    " bytes is more than the work dir holds (" +
                                                    std::to_string(s->limits.work_dir_bytes) + " bytes)"});
  }
  for (int attempt = 0;; ++attempt) {
    if (auto ok = EnsureChild(*s); !ok) return ok;
    auto put = s->child->PutFile(plain, content);
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
        return std::unexpected(Internal("could not write " + plain + ": " + put.error().message));
      case K::kBroken:
        Lost(*s, "internal_error");
        return std::unexpected(Internal("could not write " + plain + ": " + put.error().message));
      case K::kNotFound:
      case K::kRefused:
        return std::unexpected(RefusedFile("could not write " + put.error().message));
    }
  }
}

SessionExpected<std::string> Sessions::ReadFile(const std::string& owner, const std::string& id,
                                                const std::string& path, uint64_t max_bytes) {
  auto call = StartFileCall(owner, id, path);
  if (!call) return std::unexpected(call.error());
  Session* s = call->session.get();
  const std::string& plain = call->path;
  if (!s->child || !s->child->alive()) {
    // The state was lost and the session not yet restarted: its work dir is empty.
    return std::unexpected(
        SessionFailure{SessionError::kFileNotFound, plain + ": no such file (the session's state was lost)"});
  }
  auto got = s->child->GetFile(plain, max_bytes);
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
                                            plain + ": no such file (" + got.error().message + ")"});
    case K::kBroken:
      Lost(*s, "internal_error");
      return std::unexpected(Internal("could not read " + plain + ": " + got.error().message));
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

SessionExpected<bool> Sessions::Paused(const std::string& owner, const std::string& id) {
  auto s = Find(owner, id);
  if (!s) return std::unexpected(NotFound(id));
  return s->paused.load();
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

SessionExpected<void> Sessions::SetExpiry(const std::string& owner, const std::string& id,
                                          std::optional<std::chrono::system_clock::time_point> expires) {
  auto s = Find(owner, id);
  if (!s) return std::unexpected(NotFound(id));
  int64_t ns = 0;
  if (expires) {
    ns = std::chrono::duration_cast<std::chrono::nanoseconds>(expires->time_since_epoch()).count();
    ns = std::max<int64_t>(ns, 1);
  }
  s->expires_ns = ns;
  s->lifetime_ns = expires ? std::max<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                   *expires - std::chrono::system_clock::now())
                                                   .count(),
                                               0)
                           : 0;
  wake_.notify_all();  // an expiry in the past closes the session at the sweep's next look
  return {};
}

SessionExpected<void> Sessions::SetPauseAtExpiry(const std::string& owner, const std::string& id,
                                                 bool pause) {
  auto s = Find(owner, id);
  if (!s) return std::unexpected(NotFound(id));
  s->pause_at_expiry = pause;
  return {};
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
  Rebind(*s);        // every process ended with it
  if (store_) store_->Remove(id);
  return {};
}

SessionExpected<std::shared_ptr<SessionProcesses>> Sessions::Processes(const std::string& owner,
                                                                       const std::string& id, bool restart) {
  auto s = Find(owner, id);
  if (!s) return std::unexpected(NotFound(id));
  if (std::unique_lock run(s->run_mu, std::try_to_lock); run.owns_lock()) {
    if (s->closed) return std::unexpected(NotFound(id));
    s->last_used = std::chrono::system_clock::now();  // else an execution runs: it is in use
  }
  if (restart && !s->processes->ready()) {
    std::lock_guard run(s->run_mu);
    if (s->closed) return std::unexpected(NotFound(id));
    RestoreSaved(*s);
    if (s->child && s->child->alive() && !s->child->Probe()) Lost(*s, "exited");
    if (auto ok = EnsureChild(*s); !ok) return std::unexpected(ok.error());
  }
  return s->processes;
}

size_t Sessions::size() {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

size_t Sessions::SweepIdle() {
  auto now = std::chrono::system_clock::now();
  struct Over {
    std::string id, owner;
    Swept what;
  };
  std::vector<Over> over;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, s] : sessions_) {
      std::unique_lock run(s->run_mu, std::try_to_lock);
      if (!run.owns_lock()) continue;
      if (s->paused) continue;  // kept until it is resumed or deleted
      const int64_t expires_ns = s->expires_ns.load();
      if (expires_ns == 0) {
        if (now - s->last_used > options_.idle_ttl) over.push_back({id, s->owner, Swept::kIdle});
      } else if (now.time_since_epoch() >= std::chrono::nanoseconds(expires_ns)) {
        over.push_back({id, s->owner, s->pause_at_expiry ? Swept::kPausedAtExpiry : Swept::kExpired});
      }
    }
  }
  size_t closed = 0;
  for (auto& o : over) {
    // A session that cannot be paused (its process had ended, its state does not fit) ends.
    if (o.what == Swept::kPausedAtExpiry && Pause(o.owner, o.id)) {
      Tell(o.owner, o.id, o.what);
      continue;
    }
    if (o.what == Swept::kPausedAtExpiry) o.what = Swept::kExpired;
    if (Close(o.id).has_value()) {
      ++closed;
      Tell(o.owner, o.id, o.what);
    }
  }
  return closed;
}

void Sessions::OnSwept(SweepListener listener) {
  std::lock_guard lock(listener_mu_);
  listener_ = std::move(listener);
}

void Sessions::Tell(const std::string& owner, const std::string& id, Swept what) {
  std::lock_guard lock(listener_mu_);
  if (listener_) listener_(owner, id, what);
}

}  // namespace execbox::engine
