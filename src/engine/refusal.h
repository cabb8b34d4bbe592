// Why the engine's gate did not run (or finish) a request: a typed value every front end maps
// to its own wire (HTTP: a problem with its status; MCP: a tool result with isError), so that
// the rule and its wording live here once.
#pragma once

#include <expected>
#include <nlohmann/json.hpp>
#include <string>

namespace execbox::engine {

enum class RefusalKind {
  kBadRequest,     // the request itself is malformed (a wrong type, an unknown name, a bad path)
  kNotFound,       // no such session for this caller (another caller's looks the same)
  kConflict,       // the request cannot be done here (sessions without the warm pool, ...)
  kTooLarge,       // the inputs do not fit
  kUnprocessable,  // above the server's maximum, or a limit the session fixed at creation
  kTooMany,        // the caller's rate or concurrency, the queue, the sessions: retry later
  kUnavailable,    // shutting down, or cancelled while waiting for a slot
  kInternal,       // the sandbox failed; `detail` is generic, the server log has the rest
};

struct Refusal {
  RefusalKind kind = RefusalKind::kInternal;
  std::string type;    // stable slug, e.g. "limit-exceeded"
  std::string title;   // constant per type, e.g. "Limit exceeded"
  std::string detail;  // this occurrence, for the client (or the model) to act on
  nlohmann::json extra = nlohmann::json::object();  // e.g. {"limit": ..., "maximum": ...}
  int retry_after_seconds = 0;                      // set for kTooMany and kUnavailable
};

template <typename T>
using Refused = std::expected<T, Refusal>;

inline std::unexpected<Refusal> Refuse(RefusalKind kind, std::string type, std::string title,
                                       std::string detail, nlohmann::json extra = nlohmann::json::object()) {
  return std::unexpected(Refusal{.kind = kind,
                                 .type = std::move(type),
                                 .title = std::move(title),
                                 .detail = std::move(detail),
                                 .extra = std::move(extra)});
}

}  // namespace execbox::engine
