#include "api/e2b/e2b_api.h"

#include <openssl/crypto.h>

#include <charconv>

#include "api/common/json_text.h"
#include "api/e2b/e2b_sandbox.h"
#include "api/e2b/e2b_wire.h"
#include "api/http/auth.h"
#include "api/http/http_target.h"
#include "base/base64.h"
#include "base/sha256.h"

namespace execbox::api::e2b {
namespace {

bool UnderAny(std::string_view path, std::initializer_list<std::string_view> prefixes) {
  for (std::string_view prefix : prefixes) {
    if (path == prefix || (path.starts_with(prefix) && path[prefix.size()] == '/')) return true;
  }
  return false;
}

bool IsControlPath(std::string_view path) { return UnderAny(path, {"/sandboxes", "/v2/sandboxes"}); }

// The rest of E2B's API (api.e2b.app), each with the API key: snapshots, templates, volumes,
// secrets (e2b_snapshots.cc).
bool IsOtherApiPath(std::string_view path) {
  return UnderAny(path, {"/snapshots", "/templates", "/v2/templates", "/v3/templates", "/volumes",
                         "/volumecontent", "/secrets"});
}

// A request for a file by a signed URL (E2B's downloadUrl, uploadUrl).
bool IsSignedFileUrl(const HttpRequest& request) {
  return request.path == "/files" && QueryParam(request.query, "signature").has_value();
}

// The signature E2B's SDK puts in a file URL: "v1_" and the unpadded base64 of SHA-256 over
// "path:operation:user:token" (":expiry" added when it has one).
std::string FileSignature(std::string_view path, std::string_view operation, std::string_view user,
                          std::string_view token, std::string_view expiry) {
  std::string raw;
  raw.append(path).append(":").append(operation).append(":").append(user).append(":").append(token);
  if (!expiry.empty()) raw.append(":").append(expiry);
  const auto digest = Sha256(raw);
  std::string encoded =
      Base64Encode(std::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
  while (!encoded.empty() && encoded.back() == '=') encoded.pop_back();
  return "v1_" + encoded;
}

bool SameToken(std::string_view sent, const std::string& token) {
  return !sent.empty() && sent.size() == token.size() &&
         CRYPTO_memcmp(sent.data(), token.data(), token.size()) == 0;
}

}  // namespace

void SendJson(Exchange& exchange, int status, const nlohmann::json& body) {
  exchange.Respond(HttpResponse{.status = status, .body = Serialize(body)});
}

void SendError(Exchange& exchange, int status, const std::string& message) {
  SendJson(exchange, status, {{"code", status}, {"message", message}});
}

int StatusOf(const engine::Refusal& refusal) { return ProblemOf(refusal).status; }

void SendRefusal(Exchange& exchange, const engine::Refusal& refusal) {
  Problem problem = ProblemOf(refusal);
  HttpResponse response{
      .status = problem.status,
      .headers = problem.headers,
      .body = Serialize({{"code", problem.status}, {"message", problem.detail}, {"type", problem.type}})};
  exchange.Respond(std::move(response));
}

std::optional<nlohmann::json> JsonBody(const HttpRequest& request, Exchange& exchange) {
  if (request.body.empty()) return nlohmann::json::object();
  auto parsed = nlohmann::json::parse(request.body, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    SendError(exchange, 400, "the body must be a JSON object");
    return std::nullopt;
  }
  return parsed;
}

std::optional<Page> PageOf(const HttpRequest& request, Exchange& exchange) {
  Page page;
  try {
    if (auto l = QueryParam(request.query, "limit"); l && !l->empty()) page.limit = std::stoul(*l);
    if (auto t = QueryParam(request.query, "nextToken"); t && !t->empty()) page.offset = std::stoul(*t);
  } catch (const std::exception&) {
    SendError(exchange, 400, "limit and nextToken must be whole numbers");
    return std::nullopt;
  }
  page.limit = std::clamp<size_t>(page.limit, 1, 1000);
  return page;
}

std::optional<std::string> QueryParam(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) != name) continue;
    std::string value(eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1));
    for (char& c : value) {
      if (c == '+') c = ' ';  // form encoding
    }
    return PercentDecode(value);
  }
  return std::nullopt;
}

E2bApi::E2bApi(engine::Gate& gate, HttpApi& http, E2bOptions options)
    : gate_(gate), http_(http), options_(std::move(options)) {
  TakeBack();
}

E2bApi::~E2bApi() { calls_.Close(); }

bool E2bApi::Claims(const HttpRequest& request) const {
  return IsControlPath(request.path) || IsOtherApiPath(request.path) ||
         !request.Header("e2b-sandbox-id").empty() || IsSignedFileUrl(request) ||
         SandboxHostOf(request).has_value();
}

void E2bApi::Handle(HttpRequest request, std::shared_ptr<Exchange> exchange) {
  if (!gate_.sessions_available()) {
    return SendError(*exchange, 503,
                     "E2B sandboxes are execbox sessions, which need the warm pool; "
                     "this server runs without it (see `execbox doctor`)");
  }
  // A Host naming a sandbox's port says what E2b-Sandbox-Id and E2b-Sandbox-Port say.
  if (auto target = SandboxHostOf(request)) {
    request.headers["e2b-sandbox-id"] = target->id;
    request.headers["e2b-sandbox-port"] = std::to_string(target->port);
  }
  if (request.Header("e2b-sandbox-id").empty() && IsControlPath(request.path))
    return ControlPlane(request, exchange);
  if (IsOtherApiPath(request.path) && request.Header("e2b-sandbox-id").empty())
    return OtherPlane(request, exchange);
  auto authorized = request.Header("e2b-sandbox-id").empty() && IsSignedFileUrl(request)
                        ? AuthorizeSigned(request, *exchange)
                        : Authorize(request, *exchange);
  if (!authorized) return;
  auto& [sandbox, key] = *authorized;
  // E2b-Sandbox-Port says which of the sandbox's servers the SDK means; the paths differ anyway.
  const std::string_view port = request.Header("e2b-sandbox-port");
  const std::string& path = request.path;
  const bool interpreter_path = path == "/execute" || path == "/contexts" || path.starts_with("/contexts/");
  if (port == "49999" || (port.empty() && interpreter_path))
    return Interpreter(request, exchange, sandbox, key);
  if (port.empty() || port == "49983") return Envd(request, exchange, sandbox, key);
  // Any other port is a server of the sandbox's own.
  int number = 0;
  if (std::from_chars(port.data(), port.data() + port.size(), number).ec == std::errc() && number >= 1 &&
      number <= 65535)
    return RelayToPort(request, exchange, sandbox, key, number);
  SendError(*exchange, 400, "E2b-Sandbox-Port must be a port number");
}

std::optional<ApiKey> E2bApi::Authenticate(const HttpRequest& request, Exchange& exchange) {
  std::string_view token = request.Header("x-api-key");
  if (token.empty()) {
    std::string_view authorization = request.Header("authorization");
    if (authorization.size() > 7 && authorization.substr(0, 7) == "Bearer ") token = authorization.substr(7);
  }
  if (token.empty()) {
    SendError(exchange, 401, "missing X-API-KEY header: set E2B_API_KEY to an execbox API key");
    return std::nullopt;
  }
  auto key = http_.keys()->KeyOfToken(token);
  if (!key) {
    SendError(exchange, 401, "the API key matches no key of this execbox server");
    return std::nullopt;
  }
  return key;
}

std::optional<std::pair<std::shared_ptr<E2bApi::Sandbox>, ApiKey>> E2bApi::Authorize(
    const HttpRequest& request, Exchange& exchange) {
  const std::string id(request.Header("e2b-sandbox-id"));
  auto sandbox = Find(id);
  std::string_view token = request.Header("x-access-token");
  if (token.empty()) token = request.Header("e2b-traffic-access-token");
  // An unknown sandbox and a wrong token look the same, so ids cannot be probed. The health
  // check reads 502 as "not running", as E2B's proxy answers for a sandbox that is gone.
  if (!sandbox || !SameToken(token, sandbox->token)) {
    const bool health = request.path == "/health";
    SendError(exchange, health ? 502 : 404,
              "no sandbox " + id.substr(0, 100) +
                  " (killed, timed out, or never created; or the call lacks its access token)");
    return std::nullopt;
  }
  auto key = http_.keys()->KeyWithId(sandbox->key_id);
  if (!key) {
    SendError(exchange, 401, "the API key that created this sandbox is no longer configured");
    return std::nullopt;
  }
  // Its session may have ended since (its timeout, a kill through /v1): then so has it.
  if (!gate_.SessionLimits(CallerOf(*key), sandbox->id)) {
    Forget(sandbox->id);
    SendError(exchange, request.path == "/health" ? 502 : 404,
              "sandbox " + id.substr(0, 100) + " has ended (its timeout passed, or it was killed)");
    return std::nullopt;
  }
  return std::make_pair(std::move(sandbox), std::move(*key));
}

std::optional<std::pair<std::shared_ptr<E2bApi::Sandbox>, ApiKey>> E2bApi::AuthorizeSigned(
    const HttpRequest& request, Exchange& exchange) {
  const std::string signature = QueryParam(request.query, "signature").value_or("");
  const std::string expiry = QueryParam(request.query, "signature_expiration").value_or("");
  const std::string path = QueryParam(request.query, "path").value_or("");
  const std::string user = QueryParam(request.query, "username").value_or("");
  const char* operation = request.method == "POST" ? "write" : "read";
  // The signature names its sandbox: the one whose token makes it (each compared in constant time).
  std::vector<std::shared_ptr<Sandbox>> all;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, s] : sandboxes_) all.push_back(s);
  }
  std::shared_ptr<Sandbox> signer;
  for (const auto& s : all) {
    if (SameToken(signature, FileSignature(path, operation, user, s->token, expiry))) signer = s;
  }
  if (!signer) {
    SendError(exchange, 401, "the file URL's signature is not valid (for this path, operation and user)");
    return std::nullopt;
  }
  if (!expiry.empty()) {
    const auto now =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    int64_t until = 0;
    const auto [end, ec] = std::from_chars(expiry.data(), expiry.data() + expiry.size(), until);
    if (ec != std::errc() || end != expiry.data() + expiry.size()) {
      SendError(exchange, 401, "the file URL's signature_expiration is not a time (seconds since 1970)");
      return std::nullopt;
    }
    if (until < now) {
      SendError(exchange, 401, "the file URL's signature has expired");
      return std::nullopt;
    }
  }
  auto key = http_.keys()->KeyWithId(signer->key_id);
  if (!key || !gate_.SessionLimits(CallerOf(*key), signer->id)) {
    SendError(exchange, 404, "sandbox " + signer->id + " has ended (its timeout passed, or it was killed)");
    return std::nullopt;
  }
  return std::make_pair(std::move(signer), std::move(*key));
}

std::shared_ptr<E2bApi::Sandbox> E2bApi::Find(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(id);
  return it == sandboxes_.end() ? nullptr : it->second;
}

void E2bApi::Forget(const std::string& id) {
  {
    std::lock_guard lock(mu_);
    if (sandboxes_.erase(id) == 0) return;
  }
  Unkeep(id);
}

void E2bApi::ForgetEnded() {
  std::vector<std::pair<std::string, std::string>> all;  // id, key id
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, s] : sandboxes_) all.emplace_back(id, s->key_id);
  }
  for (const auto& [id, key_id] : all) {
    if (!gate_.SessionLimits(engine::Caller{.id = key_id}, id)) Forget(id);
  }
}

runtime::PythonProgram E2bApi::ProgramFor(const Sandbox& sandbox, runtime::Mode mode, std::string code) {
  runtime::PythonProgram program;
  program.mode = mode;
  program.code = std::move(code);
  program.env = sandbox.env;      // set at creation, never written after
  program.collect_files = false;  // the files stay in the sandbox, for files.read
  return program;
}

engine::Refused<engine::Result> E2bApi::RunIn(const Sandbox& sandbox, const ApiKey& key,
                                              runtime::PythonProgram program, const std::string& peer,
                                              const engine::ExecuteOptions& options) {
  engine::ExecutionRequest request{.program = std::move(program), .limits = {}, .session_id = sandbox.id};
  auto outcome = gate_.Execute(CallerOf(key), std::move(request),
                               {.transport = engine::Transport::kE2b, .peer = peer}, options);
  if (!outcome && outcome.error().reason == engine::RefusalReason::kSessionNotFound) Forget(sandbox.id);
  return outcome;
}

size_t E2bApi::InFlight() { return calls_.running(); }

void E2bApi::CancelAll() { calls_.CancelAll(); }

}  // namespace execbox::api::e2b
