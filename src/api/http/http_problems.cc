#include "api/http/http_problems.h"

#include <algorithm>

namespace execbox::api {

Problem MethodNotAllowed(std::string_view method, const std::string& allow) {
  return Problem{.status = 405,
                 .type = "method-not-allowed",
                 .title = "Method not allowed",
                 .detail = std::string(method) + " is not allowed here; allowed: " + allow,
                 .headers = {{"Allow", allow}}};
}

Problem SessionProblem(const engine::SessionFailure& failure, const std::string& id) {
  switch (failure.kind) {
    case engine::SessionError::kNotFound:
      return Problem{.status = 404,
                     .type = "session-not-found",
                     .title = "Session not found",
                     .detail = "no session " + id + " (closed, expired, or never created)"};
    case engine::SessionError::kFileNotFound:
      return Problem{
          .status = 404, .type = "file-not-found", .title = "File not found", .detail = failure.message};
    case engine::SessionError::kTooLarge:
      return Problem{
          .status = 413, .type = "file-too-large", .title = "File too large", .detail = failure.message};
    case engine::SessionError::kFull:
      return Problem{.status = 429,
                     .type = "sessions-full",
                     .title = "Too many sessions",
                     .detail = failure.message,
                     .headers = {{"Retry-After", "5"}}};
    default:
      return Problem{
          .status = 500, .type = "session-failed", .title = "Session failed", .detail = failure.message};
  }
}

Problem SessionsUnavailable() {
  return Problem{.status = 409,
                 .type = "sessions-unavailable",
                 .title = "Sessions unavailable",
                 .detail = "sessions need the warm pool, which this server runs without"};
}

std::string RejectionReason(const Problem& problem) {
  std::string reason = problem.type;
  std::replace(reason.begin(), reason.end(), '-', '_');
  return reason;
}

}  // namespace execbox::api
