// JSON-RPC 2.0 framing for line-delimited transports (MCP stdio): parsing one line with the
// limits hostile input needs, and building replies.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "api/common/json_text.h"  // MaxDepth, and Serialize for one line of output
#include "base/error.h"

namespace execbox::api {

// Standard JSON-RPC error codes.
inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;

// Past this a line is refused unread: a client that sends more is broken or hostile.
inline constexpr size_t kMaxMessageBytes = 16u << 20;
// Deeper documents are refused before parsing: nothing MCP sends nests this far, and every
// level costs stack or heap in whoever walks the value later.
inline constexpr int kMaxDepth = 64;

// One message parsed; an error (to answer with kParseError) for bad JSON or too deep nesting.
Expected<nlohmann::json> ParseMessage(std::string_view line);

nlohmann::json MakeResult(const nlohmann::json& id, nlohmann::json result);
nlohmann::json MakeError(const nlohmann::json& id, int code, std::string message);
nlohmann::json MakeNotification(std::string method, nlohmann::json params);

}  // namespace execbox::api
