#include "cli/mcp_bridge.h"

#include <unistd.h>

#include <iostream>

#include "api/mcp/json_rpc.h"
#include "base/io.h"
#include "cli/local_client.h"

namespace execbox::cli {
namespace {

using nlohmann::json;

// Messages answered at once; past this the reader waits (the server's admission refuses
// executions long before: this only bounds threads).
constexpr size_t kMaxInFlight = 64;

bool IsJsonRpc(const std::string& body) {
  json message = json::parse(body, nullptr, false);
  return message.is_object() && message.contains("jsonrpc");
}

}  // namespace

void McpBridge::Write(const std::string& line) {
  std::lock_guard lock(out_mu_);
  if (auto written = WriteAll(STDOUT_FILENO, line + "\n"); !written) {
    std::cerr << "execbox mcp: cannot write to stdout: " << written.error().message << "\n";
  }
}

void McpBridge::ReplyError(const json& message, const std::string& why) {
  std::cerr << "execbox mcp: " << why << "\n";
  // A request gets its answer; a notification or a response has none to get.
  if (message.contains("method") && message.contains("id"))
    Write(api::Serialize(api::MakeError(message["id"], api::kInternalError, why)));
}

void McpBridge::HandleOversized() {
  Write(api::Serialize(api::MakeError(nullptr, api::kParseError, "message larger than 16 MiB")));
}

void McpBridge::HandleLine(std::string_view line) {
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;  // not a message
  auto parsed = api::ParseMessage(line);
  if (!parsed) {
    Write(
        api::Serialize(api::MakeError(nullptr, api::kParseError, "parse error: " + parsed.error().message)));
    return;
  }
  json message = std::move(*parsed);
  std::string body(line);
  const bool initialize =
      message.is_object() && message.contains("id") && message.value("method", "") == "initialize";
  if (initialize) {
    {
      std::lock_guard lock(mu_);
      initialize_ = body;
    }
    Forward(body, message);
    return;
  }
  {
    std::unique_lock lock(mu_);
    idle_.wait(lock, [this] { return in_flight_ < kMaxInFlight; });
    ++in_flight_;
  }
  calls_.Spawn([this, body = std::move(body), message = std::move(message)] {
    Forward(body, message);
    std::lock_guard lock(mu_);
    --in_flight_;
    idle_.notify_all();
  });
}

void McpBridge::Forward(const std::string& body, const json& message) {
  const bool initialize = message.is_object() && message.value("method", "") == "initialize";
  for (int attempt = 0; attempt < 2; ++attempt) {
    LocalClient::Request request{.target = "/mcp", .json_body = body, .headers = {}};
    request.headers.emplace_back("Accept", "application/json, text/event-stream");
    std::string session;
    {
      std::lock_guard lock(mu_);
      session = session_id_;
      if (!initialize && !session.empty()) request.headers.emplace_back("Mcp-Session-Id", session);
      if (!initialize && !protocol_version_.empty())
        request.headers.emplace_back("MCP-Protocol-Version", protocol_version_);
    }
    auto client = LocalClient::Connect(path_);
    if (!client) return ReplyError(message, "the local server is gone: " + client.error().message);
    auto reply = (*client)->Send(request, [this](std::string_view event, std::string_view data) {
      if ((event == "message" || event.empty()) && !data.empty()) Write(std::string(data));
    });
    if (!reply) return ReplyError(message, reply.error().message);
    if (reply->status == 200 || reply->status == 202) {
      if (!reply->body.empty()) Write(reply->body);
      if (initialize && reply->status == 200) {
        json answer = json::parse(reply->body, nullptr, false);
        std::lock_guard lock(mu_);
        if (auto it = reply->headers.find("mcp-session-id"); it != reply->headers.end())
          session_id_ = it->second;
        if (answer.is_object() && answer.contains("result") && answer["result"].is_object())
          protocol_version_ = answer["result"].value("protocolVersion", "");
      }
      return;
    }
    // The server ends an MCP session that sat idle past its TTL; a stdio client cannot know,
    // so the bridge starts a fresh one (sessions made in the old one are gone, and say so).
    if (reply->status == 404 && !initialize && attempt == 0 && !session.empty() && Reinitialize(session))
      continue;
    if (IsJsonRpc(reply->body)) return Write(reply->body);
    return ReplyError(message, "the local server refused: " + LocalClient::ProblemDetail(reply->body));
  }
}

bool McpBridge::Reinitialize(const std::string& stale_session) {
  std::lock_guard lock(mu_);
  if (session_id_ != stale_session) return true;  // another thread has done it
  if (initialize_.empty()) return false;
  auto client = LocalClient::Connect(path_);
  if (!client) return false;
  LocalClient::Request request{.target = "/mcp", .json_body = initialize_, .headers = {}};
  request.headers.emplace_back("Accept", "application/json, text/event-stream");
  auto reply = (*client)->Send(request);
  if (!reply || reply->status != 200 || !reply->headers.contains("mcp-session-id")) return false;
  session_id_ = reply->headers["mcp-session-id"];
  // Its answer is not the client's to see (it was answered once); the session needs the
  // client's "initialized" notification as any other would.
  auto notify = LocalClient::Connect(path_);
  if (!notify) return false;
  LocalClient::Request initialized{
      .target = "/mcp",
      .json_body = api::Serialize(api::MakeNotification("notifications/initialized", json::object())),
      .headers = {{"Accept", "application/json, text/event-stream"}, {"Mcp-Session-Id", session_id_}}};
  if (!protocol_version_.empty()) initialized.headers.emplace_back("MCP-Protocol-Version", protocol_version_);
  std::cerr << "execbox mcp: the local server had ended the idle MCP session; started a new one\n";
  return (*notify)->Send(initialized).has_value();
}

void McpBridge::Drain() {
  std::unique_lock lock(mu_);
  idle_.wait(lock, [this] { return in_flight_ == 0; });
  if (session_id_.empty()) return;
  auto client = LocalClient::Connect(path_);
  if (!client) return;
  LocalClient::Request end{.method = "DELETE", .target = "/mcp", .json_body = {}, .headers = {}};
  end.headers.emplace_back("Mcp-Session-Id", session_id_);
  (void)(*client)->Send(end);
}

}  // namespace execbox::cli
