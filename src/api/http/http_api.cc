#include "api/http/http_api.h"

#include <unistd.h>

#include "api/common/json_text.h"
#include "api/http/http_problems.h"
#include "api/http/openapi.h"
#include "engine/result_json.h"

namespace execbox::api {
namespace {

Problem NotFound(std::string_view path) {
  return Problem{.status = 404,
                 .type = "not-found",
                 .title = "Not found",
                 .detail = "no route for " + std::string(path)};
}

}  // namespace

HttpApi::HttpApi(engine::Gate& gate, std::vector<ApiKey> keys, std::string version, Metrics& metrics)
    : gate_(gate),
      version_(std::move(version)),
      openapi_(OpenApiDocument(gate.limits())),
      auth_(std::make_shared<const Authenticator>(std::move(keys))),
      metrics_(metrics) {}

HttpApi::~HttpApi() { Drain(std::chrono::milliseconds(0)); }

void HttpApi::Serve(const std::string& path, RoutedApi* api) {
  std::erase_if(routed_, [&](const auto& route) { return route.first == path; });
  if (api != nullptr) routed_.emplace_back(path, api);
}

std::vector<ServedApi*> HttpApi::Served() const {
  std::vector<ServedApi*> served;
  if (mounted_ != nullptr) served.push_back(mounted_);
  for (const auto& [path, api] : routed_) served.push_back(api);
  return served;
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
  if (mounted_ != nullptr && mounted_->Claims(request)) return mounted_->Handle(std::move(request), exchange);
  // On the Unix socket a request without a token is its kernel-known user's; with one, the
  // token's key, as over TCP.
  auto key = request.local_peer && request.Header("authorization").empty()
                 ? AuthenticateLocal(*request.local_peer, geteuid(), getegid())
                 : auth_.load()->Authenticate(request.Header("authorization"));
  if (!key) {
    metrics_.Rejected(key.error().status == 401 ? "unauthorized" : "forbidden");
    return exchange->Respond(ProblemResponse(key.error()));
  }
  // A copy: the keys may be replaced (ReplaceKeys) while this request is answered.
  const ApiKey authenticated = *key;
  Route(request, exchange, authenticated);
}

void HttpApi::ReplaceKeys(std::vector<ApiKey> keys) {
  auth_.store(std::make_shared<const Authenticator>(std::move(keys)));
}

void HttpApi::Route(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const ApiKey& key) {
  const std::string& path = request.path;
  const std::string& method = request.method;
  for (const auto& [routed_path, api] : routed_) {
    if (path == routed_path) return api->Handle(std::move(request), exchange, key);
  }

  if (method == "POST" || method == "PUT") {
    // JSON routes take JSON; the file upload takes any bytes.
    auto type = request.Header("content-type");
    bool file_upload = method == "PUT" || path == "/v1/sessions/import";  // a sealed snapshot
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
    const engine::GateStats stats = gate_.Stats();
    Gauges gauges{.running = stats.running, .queued = stats.queued};
    gauges.warm_workers = stats.pool.warm_workers;
    gauges.prepared_children = stats.pool.prepared;
    gauges.lean_workers = stats.pool.lean_workers;
    gauges.lean_prepared_children = stats.pool.lean_prepared;
    gauges.prepared_session_children = stats.pool.prepared_sessions;
    gauges.prepared_target = stats.pool.prepared_target;
    gauges.lean_prepared_target = stats.pool.lean_prepared_target;
    gauges.prepared_sessions_target = stats.pool.prepared_sessions_target;
    gauges.served_full = stats.pool.served_full;
    gauges.served_lean = stats.pool.served_lean;
    gauges.full_zygote_peak_bytes = stats.pool.full_zygote_peak_bytes;
    gauges.lean_zygote_peak_bytes = stats.pool.lean_zygote_peak_bytes;
    gauges.children_ended = stats.pool.children_ended;
    gauges.workers_replaced = stats.pool.workers_replaced;
    gauges.zygote_cpu_ns = stats.pool.zygote_cpu_ns;
    gauges.child_setup_cpu_ns = stats.pool.child_setup_ns;
    gauges.child_execution_cpu_ns = stats.pool.child_execution_ns;
    gauges.child_exit_cpu_ns = stats.pool.child_exit_ns;
    gauges.sessions = stats.sessions;
    gauges.keys = stats.keys;
    if (connection_count_) gauges.connections = connection_count_();
    return Respond(*exchange, HttpResponse{.content_type = "text/plain; version=0.0.4; charset=utf-8",
                                           .body = metrics_.Render(gauges)});
  }
  if (path == "/v1/openapi.json") {
    if (method != "GET") return Fail(*exchange, MethodNotAllowed(method, "GET"));
    return Respond(*exchange, HttpResponse{.body = openapi_});
  }
  if (path == "/v1/packages") {
    if (method != "GET") return Fail(*exchange, MethodNotAllowed(method, "GET"));
    // The first call lists them in a sandbox: not on the I/O thread.
    return calls_.Spawn([this, exchange] {
      auto catalog = gate_.Packages();
      if (!catalog) return exchange->Respond(ProblemResponse(ProblemOf(catalog.error())));
      Respond(*exchange, HttpResponse{.body = Serialize(engine::ToJson(*catalog))});
    });
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
  const engine::GateStats stats = gate_.Stats();
  const size_t warm = stats.pool.warm_workers;
  bool ready = !shutting_down_ && (warm > 0 || !stats.warm);
  if (!ready) {
    return Fail(*exchange,
                Problem{.status = 503,
                        .type = "not-ready",
                        .title = "Not ready",
                        .detail = shutting_down_ ? "the server is shutting down" : "no warm worker is up yet",
                        .headers = {{"Retry-After", "1"}}});
  }
  nlohmann::json body = {
      {"status", "ready"}, {"engine", stats.warm ? "warm" : "cold"}, {"warm_workers", warm}};
  Respond(*exchange, HttpResponse{.body = Serialize(body)});
}

void HttpApi::Check(HttpRequest request, std::shared_ptr<Exchange> exchange, const ApiKey& key) {
  auto call = ParseCheckBody(request.body);
  if (!call) return Fail(*exchange, call.error());
  // A check starts a cold jail (the agent parses; no user code runs): the gate admits it like
  // an execution, at once, here on the I/O thread; it runs on a thread of its own.
  auto admitted = gate_.Admit(CallerOf(key), std::move(*call),
                              {.transport = engine::Transport::kHttp, .peer = request.peer});
  if (!admitted) return exchange->Respond(ProblemResponse(ProblemOf(admitted.error())));
  Run(std::move(*admitted), exchange, false);
}

size_t HttpApi::in_flight() {
  size_t in_flight = calls_.running();
  for (ServedApi* api : Served()) in_flight += api->InFlight();
  return in_flight;
}

void HttpApi::Drain(std::chrono::milliseconds grace) {
  shutting_down_ = true;
  gate_.Close();
  auto deadline = std::chrono::steady_clock::now() + grace;
  calls_.WaitIdle(deadline);
  // The front ends served beside (MCP's tool calls, E2B's) run on their own Calls: the same
  // grace, then cancelled.
  auto others_in_flight = [this] {
    size_t n = 0;
    for (ServedApi* api : Served()) n += api->InFlight();
    return n;
  };
  while (others_in_flight() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (ServedApi* api : Served()) api->CancelAll();
  calls_.CancelAll();
  // A cancelled execution ends within ~100 ms; a session restart or a file transfer may take a
  // few seconds more.
  calls_.WaitIdle(std::chrono::steady_clock::now() + std::chrono::seconds(30));
}

}  // namespace execbox::api
