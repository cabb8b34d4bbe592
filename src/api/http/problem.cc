#include "api/http/problem.h"

#include "api/common/json_text.h"

namespace execbox::api {

Problem ProblemOf(const engine::Refusal& refusal) {
  using K = engine::RefusalKind;
  int status = 500;
  switch (refusal.kind) {
    case K::kBadRequest:
      status = 400;
      break;
    case K::kNotFound:
      status = 404;
      break;
    case K::kConflict:
      status = 409;
      break;
    case K::kTooLarge:
      status = 413;
      break;
    case K::kUnprocessable:
      status = 422;
      break;
    case K::kTooMany:
      status = 429;
      break;
    case K::kUnavailable:
      status = 503;
      break;
    case K::kInternal:
      break;
  }
  Problem p{.status = status,
            .type = refusal.type,
            .title = refusal.title,
            .detail = refusal.detail,
            .extra = refusal.extra.is_object() ? refusal.extra : nlohmann::json::object()};
  if (refusal.retry_after_seconds > 0)
    p.headers.emplace_back("Retry-After", std::to_string(refusal.retry_after_seconds));
  return p;
}

HttpResponse ProblemResponse(const Problem& problem) {
  nlohmann::json body = problem.extra.is_object() ? problem.extra : nlohmann::json::object();
  body["type"] = "urn:execbox:problem:" + problem.type;
  body["title"] = problem.title;
  body["status"] = problem.status;
  body["detail"] = problem.detail;
  HttpResponse response{.status = problem.status, .content_type = "application/problem+json"};
  response.headers = problem.headers;
  response.body = Serialize(body);
  return response;
}

}  // namespace execbox::api
