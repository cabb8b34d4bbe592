// The pieces the OpenAPI document (openapi.h) is built from, one file each: the paths and the
// shared responses (openapi_paths.cc), the Result's schemas (openapi_result.cc), the sessions'
// and the service's schemas (openapi_schemas.cc); the request schemas, from the request schema,
// and the whole are openapi.cc's. Also the small builders they share, so that a schema
// reference or a problem response is written once.
#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace execbox::api::openapi {

using nlohmann::json;

// {"$ref": "#/components/schemas/NAME"}.
inline json Schema(std::string_view name) { return {{"$ref", "#/components/schemas/" + std::string(name)}}; }
// The schema, or null.
inline json OrNull(json schema) { return {{"anyOf", {std::move(schema), {{"type", "null"}}}}}; }

inline json String(std::string_view description = {}) {
  json s = {{"type", "string"}};
  if (!description.empty()) s["description"] = description;
  return s;
}
inline json Boolean(std::string_view description = {}) {
  json s = {{"type", "boolean"}};
  if (!description.empty()) s["description"] = description;
  return s;
}
// An integer that is never negative.
inline json Count(std::string_view description = {}) {
  json s = {{"type", "integer"}, {"minimum", 0}};
  if (!description.empty()) s["description"] = description;
  return s;
}
inline json ArrayOf(json items, std::string_view description = {}) {
  json s = {{"type", "array"}, {"items", std::move(items)}};
  if (!description.empty()) s["description"] = description;
  return s;
}
// An object of these properties, these required; `closed`: no others.
inline json Object(std::initializer_list<const char*> required, json properties, bool closed = false) {
  json s = {{"type", "object"}, {"properties", std::move(properties)}};
  if (required.size() > 0) s["required"] = json(required);
  if (closed) s["additionalProperties"] = false;
  return s;
}

// Component schemas by name, merged into components.schemas.
json ResultSchemas();
json SessionSchemas();
json ServiceSchemas();
// components.responses and components.parameters.
json ResponseComponents();
json ParameterComponents();
// The paths; the body of POST /v1/sessions is `session_body`.
json Paths(json session_body);
// A session's processes (openapi_processes.cc): their paths and schemas.
json ProcessPaths();
json ProcessSchemas();

}  // namespace execbox::api::openapi
