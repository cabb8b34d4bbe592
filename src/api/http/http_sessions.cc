// /v1/sessions: create, list, info, execute, fork, delete, and file upload and download.
// A session belongs to the key that created it: to any other key it does not exist (404).
#include <ctime>

#include "api/http/http_api.h"
#include "api/http/http_problems.h"
#include "api/mcp/json_rpc.h"

namespace execbox::api {

namespace {

std::string Rfc3339(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json SessionJson(const engine::SessionInfo& info) {
  nlohmann::json j = {{"id", info.id},
                      {"generation", info.generation},
                      {"executions", info.executions},
                      {"state", info.preserved ? "preserved" : "lost"},
                      {"created", Rfc3339(info.created)},
                      {"last_used", Rfc3339(info.last_used)},
                      {"memory", {{"private_bytes", info.private_bytes}, {"pss_bytes", info.pss_bytes}}}};
  if (!info.preserved) j["reason"] = info.lost_reason;
  return j;
}

HttpResponse JsonResponse(int status, const nlohmann::json& body) {
  return HttpResponse{.status = status, .body = Serialize(body)};
}

// Largest file a download returns; bigger ones get 413 (the work dir itself is capped).
constexpr uint64_t kMaxDownloadBytes = 256ull << 20;

}  // namespace

bool HttpApi::OwnsSession(const std::string& id, const ApiKey& key) {
  std::lock_guard lock(mu_);
  auto it = session_owner_.find(id);
  return it != session_owner_.end() && it->second == key.id;
}

void HttpApi::Sessions(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const ApiKey& key,
                       std::string_view rest) {
  const std::string& method = request.method;
  auto* sessions = engine_.sessions();
  if (!sessions) {
    return Fail(*exchange, SessionsUnavailable());
  }
  if (rest.empty() || rest == "/") {
    if (method == "GET") {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& info : sessions->List()) {
        if (OwnsSession(info.id, key)) list.push_back(SessionJson(info));
      }
      return Respond(*exchange, JsonResponse(200, {{"sessions", list}}));
    }
    if (method != "POST") return Fail(*exchange, MethodNotAllowed(method, "GET, POST"));
    if (!request.body.empty()) {
      auto body = ParseJsonObject(request.body);
      if (!body) return Fail(*exchange, body.error());
      if (!body->empty()) {
        return Fail(*exchange, Problem{.status = 400,
                                       .type = "unknown-field",
                                       .title = "Unknown field",
                                       .detail = "unknown field `" + body->begin().key() +
                                                 "`: the body is {} or empty"});
      }
    }
    if (shutting_down_) {
      return Fail(*exchange, Problem{.status = 503,
                                     .type = "shutting-down",
                                     .title = "Shutting down",
                                     .detail = "the server is shutting down"});
    }
    std::string key_id = key.id;
    return Spawn([this, exchange, sessions, key_id] {
      auto info = sessions->Create();
      if (!info) return Fail(*exchange, SessionProblem(info.error(), ""));
      {
        std::lock_guard lock(mu_);
        session_owner_[info->id] = key_id;
      }
      Respond(*exchange, JsonResponse(201, SessionJson(*info)));
    });
  }

  // "/{id}" then an optional "/execute", "/fork" or "/files/{path}".
  rest.remove_prefix(1);
  size_t slash = rest.find('/');
  std::string id(rest.substr(0, slash));
  std::string_view action = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
  if (!OwnsSession(id, key))
    return Fail(*exchange, SessionProblem({engine::SessionError::kNotFound, ""}, id));

  auto not_allowed = [&](const std::string& allow) { Fail(*exchange, MethodNotAllowed(method, allow)); };
  if (action.empty()) {
    if (method == "GET") {
      auto info = sessions->Info(id);
      if (!info) return Fail(*exchange, SessionProblem(info.error(), id));
      return Respond(*exchange, JsonResponse(200, SessionJson(*info)));
    }
    if (method == "DELETE") {
      return Spawn([this, exchange, sessions, id] {
        auto deleted = sessions->Delete(id);
        {
          std::lock_guard lock(mu_);
          session_owner_.erase(id);
        }
        if (!deleted) return Fail(*exchange, SessionProblem(deleted.error(), id));
        Respond(*exchange, HttpResponse{.status = 204, .content_type = ""});
      });
    }
    return not_allowed("GET, DELETE");
  }
  if (action == "/execute") {
    if (method != "POST") return not_allowed("POST");
    return Execute(std::move(request), exchange, key, id);
  }
  if (action == "/fork") {
    if (method != "POST") return not_allowed("POST");
    auto forked = sessions->Fork(id);
    if (!forked) {
      if (forked.error().kind == engine::SessionError::kFailed) {
        return Fail(*exchange, Problem{.status = 409,
                                       .type = "fork-unsupported",
                                       .title = "Session fork unsupported",
                                       .detail = forked.error().message});
      }
      return Fail(*exchange, SessionProblem(forked.error(), id));
    }
    {
      std::lock_guard lock(mu_);
      session_owner_[forked->id] = key.id;
    }
    return Respond(*exchange, JsonResponse(201, SessionJson(*forked)));
  }
  if (action.starts_with("/files/")) return SessionFiles(request, exchange, id, action.substr(7));
  Fail(*exchange, Problem{.status = 404,
                          .type = "not-found",
                          .title = "Not found",
                          .detail = "no route for " + request.path});
}

void HttpApi::SessionFiles(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const std::string& id,
                           std::string_view raw_path) {
  auto path = ValidateFilePath(raw_path);
  if (!path) return Fail(*exchange, path.error());
  auto* sessions = engine_.sessions();
  if (request.method == "PUT") {
    if (request.body.size() > config_.max_limits.work_dir_bytes) {
      return Fail(*exchange,
                  Problem{.status = 413,
                          .type = "file-too-large",
                          .title = "File too large",
                          .detail = "the file is larger than the largest work dir (" +
                                    std::to_string(config_.max_limits.work_dir_bytes) + " bytes)"});
    }
    return Spawn(
        [this, exchange, sessions, id, file = std::move(*path), body = std::move(request.body)]() mutable {
          auto written = sessions->WriteFile(id, file, std::move(body));
          if (!written) {
            if (written.error().kind == engine::SessionError::kFailed) {
              // The keeper refused: a symlink or a file where a parent dir should be, a dir at the path.
              return Fail(*exchange, Problem{.status = 409,
                                             .type = "file-refused",
                                             .title = "File refused",
                                             .detail = written.error().message});
            }
            return Fail(*exchange, SessionProblem(written.error(), id));
          }
          Respond(*exchange, HttpResponse{.status = 204, .content_type = ""});
        });
  }
  if (request.method == "GET" || request.method == "HEAD") {
    return Spawn([this, exchange, sessions, id, file = std::move(*path)] {
      auto content = sessions->ReadFile(id, file, kMaxDownloadBytes);
      if (!content) {
        return Fail(*exchange, SessionProblem(content.error(), id));
      }
      Respond(*exchange,
              HttpResponse{.content_type = "application/octet-stream", .body = std::move(*content)});
    });
  }
  Fail(*exchange, MethodNotAllowed(request.method, "GET, PUT"));
}

}  // namespace execbox::api
