// MCP over Streamable HTTP (revision 2025-11-25, also 2025-06-18 and 2025-03-26) at /mcp:
// POST carries one JSON-RPC message; a request is answered with an SSE stream (its progress
// notifications, then its response) or with application/json; a notification or response gets
// 202. initialize issues an Mcp-Session-Id; later requests must carry it (404 when unknown or
// closed, 400 when missing). DELETE ends the MCP session. GET (a server-to-client stream) gets
// 405: this server sends nothing unprompted. Origin is checked against the allow-list (403).
// Served by the HTTP API as a RoutedApi (api/http/http_api.h): it checks the bearer key first.
//
// Each MCP session has its own McpServer (the protocol logic shared with stdio); its messages
// are routed by request id to the POST that asked. tools/call is always answered on an SSE
// stream (comment lines keep an idle one alive); everything else, answered at once, as JSON.
// A tools/call is cancelled by notifications/cancelled, by its client going away (there is no
// resumption: nobody could receive its result), and when its MCP session ends.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "api/http/auth.h"
#include "api/http/http_api.h"
#include "api/http/http_types.h"
#include "engine/gate.h"

namespace execbox::api {

struct McpHttpOptions {
  std::vector<std::string> allowed_origins;  // exact; loopback origins are always allowed
  size_t max_sessions = 256;                 // MCP sessions (not execbox sessions); 503 beyond
  size_t max_sessions_per_key = 64;          // one key cannot take them all; 429 beyond
  std::chrono::seconds idle_ttl{60 * 60};    // an MCP session with no request for this long ends
  std::string instance;                      // the server's instance name: ends every Mcp-Session-Id
};

class McpHttp final : public RoutedApi {
 public:
  McpHttp(engine::Gate& gate, std::string version, McpHttpOptions options);
  ~McpHttp();  // waits for running tool calls
  McpHttp(const McpHttp&) = delete;
  McpHttp& operator=(const McpHttp&) = delete;

  // Any request whose path is /mcp. `key_id` is the authenticated key (MCP sessions are bound to
  // the key that created them). Returns at once: a tools/call goes on on its own thread.
  void Handle(HttpRequest request, std::shared_ptr<Exchange> exchange, const ApiKey& key) override;

  // Cancels every running tool call (their streams end without a reply) and every one started
  // later: for shutdown, once the grace period is over.
  void CancelAll() override;

  // MCP sessions open now (for metrics).
  size_t SessionCount() const;
  // Requests being answered now, tool calls included (for a drain on shutdown).
  size_t InFlight() override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace execbox::api
