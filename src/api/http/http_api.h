// The HTTP API's routes over the shared Engine: authentication, admission, executions (JSON
// or SSE), sessions and their files, check, health, metrics, the OpenAPI document and /mcp.
// Every error is an RFC 9457 problem with its real status; every accepted execution gets its
// Result or a problem that says why not.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "api/http/admission.h"
#include "api/http/audit.h"
#include "api/http/auth.h"
#include "api/http/config.h"
#include "api/http/execute_request.h"
#include "api/http/http_types.h"
#include "api/http/mcp_http.h"
#include "api/http/metrics.h"
#include "engine/warm_engine.h"

namespace execbox::api {

class HttpApi {
 public:
  // `audit` may be null. `connections` reports open connections for /metrics (may be empty).
  HttpApi(engine::Engine& engine, const ServerConfig& config, std::string version, AuditLog* audit);
  ~HttpApi();  // Drain(0) if not drained
  HttpApi(const HttpApi&) = delete;
  HttpApi& operator=(const HttpApi&) = delete;

  void Handle(HttpRequest request, std::shared_ptr<Exchange> exchange);
  Metrics& metrics() { return metrics_; }
  void set_connection_count(std::function<size_t()> count) { connection_count_ = std::move(count); }

  // Graceful shutdown: refuse new executions (503) and wake queued ones with 503; wait up to
  // `grace` for running executions to finish, then cancel the rest (they answer with status
  // killed, "the server is shutting down") and wait for their answers.
  void Drain(std::chrono::milliseconds grace);
  size_t in_flight();

  // One execution in flight (defined in http_execute.cc).
  struct Running;

 private:
  void Route(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const ApiKey& key);
  void Execute(HttpRequest request, std::shared_ptr<Exchange> exchange, const ApiKey& key,
               std::optional<std::string> session_in_path);
  void Sessions(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const ApiKey& key,
                std::string_view rest);
  void SessionFiles(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const std::string& id,
                    std::string_view path);
  void Check(HttpRequest request, std::shared_ptr<Exchange> exchange, const ApiKey& key);
  void Ready(std::shared_ptr<Exchange>& exchange);
  void Respond(Exchange& exchange, HttpResponse response);
  void Fail(Exchange& exchange, const Problem& problem);
  // The session exists and belongs to `key` (404 otherwise, for either).
  bool OwnsSession(const std::string& id, const ApiKey& key);
  // Runs `work` on its own thread, counted for Drain.
  void Spawn(std::function<void()> work);
  void Monitor();

  engine::Engine& engine_;
  ServerConfig config_;
  std::string version_;
  AuditLog* audit_;
  RequestLimits request_limits_;
  Authenticator auth_;
  Admission admission_;
  Metrics metrics_;
  std::unique_ptr<McpHttp> mcp_;
  std::function<size_t()> connection_count_;
  std::atomic<bool> shutting_down_{false};

  std::mutex mu_;
  std::condition_variable idle_;
  size_t threads_ = 0;
  std::set<Running*> running_;
  std::map<std::string, std::string> session_owner_;  // session id -> key id
  bool stop_monitor_ = false;
  std::condition_variable monitor_wake_;
  std::thread monitor_;
};

}  // namespace execbox::api
