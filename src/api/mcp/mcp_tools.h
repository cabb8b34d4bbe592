// The MCP tools' definitions (names, descriptions, JSON Schemas) and how an engine Result
// becomes a tool result a model can read: a compact text block, one image block per figure,
// and structuredContent that validates against execute_python's outputSchema.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/error.h"
#include "engine/result.h"

namespace execbox::api {

// tools/list's "tools" array.
nlohmann::json ToolDefinitions();

struct ExecuteArguments {
  std::string code;
  std::optional<std::string> session_id;
  double timeout_seconds = 30;
};

// Checks execute_python's arguments; the error text is meant for the model to correct itself.
Expected<ExecuteArguments> ParseExecuteArguments(const nlohmann::json& arguments);
// A required string argument (session_id for the session tools).
Expected<std::string> StringArgument(const nlohmann::json& arguments, const std::string& name);

// The CallToolResult for one execution.
nlohmann::json ExecutionToolResult(const engine::Result& result);
// A CallToolResult carrying only a structured value (and its JSON as text, for older clients).
nlohmann::json StructuredToolResult(nlohmann::json value);
// A failed tool call, isError set: the model reads the message.
nlohmann::json ToolError(const std::string& message);

}  // namespace execbox::api
