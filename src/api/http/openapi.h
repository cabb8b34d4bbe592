// The OpenAPI 3.1 document served at /v1/openapi.json, built here (openapi.cc and the parts of
// openapi_parts.h): the request schemas from the request schema (api/schema/request_schema.h),
// `Limits` and the Result's `limits` from the limit schema with this server's defaults and
// maxima, so the document never disagrees with the server that serves it. docs/openapi.json is
// it with the built-in limits, written by `make openapi` for review (tests/unit/openapi_test.cc
// fails when the two differ).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "engine/limit_schema.h"

namespace execbox::api {

// The document with the limits of `limits`, and serialized.
nlohmann::json OpenApiJson(const engine::LimitsConfig& limits);
std::string OpenApiDocument(const engine::LimitsConfig& limits);
// Its components.schemas "Limits" and "Result".properties.limits.
nlohmann::json OpenApiLimitsSchema(const engine::LimitsConfig& limits);
nlohmann::json OpenApiResultLimitsSchema();

}  // namespace execbox::api
