// Inside the E2B front end (e2b_*.cc): a sandbox as it keeps one, a stream in flight, and the
// answers its three parts share. Not for anyone else.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "api/e2b/e2b_api.h"
#include "engine/refusal.h"

namespace execbox::api::e2b {

// What E2B keeps of a sandbox that an execbox session does not: the token of its sandbox
// calls, its template and metadata, its environment, and its contexts. The session itself
// (its process, work dir, limits, lifetime, owner) is the engine's.
struct E2bApi::Sandbox {
  std::string id;      // the session's id
  std::string key_id;  // the key that created it (the session's owner)
  std::string token;   // its sandbox calls carry it (X-Access-Token, E2B-Traffic-Access-Token)
  std::string template_id;
  nlohmann::json metadata = nlohmann::json::object();  // strings, as sent at creation
  std::map<std::string, std::string> env;              // envVars at creation: every execution's
  std::chrono::system_clock::time_point started;

  struct Context {
    std::string id;
    std::string cwd;  // as code inside the sandbox sees it ("" for the work dir)
    uint64_t executions = 0;
  };
  std::mutex mu;  // guards what follows
  std::chrono::system_clock::time_point end_at;
  std::map<std::string, Context> contexts;  // kDefaultContext always
  uint64_t commands = 0;                    // numbers the commands' handles (E2B's "pid")
};

// The context every sandbox has; in the session it is the default namespace ("").
inline constexpr const char* kDefaultContext = "default";
inline std::string NamespaceOf(const std::string& context) {
  return context == kDefaultContext ? "" : context;
}

// A streamed answer (NDJSON from /execute, Connect envelopes from Process/Start): writes from
// the execution's output thread and the keep-alive never interleave, and the stream starts
// with the first write so that a refusal before it is still an ordinary answer.
struct E2bApi::Stream {
  Stream(std::shared_ptr<Exchange> e, std::string type, std::string keep)
      : exchange(std::move(e)), content_type(std::move(type)), keepalive(std::move(keep)) {}
  const std::shared_ptr<Exchange> exchange;
  const std::string content_type;
  const std::string keepalive;  // sent after a silence
  std::atomic<bool> cancel{false};

  void Send(const std::string& data) {
    std::lock_guard lock(mu_);
    StartLocked();
    exchange->Write(data);
    last_write_ = std::chrono::steady_clock::now();
  }
  void Start() {
    std::lock_guard lock(mu_);
    StartLocked();
  }
  // The keep-alive, if the stream started and has been silent this long.
  void KeepAlive(std::chrono::steady_clock::duration silence) {
    std::lock_guard lock(mu_);
    if (started_ && std::chrono::steady_clock::now() - last_write_ > silence) {
      exchange->Write(keepalive);
      last_write_ = std::chrono::steady_clock::now();
    }
  }
  // Called by the monitor every ~100 ms while the stream is watched (may be empty): sends what
  // waited for the end of its line too long.
  std::function<void()> tick;
  bool started() {
    std::lock_guard lock(mu_);
    return started_;
  }

 private:
  void StartLocked() {
    if (started_) return;
    exchange->StartStream(200, content_type, {});
    started_ = true;
    last_write_ = std::chrono::steady_clock::now();
  }
  std::mutex mu_;
  bool started_ = false;
  std::chrono::steady_clock::time_point last_write_;
};

// E2B's error body, {"code": status, "message"}, with that status.
void SendError(Exchange& exchange, int status, const std::string& message);
void SendJson(Exchange& exchange, int status, const nlohmann::json& body);
// A refusal of the gate's, with the status the HTTP API gives it.
void SendRefusal(Exchange& exchange, const engine::Refusal& refusal);
int StatusOf(const engine::Refusal& refusal);
// The request's JSON object body ({} when empty), or an answer sent.
std::optional<nlohmann::json> JsonBody(const HttpRequest& request, Exchange& exchange);
// A query parameter, percent-decoded.
std::optional<std::string> QueryParam(std::string_view query, std::string_view name);

}  // namespace execbox::api::e2b
