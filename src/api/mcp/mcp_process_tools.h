// The MCP tools for a session's processes (engine/session_processes.h): start_process,
// list_processes, read_process_output, send_process_input and signal_process. Their arguments
// are the request schema's (api/schema/request_schema.h), checked by its CheckFields as the HTTP
// process routes' bodies are; every call goes through the gate as the caller (the session's
// owner only; starts and signals audited), and a refusal is a tool error. Both transports (stdio
// and Streamable HTTP) reach them through McpServer, which offers them only where the gate has
// sessions.
#pragma once

#include <atomic>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "engine/gate.h"

namespace execbox::api {

// The process tools' entries of tools/list.
nlohmann::json ProcessToolDefinitions();
bool IsProcessTool(std::string_view name);

// One call of the process tool `name`: its CallToolResult. A wait (wait_seconds) ends early when
// `cancel` is set (the call was cancelled, or its client went away).
nlohmann::json CallProcessTool(engine::Gate& gate, const engine::Caller& caller, const engine::Origin& origin,
                               const std::string& name, const nlohmann::json& arguments,
                               const std::atomic<bool>& cancel);

}  // namespace execbox::api
