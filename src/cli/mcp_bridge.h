// `execbox mcp` through a local `execbox serve --unix`: MCP over stdio in front, the server's
// MCP over Streamable HTTP (/mcp) behind, so the stdio server starts at once and shares the
// server's warm pool instead of starting one of its own. Each message read is POSTed as it is;
// what comes back (a JSON response, or a stream of progress notifications ending in the
// response) is written one message per line. The server's gate, limits and audit apply; the
// caller is the local user (local-uid-N).
#pragma once

#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "api/common/calls.h"

namespace execbox::cli {

class McpBridge {
 public:
  explicit McpBridge(std::string socket_path) : path_(std::move(socket_path)) {}
  // One line from stdin. initialize is answered before the next line is read (it makes the
  // MCP session the rest belong to); everything else is forwarded on its own connection, so a
  // long tools/call does not hold up a ping or a cancellation.
  void HandleLine(std::string_view line);
  void HandleOversized();
  // End of input: waits for every forwarded message's answer, then ends the MCP session (and
  // with it the sessions it created).
  void Drain();

 private:
  void Forward(const std::string& body, const nlohmann::json& message);
  // POSTs initialize (the client's own) again after the server ended an idle MCP session.
  bool Reinitialize(const std::string& stale_session);
  void Write(const std::string& line);
  void ReplyError(const nlohmann::json& message, const std::string& why);

  const std::string path_;
  std::mutex mu_;
  std::condition_variable idle_;
  size_t in_flight_ = 0;
  std::string session_id_, protocol_version_;  // from initialize's answer
  std::string initialize_;                     // the client's initialize, for Reinitialize
  std::mutex out_mu_;
  // The forwarded messages' threads, joined when the bridge goes; last, so that they end first.
  api::Calls calls_;
};

}  // namespace execbox::cli
