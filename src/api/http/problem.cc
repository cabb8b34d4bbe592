#include "api/http/problem.h"

#include "api/common/json_text.h"
#include "api/common/problem_json.h"

namespace execbox::api {

Problem ProblemOf(const engine::Refusal& refusal) {
  const int status = HttpStatusOfRefusal(refusal.kind);
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
  const nlohmann::json body =
      ProblemJson(problem.type, problem.title, problem.status, problem.detail, problem.extra);
  HttpResponse response{.status = problem.status, .content_type = "application/problem+json"};
  response.headers = problem.headers;
  response.body = Serialize(body);
  return response;
}

}  // namespace execbox::api
