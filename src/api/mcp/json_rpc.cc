#include "api/mcp/json_rpc.h"

namespace execbox::api {
namespace {

using nlohmann::json;

}  // namespace

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

}  // namespace execbox::api
