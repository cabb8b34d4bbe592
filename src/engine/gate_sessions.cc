// The gate's calls for sessions (gate.h): create, find, list, close, fork, export, import,
// undo, files and lifetime, each for its owner only, admitted into a slot where it runs code,
// and audited; the engine's session failures turned into refusals.
#include <chrono>

#include "engine/gate.h"
#include "engine/gate_refusals.h"
#include "engine/result_json.h"

namespace execbox::engine {

Refusal Gate::FromSession(const SessionFailure& failure, const std::string& id) const {
  auto make = [&](RefusalReason reason) { return MakeRefusal(reason, failure.message); };
  switch (failure.kind) {
    case SessionError::kNotFound:
      return SessionNotFound(id, engine_.instance());
    case SessionError::kFull: {
      Refusal r = make(RefusalReason::kSessionsFull);
      r.retry_after_seconds = 5;
      return r;
    }
    case SessionError::kInvalid:
      return make(RefusalReason::kInvalidPath);
    case SessionError::kRefused:
      return make(RefusalReason::kFileRefused);
    case SessionError::kStateNotCopied:
      return make(RefusalReason::kStateNotCopied);
    case SessionError::kNothingToUndo:
      return make(RefusalReason::kNothingToUndo);
    case SessionError::kBadSnapshot:
      return make(RefusalReason::kInvalidSnapshot);
    case SessionError::kNotYours:
      return make(RefusalReason::kSnapshotNotYours);
    case SessionError::kNoSnapshot:
      return make(RefusalReason::kSnapshotNotFound);
    case SessionError::kFileNotFound:
      return make(RefusalReason::kFileNotFound);
    case SessionError::kTooLarge:
      return make(RefusalReason::kFileTooLarge);
    case SessionError::kInternal:
      break;
  }
  return Internal("session", failure.message);
}

Refused<SessionNetwork> Gate::SessionNetworkWithin(const Caller& caller, NetPolicy asked) const {
  auto within = NetworkWithin(caller, std::move(asked));
  if (!within) return std::unexpected(std::move(within.error()));
  return SessionNetwork{.policy = std::make_shared<const NetPolicy>(std::move(*within)),
                        .max_connections = options_.network_max_connections,
                        .max_bytes = options_.network_max_bytes,
                        .hosts = options_.network_hosts};
}

Refused<SessionInfo> Gate::CreateSession(const Caller& caller, const LimitOverrides& overrides,
                                         const Origin& origin, bool checkpoint, std::optional<NetPolicy> network) {
  const char* route = "session_create";
  auto refuse = [&](Refusal r) {
    return std::unexpected(Reject(caller, origin, route, "", "", std::move(r)));
  };
  if (engine_.sessions() == nullptr) return refuse(SessionsUnavailable());
  auto limits = ApplyLimitOverrides(options_.limits, options_.limits.defaults, overrides);
  if (!limits) return refuse(std::move(limits.error()));
  SessionNetwork session_network;
  if (network) {
    auto within = SessionNetworkWithin(caller, std::move(*network));
    if (!within) return refuse(std::move(within.error()));
    session_network = std::move(*within);
  }
  auto place = SessionPlace(caller);  // held until the session exists (or failed)
  if (!place) return refuse(std::move(place.error()));
  if (checkpoint) {
    if (auto room = StateRoom(caller); !room) return refuse(std::move(room.error()));
  }
  // Making a session's child costs a fork of the warm interpreter: it takes a slot and the
  // caller's rate like an execution, so a flood of creations is refused, not forked.
  auto ticket = admission_.Reserve(WithCaps(caller));
  if (!ticket) return refuse(std::move(ticket.error()));
  if (auto waited = admission_.Wait(*ticket, nullptr); !waited) return refuse(std::move(waited.error()));
  auto info = engine_.sessions()->Create(caller.id, *limits, checkpoint, session_network);
  { Ticket done = std::move(*ticket); }
  if (!info) return refuse(FromSession(info.error(), ""));
  Audit(caller, origin, route, info->id, "", "created", nullptr,
        session_network.policy ? nlohmann::json{{"policy", NetPolicyJson(*session_network.policy)}} : nlohmann::json());
  return std::move(*info);
}

Refused<Gate::CreatedSession> Gate::CreateSession(const Caller& caller, const LimitOverrides& overrides,
                                                  const Origin& origin, bool checkpoint,
                                                  std::vector<std::string> packages,
                                                  std::optional<NetPolicy> network) {
  if (!packages.empty()) {
    runtime::PythonProgram wanted;
    wanted.packages = packages;
    if (auto checked = CheckInputs(wanted); !checked)
      return std::unexpected(Reject(caller, origin, "session_create", "", "", std::move(checked.error())));
  }
  auto info = CreateSession(caller, overrides, origin, checkpoint, std::move(network));
  if (!info) return std::unexpected(std::move(info.error()));
  CreatedSession created{.info = std::move(*info), .installed = {}};
  if (packages.empty()) return created;
  auto installed = InstallPackages(caller, created.info.id, std::move(packages), origin);
  if (!installed) {
    (void)CloseSession(caller, created.info.id, origin);
    return std::unexpected(std::move(installed.error()));
  }
  created.installed = std::move(*installed);
  if (auto now = Session(caller, created.info.id)) created.info = std::move(*now);  // one execution later
  return created;
}

Refused<SessionInfo> Gate::Session(const Caller& caller, const std::string& id) {
  if (engine_.sessions() == nullptr) return std::unexpected(SessionsUnavailable());
  auto info = engine_.sessions()->Info(caller.id, id);
  if (!info) return std::unexpected(FromSession(info.error(), id));
  return std::move(*info);
}

Refused<jail::Limits> Gate::SessionLimits(const Caller& caller, const std::string& id) {
  if (engine_.sessions() == nullptr) return std::unexpected(SessionsUnavailable());
  auto limits = engine_.sessions()->CreatedWith(caller.id, id);
  if (!limits) return std::unexpected(FromSession(limits.error(), id));
  return *limits;
}

std::vector<SessionInfo> Gate::ListSessions(const Caller& caller) {
  if (engine_.sessions() == nullptr) return {};
  return engine_.sessions()->List(caller.id);
}

Refused<void> Gate::CloseSession(const Caller& caller, const std::string& id, const Origin& origin) {
  const char* route = "session_close";
  if (engine_.sessions() == nullptr)
    return std::unexpected(Reject(caller, origin, route, id, "", SessionsUnavailable()));
  auto closed = engine_.sessions()->Delete(caller.id, id);
  if (!closed) return std::unexpected(Reject(caller, origin, route, id, "", FromSession(closed.error(), id)));
  Audit(caller, origin, route, id, "", "closed", nullptr);
  return {};
}

template <typename T, typename Call>
Refused<T> Gate::InSlot(const Caller& caller, const Origin& origin, const char* route, const std::string& id,
                        Call call) {
  auto refuse = [&](Refusal r) {
    return std::unexpected(Reject(caller, origin, route, id, "", std::move(r)));
  };
  if (engine_.sessions() == nullptr) return refuse(SessionsUnavailable());
  if (closed()) return refuse(ShuttingDown());
  auto ticket = admission_.Reserve(WithCaps(caller));
  if (!ticket) return refuse(std::move(ticket.error()));
  if (auto waited = admission_.Wait(*ticket, nullptr); !waited) return refuse(std::move(waited.error()));
  auto done = call(*engine_.sessions());
  { Ticket free = std::move(*ticket); }
  if (!done) return refuse(FromSession(done.error(), id));
  return std::move(*done);
}

Refused<StateCopied> Gate::ForkSession(const Caller& caller, const std::string& id, const Origin& origin) {
  auto place = SessionPlace(caller);
  if (!place)
    return std::unexpected(Reject(caller, origin, "session_fork", id, "", std::move(place.error())));
  if (auto room = StateRoom(caller); !room)
    return std::unexpected(Reject(caller, origin, "session_fork", id, "", std::move(room.error())));
  auto forked = InSlot<StateCopied>(caller, origin, "session_fork", id,
                                    [&](Sessions& sessions) { return sessions.Fork(caller.id, id); });
  if (forked) Audit(caller, origin, "session_fork", forked->info.id, "", "forked:" + id, nullptr);
  return forked;
}

Refused<Sessions::Exported> Gate::ExportSession(const Caller& caller, const std::string& id,
                                                const Origin& origin) {
  auto exported = InSlot<Sessions::Exported>(caller, origin, "session_export", id, [&](Sessions& sessions) {
    return sessions.Export(caller.id, id);
  });
  if (exported) Audit(caller, origin, "session_export", id, "", "exported", nullptr);
  return exported;
}

Refused<StateCopied> Gate::ImportSession(const Caller& caller, std::string_view sealed,
                                         const Origin& origin) {
  return ImportOpened(caller, origin, "session_import",
                      [sealed](Sessions& sessions) { return sessions.OpenExport(sealed); });
}

Refused<StateCopied> Gate::ImportOpened(const Caller& caller, const Origin& origin, const char* route,
                                        const std::function<SessionExpected<Unsealed>(Sessions&)>& open) {
  auto place = SessionPlace(caller);
  if (!place) return std::unexpected(Reject(caller, origin, route, "", "", std::move(place.error())));
  if (auto room = StateRoom(caller); !room)
    return std::unexpected(Reject(caller, origin, route, "", "", std::move(room.error())));
  if (engine_.sessions() == nullptr)
    return std::unexpected(Reject(caller, origin, route, "", "", SessionsUnavailable()));
  // Opened (its seal checked) once. Its network is bounded again, as a new session's would be:
  // the server's bound or the key's may have narrowed since it was sealed.
  auto exported = open(*engine_.sessions());
  if (!exported)
    return std::unexpected(Reject(caller, origin, route, "", "", FromSession(exported.error(), "")));
  SessionNetwork network;
  if (exported->session.network) {
    auto within = SessionNetworkWithin(caller, std::move(*exported->session.network));
    if (!within) return std::unexpected(Reject(caller, origin, route, "", "", std::move(within.error())));
    network = std::move(*within);
  }
  auto imported = InSlot<StateCopied>(caller, origin, route, "", [&](Sessions& sessions) {
    return sessions.Import(caller.id, std::move(*exported), options_.limits.maxima, network);
  });
  if (imported)
    Audit(caller, origin, route, imported->info.id, "", "imported", nullptr,
          network.policy ? nlohmann::json{{"policy", NetPolicyJson(*network.policy)}} : nlohmann::json());
  return imported;
}

Refused<ShelvedSnapshot> Gate::KeepSnapshot(const Caller& caller, const std::string& id,
                                            const std::optional<std::string>& name, const Origin& origin) {
  if (auto room = StateRoom(caller); !room)
    return std::unexpected(Reject(caller, origin, "snapshot_create", id, "", std::move(room.error())));
  auto kept = InSlot<ShelvedSnapshot>(caller, origin, "snapshot_create", id, [&](Sessions& sessions) {
    return sessions.Shelve(caller.id, id, name);
  });
  if (kept) Audit(caller, origin, "snapshot_create", id, kept->id, "kept", {{"bytes", kept->bytes()}});
  return kept;
}

std::vector<ShelvedSnapshot> Gate::KeptSnapshots(const Caller& caller) {
  return engine_.sessions() ? engine_.sessions()->Shelved(caller.id) : std::vector<ShelvedSnapshot>{};
}

Refused<void> Gate::DropSnapshot(const Caller& caller, const std::string& id_or_name, const Origin& origin) {
  if (engine_.sessions() == nullptr || !engine_.sessions()->Unshelve(caller.id, id_or_name)) {
    return std::unexpected(
        Reject(caller, origin, "snapshot_delete", "", id_or_name.substr(0, 100),
               MakeRefusal(RefusalReason::kSnapshotNotFound,
                           "no snapshot " + id_or_name.substr(0, 100) + " is kept for this key")));
  }
  Audit(caller, origin, "snapshot_delete", "", id_or_name.substr(0, 100), "deleted", nullptr);
  return {};
}

Refused<StateCopied> Gate::SessionFromSnapshot(const Caller& caller, const std::string& id_or_name,
                                               const Origin& origin) {
  return ImportOpened(caller, origin, "snapshot_restore",
                      [&](Sessions& sessions) { return sessions.OpenShelved(caller.id, id_or_name); });
}

Refused<StateCopied> Gate::UndoSession(const Caller& caller, const std::string& id, const Origin& origin) {
  auto undone = InSlot<StateCopied>(caller, origin, "session_undo", id,
                                    [&](Sessions& sessions) { return sessions.Undo(caller.id, id); });
  if (undone) Audit(caller, origin, "session_undo", id, "", "undone", nullptr);
  return undone;
}

Refused<bool> Gate::PauseSession(const Caller& caller, const std::string& id, const Origin& origin) {
  if (auto room = StateRoom(caller); !room)
    return std::unexpected(Reject(caller, origin, "session_pause", id, "", std::move(room.error())));
  auto paused = InSlot<bool>(caller, origin, "session_pause", id,
                             [&](Sessions& sessions) { return sessions.Pause(caller.id, id); });
  if (paused) Audit(caller, origin, "session_pause", id, "", *paused ? "paused" : "already_paused", nullptr);
  return paused;
}

Refused<bool> Gate::SessionPaused(const Caller& caller, const std::string& id) {
  if (engine_.sessions() == nullptr) return std::unexpected(SessionsUnavailable());
  auto paused = engine_.sessions()->Paused(caller.id, id);
  if (!paused) return std::unexpected(FromSession(paused.error(), id));
  return *paused;
}

Refused<void> Gate::PauseSessionAtExpiry(const Caller& caller, const std::string& id, bool pause) {
  if (engine_.sessions() == nullptr) return std::unexpected(SessionsUnavailable());
  auto set = engine_.sessions()->SetPauseAtExpiry(caller.id, id, pause);
  if (!set) return std::unexpected(FromSession(set.error(), id));
  return {};
}

Refused<bool> Gate::ResumeSession(const Caller& caller, const std::string& id, const Origin& origin) {
  auto resumed = InSlot<bool>(caller, origin, "session_resume", id,
                              [&](Sessions& sessions) { return sessions.Resume(caller.id, id); });
  if (resumed && *resumed) Audit(caller, origin, "session_resume", id, "", "resumed", nullptr);
  return resumed;
}

Refused<void> Gate::WriteSessionFile(const Caller& caller, const std::string& id, const std::string& path,
                                     std::string content) {
  if (engine_.sessions() == nullptr) return std::unexpected(SessionsUnavailable());
  auto written = engine_.sessions()->WriteFile(caller.id, id, path, std::move(content));
  if (!written) return std::unexpected(FromSession(written.error(), id));
  return {};
}

Refused<std::string> Gate::ReadSessionFile(const Caller& caller, const std::string& id,
                                           const std::string& path, uint64_t max_bytes) {
  if (engine_.sessions() == nullptr) return std::unexpected(SessionsUnavailable());
  auto content = engine_.sessions()->ReadFile(caller.id, id, path, max_bytes);
  if (!content) return std::unexpected(FromSession(content.error(), id));
  return std::move(*content);
}

Refused<void> Gate::SetSessionLifetime(const Caller& caller, const std::string& id,
                                       std::chrono::seconds lifetime, const Origin& origin) {
  const char* route = "session_lifetime";
  auto* sessions = engine_.sessions();
  if (sessions == nullptr)
    return std::unexpected(Reject(caller, origin, route, id, "", SessionsUnavailable()));
  const auto most = sessions->max_lifetime();
  if (lifetime.count() < 0 || lifetime > most) {
    return std::unexpected(Reject(
        caller, origin, route, id, "",
        MakeRefusal(RefusalReason::kLimitExceeded,
                    "a session may live at most " + std::to_string(most.count()) + " s; " +
                        std::to_string(lifetime.count()) + " s was asked for",
                    {{"limit", "lifetime_s"}, {"requested", lifetime.count()}, {"maximum", most.count()}})));
  }
  auto set = sessions->SetExpiry(caller.id, id, std::chrono::system_clock::now() + lifetime);
  if (!set) return std::unexpected(Reject(caller, origin, route, id, "", FromSession(set.error(), id)));
  return {};
}

}  // namespace execbox::engine
