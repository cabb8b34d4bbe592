// The HTTP API's routes over the engine's gate: authentication, then executions (JSON or SSE),
// sessions and their files, check, health, metrics and the OpenAPI document; beside them, the
// front ends served on the same port (MCP at /mcp, E2B's API). Limits,
// admission, session ownership and the audit log are the gate's; the routes translate HTTP to
// and from it. Every error is an RFC 9457 problem with its real status; every accepted
// execution gets its Result or a problem that says why not.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/common/calls.h"
#include "api/http/auth.h"
#include "api/http/execute_request.h"
#include "api/http/http_types.h"
#include "api/http/metrics.h"
#include "engine/gate.h"

namespace execbox::api {

// What Drain needs of a front end served on this API's port beside its own routes.
class ServedApi {
 public:
  virtual ~ServedApi() = default;
  virtual size_t InFlight() = 0;  // requests being answered now
  virtual void CancelAll() = 0;   // cancels them, and any started later (shutdown)
};

// A front end with paths and authentication of its own (E2B's API, api/e2b). It answers the
// requests it claims, before any bearer-token check; its executions pass the same gate.
class MountedApi : public ServedApi {
 public:
  virtual bool Claims(const HttpRequest& request) const = 0;
  virtual void Handle(HttpRequest request, std::shared_ptr<Exchange> exchange) = 0;
};

// A front end at one path of this API, behind its bearer-token check (MCP's Streamable HTTP at
// /mcp, api/mcp/mcp_http.h): it gets the authenticated key.
class RoutedApi : public ServedApi {
 public:
  virtual void Handle(HttpRequest request, std::shared_ptr<Exchange> exchange, const ApiKey& key) = 0;
};

class HttpApi {
 public:
  // `keys`: the bearer tokens' keys. `metrics` is the gate's observer too
  // (GateOptions::observer), so that executions over MCP count with the rest.
  HttpApi(engine::Gate& gate, std::vector<ApiKey> keys, std::string version, Metrics& metrics);
  ~HttpApi();  // Drain(0) if not drained
  HttpApi(const HttpApi&) = delete;
  HttpApi& operator=(const HttpApi&) = delete;

  void Handle(HttpRequest request, std::shared_ptr<Exchange> exchange);
  Metrics& metrics() { return metrics_; }
  void set_connection_count(std::function<size_t()> count) { connection_count_ = std::move(count); }
  // The keys from now on (SIGHUP: the config file read again). A request being answered keeps
  // the key it was authenticated with; a key that is gone is refused from its next request.
  void ReplaceKeys(std::vector<ApiKey> keys);
  // The keys now (a mounted front end authenticates with them).
  std::shared_ptr<const Authenticator> keys() const { return auth_.load(); }
  // Serves `api`'s requests from now on (null: no more); it must outlive this HttpApi's Drain.
  // Before serving and after it only, as Serve.
  void Mount(MountedApi* api) { mounted_ = api; }
  // Serves `path` with `api`, behind the bearer-token check (null: no more).
  void Serve(const std::string& path, RoutedApi* api);

  // Graceful shutdown: refuse new executions (503) and wake queued ones with 503; wait up to
  // `grace` for running executions to finish, then cancel the rest (they answer with status
  // killed, "the server is shutting down") and wait for their answers.
  void Drain(std::chrono::milliseconds grace);
  size_t in_flight();

 private:
  void Route(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const ApiKey& key);
  void Execute(HttpRequest request, std::shared_ptr<Exchange> exchange, const ApiKey& key,
               std::optional<std::string> session_in_path);
  void Sessions(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const ApiKey& key,
                std::string_view rest);
  void SessionFiles(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const ApiKey& key,
                    const std::string& id, std::string_view path);
  // /v1/sessions/{id}/processes and below (http_processes.cc); `rest` after "/processes".
  void Processes(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const ApiKey& key,
                 const std::string& id, std::string_view rest);
  void Check(HttpRequest request, std::shared_ptr<Exchange> exchange, const ApiKey& key);
  // An admitted execution, run on its own thread; the answer as JSON or as SSE.
  void Run(engine::Admitted admitted, std::shared_ptr<Exchange> exchange, bool sse);
  void Ready(std::shared_ptr<Exchange>& exchange);
  void Respond(Exchange& exchange, HttpResponse response);
  void Fail(Exchange& exchange, const Problem& problem);

  // The front ends served beside these routes, for Drain.
  std::vector<ServedApi*> Served() const;

  engine::Gate& gate_;
  std::string version_;
  std::string openapi_;  // the document with this server's limits
  std::atomic<std::shared_ptr<const Authenticator>> auth_;
  Metrics& metrics_;
  MountedApi* mounted_ = nullptr;
  std::vector<std::pair<std::string, RoutedApi*>> routed_;  // path, front end
  std::function<size_t()> connection_count_;
  std::atomic<bool> shutting_down_{false};
  // Executions and session calls, each on its own thread; last, so that they end first.
  Calls calls_;
};

}  // namespace execbox::api
