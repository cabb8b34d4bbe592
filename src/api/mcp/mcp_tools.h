// The MCP tools' definitions (names, descriptions, JSON Schemas, with this server's limits; the
// arguments of execute_python and create_session are the request schema's,
// api/schema/request_schema.h) and how a gate's Result or Refusal becomes a tool result a model
// can read: the one text rendering of a Result (engine/result_text.h), one image block per
// figure, and structuredContent that is the Result's JSON with the same names (images replaced
// by their index in `content`, files without their bytes).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/schema/request_schema.h"
#include "base/error.h"
#include "engine/gate.h"
#include "engine/result.h"

namespace execbox::api {

// tools/list's "tools" array. `modules`: what the sandbox can import (engine/packages.h), named
// in execute_python's description; empty when the listing failed (a shorter description).
// `wheelhouse`: the names of the wheels in the server's wheelhouse, which execute_python's
// `packages` installs from; nullopt without one (the argument is then not offered: it could only
// be refused).
nlohmann::json ToolDefinitions(const engine::LimitsConfig& limits,
                               const std::vector<std::string>& modules = {},
                               const std::optional<std::vector<std::string>>& wheelhouse = std::nullopt);

// The inputSchema of a tool whose arguments are all rows of the request schema (the process
// tools): each with its type, bounds, default and description, the required ones listed.
nlohmann::json ToolArgumentsSchema(Request tool);

// execute_python's arguments {code, session_id?, packages?, network?, <limit>?...} as the gate's
// request, or with kCheckPythonTool check_python's {code, policy?, analyzers?, lint?} as a check.
// A bad argument is a refusal whose detail is meant for the model to correct itself.
engine::Refused<engine::ExecutionRequest> ParseExecuteArguments(const nlohmann::json& arguments,
                                                                Request tool = kExecutePythonTool);
// create_session's arguments: the limits the session is created with, and the packages it is
// created with (offered only where there is a wheelhouse; the gate refuses them without one).
struct CreateSessionArguments {
  engine::LimitOverrides limits;
  std::vector<std::string> packages;
  std::optional<engine::NetPolicy> network;  // the session's; none: no network
};
engine::Refused<CreateSessionArguments> ParseCreateSessionArguments(const nlohmann::json& arguments);
// A required string argument (session_id for close_session).
Expected<std::string> StringArgument(const nlohmann::json& arguments, const std::string& name);

// The CallToolResult for one execution; isError for any status but ok.
nlohmann::json ExecutionToolResult(const engine::Result& result);
// A request the gate refused: isError, "[execbox] refused (TYPE): DETAIL" as text, and as
// structuredContent the problem object HTTP would send (api/common/problem_json.h).
nlohmann::json RefusalToolResult(const engine::Refusal& refusal);
// A tool's outputSchema: its answer's, or a refusal's problem object (anyOf), so that a client
// validating structuredContent takes both.
nlohmann::json OrRefusal(nlohmann::json output);
// A CallToolResult carrying only a structured value (and its JSON as text, for older clients).
nlohmann::json StructuredToolResult(nlohmann::json value);
// A failed tool call, isError set: the model reads the message.
nlohmann::json ToolError(const std::string& message);

}  // namespace execbox::api
