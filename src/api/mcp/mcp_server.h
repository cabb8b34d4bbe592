// The MCP server's protocol logic, independent of the transport: it takes one JSON-RPC message
// (a line) at a time and writes replies and notifications through a callback. Each tools/call
// runs on a thread of the transport's Calls, so ping and notifications/cancelled are answered
// while code runs, and the transport's shutdown cancels and joins it.
// Every message written says which client request it belongs to, so a transport that answers
// each request on its own channel (Streamable HTTP) can route it; stdio ignores that.
// Every tool call goes through the engine's gate as one caller (the API key over HTTP, the
// local user over stdio): limits, admission, session ownership and the audit log are the
// gate's. An execute_python call is admitted on the transport's thread, before a thread is
// started for it, so a flood of calls is refused at once. Sessions created through an
// McpServer are closed when it ends (end of input, DELETE /mcp or the MCP session's expiry).
// The tools for a session's processes (mcp_process_tools.h) are offered and run only where the
// gate has sessions.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>

#include "api/common/calls.h"
#include "engine/gate.h"

namespace execbox::api {

// Revisions we speak, newest first; the first is offered when the client asks for another.
inline constexpr const char* kProtocolVersions[] = {"2025-11-25", "2025-06-18", "2025-03-26"};

// One message out. `line` is a serialized JSON-RPC message (no newline). `request_id` is the id
// of the client request the message belongs to (its reply, or a progress notification for it);
// null when it belongs to none (the error reply to a message without a usable id). `last` marks
// a request's final message: its reply, or, for a cancelled tools/call (which gets no reply), a
// call with an empty `line` that writes nothing. Called from several threads, one at a time (the
// server serializes the calls), in the order the messages are sent.
using McpWrite = std::function<void(const nlohmann::json& request_id, const std::string& line, bool last)>;

// Called about ten times a second, from the Calls' ticker, for each tools/call running: the
// transport keeps the request's channel alive, and says whether its client is still there
// (false: the call is cancelled, as notifications/cancelled would). May be empty (stdio).
using McpWatch =
    std::function<bool(const nlohmann::json& request_id, std::chrono::steady_clock::time_point now)>;

class McpServer {
 public:
  // Tool calls run on `calls`, which must outlive this server.
  McpServer(engine::Gate& gate, Calls& calls, engine::Caller caller, engine::Origin origin,
            std::string version, McpWrite write, McpWatch watch = nullptr);
  ~McpServer();  // waits for in-flight calls, then closes the sessions created through it
  McpServer(const McpServer&) = delete;
  McpServer& operator=(const McpServer&) = delete;

  void HandleLine(std::string_view line);
  // One message already parsed (by ParseMessage, for its limits).
  void HandleMessage(const nlohmann::json& message);
  // A line longer than the transport accepts: answered with a parse error, not read.
  void HandleOversized();
  // Blocks until every tools/call has replied (at end of input).
  void Drain();
  // Cancels the running tools/call with this request id, as notifications/cancelled does (for a
  // transport that saw its client go away).
  void CancelRequest(const nlohmann::json& request_id);
  // Cancels every running tools/call, and every later one as it starts (the transport's session
  // is ending).
  void CancelAll();

 private:
  class ToolCall;  // mcp_server.cc

  void Send(const nlohmann::json& message, const nlohmann::json& request_id, bool last = true);
  void Dispatch(const nlohmann::json& message);
  nlohmann::json Initialize(const nlohmann::json& params);
  void StartToolCall(const nlohmann::json& id, const nlohmann::json& params);
  // The call's reply (none when it was cancelled); the request id is free again after it.
  void Finish(const nlohmann::json& id, const Call& call, nlohmann::json result);
  void Cancel(const nlohmann::json& params);
  nlohmann::json SessionTool(const std::string& name, const nlohmann::json& arguments);

  engine::Gate& gate_;
  Calls& calls_;
  const engine::Caller caller_;
  const engine::Origin origin_;
  std::string version_;
  McpWrite write_;
  McpWatch watch_;
  std::mutex write_mu_;

  std::mutex calls_mu_;
  std::condition_variable calls_done_;
  std::map<std::string, std::shared_ptr<ToolCall>> by_id_;  // running, by the request id's JSON text
  size_t running_ = 0;
  bool cancel_all_ = false;

  std::mutex sessions_mu_;
  std::set<std::string> sessions_;  // created through this server, not yet closed
};

}  // namespace execbox::api
