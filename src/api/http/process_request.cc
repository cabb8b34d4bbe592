#include "api/http/process_request.h"

#include "api/http/execute_request.h"
#include "api/schema/request_schema.h"
#include "base/base64.h"
#include "engine/limit_schema.h"

namespace execbox::api {
namespace {

using nlohmann::json;

std::unexpected<Problem> Bad(std::string type, std::string title, std::string detail,
                             const std::string& field) {
  return std::unexpected(Problem{.status = 400,
                                 .type = std::move(type),
                                 .title = std::move(title),
                                 .detail = std::move(detail),
                                 .extra = {{"field", field}}});
}

std::unexpected<Problem> Invalid(const std::string& field, const std::string& why) {
  return Bad("invalid-value", "Invalid value", "'" + field + "' " + why, field);
}

// The body's fields as the schema says `request` carries them (CheckFields): a fault is a 400
// problem of its type naming the field.
std::expected<json, Problem> ReadFields(std::string_view body, Request request) {
  auto doc = ParseJsonObject(body.empty() ? std::string_view("{}") : body);
  if (!doc) return std::unexpected(std::move(doc.error()));
  auto fields = CheckFields(*doc, request);
  if (fields) return std::move(*fields);
  const FieldFault& fault = fields.error();
  const char* title = fault.type == "unknown-field"   ? "Unknown field"
                      : fault.type == "missing-field" ? "Missing field"
                      : fault.type == "wrong-type"    ? "Wrong type"
                                                      : "Invalid value";
  return Bad(fault.type, title, fault.detail, fault.field);
}

}  // namespace

std::expected<engine::ProcessSpec, Problem> ParseProcessStartBody(std::string_view body) {
  auto fields = ReadFields(body, kProcessStartBody);
  if (!fields) return std::unexpected(std::move(fields.error()));
  auto spec = ReadProcessSpec(*fields);
  if (!spec) return Bad(spec.error().type, "Invalid value", spec.error().detail, spec.error().field);
  return std::move(*spec);
}

std::expected<std::string, Problem> ParseProcessInputBody(std::string_view body) {
  auto fields = ReadFields(body, kProcessInputBody);
  if (!fields) return std::unexpected(std::move(fields.error()));
  const bool text = fields->contains("data"), bytes = fields->contains("data_base64");
  if (text == bytes) return Invalid("data", "or 'data_base64' is required (one of them)");
  if (text) return (*fields)["data"].get<std::string>();
  auto decoded = Base64Decode((*fields)["data_base64"].get_ref<const std::string&>());
  if (!decoded) {
    return Bad("invalid-base64", "Invalid base64",
               "'data_base64' is not valid base64 (standard alphabet, with padding)", "data_base64");
  }
  return std::move(*decoded);
}

std::expected<int, Problem> ParseProcessSignalBody(std::string_view body) {
  auto fields = ReadFields(body, kProcessSignalBody);
  if (!fields) return std::unexpected(std::move(fields.error()));
  std::optional<int> signal = ReadSignal((*fields)["signal"]);
  if (!signal)
    return Invalid("signal", "must name a signal (\"SIGTERM\", \"KILL\", ...) or be its number (1-64)");
  return *signal;
}

std::expected<PtySize, Problem> ParseProcessResizeBody(std::string_view body) {
  auto fields = ReadFields(body, kProcessResizeBody);
  if (!fields) return std::unexpected(std::move(fields.error()));
  return PtySize{.rows = (*fields)["rows"].get<uint16_t>(), .cols = (*fields)["cols"].get<uint16_t>()};
}

}  // namespace execbox::api
