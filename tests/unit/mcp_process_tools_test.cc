// The MCP process tools (api/mcp/mcp_process_tools.h): their input schemas are the request
// schema's, bad arguments are refused before the gate is asked, and a server without sessions
// (cold jails) neither offers nor runs them. What they do in a real session is tests/mcp's.
#include "api/mcp/mcp_process_tools.h"

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "api/common/calls.h"
#include "api/mcp/mcp_server.h"
#include "api/mcp/mcp_tools.h"
#include "api/schema/request_schema.h"
#include "engine/engine.h"

namespace execbox::api {
namespace {

using nlohmann::json;

// A cold engine's gate: no sessions, and nothing here runs a jail.
struct ColdGate {
  ColdGate() {
    auto created = engine::Engine::Create({.warm = false});
    EXPECT_TRUE(created.has_value());
    engine = std::move(*created);
    gate = std::make_unique<engine::Gate>(*engine, engine::GateOptions{});
  }
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<engine::Gate> gate;
};

std::string TextOf(const json& result) { return result["content"][0]["text"].get<std::string>(); }

TEST(McpProcessTools, InputSchemasAreTheRequestSchemas) {
  const std::pair<const char*, Request> tools[] = {{"start_process", kStartProcessTool},
                                                   {"list_processes", kListProcessesTool},
                                                   {"read_process_output", kReadOutputTool},
                                                   {"send_process_input", kSendInputTool},
                                                   {"signal_process", kSignalProcessTool}};
  json definitions = ProcessToolDefinitions();
  ASSERT_EQ(definitions.size(), std::size(tools));
  for (size_t i = 0; i < std::size(tools); ++i) {
    const auto& [name, request] = tools[i];
    const json& tool = definitions[i];
    EXPECT_EQ(tool["name"], name);
    EXPECT_TRUE(IsProcessTool(name));
    EXPECT_FALSE(tool["description"].get<std::string>().empty()) << name;
    EXPECT_EQ(tool["outputSchema"]["type"], "object") << name;
    EXPECT_EQ(tool["inputSchema"], ToolArgumentsSchema(request)) << name;
    json required = json::array();
    for (const RequestField* field : FieldsOf(request)) {
      EXPECT_TRUE(tool["inputSchema"]["properties"].contains(field->name)) << name << " " << field->name;
      if (IsRequired(*field, request)) required.push_back(field->name);
    }
    EXPECT_EQ(tool["inputSchema"]["properties"].size(), FieldsOf(request).size()) << name;
    EXPECT_EQ(tool["inputSchema"]["required"], required) << name;
  }
  EXPECT_FALSE(IsProcessTool("execute_python"));
  // What the descriptions promise is what the engine keeps.
  const engine::ProcessLimits limits;
  EXPECT_EQ(limits.max_running, 32u);
  EXPECT_EQ(limits.stream_bytes, size_t{1} << 20);
  EXPECT_EQ(limits.max_kept, 64u);
  const json signal = definitions[4]["inputSchema"]["properties"]["signal"];
  EXPECT_EQ(signal["default"], "SIGTERM");
  EXPECT_EQ(signal["anyOf"], SignalSchema()["anyOf"]);
}

TEST(McpProcessTools, BadArgumentsAreRefusedBeforeTheGateIsAsked) {
  ColdGate cold;
  std::atomic<bool> cancel{false};
  auto call = [&](const std::string& tool, const json& arguments) {
    return CallProcessTool(*cold.gate, engine::Caller{.id = "t"}, engine::Origin{}, tool, arguments, cancel);
  };
  const std::pair<const char*, json> bad[] = {
      {"start_process", {{"session_id", "s"}}},
      {"start_process", {{"session_id", "s"}, {"command", "x"}, {"pty", true}, {"stdin", true}}},
      {"start_process", {{"session_id", "s"}, {"command", "x"}, {"rows", 5}}},
      {"start_process", {{"session_id", "s"}, {"command", "x"}, {"pty", true}, {"cols", 0}}},
      {"read_process_output", {{"session_id", "s"}, {"pid", "1"}}},
      {"read_process_output", {{"session_id", "s"}, {"pid", 1}, {"wait_seconds", 600}}},
      {"send_process_input", {{"session_id", "s"}, {"pid", 1}}},
      {"signal_process", {{"session_id", "s"}, {"pid", 1}, {"signal", "NOPE"}}},
      {"list_processes", json::object()},
  };
  for (const auto& [tool, arguments] : bad) {
    json result = call(tool, arguments);
    EXPECT_TRUE(result["isError"].get<bool>()) << tool << " " << arguments.dump();
    EXPECT_TRUE(TextOf(result).starts_with("[execbox] refused (invalid-arguments): "))
        << tool << " " << arguments.dump() << ": " << TextOf(result);
  }
  // Good arguments reach the gate, which has no sessions here.
  json result = call("list_processes", {{"session_id", "s"}});
  EXPECT_TRUE(TextOf(result).starts_with("[execbox] refused (sessions-unavailable): ")) << TextOf(result);
}

TEST(McpProcessTools, NotOfferedWithoutSessions) {
  ColdGate cold;
  Calls calls;
  std::mutex mu;
  std::vector<json> written;
  {
    McpServer server(*cold.gate, calls, engine::Caller{.id = "t"}, engine::Origin{}, "test",
                     [&](const json&, const std::string& line, bool) {
                       std::lock_guard lock(mu);
                       if (!line.empty()) written.push_back(json::parse(line));
                     });
    server.HandleLine(R"({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})");
    server.HandleLine(
        R"({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_processes",)"
        R"( "arguments": {"session_id": "s"}}})");
    server.Drain();
  }
  ASSERT_EQ(written.size(), 2u);
  for (const auto& tool : written[0]["result"]["tools"])
    EXPECT_FALSE(IsProcessTool(tool["name"].get<std::string>()));
  EXPECT_EQ(written[1]["error"]["code"], -32602) << written[1].dump();
}

}  // namespace
}  // namespace execbox::api
