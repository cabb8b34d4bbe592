#include "api/mcp/json_rpc.h"

namespace execbox::api {
namespace {

using nlohmann::json;

}  // namespace

int MaxDepth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

Expected<json> ParseMessage(std::string_view line) {
  if (line.size() > kMaxMessageBytes) return Fail("message larger than 16 MiB");
  if (MaxDepth(line) > kMaxDepth)
    return Fail("JSON nested deeper than " + std::to_string(kMaxDepth) + " levels");
  json message = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (message.is_discarded()) return Fail("invalid JSON");
  return message;
}

json MakeResult(const json& id, json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

json MakeError(const json& id, int code, std::string message) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", std::move(message)}}}};
}

json MakeNotification(std::string method, json params) {
  return {{"jsonrpc", "2.0"}, {"method", std::move(method)}, {"params", std::move(params)}};
}

std::string Serialize(const json& message) {
  return message.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace execbox::api
