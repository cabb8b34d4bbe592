// A gate's refusal as an RFC 9457 problem object: HTTP sends it as application/problem+json
// (api/http/problem.h), MCP as a refused tool call's structuredContent, so both say the same.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "engine/refusal.h"

namespace execbox::api {

// The HTTP status of a refusal's kind: 400, 404, 409, 413, 422, 429, 503, or 500.
int HttpStatusOfRefusal(engine::RefusalKind kind);

// {"type": "urn:execbox:problem:<slug>", "title", "status", "detail"} over the extension
// members in `extra` (an object; anything else is left out).
nlohmann::json ProblemJson(const std::string& type, const std::string& title, int status,
                           const std::string& detail, const nlohmann::json& extra);
nlohmann::json ProblemJson(const engine::Refusal& refusal);

}  // namespace execbox::api
