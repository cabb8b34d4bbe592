// E2B's control plane (api.e2b.app's sandbox routes): a sandbox is created as a session of the
// caller's key through the gate, its timeout becomes the session's lifetime (Gate::
// SetSessionLifetime, which holds the maximum), and get, list, connect, timeout and kill read
// or change that session, found only for that key.
#include <thread>

#include "api/common/json_text.h"
#include "api/e2b/e2b_api.h"
#include "api/e2b/e2b_network.h"
#include "api/e2b/e2b_sandbox.h"
#include "api/e2b/e2b_wire.h"
#include "api/http/auth.h"
#include "api/http/http_target.h"
#include "api/http/http_wire.h"

namespace execbox::api::e2b {
namespace {

// Copies made by one fork call: each is a session of the key's, counted by max_sessions anyway.
constexpr int64_t kMaxForks = 8;

// The E2B features a sandbox here cannot have: a request that asks for one is refused, never
// answered with a sandbox that silently lacks it. (The network fields are e2b_network.h's.)
std::optional<std::string> Unsupported(const nlohmann::json& body) {
  for (const char* field : {"mcp", "volumeMounts", "iam", "secure_token"}) {
    if (!body.contains(field) || body[field].is_null()) continue;
    if (body[field].is_object() && body[field].empty()) continue;
    return std::string(field) + ": not available in execbox";
  }
  return std::nullopt;
}

std::optional<std::chrono::seconds> TimeoutOf(const nlohmann::json& body, std::string& problem) {
  if (!body.contains("timeout") || body["timeout"].is_null()) return std::nullopt;
  if (!body["timeout"].is_number_integer() || body["timeout"].get<int64_t>() < 0) {
    problem = "timeout must be a whole number of seconds";
    return std::nullopt;
  }
  return std::chrono::seconds(body["timeout"].get<int64_t>());
}

std::optional<std::map<std::string, std::string>> StringMap(const nlohmann::json& body, const char* field,
                                                            std::string& problem) {
  std::map<std::string, std::string> out;
  if (!body.contains(field) || body[field].is_null()) return out;
  if (!body[field].is_object()) {
    problem = std::string(field) + " must be an object of strings";
    return std::nullopt;
  }
  for (const auto& [k, v] : body[field].items()) {
    if (!v.is_string()) {
      problem = std::string(field) + "." + k + " must be a string";
      return std::nullopt;
    }
    out[k] = v.get<std::string>();
  }
  return out;
}

// "a=1&b=2" as E2B's list sends metadata filters (each pair percent-encoded).
std::map<std::string, std::string> MetadataFilter(const std::string& encoded) {
  std::map<std::string, std::string> filter;
  std::string_view rest = encoded;
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view{} : rest.substr(amp + 1);
    const size_t eq = pair.find('=');
    if (eq == std::string_view::npos) continue;
    auto key = PercentDecode(pair.substr(0, eq));
    auto value = PercentDecode(pair.substr(eq + 1));
    if (key && value) filter[*key] = *value;
  }
  return filter;
}

}  // namespace

nlohmann::json E2bApi::Describe(Sandbox& s, bool created) {
  nlohmann::json j = {{"sandboxID", s.id},
                      {"templateID", s.template_id},
                      {"clientID", "execbox"},
                      {"envdVersion", kEnvdVersion}};
  if (created) {
    j["envdAccessToken"] = s.token;
    j["trafficAccessToken"] = s.token;
    j["domain"] = options_.domain.empty() ? nlohmann::json() : nlohmann::json(options_.domain);
    return j;
  }
  const engine::Caller owner{.id = s.key_id};
  auto limits = gate_.SessionLimits(owner, s.id);
  auto paused = gate_.SessionPaused(owner, s.id);
  std::lock_guard lock(s.mu);
  j["startedAt"] = Rfc3339(s.started);
  j["endAt"] = Rfc3339(s.end_at);
  j["state"] = paused && *paused ? "paused" : "running";
  j["metadata"] = s.metadata;
  // No CPU quota: the sandbox's processes may use every core of the host.
  j["cpuCount"] = std::max(1u, std::thread::hardware_concurrency());
  j["memoryMB"] = limits ? limits->memory_bytes >> 20 : 0;
  j["diskSizeMB"] = limits ? limits->work_dir_bytes >> 20 : 0;
  return j;
}

void E2bApi::ControlPlane(HttpRequest& request, std::shared_ptr<Exchange>& exchange) {
  auto key = Authenticate(request, *exchange);
  if (!key) return;
  std::string_view path = request.path;
  if (path.starts_with("/v2")) path.remove_prefix(3);
  path.remove_prefix(std::string_view("/sandboxes").size());
  const std::string& method = request.method;
  if (path.empty() || path == "/") {
    if (method == "POST") return Create(request, exchange, *key);
    if (method == "GET") return List(request, exchange, *key);
    return SendError(*exchange, 405, method + " " + request.path + " is not part of E2B's API");
  }
  path.remove_prefix(1);
  const size_t slash = path.find('/');
  const std::string id(path.substr(0, slash));
  const std::string action(slash == std::string_view::npos ? "" : path.substr(slash + 1));
  auto sandbox = Find(id);
  const engine::Caller caller = CallerOf(*key);
  const engine::Origin origin{.transport = engine::Transport::kE2b, .peer = request.peer};
  // Whose it is, is the gate's to say: another key's sandbox does not exist for this one.
  if (!sandbox || !gate_.SessionLimits(caller, id)) {
    if (sandbox && sandbox->key_id == key->id) Forget(id);  // its session ended
    return SendError(*exchange, 404, "sandbox " + id.substr(0, 100) + " not found");
  }
  if (action.empty() && method == "GET") {
    return calls_.Spawn([this, exchange, sandbox, caller] {
      if (!gate_.SessionLimits(caller, sandbox->id)) {
        Forget(sandbox->id);
        return SendError(*exchange, 404, "sandbox " + sandbox->id + " not found (it ended)");
      }
      SendJson(*exchange, 200, Describe(*sandbox, false));
    });
  }
  if (action.empty() && method == "DELETE") {
    return calls_.Spawn([this, exchange, sandbox, caller, origin] {
      auto closed = gate_.CloseSession(caller, sandbox->id, origin);
      Forget(sandbox->id);
      if (!closed) return SendRefusal(*exchange, closed.error());
      exchange->Respond(HttpResponse{.status = 204, .content_type = "", .body = ""});
    });
  }
  if (action == "timeout" && method == "POST") {
    auto body = JsonBody(request, *exchange);
    if (!body) return;
    std::string problem;
    auto timeout = TimeoutOf(*body, problem);
    if (!timeout) return SendError(*exchange, 400, problem.empty() ? "timeout is required" : problem);
    auto set = gate_.SetSessionLifetime(caller, sandbox->id, *timeout, origin);
    if (!set) {
      if (set.error().reason == engine::RefusalReason::kSessionNotFound) Forget(sandbox->id);
      return SendRefusal(*exchange, set.error());
    }
    {
      std::lock_guard lock(sandbox->mu);
      sandbox->end_at = std::chrono::system_clock::now() + *timeout;
    }
    return exchange->Respond(HttpResponse{.status = 204, .content_type = "", .body = ""});
  }
  if (action == "pause" && method == "POST") {
    return calls_.Spawn([this, exchange, sandbox, caller, origin] {
      auto paused = gate_.PauseSession(caller, sandbox->id, origin);
      if (!paused) return SendRefusal(*exchange, paused.error());
      if (!*paused) return SendError(*exchange, 409, "sandbox " + sandbox->id + " is already paused");
      exchange->Respond(HttpResponse{.status = 204, .content_type = "", .body = ""});
    });
  }
  if ((action == "connect" || action == "resume") && method == "POST")
    return Connect(request, exchange, *key, id);
  if (action == "fork" && method == "POST") return Fork(request, exchange, *key, sandbox);
  if (action == "metrics" && method == "GET") return Metrics(request, exchange, *key, sandbox);
  if (action == "snapshots" && method == "POST") return CreateSnapshot(request, exchange, *key, sandbox);
  if (action == "network") {
    return SendError(*exchange, 501,
                     "a sandbox's network policy is fixed for its life in execbox (a session's is): give it "
                     "at creation (allowInternetAccess, network), or create a new sandbox from a snapshot");
  }
  SendError(*exchange, 501,
            method + " /sandboxes/{id}" + (action.empty() ? "" : "/" + action.substr(0, 40)) +
                " of E2B's API is not implemented by execbox");
}

void E2bApi::Create(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const ApiKey& key) {
  auto body = JsonBody(request, *exchange);
  if (!body) return;
  std::string problem;
  auto sandbox = std::make_shared<Sandbox>();
  sandbox->template_id = body->value("templateID", std::string("base"));
  if (!(*body)["templateID"].is_null() && !(*body)["templateID"].is_string())
    return SendError(*exchange, 400, "templateID must be a string");
  const engine::Caller caller = CallerOf(key);
  // Any other template is one of the key's snapshots (by id or name), or not available.
  std::optional<std::string> snapshot;
  if (!KnownTemplate(sandbox->template_id)) {
    for (const auto& s : gate_.KeptSnapshots(caller)) {
      if (s.id == sandbox->template_id ||
          std::find(s.names.begin(), s.names.end(), sandbox->template_id) != s.names.end())
        snapshot = s.id;
    }
    if (!snapshot) {
      return SendError(*exchange, 400,
                       "template '" + sandbox->template_id.substr(0, 100) +
                           "' is not available: an execbox sandbox is its server's Debian Python with "
                           "numpy, pandas and matplotlib (templates code-interpreter-v1 and base), or made "
                           "from one of this key's snapshots (createSnapshot)");
    }
  }
  if (auto unsupported = Unsupported(*body))
    return SendError(*exchange, 400, "not supported: " + *unsupported);
  auto env = StringMap(*body, "envVars", problem);
  auto metadata = StringMap(*body, "metadata", problem);
  auto timeout = TimeoutOf(*body, problem);
  if (!env || !metadata || !problem.empty()) return SendError(*exchange, 400, problem);
  sandbox->env = std::move(*env);
  for (const auto& [k, v] : *metadata) sandbox->metadata[k] = v;
  if (body->contains("autoPause") && !(*body)["autoPause"].is_null() && !(*body)["autoPause"].is_boolean())
    return SendError(*exchange, 400, "autoPause must be a boolean");
  const bool auto_pause = body->value("autoPause", nlohmann::json(false)) == true;
  sandbox->key_id = key.id;
  sandbox->token = GenerateToken();
  const auto lifetime = timeout.value_or(options_.default_timeout);
  const engine::Origin origin{.transport = engine::Transport::kE2b, .peer = request.peer};
  // Network, as far as the gate grants it: `allow_internet_access: true` (the SDKs' default)
  // asks for the caller's whole bound, none where that is empty. A sandbox made from a snapshot
  // has the snapshot's sandbox's policy instead, bounded again (Gate::SessionFromSnapshot).
  auto network = NetworkAsk(*body, gate_.NetworkBound(caller));
  if (!network) return SendError(*exchange, 400, network.error());
  // Making a session forks a child: never on the I/O thread.
  calls_.Spawn([this, exchange, sandbox, caller, origin, lifetime, auto_pause, snapshot,
                policy = std::move(*network)]() mutable {
    ForgetEnded();
    engine::Refused<engine::SessionInfo> info;
    if (snapshot) {
      auto copied = gate_.SessionFromSnapshot(caller, *snapshot, origin);
      if (!copied) return SendRefusal(*exchange, copied.error());
      info = std::move(copied->info);
    } else {
      info = gate_.CreateSession(caller, {}, origin, false, std::move(policy));
    }
    if (!info) return SendRefusal(*exchange, info.error());
    // autoPause (the SDKs' lifecycle onTimeout 'pause'): paused at its timeout, not killed.
    if (auto_pause) (void)gate_.PauseSessionAtExpiry(caller, info->id, true);
    if (auto published = Publish(sandbox, *info, caller, origin, lifetime); !published)
      return SendRefusal(*exchange, published.error());
    SendJson(*exchange, 201, Describe(*sandbox, true));
  });
}

engine::Refused<void> E2bApi::Publish(std::shared_ptr<Sandbox> sandbox, const engine::SessionInfo& session,
                                      const engine::Caller& caller, const engine::Origin& origin,
                                      std::chrono::seconds lifetime) {
  sandbox->id = session.id;
  sandbox->started = session.created;
  if (auto set = gate_.SetSessionLifetime(caller, sandbox->id, lifetime, origin); !set) {
    (void)gate_.CloseSession(caller, sandbox->id, origin);
    return std::unexpected(set.error());
  }
  {
    std::lock_guard lock(sandbox->mu);
    sandbox->end_at = std::chrono::system_clock::now() + lifetime;
    sandbox->contexts[kDefaultContext] = Sandbox::Context{.id = kDefaultContext, .cwd = ""};
  }
  Keep(*sandbox);
  std::lock_guard lock(mu_);
  sandboxes_[sandbox->id] = sandbox;
  return {};
}

void E2bApi::Fork(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const ApiKey& key,
                  std::shared_ptr<Sandbox> parent) {
  auto body = JsonBody(request, *exchange);
  if (!body) return;
  std::string problem;
  auto timeout = TimeoutOf(*body, problem);
  const nlohmann::json count_field = body->value("count", nlohmann::json(1));
  if (!problem.empty()) return SendError(*exchange, 400, problem);
  if (!count_field.is_number_integer() || count_field.get<int64_t>() < 1 ||
      count_field.get<int64_t>() > kMaxForks)
    return SendError(*exchange, 400, "count must be 1 to " + std::to_string(kMaxForks));
  const auto count = count_field.get<int64_t>();
  const auto lifetime = timeout.value_or(options_.default_timeout);
  const engine::Caller caller = CallerOf(key);
  const engine::Origin origin{.transport = engine::Transport::kE2b, .peer = request.peer};
  // Each fork is the session's state copied (Sessions::Fork: the default context's globals and
  // the work dir, made inside the sandbox), each answered on its own as E2B does.
  calls_.Spawn([this, exchange, parent, caller, origin, lifetime, count] {
    nlohmann::json results = nlohmann::json::array();
    for (int64_t i = 0; i < count; ++i) {
      auto forked = gate_.ForkSession(caller, parent->id, origin);
      if (!forked && forked.error().reason == engine::RefusalReason::kSessionNotFound) {
        Forget(parent->id);
        return SendError(*exchange, 404, "sandbox " + parent->id + " not found (it ended)");
      }
      auto child = std::make_shared<Sandbox>();
      child->key_id = parent->key_id;
      child->token = GenerateToken();
      child->template_id = parent->template_id;
      child->metadata = parent->metadata;
      child->env = parent->env;
      {
        std::lock_guard lock(parent->mu);
        child->file_metadata = parent->file_metadata;  // the files are copied with the state
      }
      engine::Refused<void> published =
          forked ? Publish(child, forked->info, caller, origin, lifetime) : std::unexpected(forked.error());
      if (!published) {
        results.push_back(
            {{"error", {{"code", StatusOf(published.error())}, {"message", published.error().detail}}}});
        continue;
      }
      nlohmann::json sandbox = Describe(*child, true);
      // What the copy could not hold (E2B's answer has no place for it; the SDKs ignore it).
      nlohmann::json left_out = nlohmann::json::array();
      for (const auto& e : forked->left_out)
        left_out.push_back({{"name", e.name}, {"type", e.type}, {"reason", e.reason}});
      sandbox["notCopied"] = left_out;
      results.push_back({{"sandbox", sandbox}});
    }
    SendJson(*exchange, 200, results);
  });
}

void E2bApi::Connect(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const ApiKey& key,
                     const std::string& id) {
  auto body = JsonBody(request, *exchange);
  if (!body) return;
  std::string problem;
  auto timeout = TimeoutOf(*body, problem);
  if (!problem.empty()) return SendError(*exchange, 400, problem);
  auto sandbox = Find(id);
  if (!sandbox) return SendError(*exchange, 404, "sandbox " + id.substr(0, 100) + " not found");
  const engine::Caller caller = CallerOf(key);
  const engine::Origin origin{.transport = engine::Transport::kE2b, .peer = request.peer};
  calls_.Spawn([this, exchange, sandbox, caller, origin, timeout] {
    if (!gate_.SessionLimits(caller, sandbox->id)) {
      Forget(sandbox->id);
      return SendError(*exchange, 404, "sandbox " + sandbox->id + " not found (it ended)");
    }
    // A paused sandbox is resumed (E2B's auto-resume): its state restored in a fresh sandbox, its
    // timeout's clock going on from where the pause stopped it.
    engine::Refused<bool> resumed = false;  // a running sandbox's connect takes no slot
    if (auto paused = gate_.SessionPaused(caller, sandbox->id); paused && *paused)
      resumed = gate_.ResumeSession(caller, sandbox->id, origin);
    if (!resumed) return SendRefusal(*exchange, resumed.error());
    if (*resumed) {
      if (auto info = gate_.Session(caller, sandbox->id); info && info->expires) {
        std::lock_guard lock(sandbox->mu);
        sandbox->end_at = *info->expires;
      }
    }
    if (timeout) {
      // Connecting extends a sandbox's life, never shortens it (as on E2B).
      std::unique_lock lock(sandbox->mu);
      const auto wanted = std::chrono::system_clock::now() + *timeout;
      if (wanted > sandbox->end_at) {
        lock.unlock();
        if (auto set = gate_.SetSessionLifetime(caller, sandbox->id, *timeout, origin); !set)
          return SendRefusal(*exchange, set.error());
        lock.lock();
        sandbox->end_at = wanted;
      }
    }
    SendJson(*exchange, *resumed ? 201 : 200, Describe(*sandbox, true));
  });
}

void E2bApi::List(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const ApiKey& key) {
  const std::string state = QueryParam(request.query, "state").value_or("");
  const auto filter = MetadataFilter(QueryParam(request.query, "metadata").value_or(""));
  auto page = PageOf(request, *exchange);
  if (!page) return;
  const size_t limit = page->limit, offset = page->offset;
  // E2B's filter: "running", "paused" or both (comma-separated); none: both.
  const bool running_wanted = state.empty() || state.find("running") != std::string::npos;
  const bool paused_wanted = state.empty() || state.find("paused") != std::string::npos;
  const engine::Caller caller = CallerOf(key);
  calls_.Spawn([this, exchange, caller, filter, limit, offset, running_wanted, paused_wanted] {
    std::set<std::string> live, paused;
    for (const auto& info : gate_.ListSessions(caller)) {
      live.insert(info.id);
      if (info.paused) paused.insert(info.id);
    }
    std::vector<std::shared_ptr<Sandbox>> mine;
    std::vector<std::string> ended;
    {
      std::lock_guard lock(mu_);
      for (const auto& [id, s] : sandboxes_) {
        if (s->key_id != caller.id) continue;
        if (live.contains(id)) {
          mine.push_back(s);
        } else {
          ended.push_back(id);  // its session ended
        }
      }
    }
    for (const auto& id : ended) Forget(id);
    std::sort(mine.begin(), mine.end(), [](const auto& a, const auto& b) {
      return a->started != b->started ? a->started < b->started : a->id < b->id;
    });
    nlohmann::json list = nlohmann::json::array();
    size_t matched = 0;
    bool more = false;
    for (const auto& s : mine) {
      if (!(paused.contains(s->id) ? paused_wanted : running_wanted)) continue;
      bool match = true;
      for (const auto& [k, v] : filter) match = match && s->metadata.value(k, nlohmann::json()) == v;
      if (!match) continue;
      if (matched++ < offset) continue;
      if (list.size() == limit) {
        more = true;
        break;
      }
      list.push_back(Describe(*s, false));
    }
    HttpResponse response{.status = 200, .body = Serialize(list)};
    if (more) response.headers.emplace_back("x-next-token", std::to_string(offset + limit));
    exchange->Respond(std::move(response));
  });
}

}  // namespace execbox::api::e2b
