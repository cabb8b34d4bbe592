#include "api/common/problem_json.h"

namespace execbox::api {

int HttpStatusOfRefusal(engine::RefusalKind kind) {
  using K = engine::RefusalKind;
  switch (kind) {
    case K::kBadRequest:
      return 400;
    case K::kNotFound:
      return 404;
    case K::kConflict:
      return 409;
    case K::kTooLarge:
      return 413;
    case K::kUnprocessable:
      return 422;
    case K::kTooMany:
      return 429;
    case K::kUnavailable:
      return 503;
    case K::kInternal:
      break;
  }
  return 500;
}

nlohmann::json ProblemJson(const std::string& type, const std::string& title, int status,
                           const std::string& detail, const nlohmann::json& extra) {
  nlohmann::json body = extra.is_object() ? extra : nlohmann::json::object();
  body["type"] = "urn:execbox:problem:" + type;
  body["title"] = title;
  body["status"] = status;
  body["detail"] = detail;
  return body;
}

nlohmann::json ProblemJson(const engine::Refusal& refusal) {
  return ProblemJson(refusal.type, refusal.title, HttpStatusOfRefusal(refusal.kind), refusal.detail,
                     refusal.extra);
}

}  // namespace execbox::api
