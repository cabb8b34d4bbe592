// /v1/sessions: create, list, info, execute, fork, undo, delete, and file upload and download, each
// through the gate. A session belongs to the key that created it: to any other key it does not
// exist (404), on every transport (the rule is the gate's, engine/gate.h).
#include <ctime>

#include "api/common/json_text.h"
#include "api/http/http_api.h"
#include "api/http/http_problems.h"
#include "api/http/http_wire.h"
#include "engine/result_json.h"

namespace execbox::api {

namespace {

nlohmann::json SessionJson(const engine::SessionInfo& info) {
  nlohmann::json j = {{"id", info.id},
                      {"generation", info.generation},
                      {"executions", info.executions},
                      {"state", info.preserved ? "preserved" : "lost"},
                      {"created", Rfc3339(info.created)},
                      {"last_used", Rfc3339(info.last_used)},
                      {"memory", {{"private_bytes", info.private_bytes}, {"pss_bytes", info.pss_bytes}}}};
  if (!info.preserved) j["reason"] = info.lost_reason;
  j["checkpoint"] = info.checkpoint;
  if (info.checkpoint) j["can_undo"] = info.can_undo;
  if (info.network) j["network"] = engine::NetPolicyJson(*info.network);
  j["paused"] = info.paused;
  return j;
}

nlohmann::json LeftOutJson(const std::vector<engine::LeftOut>& left_out) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& e : left_out) list.push_back({{"name", e.name}, {"type", e.type}, {"reason", e.reason}});
  return list;
}

HttpResponse JsonResponse(int status, const nlohmann::json& body) {
  return HttpResponse{.status = status, .body = Serialize(body)};
}

// Largest file a download returns; bigger ones get 413 (the work dir itself is capped).
constexpr uint64_t kMaxDownloadBytes = 256ull << 20;

}  // namespace

void HttpApi::Sessions(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const ApiKey& key,
                       std::string_view rest) {
  const std::string& method = request.method;
  if (!gate_.sessions_available()) return Fail(*exchange, ProblemOf(engine::SessionsUnavailable()));
  const engine::Caller caller = CallerOf(key);
  const engine::Origin origin{.transport = engine::Transport::kHttp, .peer = request.peer};
  // Session calls wait for the session's running execution (or make a child): never on the I/O thread.
  if (rest.empty() || rest == "/") {
    if (method == "GET") {
      return calls_.Spawn([this, exchange, caller] {
        nlohmann::json list = nlohmann::json::array();
        for (const auto& info : gate_.ListSessions(caller)) list.push_back(SessionJson(info));
        Respond(*exchange, JsonResponse(200, {{"sessions", list}}));
      });
    }
    if (method != "POST") return Fail(*exchange, MethodNotAllowed(method, "GET, POST"));
    auto body = ParseSessionBody(request.body);
    if (!body) return Fail(*exchange, body.error());
    return calls_.Spawn([this, exchange, caller, origin, body = std::move(*body)]() mutable {
      const bool asked_packages = !body.packages.empty();
      auto created =
          gate_.CreateSession(caller, body.limits, origin, body.checkpoint, std::move(body.packages),
                              std::move(body.network));
      if (!created) return exchange->Respond(ProblemResponse(ProblemOf(created.error())));
      nlohmann::json out = SessionJson(created->info);
      if (asked_packages) out["installed"] = engine::InstalledJson(created->installed);
      Respond(*exchange, JsonResponse(201, out));
    });
  }

  if (rest == "/import") {
    if (method != "POST") return Fail(*exchange, MethodNotAllowed(method, "POST"));
    return calls_.Spawn([this, exchange, caller, origin, body = std::move(request.body)] {
      auto imported = gate_.ImportSession(caller, body, origin);
      if (!imported) return exchange->Respond(ProblemResponse(ProblemOf(imported.error())));
      nlohmann::json out = SessionJson(imported->info);
      out["not_restored"] = LeftOutJson(imported->left_out);
      Respond(*exchange, JsonResponse(201, out));
    });
  }

  // "/{id}" then an optional "/execute", "/fork", "/undo", "/pause", "/resume", "/snapshot", "/files/{path}"
  // or
  // "/processes..." (http_processes.cc).
  rest.remove_prefix(1);
  size_t slash = rest.find('/');
  std::string id(rest.substr(0, slash));
  std::string_view action = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);

  auto not_allowed = [&](const std::string& allow) { Fail(*exchange, MethodNotAllowed(method, allow)); };
  if (action.empty()) {
    if (method == "GET") {
      return calls_.Spawn([this, exchange, caller, id] {
        auto info = gate_.Session(caller, id);
        if (!info) return exchange->Respond(ProblemResponse(ProblemOf(info.error())));
        Respond(*exchange, JsonResponse(200, SessionJson(*info)));
      });
    }
    if (method == "DELETE") {
      return calls_.Spawn([this, exchange, caller, origin, id] {
        auto closed = gate_.CloseSession(caller, id, origin);
        if (!closed) return exchange->Respond(ProblemResponse(ProblemOf(closed.error())));
        Respond(*exchange, HttpResponse{.status = 204, .content_type = ""});
      });
    }
    return not_allowed("GET, DELETE");
  }
  if (action == "/execute") {
    if (method != "POST") return not_allowed("POST");
    return Execute(std::move(request), exchange, key, id);
  }
  if (action == "/fork" || action == "/undo") {
    if (method != "POST") return not_allowed("POST");
    const bool fork = action == "/fork";
    return calls_.Spawn([this, exchange, caller, origin, id, fork] {
      auto copied = fork ? gate_.ForkSession(caller, id, origin) : gate_.UndoSession(caller, id, origin);
      if (!copied) return exchange->Respond(ProblemResponse(ProblemOf(copied.error())));
      nlohmann::json body = SessionJson(copied->info);
      body[fork ? "not_copied" : "not_restored"] = LeftOutJson(copied->left_out);
      Respond(*exchange, JsonResponse(fork ? 201 : 200, body));
    });
  }
  if (action == "/pause" || action == "/resume") {
    if (method != "POST") return not_allowed("POST");
    const bool pause = action == "/pause";
    return calls_.Spawn([this, exchange, caller, origin, id, pause] {
      auto done = pause ? gate_.PauseSession(caller, id, origin) : gate_.ResumeSession(caller, id, origin);
      if (!done) return exchange->Respond(ProblemResponse(ProblemOf(done.error())));
      auto info = gate_.Session(caller, id);
      if (!info) return exchange->Respond(ProblemResponse(ProblemOf(info.error())));
      nlohmann::json body = SessionJson(*info);
      body["changed"] = *done;
      Respond(*exchange, JsonResponse(200, body));
    });
  }
  if (action == "/snapshot") {
    if (method != "GET") return not_allowed("GET");
    return calls_.Spawn([this, exchange, caller, origin, id] {
      auto exported = gate_.ExportSession(caller, id, origin);
      if (!exported) return exchange->Respond(ProblemResponse(ProblemOf(exported.error())));
      // What the snapshot could not hold, by name and type (ASCII JSON: a header value), as
      // many as fit in 4 KiB; the import lists them all with their reasons.
      nlohmann::json left = nlohmann::json::array();
      std::string listed = "[]";
      for (size_t i = 0; i < exported->left_out.size(); ++i) {
        left.push_back({{"name", exported->left_out[i].name}, {"type", exported->left_out[i].type}});
        std::string next = left.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
        if (next.size() > 4000) {
          left.erase(left.size() - 1);
          left.push_back({{"more", exported->left_out.size() - i}});
          listed = left.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
          break;
        }
        listed = std::move(next);
      }
      HttpResponse response{.content_type = "application/octet-stream", .body = std::move(exported->sealed)};
      response.headers.emplace_back("Execbox-Not-Copied", std::move(listed));
      Respond(*exchange, std::move(response));
    });
  }
  if (action.starts_with("/files/")) return SessionFiles(request, exchange, key, id, action.substr(7));
  if (action == "/processes" || action.starts_with("/processes/"))
    return Processes(request, exchange, key, id, action.substr(10));
  Fail(*exchange, Problem{.status = 404,
                          .type = "not-found",
                          .title = "Not found",
                          .detail = "no route for " + request.path});
}

void HttpApi::SessionFiles(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const ApiKey& key,
                           const std::string& id, std::string_view raw_path) {
  auto path = ValidateFilePath(raw_path);
  if (!path) return Fail(*exchange, path.error());
  const engine::Caller caller = CallerOf(key);
  if (request.method == "PUT") {
    const uint64_t largest = gate_.limits().maxima.work_dir_bytes;
    if (request.body.size() > largest) {
      return Fail(*exchange, Problem{.status = 413,
                                     .type = "file-too-large",
                                     .title = "File too large",
                                     .detail = "the file is larger than the largest work dir (" +
                                               std::to_string(largest) + " bytes)"});
    }
    return calls_.Spawn(
        [this, exchange, caller, id, file = std::move(*path), body = std::move(request.body)]() mutable {
          auto written = gate_.WriteSessionFile(caller, id, file, std::move(body));
          if (!written) return Fail(*exchange, ProblemOf(written.error()));
          Respond(*exchange, HttpResponse{.status = 204, .content_type = ""});
        });
  }
  if (request.method == "GET" || request.method == "HEAD") {
    return calls_.Spawn([this, exchange, caller, id, file = std::move(*path)] {
      auto content = gate_.ReadSessionFile(caller, id, file, kMaxDownloadBytes);
      if (!content) return Fail(*exchange, ProblemOf(content.error()));
      Respond(*exchange,
              HttpResponse{.content_type = "application/octet-stream", .body = std::move(*content)});
    });
  }
  Fail(*exchange, MethodNotAllowed(request.method, "GET, PUT"));
}

}  // namespace execbox::api
