// RFC 9457 problem details: every error the HTTP API returns is one of these, with the real
// status code and a detail a client (or a model) can act on.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "api/http/http_types.h"
#include "engine/refusal.h"

namespace execbox::api {

struct Problem {
  int status = 400;
  std::string type;    // short slug, e.g. "malformed-json"; becomes "urn:execbox:problem:<type>"
  std::string title;   // constant per type, e.g. "Malformed JSON"
  std::string detail;  // this occurrence, e.g. "line 1, column 7: unexpected '}'"
  nlohmann::json extra = nlohmann::json::object();  // extension members (e.g. "errors": [...])
  // Extra response headers (Retry-After for 429, WWW-Authenticate for 401).
  std::vector<std::pair<std::string, std::string>> headers;
};

// The problem for a refusal of the engine's gate: its kind becomes the status (400, 404, 409,
// 413, 422, 429, 503, 500), Retry-After comes with 429 and 503.
Problem ProblemOf(const engine::Refusal& refusal);

// The application/problem+json response for it ("instance" is left out: no request ids yet).
HttpResponse ProblemResponse(const Problem& problem);

}  // namespace execbox::api
