// The OpenAPI 3.1 document served at /v1/openapi.json: checked in as src/api/http/openapi.json
// (embedded at build time), with its `Limits` schema and the Result's `limits` written from
// the limit schema and this server's defaults and maxima, so the document never disagrees
// with the server that serves it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "engine/limit_schema.h"

namespace execbox::api {

// The document as checked in.
const std::string& CheckedInOpenApiDocument();
// The checked-in document with the limits of `limits` (serialized).
std::string OpenApiDocument(const engine::LimitsConfig& limits);
// What OpenApiDocument writes into components.schemas: "Limits" and "Result".properties.limits.
nlohmann::json OpenApiLimitsSchema(const engine::LimitsConfig& limits);
nlohmann::json OpenApiResultLimitsSchema();

}  // namespace execbox::api
