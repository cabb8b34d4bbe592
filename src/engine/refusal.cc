#include "engine/refusal.h"

namespace execbox::engine {

RefusalSpec RefusalSpecOf(RefusalReason reason) {
  using K = RefusalKind;
  using R = RefusalReason;
  switch (reason) {
    case R::kRateLimited:
      return {K::kTooMany, "rate-limited", "Rate limit exceeded"};
    case R::kKeyConcurrency:
      return {K::kTooMany, "key-concurrency", "Too many concurrent executions"};
    case R::kQueueFull:
      return {K::kTooMany, "queue-full", "Server busy"};
    case R::kKeySessions:
      return {K::kTooMany, "key-sessions", "Too many sessions for this key"};
    case R::kKeyQueue:
      return {K::kTooMany, "key-queue", "Too many queued executions for this key"};
    case R::kKeyProcesses:
      return {K::kTooMany, "key-processes", "Too many session processes for this key"};
    case R::kKeySessionState:
      return {K::kTooMany, "key-session-state", "Too much session state for this key"};
    case R::kShuttingDown:
      return {K::kUnavailable, "shutting-down", "Shutting down"};
    case R::kCancelled:
      return {K::kUnavailable, "cancelled", "Cancelled"};
    case R::kSessionNotFound:
      return {K::kNotFound, "session-not-found", "Session not found"};
    case R::kSessionsUnavailable:
      return {K::kConflict, "sessions-unavailable", "Sessions unavailable"};
    case R::kSessionsFull:
      return {K::kTooMany, "sessions-full", "Too many sessions"};
    case R::kSessionRequired:
      return {K::kBadRequest, "session-required", "Session required"};
    case R::kStateNotCopied:
      return {K::kConflict, "state-not-copied", "Session state not copied"};
    case R::kNothingToUndo:
      return {K::kConflict, "nothing-to-undo", "Nothing to undo"};
    case R::kInvalidSnapshot:
      return {K::kBadRequest, "invalid-snapshot", "Invalid snapshot"};
    case R::kSnapshotNotYours:
      return {K::kBadRequest, "snapshot-not-yours", "Snapshot of another key's session"};
    case R::kSnapshotNotFound:
      return {K::kNotFound, "snapshot-not-found", "Snapshot not found"};
    case R::kInvalidPath:
      return {K::kBadRequest, "invalid-path", "Invalid file path"};
    case R::kFileRefused:
      return {K::kConflict, "file-refused", "File refused"};
    case R::kFileNotFound:
      return {K::kNotFound, "file-not-found", "File not found"};
    case R::kFileTooLarge:
      return {K::kTooLarge, "file-too-large", "File too large"};
    case R::kInputsTooLarge:
      return {K::kTooLarge, "inputs-too-large", "Input files too large"};
    case R::kLimitExceeded:
      return {K::kUnprocessable, "limit-exceeded", "Limit exceeded"};
    case R::kLimitFixed:
      return {K::kUnprocessable, "limit-fixed", "Limit fixed when the session was created"};
    case R::kWrongType:
      return {K::kBadRequest, "wrong-type", "Wrong type"};
    case R::kInvalidValue:
      return {K::kBadRequest, "invalid-value", "Invalid value"};
    case R::kUnknownField:
      return {K::kBadRequest, "unknown-field", "Unknown field"};
    case R::kInvalidArguments:
      return {K::kBadRequest, "invalid-arguments", "Invalid arguments"};
    case R::kPolicyViolation:
      return {K::kConflict, "policy-violation", "Refused by policy"};
    case R::kInvalidPackages:
      return {K::kBadRequest, "invalid-packages", "Invalid package names"};
    case R::kNoWheelhouse:
      return {K::kConflict, "no-wheelhouse", "No wheelhouse"};
    case R::kPackageInstallFailed:
      return {K::kUnprocessable, "package-install-failed", "Package install failed"};
    case R::kNetworkNotAllowed:
      return {K::kUnprocessable, "network-not-allowed", "Network not allowed"};
    case R::kProcessNotFound:
      return {K::kNotFound, "process-not-found", "Process not found"};
    case R::kProcessesFull:
      return {K::kConflict, "processes-full", "Too many processes in the session"};
    case R::kProcessNotRunning:
      return {K::kConflict, "process-not-running", "Process not running"};
    case R::kNoStdin:
      return {K::kConflict, "no-stdin", "No stdin to write to"};
    case R::kNotAPty:
      return {K::kConflict, "not-a-pty", "Not a pty"};
    case R::kStartFailed:
      return {K::kUnprocessable, "start-failed", "Process could not start"};
    case R::kSessionEnded:
      return {K::kConflict, "session-ended", "Session's sandbox ended"};
    case R::kInternalError:
      break;
  }
  return {K::kInternal, "internal-error", "Internal error"};
}

Refusal MakeRefusal(RefusalReason reason, std::string detail, nlohmann::json extra) {
  const RefusalSpec spec = RefusalSpecOf(reason);
  return Refusal{.reason = reason,
                 .kind = spec.kind,
                 .type = spec.type,
                 .title = spec.title,
                 .detail = std::move(detail),
                 .extra = std::move(extra)};
}

}  // namespace execbox::engine
