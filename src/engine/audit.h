// The audit log: one JSON line per request that reaches the engine's gate (time, caller,
// transport, route, session, SHA-256 of the code, status or refusal, usage), and the code
// itself only when configured. Lines are written whole, one
// write(2) each, to a file opened O_APPEND, so concurrent executions never interleave.
#pragma once

#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"
#include "base/unique_fd.h"

namespace execbox::engine {

struct AuditRecord {
  std::string caller_id;
  std::string transport;   // "http" | "mcp_http" | "mcp_stdio" | "cli"
  std::string route;       // "execute" | "session" | "check" | "session_create" | "session_close"
  std::string session_id;  // "" for a one-shot execution
  std::string code;
  std::string status;    // the Result's status, or "refused:<type>"
  nlohmann::json usage;  // the Result's usage object, or null
  std::string peer;      // the client's address, when there is one
  // The Result's `network` (every connection attempt, as the Result lists them), or null when
  // it ran without a network policy.
  nlohmann::json network;
  // The Result's `guard` (what the guard refused), or null when the code ran without it.
  nlohmann::json guard;
};

class AuditLog {
 public:
  // path "-" writes to stderr.
  static Expected<std::unique_ptr<AuditLog>> Open(const std::string& path, bool include_code);
  void Write(const AuditRecord& record);

 private:
  AuditLog(UniqueFd fd, bool include_code) : fd_(std::move(fd)), include_code_(include_code) {}
  UniqueFd fd_;
  bool include_code_;
  std::mutex mu_;              // one line at a time, its partial writes included
  bool write_failed_ = false;  // reported once on stderr
};

}  // namespace execbox::engine
