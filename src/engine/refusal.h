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

// What was refused: one value per wire slug (`type`), so that code tells refusals apart by
// value, never by their text. Each has one kind, slug and title (RefusalSpecOf, refusal.cc).
enum class RefusalReason {
  // admission
  kRateLimited,
  kKeyConcurrency,
  kQueueFull,
  kShuttingDown,
  // a key's caps (key_caps.h): each names its cap in the refusal's extra
  kKeySessions,
  kKeyQueue,
  kKeyProcesses,
  kKeySessionState,
  kCancelled,
  // sessions
  kSessionNotFound,
  kSessionsUnavailable,
  kSessionsFull,
  kSessionRequired,
  kStateNotCopied,
  kNothingToUndo,
  kInvalidSnapshot,
  kSnapshotNotYours,
  kSnapshotNotFound,
  // files
  kInvalidPath,
  kFileRefused,
  kFileNotFound,
  kFileTooLarge,
  kInputsTooLarge,
  // limits and the request's form
  kLimitExceeded,
  kLimitFixed,
  kWrongType,
  kInvalidValue,
  kUnknownField,
  kInvalidArguments,
  kPolicyViolation,
  // packages
  kInvalidPackages,
  kNoWheelhouse,
  kPackageInstallFailed,
  // network
  kNetworkNotAllowed,
  // a session's processes
  kProcessNotFound,
  kProcessesFull,
  kProcessNotRunning,
  kNoStdin,
  kNotAPty,
  kStartFailed,
  kSessionEnded,
  kInternalError,  // last: a test walks them all
};

struct RefusalSpec {
  RefusalKind kind;
  const char* type;   // the slug, e.g. "limit-exceeded"
  const char* title;  // e.g. "Limit exceeded"
};
RefusalSpec RefusalSpecOf(RefusalReason reason);

struct Refusal {
  RefusalReason reason = RefusalReason::kInternalError;
  RefusalKind kind = RefusalKind::kInternal;
  std::string type;    // stable slug, e.g. "limit-exceeded": RefusalSpecOf(reason).type
  std::string title;   // constant per type, e.g. "Limit exceeded"
  std::string detail;  // this occurrence, for the client (or the model) to act on
  nlohmann::json extra = nlohmann::json::object();  // e.g. {"limit": ..., "maximum": ...}
  int retry_after_seconds = 0;                      // set for kTooMany and kUnavailable
};

template <typename T>
using Refused = std::expected<T, Refusal>;

// A refusal for `reason` (its kind, slug and title from the one table) with this occurrence's
// detail.
Refusal MakeRefusal(RefusalReason reason, std::string detail,
                    nlohmann::json extra = nlohmann::json::object());

inline std::unexpected<Refusal> Refuse(RefusalReason reason, std::string detail,
                                       nlohmann::json extra = nlohmann::json::object()) {
  return std::unexpected(MakeRefusal(reason, std::move(detail), std::move(extra)));
}

}  // namespace execbox::engine
