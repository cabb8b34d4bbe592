#include "api/http/openapi.h"

#include "api/common/json_text.h"
#include "api/http/openapi_parts.h"
#include "api/schema/lint_schema.h"
#include "api/schema/network_schema.h"
#include "api/schema/request_schema.h"
#include "base/build_info.h"
#include "runtime/python_program.h"

namespace execbox::api {

using nlohmann::json;
using openapi::OrNull;
using openapi::Schema;

namespace {

// A field of a request body as the request schema says (api/schema/request_schema.h). A field
// whose value is a component refers to it: the component carries its type and description.
json FieldSchema(const RequestField& field, Request request) {
  if (!field.component.empty() && field.type != JsonType::kArray) {
    return field.nullable ? OrNull(Schema(field.component)) : Schema(field.component);
  }
  const std::string type(JsonTypeName(field.type));
  json schema = {{"type", field.nullable ? json({type, "null"}) : json(type)}};
  if (field.type == JsonType::kArray) {
    schema["items"] =
        field.component.empty() ? json{{"type", JsonTypeName(field.items)}} : Schema(field.component);
  }
  if (field.min_length > 0) schema["minLength"] = field.min_length;
  if (field.max_length > 0) schema["maxLength"] = field.max_length;
  if (!field.pattern.empty()) schema["pattern"] = field.pattern;
  if (field.max_items > 0) schema["maxItems"] = field.max_items;
  if (field.maximum > 0) {
    schema["minimum"] = field.minimum;
    schema["maximum"] = field.maximum;
  }
  if (!field.content_encoding.empty()) schema["contentEncoding"] = field.content_encoding;
  if (!field.default_json.empty()) schema["default"] = json::parse(field.default_json);
  if (auto text = DescriptionOf(field, request); !text.empty()) schema["description"] = text;
  return schema;
}

// The body of `request`: its fields, the required ones, and no others (the parsers refuse them).
json BodySchema(Request request) {
  json properties = json::object();
  json required = json::array();
  for (const RequestField* field : FieldsOf(request)) {
    properties[std::string(field->name)] = FieldSchema(*field, request);
    if (IsRequired(*field, request)) required.push_back(field->name);
  }
  json schema = {{"type", "object"}, {"properties", properties}, {"additionalProperties", false}};
  if (!required.empty()) schema["required"] = required;
  return schema;
}

// The lint profiles this build has, as `policy` takes them.
json PolicySchema() {
  const RequestField& policy = FieldWithId(FieldId::kPolicy);
  return {{"type", JsonTypeName(policy.type)},
          {"enum", runtime::LintProfileNames()},
          {"default", json::parse(policy.default_json)},
          {"description", DescriptionOf(policy, kExecuteBody)}};
}

// A signal, by name or number: the schema the signal_process tool offers too.
json SignalComponent() {
  json schema = {{"description", DescriptionOf(FieldWithId(FieldId::kSignal), kProcessSignalBody)}};
  schema.update(SignalSchema());
  return schema;
}

json RequestSchemas(const engine::LimitsConfig& limits) {
  json execute = BodySchema(kExecuteBody);
  execute["description"] =
      "Unknown fields are refused (400 `unknown-field`); null is the same as leaving an optional field out.";
  // The session route's body is the one-shot body without what it leaves out (session_id).
  json left_out = json::object();
  for (const RequestField* field : FieldsOf(kExecuteBody)) {
    if (!(field->in & kSessionExecuteBody)) left_out[std::string(field->name)] = false;
  }
  json in_session = {
      {"$ref", "#/components/schemas/ExecuteRequest"},
      {"properties", left_out},
      {"description", "An `ExecuteRequest` without `session_id`: the session is the one in the path."}};
  return {{"ExecuteRequest", execute},
          {"SessionExecuteRequest", in_session},
          {"CheckRequest", BodySchema(kCheckBody)},
          {"Policy", PolicySchema()},
          {"NetworkPolicy", NetworkPolicySchema(DescriptionOf(FieldWithId(FieldId::kNetwork), kExecuteBody))},
          {"Lint", LintSchema(DescriptionOf(FieldWithId(FieldId::kLint), kExecuteBody))},
          {"Limits", OpenApiLimitsSchema(limits)},
          {"InputFile", BodySchema(kInputFile)},
          {"ProcessStartRequest", BodySchema(kProcessStartBody)},
          {"ProcessInputRequest", BodySchema(kProcessInputBody)},
          {"ProcessSignalRequest", BodySchema(kProcessSignalBody)},
          {"ProcessResizeRequest", BodySchema(kProcessResizeBody)},
          {"Signal", SignalComponent()}};
}

json Info() {
  return {{"title", "execbox"},
          {"version", kVersion},  // the release (CMakeLists.txt)
          {"summary", "Runs untrusted Python in a sandbox and returns what happened."},
          {"description",
           "A sandbox for Python written a moment ago by a language model: stdout, stderr, the value of the "
           "last expression, errors with tracebacks, figures as PNG and the files the code wrote, under CPU, "
           "memory, time, process, output and disk limits, with no network. Every error is "
           "`application/problem+json` (RFC 9457). Every route but `/livez` and `/readyz` needs "
           "`Authorization: Bearer <token>`. A server with an instance name sends it in the "
           "`Execbox-Instance` header of every response. The same port also serves E2B's API (`/sandboxes`, "
           "`/v2/sandboxes`, and calls naming a sandbox in the `E2b-Sandbox-Id` header), which is E2B's own "
           "and not described here: see docs/e2b.md, \"Using the E2B SDK\"."}};
}

json Tags() {
  json tags = json::array();
  for (auto [name, description] : {std::pair{"execution", "One-shot execution and checks."},
                                   std::pair{"sessions", "Stateful sessions, like notebook kernels."},
                                   std::pair{"processes", "A session's processes besides its Python kernel."},
                                   std::pair{"operations", "Health, metrics and this document."},
                                   std::pair{"mcp", "The Model Context Protocol over Streamable HTTP."}}) {
    tags.push_back({{"name", name}, {"description", description}});
  }
  return tags;
}

}  // namespace

json OpenApiLimitsSchema(const engine::LimitsConfig& limits) {
  json schema = engine::LimitsJsonSchema(limits);
  for (auto& [name, property] : schema["properties"].items()) {
    property["type"] = json::array({property["type"], "null"});
  }
  schema["description"] = DescriptionOf(FieldWithId(FieldId::kLimits), kExecuteBody);
  return schema;
}

json OpenApiResultLimitsSchema() {
  json properties = json::object();
  json required = json::array();
  for (const auto& spec : engine::LimitTable()) {
    const std::string name(spec.name);
    required.push_back(name);
    properties[name] = {{"type", "object"},
                        {"required", {"value", "enforced_by"}},
                        {"properties",
                         {{"value", {{"type", spec.integer() ? "integer" : "number"}, {"minimum", 0}}},
                          {"enforced_by",
                           {{"type", "string"},
                            {"description",
                             "What enforced it in this run, e.g. `cgroup-v2`, `cgroup-v1+rlimit`, `rlimit`, "
                             "`supervisor`, `tmpfs`."}}}}},
                        {"additionalProperties", false}};
  }
  return {
      {"type", "object"},
      {"description",
       "The limits in force, by the names and in the units of a request's `limits`, and what enforced each."},
      {"required", required},
      {"properties", properties},
      {"additionalProperties", false}};
}

json OpenApiJson(const engine::LimitsConfig& limits) {
  json schemas = RequestSchemas(limits);
  schemas.update(openapi::ResultSchemas());
  schemas.update(openapi::SessionSchemas());
  schemas.update(openapi::ProcessSchemas());
  schemas.update(openapi::ServiceSchemas());
  json components = {{"securitySchemes",
                      {{"bearer",
                        {{"type", "http"},
                         {"scheme", "bearer"},
                         {"description", "An API key of the server: `Authorization: Bearer <token>`."}}}}},
                     {"parameters", openapi::ParameterComponents()},
                     {"responses", openapi::ResponseComponents()},
                     {"schemas", schemas}};
  return {{"openapi", "3.1.0"},
          {"jsonSchemaDialect", "https://json-schema.org/draft/2020-12/schema"},
          {"info", Info()},
          {"tags", Tags()},
          {"security", {{{"bearer", json::array()}}}},
          {"paths", openapi::Paths(BodySchema(kSessionBody))},
          {"components", components}};
}

std::string OpenApiDocument(const engine::LimitsConfig& limits) { return Serialize(OpenApiJson(limits)); }

}  // namespace execbox::api
