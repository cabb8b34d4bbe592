#include "api/http/problem.h"

#include "api/mcp/json_rpc.h"

namespace execbox::api {

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
