#include "api/http/http_api.h"

#include "api/http/http_problems.h"
#include "api/http/http_running.h"
#include "api/mcp/json_rpc.h"
#include "engine/result_json.h"

namespace execbox::api {
namespace {

constexpr std::chrono::milliseconds kMonitorPeriod{100};
constexpr std::chrono::seconds kHeartbeat{10};
constexpr std::chrono::seconds kPrunePeriod{60};

Problem NotFound(std::string_view path) {
  return Problem{.status = 404,
                 .type = "not-found",
                 .title = "Not found",
                 .detail = "no route for " + std::string(path)};
}

}  // namespace

HttpApi::HttpApi(engine::Engine& engine, const ServerConfig& config, std::string version, AuditLog* audit)
    : engine_(engine),
      config_(config),
      version_(std::move(version)),
      audit_(audit),
      request_limits_{.defaults = config.default_limits, .maxima = config.max_limits},
      auth_(config.keys),
      admission_(config.max_running, config.max_queue) {
  mcp_ =
      std::make_unique<McpHttp>(engine_, version_, McpHttpOptions{.allowed_origins = config.allowed_origins});
  monitor_ = std::thread([this] { Monitor(); });
}

HttpApi::~HttpApi() {
  Drain(std::chrono::milliseconds(0));
  mcp_.reset();
  {
    std::lock_guard lock(mu_);
    stop_monitor_ = true;
  }
  monitor_wake_.notify_all();
  monitor_.join();
}

void HttpApi::Respond(Exchange& exchange, HttpResponse response) { exchange.Respond(std::move(response)); }

void HttpApi::Fail(Exchange& exchange, const Problem& problem) {
  if (problem.status == 400 || problem.status == 415 || problem.status == 422)
    metrics_.Rejected("bad_request");
  if (problem.status == 413) metrics_.Rejected("too_large");
  exchange.Respond(ProblemResponse(problem));
}

void HttpApi::Handle(HttpRequest request, std::shared_ptr<Exchange> exchange) {
  const std::string& path = request.path;
  if (path == "/livez" || path == "/readyz") {
    if (request.method != "GET" && request.method != "HEAD")
      return Fail(*exchange, MethodNotAllowed(request.method, "GET, HEAD"));
    if (path == "/livez") return Respond(*exchange, HttpResponse{.body = R"({"status":"ok"})"});
    return Ready(exchange);
  }
  auto key = auth_.Authenticate(request.Header("authorization"));
  if (!key) {
    metrics_.Rejected(key.error().status == 401 ? "unauthorized" : "forbidden");
    return exchange->Respond(ProblemResponse(key.error()));
  }
  Route(request, exchange, **key);
}

void HttpApi::Route(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const ApiKey& key) {
  const std::string& path = request.path;
  const std::string& method = request.method;
  if (path == "/mcp") return mcp_->Handle(std::move(request), exchange, key.id);

  if (method == "POST" || method == "PUT") {
    // JSON routes take JSON; the file upload takes any bytes.
    auto type = request.Header("content-type");
    bool file_upload = method == "PUT";
    if (!file_upload && !type.empty() && !type.starts_with("application/json")) {
      return Fail(*exchange,
                  Problem{.status = 415,
                          .type = "unsupported-media-type",
                          .title = "Unsupported media type",
                          .detail = "send the body as application/json, not " + std::string(type)});
    }
  }

  if (path == "/metrics") {
    if (method != "GET") return Fail(*exchange, MethodNotAllowed(method, "GET"));
    Gauges gauges{.running = admission_.running(), .queued = admission_.queued()};
    if (auto* pool = engine_.pool()) {
      auto stats = pool->Stats();
      gauges.warm_workers = stats.warm_workers;
      gauges.prepared_children = stats.prepared;
    }
    if (auto* sessions = engine_.sessions()) gauges.sessions = sessions->size();
    if (connection_count_) gauges.connections = connection_count_();
    return Respond(*exchange, HttpResponse{.content_type = "text/plain; version=0.0.4; charset=utf-8",
                                           .body = metrics_.Render(gauges)});
  }
  if (path == "/v1/openapi.json") {
    if (method != "GET") return Fail(*exchange, MethodNotAllowed(method, "GET"));
    return Respond(*exchange, HttpResponse{.body = OpenApiDocument()});
  }
  if (path == "/v1/execute") {
    if (method != "POST") return Fail(*exchange, MethodNotAllowed(method, "POST"));
    return Execute(std::move(request), exchange, key, std::nullopt);
  }
  if (path == "/v1/check") {
    if (method != "POST") return Fail(*exchange, MethodNotAllowed(method, "POST"));
    return Check(std::move(request), exchange, key);
  }
  if (path == "/v1/sessions" || path.starts_with("/v1/sessions/")) {
    return Sessions(request, exchange, key,
                    std::string_view(path).substr(std::string_view("/v1/sessions").size()));
  }
  Fail(*exchange, NotFound(path));
}

void HttpApi::Ready(std::shared_ptr<Exchange>& exchange) {
  size_t warm = 0;
  if (auto* pool = engine_.pool()) warm = pool->Stats().warm_workers;
  bool ready = !shutting_down_ && (warm > 0 || !engine_.warm());
  if (!ready) {
    return Fail(*exchange,
                Problem{.status = 503,
                        .type = "not-ready",
                        .title = "Not ready",
                        .detail = shutting_down_ ? "the server is shutting down" : "no warm worker is up yet",
                        .headers = {{"Retry-After", "1"}}});
  }
  nlohmann::json body = {
      {"status", "ready"}, {"engine", engine_.warm() ? "warm" : "cold"}, {"warm_workers", warm}};
  Respond(*exchange, HttpResponse{.body = Serialize(body)});
}

void HttpApi::Check(HttpRequest request, std::shared_ptr<Exchange> exchange, const ApiKey& key) {
  auto program = ParseCheckBody(request.body, request_limits_);
  if (!program) return Fail(*exchange, program.error());
  // A check starts a cold jail (the agent parses; no user code runs): it takes an admission
  // slot and the key's rate like an execution, and runs off the I/O thread.
  auto reserved = admission_.Reserve(key);
  if (!reserved) {
    metrics_.Rejected(RejectionReason(reserved.error()));
    return exchange->Respond(ProblemResponse(reserved.error()));
  }
  auto ticket = std::make_shared<Ticket>(std::move(*reserved));
  Spawn([this, exchange, ticket, program = std::move(*program)]() mutable {
    if (auto waited = admission_.Wait(*ticket, &exchange->ClientGone()); !waited) {
      return exchange->Respond(ProblemResponse(waited.error()));
    }
    auto result = engine::Execute(program);
    { Ticket done = std::move(*ticket); }
    if (!result) {
      return Fail(*exchange, Problem{.status = 400,
                                     .type = "invalid-request",
                                     .title = "Invalid request",
                                     .detail = result.error().message});
    }
    Respond(*exchange, HttpResponse{.body = engine::Dump(engine::ToJson(*result))});
  });
}

void HttpApi::Spawn(std::function<void()> work) {
  {
    std::lock_guard lock(mu_);
    ++threads_;
  }
  std::thread([this, work = std::move(work)] {
    work();
    std::lock_guard lock(mu_);
    --threads_;
    idle_.notify_all();
  }).detach();
}

size_t HttpApi::in_flight() {
  size_t mcp = mcp_ ? mcp_->InFlight() : 0;
  std::lock_guard lock(mu_);
  return threads_ + mcp;
}

void HttpApi::Monitor() {
  std::unique_lock lock(mu_);
  auto pruned = std::chrono::steady_clock::now();
  while (!stop_monitor_) {
    monitor_wake_.wait_for(lock, kMonitorPeriod);
    if (auto* sessions = engine_.sessions();
        sessions && std::chrono::steady_clock::now() - pruned > kPrunePeriod) {
      // Sessions closed by their idle TTL leave their owner entry behind: drop those.
      // Only entries that existed before the listing can be stale: one added meanwhile is new.
      pruned = std::chrono::steady_clock::now();
      std::vector<std::string> known;
      for (const auto& entry : session_owner_) known.push_back(entry.first);
      lock.unlock();
      std::set<std::string> live;
      for (const auto& info : sessions->List()) live.insert(info.id);
      lock.lock();
      for (const auto& id : known) {
        if (!live.contains(id)) session_owner_.erase(id);
      }
    }
    auto now = std::chrono::steady_clock::now();
    for (Running* r : running_) {
      if (r->exchange->ClientGone()) r->cancel = true;
      if (r->streaming && now - r->last_write.load() > kHeartbeat) r->Send(": heartbeat\n\n");
    }
  }
}

void HttpApi::Drain(std::chrono::milliseconds grace) {
  shutting_down_ = true;
  admission_.Close();
  auto deadline = std::chrono::steady_clock::now() + grace;
  std::unique_lock lock(mu_);
  idle_.wait_until(lock, deadline, [this] { return threads_ == 0; });
  // MCP tool calls run on McpHttp's threads: the same grace, then cancelled.
  lock.unlock();
  while (mcp_ && mcp_->InFlight() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (mcp_) mcp_->CancelAll();
  lock.lock();
  for (Running* r : running_) {
    r->shutdown = true;
    r->cancel = true;
  }
  // A cancelled execution ends within ~100 ms; a session restart or a file transfer may take a
  // few seconds more.
  idle_.wait_for(lock, std::chrono::seconds(30), [this] { return threads_ == 0; });
}

}  // namespace execbox::api
