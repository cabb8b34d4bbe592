// MCP's JSON-RPC lines (api/mcp): each line of the input goes to ParseMessage and to
// McpServer::HandleLine, as `execbox mcp` splits its standard input, through one server per
// input. Every message the server writes must be one JSON-RPC 2.0 object.
//
// Nothing is ever executed: the server's gate stands on a cold engine (no pool, so no
// sessions) and is closed, as at shutdown, so every execute_python is refused at once
// ("shutting-down") and create_session gets "sessions-unavailable". The rest of the protocol
// (initialize, ping, tools/list, the checks of tools/call, cancellation, bad messages) runs as
// it does for a client.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "api/mcp/json_rpc.h"
#include "api/mcp/mcp_server.h"
#include "engine/engine.h"
#include "engine/gate.h"

namespace {

namespace api = execbox::api;
namespace engine = execbox::engine;
using nlohmann::json;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// The calls under test that depend on the engine's API, in one place: adapt here when it changes.
engine::Gate& ClosedGate() {
  static engine::Gate* gate = [] {
    auto created = engine::Engine::Create({.warm = false});
    Check(created.has_value());
    static const std::unique_ptr<engine::Engine> cold = std::move(*created);
    static engine::Gate closed(*cold, engine::GateOptions{});
    closed.Close();
    return &closed;
  }();
  return *gate;
}

// The tool calls' threads (api/common/calls.h): one set for every input, as a transport has.
api::Calls& FuzzCalls() {
  static api::Calls calls;
  return calls;
}

std::unique_ptr<api::McpServer> MakeServer(api::McpWrite write) {
  return std::make_unique<api::McpServer>(ClosedGate(), FuzzCalls(), engine::Caller{.id = "fuzz"},
                                          engine::Origin{.transport = engine::Transport::kMcpStdio}, "fuzz",
                                          std::move(write));
}

// What the server wrote: one JSON-RPC 2.0 object per line (an empty line only as a cancelled
// call's end).
void CheckWritten(const std::string& line) {
  if (line.empty()) return;
  json message = json::parse(line, nullptr, /*allow_exceptions=*/false);
  Check(message.is_object() && message.value("jsonrpc", json()) == "2.0");
  Check(message.contains("method") || message.contains("result") || message.contains("error"));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> written;
  {
    auto server =
        MakeServer([&written](const json&, const std::string& line, bool) { written.push_back(line); });
    while (!input.empty()) {
      size_t nl = input.find('\n');
      std::string_view line = input.substr(0, nl);
      input.remove_prefix(nl == std::string_view::npos ? input.size() : nl + 1);
      (void)api::ParseMessage(line);
      server->HandleLine(line);
    }
  }  // the destructor waits for every tools/call's reply
  for (const auto& line : written) CheckWritten(line);
  return 0;
}
