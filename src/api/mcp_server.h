// The MCP server's protocol logic, independent of the transport: it takes one JSON-RPC message
// (a line) at a time and writes replies and notifications through a callback. Each tools/call
// runs on its own thread, so ping and notifications/cancelled are answered while code runs.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "engine/warm_engine.h"

namespace execbox::api {

// Revisions we speak, newest first; the first is offered when the client asks for another.
inline constexpr const char* kProtocolVersions[] = {"2025-11-25", "2025-06-18", "2025-03-26"};

class McpServer {
 public:
  // `write` gets one serialized message (no newline); it is called from several threads, one
  // at a time (the server serializes the calls).
  McpServer(engine::Engine& engine, std::string version, std::function<void(const std::string&)> write);
  ~McpServer();  // waits for in-flight calls
  McpServer(const McpServer&) = delete;
  McpServer& operator=(const McpServer&) = delete;

  void HandleLine(std::string_view line);
  // A line longer than the transport accepts: answered with a parse error, not read.
  void HandleOversized();
  // Blocks until every tools/call has replied (at end of input).
  void Drain();

 private:
  struct Call {
    std::atomic<bool> cancel{false};
  };

  void Send(const nlohmann::json& message);
  void Dispatch(const nlohmann::json& message);
  nlohmann::json Initialize(const nlohmann::json& params);
  void StartToolCall(const nlohmann::json& id, const nlohmann::json& params);
  void Cancel(const nlohmann::json& params);
  nlohmann::json RunTool(const std::string& name, const nlohmann::json& arguments,
                         const nlohmann::json& progress_token, const std::atomic<bool>& cancel);
  nlohmann::json ExecutePython(const nlohmann::json& arguments, const nlohmann::json& progress_token,
                               const std::atomic<bool>& cancel);
  nlohmann::json SessionTool(const std::string& name, const nlohmann::json& arguments);

  engine::Engine& engine_;
  std::string version_;
  std::function<void(const std::string&)> write_;
  std::mutex write_mu_;

  std::mutex calls_mu_;
  std::condition_variable calls_done_;
  std::map<std::string, std::shared_ptr<Call>> calls_;  // by the request id's JSON text
  size_t running_ = 0;
};

}  // namespace execbox::api
