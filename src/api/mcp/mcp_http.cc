#include "api/mcp/mcp_http.h"

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <string_view>
#include <thread>
#include <utility>

#include "api/http/http_wire.h"
#include "api/http/problem.h"
#include "api/mcp/json_rpc.h"
#include "api/mcp/mcp_server.h"
#include "base/random.h"

namespace execbox::api {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// How often the watcher looks for idle sessions; how long an SSE stream may stay silent before
// a comment line keeps it (and the proxies on its way) alive.
constexpr auto kWatchPeriod = std::chrono::milliseconds(200);
constexpr auto kKeepAlive = std::chrono::seconds(15);

HttpResponse MakeProblem(int status, std::string type, std::string title, std::string detail,
                         std::vector<std::pair<std::string, std::string>> headers = {}) {
  Problem problem{
      .status = status, .type = std::move(type), .title = std::move(title), .detail = std::move(detail)};
  problem.headers = std::move(headers);
  return ProblemResponse(problem);
}

// A body that is no usable JSON-RPC message: the HTTP error carries a JSON-RPC error without an
// id, as the transport allows.
HttpResponse JsonRpcFailure(int code, std::string message) {
  return HttpResponse{.status = 400,
                      .content_type = "application/json",
                      .body = Serialize(MakeError(nullptr, code, std::move(message)))};
}

std::string SseEvent(const std::string& line) { return "event: message\ndata: " + line + "\n\n"; }

bool ValidId(const json& id) { return id.is_string() || id.is_number_integer(); }

// One client request waiting for its answer: its messages are buffered while the POST handler
// is still deciding how to answer, then written to its SSE stream as they come.
struct Pending {
  Pending(std::shared_ptr<Exchange> e, bool whole_json) : exchange(std::move(e)), json_allowed(whole_json) {}

  const std::shared_ptr<Exchange> exchange;
  const bool json_allowed;  // a whole reply may go as application/json (not for tools/call)
  std::atomic<bool> write_failed{false};

  std::mutex mu;  // the rest
  bool streaming = false;
  bool ended = false;
  std::vector<std::string> buffered;
  bool last_buffered = false;
  Clock::time_point last_write = Clock::now();
};

// One MCP session: its McpServer and the requests it is answering.
struct Session {
  Session(std::string id_, std::string key) : id(std::move(id_)), key_id(std::move(key)) {}

  // McpServer's write callback: routes one message to the POST of the request it belongs to.
  void Deliver(const json& request_id, const std::string& line, bool last) {
    std::shared_ptr<Pending> pending;
    {
      std::lock_guard lock(mu);
      last_used = Clock::now();
      auto it = requests.find(request_id.dump());
      if (it == requests.end()) return;  // nobody asked (a reply to an unreadable message)
      pending = it->second;
      if (last) requests.erase(it);
    }
    std::lock_guard lock(pending->mu);
    if (!pending->streaming) {
      if (!line.empty()) pending->buffered.push_back(line);
      pending->last_buffered = pending->last_buffered || last;
      return;
    }
    if (pending->ended) return;
    if (!line.empty()) {
      if (!pending->exchange->Write(SseEvent(line), false)) pending->write_failed = true;
      pending->last_write = Clock::now();
    }
    if (last) {
      pending->exchange->EndStream();
      pending->ended = true;
    }
  }

  // McpServer's watch of a running tools/call: whether the client that asked is still there
  // (a stream whose client went away: nobody can receive the result, as there is no resumption,
  // so the call stops), and a comment line on a stream silent for long.
  bool Watch(const json& request_id, Clock::time_point now) {
    std::shared_ptr<Pending> pending;
    {
      std::lock_guard lock(mu);
      auto it = requests.find(request_id.dump());
      if (it == requests.end()) return true;  // answered already
      pending = it->second;
    }
    if (pending->write_failed || pending->exchange->ClientGone()) return false;
    std::lock_guard lock(pending->mu);
    if (pending->streaming && !pending->ended && now - pending->last_write >= kKeepAlive) {
      if (!pending->exchange->Write(": keep-alive\n\n", true)) pending->write_failed = true;
      pending->last_write = now;
    }
    return true;
  }

  const std::string id;
  const std::string key_id;

  std::mutex mu;
  std::map<std::string, std::shared_ptr<Pending>> requests;  // by the request id's JSON text
  Clock::time_point last_used = Clock::now();
  bool closed = false;

  // Last: destroyed first, waiting for its calls while the rest is still there for them.
  std::unique_ptr<McpServer> server;
};

bool Idle(Session& session, Clock::time_point now, std::chrono::seconds ttl) {
  std::lock_guard lock(session.mu);
  return session.requests.empty() && now - session.last_used > ttl;
}

}  // namespace

struct McpHttp::State {
  State(engine::Gate& g, std::string v, McpHttpOptions o)
      : gate(g), version(std::move(v)), options(std::move(o)) {}

  void HandlePost(const HttpRequest& request, const std::shared_ptr<Exchange>& exchange, const ApiKey& key);
  void HandleDelete(const HttpRequest& request, const std::shared_ptr<Exchange>& exchange,
                    const std::string& key_id);
  // The session a request names, or the response to give instead.
  std::shared_ptr<Session> FindSession(const HttpRequest& request, const std::string& key_id,
                                       HttpResponse& error);
  std::shared_ptr<Session> CreateSession(const ApiKey& key, const std::string& peer, HttpResponse& error);
  // Runs one request through the session's McpServer and answers it (JSON or SSE).
  void Answer(const std::shared_ptr<Session>& session, const json& message,
              const std::shared_ptr<Exchange>& exchange, bool initialize);
  void Retire(std::shared_ptr<Session> session);  // mu held
  void RetireIdle(Clock::time_point now);         // mu held: every session idle past the TTL
  void Watch(std::stop_token stop);

  engine::Gate& gate;
  const std::string version;
  const McpHttpOptions options;
  // Every MCP session's tool calls; destroyed after the sessions, whose servers wait for theirs.
  Calls calls;

  mutable std::mutex mu;
  std::map<std::string, std::shared_ptr<Session>> sessions;
  std::vector<std::shared_ptr<Session>> retired;  // ended; destroyed on the watcher thread
  bool cancel_all = false;

  std::jthread watcher;  // last: stopped first
};

McpHttp::McpHttp(engine::Gate& gate, std::string version, McpHttpOptions options)
    : state_(std::make_unique<State>(gate, std::move(version), std::move(options))) {
  state_->watcher = std::jthread([state = state_.get()](std::stop_token stop) { state->Watch(stop); });
}

McpHttp::~McpHttp() {
  state_->watcher.request_stop();
  state_->watcher.join();
  std::vector<std::shared_ptr<Session>> sessions;
  {
    std::lock_guard lock(state_->mu);
    for (auto& [id, session] : state_->sessions) sessions.push_back(session);
    state_->sessions.clear();
    for (auto& session : state_->retired) sessions.push_back(std::move(session));
    state_->retired.clear();
  }
  sessions.clear();  // each McpServer waits for its calls
}

void McpHttp::CancelAll() {
  std::vector<std::shared_ptr<Session>> sessions;
  {
    std::lock_guard lock(state_->mu);
    state_->cancel_all = true;
    for (auto& [id, session] : state_->sessions) sessions.push_back(session);
  }
  for (auto& session : sessions) session->server->CancelAll();
}

size_t McpHttp::SessionCount() const {
  std::lock_guard lock(state_->mu);
  return state_->sessions.size();
}

size_t McpHttp::InFlight() {
  std::vector<std::shared_ptr<Session>> sessions;
  {
    std::lock_guard lock(state_->mu);
    for (const auto& [id, session] : state_->sessions) sessions.push_back(session);
    sessions.insert(sessions.end(), state_->retired.begin(), state_->retired.end());
  }
  size_t n = 0;
  for (const auto& session : sessions) {
    std::lock_guard lock(session->mu);
    n += session->requests.size();
  }
  return n;
}

void McpHttp::Handle(HttpRequest request, std::shared_ptr<Exchange> exchange, const ApiKey& key) {
  // Origin first, whatever the method: a browser page from elsewhere gets nothing (DNS rebinding).
  if (std::string_view origin = request.Header("origin"); !origin.empty()) {
    bool allowed = IsLoopbackOrigin(origin);
    for (const auto& allowed_origin : state_->options.allowed_origins)
      allowed = allowed || origin == allowed_origin;
    if (!allowed) {
      exchange->Respond(
          MakeProblem(403, "forbidden-origin", "Origin not allowed",
                      "Origin '" + std::string(origin) +
                          "' may not call /mcp: add it to allowed_origins in the server's configuration"));
      return;
    }
  }
  if (request.method == "POST") {
    state_->HandlePost(request, exchange, key);
  } else if (request.method == "DELETE") {
    state_->HandleDelete(request, exchange, key.id);
  } else {
    exchange->Respond(MakeProblem(
        405, "method-not-allowed", "Method not allowed",
        request.method == "GET" ? "this server sends no messages outside a request's own stream: use POST"
                                : "/mcp takes POST (messages) and DELETE (ends an MCP session)",
        {{"Allow", "POST, DELETE"}}));
  }
}

std::shared_ptr<Session> McpHttp::State::FindSession(const HttpRequest& request, const std::string& key_id,
                                                     HttpResponse& error) {
  std::string_view id = request.Header("mcp-session-id");
  if (id.empty()) {
    error = MakeProblem(400, "missing-mcp-session", "Mcp-Session-Id missing",
                        "send the Mcp-Session-Id header that initialize returned (or initialize first)");
    return nullptr;
  }
  std::shared_ptr<Session> session;
  {
    std::lock_guard lock(mu);
    if (auto it = sessions.find(std::string(id)); it != sessions.end() && it->second->key_id == key_id)
      session = it->second;
  }
  if (session == nullptr) {
    // Another key's session looks exactly like one that never existed.
    error =
        MakeProblem(404, "unknown-mcp-session", "MCP session not found",
                    "the MCP session has ended or never existed: send initialize (without Mcp-Session-Id) "
                    "to start a new one");
    return nullptr;
  }
  std::string_view protocol = request.Header("mcp-protocol-version");
  if (!protocol.empty()) {
    bool known = false;
    for (const char* v : kProtocolVersions) known = known || protocol == v;
    if (!known) {
      error = MakeProblem(400, "unsupported-protocol-version", "Unsupported MCP protocol version",
                          "MCP-Protocol-Version '" + std::string(protocol) +
                              "' is not supported; this server speaks 2025-11-25, 2025-06-18 and 2025-03-26");
      return nullptr;
    }
  }
  return session;
}

std::shared_ptr<Session> McpHttp::State::CreateSession(const ApiKey& key, const std::string& peer,
                                                       HttpResponse& error) {
  const std::string& key_id = key.id;
  // 128 random bits as 32 hex digits: visible ASCII, as the spec asks, and unguessable; then
  // the instance that holds it, for a router to pin the MCP session by its id.
  auto random = RandomHex(16);
  if (!random) {
    error = MakeProblem(500, "internal-error", "Internal error", "no randomness for a session id");
    return nullptr;
  }
  const std::string id = *random + (options.instance.empty() ? "" : "." + options.instance);
  auto session = std::make_shared<Session>(id, key_id);
  // The MCP session's tool calls are the key's, through the same gate as its /v1 requests.
  session->server = std::make_unique<McpServer>(
      gate, calls, CallerOf(key), engine::Origin{.transport = engine::Transport::kMcpHttp, .peer = peer},
      version,
      [s = session.get()](const json& request_id, const std::string& line, bool last) {
        s->Deliver(request_id, line, last);
      },
      [s = session.get()](const json& request_id, Clock::time_point now) {
        return s->Watch(request_id, now);
      });
  std::lock_guard lock(mu);
  if (sessions.size() >= options.max_sessions) {
    // Full: sessions past their idle time go now rather than at the watcher's next round.
    RetireIdle(Clock::now());
  }
  size_t of_key = 0;
  for (const auto& [other_id, other] : sessions) of_key += other->key_id == key_id ? 1 : 0;
  if (sessions.size() >= options.max_sessions) {
    error = MakeProblem(503, "mcp-sessions-exhausted", "Too many MCP sessions",
                        "the server holds " + std::to_string(options.max_sessions) +
                            " MCP sessions already; retry later, and end sessions with DELETE /mcp when done",
                        {{"Retry-After", "60"}});
    return nullptr;
  }
  if (of_key >= options.max_sessions_per_key) {
    error = MakeProblem(429, "mcp-session-limit", "Too many MCP sessions for this key",
                        "this key holds " + std::to_string(of_key) +
                            " MCP sessions already; end unused ones with DELETE /mcp (idle ones end after " +
                            std::to_string(options.idle_ttl.count()) + " s)",
                        {{"Retry-After", "60"}});
    return nullptr;
  }
  if (cancel_all) session->server->CancelAll();
  sessions.emplace(id, session);
  return session;
}

void McpHttp::State::Retire(std::shared_ptr<Session> session) {
  {
    std::lock_guard lock(session->mu);
    session->closed = true;
  }
  session->server->CancelAll();
  retired.push_back(std::move(session));
}

void McpHttp::State::RetireIdle(Clock::time_point now) {
  for (auto it = sessions.begin(); it != sessions.end();) {
    if (Idle(*it->second, now, options.idle_ttl)) {
      Retire(it->second);
      it = sessions.erase(it);
    } else {
      ++it;
    }
  }
}

void McpHttp::State::HandlePost(const HttpRequest& request, const std::shared_ptr<Exchange>& exchange,
                                const ApiKey& key) {
  const std::string& key_id = key.id;
  std::string_view accept = request.Header("accept");
  if (!Accepts(accept, "application/json") || !Accepts(accept, "text/event-stream")) {
    exchange->Respond(MakeProblem(400, "not-acceptable",
                                  "Accept must list application/json and text/event-stream",
                                  "a POST to /mcp must accept both application/json and text/event-stream "
                                  "(Accept: application/json, text/event-stream); got '" +
                                      std::string(accept) + "'"));
    return;
  }
  if (Essence(request.Header("content-type")) != "application/json") {
    exchange->Respond(MakeProblem(415, "unsupported-media-type", "Content-Type must be application/json",
                                  "a POST to /mcp carries one JSON-RPC message as application/json"));
    return;
  }
  auto parsed = ParseMessage(request.body);
  if (!parsed) {
    exchange->Respond(JsonRpcFailure(kParseError, "parse error: " + parsed.error().message));
    return;
  }
  const json& message = *parsed;
  if (message.is_array()) {
    exchange->Respond(JsonRpcFailure(kInvalidRequest,
                                     "batches are not supported (removed in MCP 2025-06-18): "
                                     "send one message per POST"));
    return;
  }
  if (!message.is_object() || !message.contains("jsonrpc") || message["jsonrpc"] != "2.0") {
    exchange->Respond(JsonRpcFailure(kInvalidRequest, "not a JSON-RPC 2.0 message"));
    return;
  }
  const bool has_method = message.contains("method");
  const bool has_id = message.contains("id");
  if (has_method && !message["method"].is_string()) {
    exchange->Respond(JsonRpcFailure(kInvalidRequest, "'method' must be a string"));
    return;
  }
  if (has_id && !ValidId(message["id"])) {
    exchange->Respond(JsonRpcFailure(kInvalidRequest, "'id' must be a string or an integer"));
    return;
  }
  if (!has_method && !(has_id && (message.contains("result") || message.contains("error")))) {
    exchange->Respond(JsonRpcFailure(kInvalidRequest, "neither a request, a notification nor a response"));
    return;
  }
  const bool is_request = has_method && has_id;
  const bool initialize = is_request && message["method"] == "initialize";

  HttpResponse error;
  std::shared_ptr<Session> session;
  if (initialize) {
    if (!request.Header("mcp-session-id").empty()) {
      exchange->Respond(MakeProblem(400, "already-initialized", "MCP session already initialized",
                                    "initialize starts a new MCP session: send it without Mcp-Session-Id"));
      return;
    }
    session = CreateSession(key, request.peer, error);
  } else {
    session = FindSession(request, key_id, error);
  }
  if (session == nullptr) {
    exchange->Respond(std::move(error));
    return;
  }
  if (!is_request) {
    // A notification (notifications/cancelled takes effect here) or a response: nothing to say.
    {
      std::lock_guard lock(session->mu);
      session->last_used = Clock::now();
    }
    session->server->HandleMessage(message);
    exchange->Respond(HttpResponse{.status = 202, .content_type = ""});
    return;
  }
  Answer(session, message, exchange, initialize);
}

void McpHttp::State::Answer(const std::shared_ptr<Session>& session, const json& message,
                            const std::shared_ptr<Exchange>& exchange, bool initialize) {
  const json& id = message["id"];
  auto pending = std::make_shared<Pending>(exchange, message["method"] != "tools/call");
  {
    std::lock_guard lock(session->mu);
    if (session->closed) {
      exchange->Respond(MakeProblem(404, "unknown-mcp-session", "MCP session not found",
                                    "the MCP session has just ended: send initialize to start a new one"));
      return;
    }
    if (!session->requests.emplace(id.dump(), pending).second) {
      exchange->Respond(MakeProblem(409, "request-id-in-use", "Request id in use",
                                    "request id " + id.dump() +
                                        " is still being answered in this MCP session: "
                                        "use a fresh id for each request"));
      return;
    }
    session->last_used = Clock::now();
  }
  session->server->HandleMessage(message);

  std::vector<std::pair<std::string, std::string>> headers;
  std::unique_lock lock(pending->mu);
  if (initialize) {
    // The session exists only if initialize succeeded.
    const bool ok = pending->last_buffered && pending->buffered.size() == 1 &&
                    json::parse(pending->buffered[0], nullptr, false).contains("result");
    if (ok) {
      headers.emplace_back("Mcp-Session-Id", session->id);
    } else {
      std::lock_guard state_lock(mu);
      if (auto it = sessions.find(session->id); it != sessions.end()) {
        Retire(it->second);
        sessions.erase(it);
      }
    }
  }
  if (pending->json_allowed && pending->last_buffered && pending->buffered.size() == 1) {
    exchange->Respond(HttpResponse{.status = 200,
                                   .content_type = "application/json",
                                   .headers = std::move(headers),
                                   .body = std::move(pending->buffered[0])});
    pending->ended = true;
    return;
  }
  // A tools/call (or, should one ever be slow, another request): an SSE stream that carries its
  // progress notifications and ends with its response. No event ids: there is no resumption.
  // (The server adds Cache-Control and X-Accel-Buffering to every stream.)
  exchange->StartStream(200, "text/event-stream", std::move(headers));
  pending->streaming = true;
  for (const auto& line : pending->buffered) {
    if (!exchange->Write(SseEvent(line), false)) pending->write_failed = true;
  }
  pending->buffered.clear();
  pending->last_write = Clock::now();
  if (pending->last_buffered) {
    exchange->EndStream();
    pending->ended = true;
  }
}

void McpHttp::State::HandleDelete(const HttpRequest& request, const std::shared_ptr<Exchange>& exchange,
                                  const std::string& key_id) {
  HttpResponse error;
  auto session = FindSession(request, key_id, error);
  if (session == nullptr) {
    exchange->Respond(std::move(error));
    return;
  }
  {
    std::lock_guard lock(mu);
    if (auto it = sessions.find(session->id); it != sessions.end() && it->second == session) {
      Retire(it->second);
      sessions.erase(it);
    }
  }
  exchange->Respond(HttpResponse{.status = 204, .content_type = ""});
}

void McpHttp::State::Watch(std::stop_token stop) {
  std::mutex wait_mu;
  std::condition_variable_any wake;
  while (!stop.stop_requested()) {
    {
      std::unique_lock lock(wait_mu);
      wake.wait_for(lock, stop, kWatchPeriod, [] { return false; });
    }
    if (stop.stop_requested()) break;
    const auto now = Clock::now();
    std::vector<std::shared_ptr<Session>> dead;
    {
      std::lock_guard lock(mu);
      RetireIdle(now);
      dead.swap(retired);
    }
    dead.clear();  // each McpServer waits for its (cancelled) calls to finish
  }
}

}  // namespace execbox::api
