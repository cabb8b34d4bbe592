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

// The body's fields as the schema says `request` carries them: unknown ones refused, required
// ones present, each of its type and, for an integer, within its bounds. Null is absent.
std::expected<json, Problem> ReadFields(std::string_view body, Request request) {
  auto doc = ParseJsonObject(body.empty() ? std::string_view("{}") : body);
  if (!doc) return std::unexpected(std::move(doc.error()));
  for (const auto& item : doc->items()) {
    if (FindField(request, item.key()) == nullptr) {
      const std::string key = item.key().substr(0, 100);
      return Bad("unknown-field", "Unknown field",
                 "unknown field '" + key + "' (allowed: " + AllowedNames(request) + ")", key);
    }
  }
  json fields = json::object();
  for (const RequestField* field : FieldsOf(request)) {
    const std::string name(field->name);
    auto it = doc->find(name);
    if (it == doc->end() || (it->is_null() && field->nullable)) {
      if (field->required) {
        return std::unexpected(Problem{.status = 400,
                                       .type = "missing-field",
                                       .title = "Missing field",
                                       .detail = "'" + name + "' is required",
                                       .extra = {{"field", name}}});
      }
      continue;
    }
    if (!HasType(*field, *it)) {
      return Bad("wrong-type", "Wrong type",
                 "'" + name + "' must be " + ExpectedType(*field) + ", not " + engine::Described(*it), name);
    }
    if (field->type == JsonType::kArray) {
      for (const auto& item : *it) {
        if (!ItemHasType(*field, item))
          return Invalid(name, "must hold only items that are " + ExpectedType(field->items));
      }
      if (field->max_items > 0 && it->size() > field->max_items)
        return Invalid(name, "holds more than " + std::to_string(field->max_items) + " items");
    }
    if (field->type == JsonType::kInteger && field->maximum > 0) {
      // A large unsigned number does not fit an int64: it is out of bounds all the same.
      const bool in = it->is_number_unsigned()
                          ? it->get<uint64_t>() <= static_cast<uint64_t>(field->maximum) &&
                                static_cast<int64_t>(it->get<uint64_t>()) >= field->minimum
                          : it->get<int64_t>() <= field->maximum && it->get<int64_t>() >= field->minimum;
      if (!in) {
        return Invalid(name,
                       "must be " + std::to_string(field->minimum) + " to " + std::to_string(field->maximum));
      }
    }
    if (field->type == JsonType::kString) {
      const size_t size = it->get_ref<const std::string&>().size();
      if (size < field->min_length) return Invalid(name, "must not be empty");
      if (field->max_length > 0 && size > field->max_length)
        return Invalid(name, "is longer than " + std::to_string(field->max_length) + " bytes");
    }
    fields[name] = *it;
  }
  return fields;
}

bool HasNul(const std::string& s) { return s.find('\0') != std::string::npos; }

}  // namespace

std::expected<engine::ProcessSpec, Problem> ParseProcessStartBody(std::string_view body) {
  auto fields = ReadFields(body, kProcessStartBody);
  if (!fields) return std::unexpected(std::move(fields.error()));
  const json& f = *fields;
  engine::ProcessSpec spec;
  if (f.contains("argv")) spec.argv = f["argv"].get<std::vector<std::string>>();
  if (f.contains("command")) spec.command = f["command"].get<std::string>();
  if (spec.argv.empty() == spec.command.empty()) {
    return Bad("invalid-value", "Invalid value",
               "give either 'command' (a shell command) or 'argv' (a program and its arguments)",
               spec.argv.empty() ? "command" : "argv");
  }
  if (!spec.argv.empty() && spec.argv[0].empty()) return Invalid("argv", "must name a program first");
  for (const auto& arg : spec.argv) {
    if (HasNul(arg)) return Invalid("argv", "must not hold a NUL character");
  }
  if (HasNul(spec.command)) return Invalid("command", "must not hold a NUL character");
  if (f.contains("env")) {
    for (const auto& [name, value] : f["env"].items()) {
      if (!value.is_string()) return Invalid("env." + name.substr(0, 100), "must be a string");
      if (name.empty() || name.find('=') != std::string::npos || HasNul(name) ||
          HasNul(value.get<std::string>()))
        return Invalid("env", "names must be non-empty, without '=' or NUL, and values without NUL");
      spec.env[name] = value.get<std::string>();
    }
  }
  if (f.contains("cwd")) {
    spec.cwd = f["cwd"].get<std::string>();
    if (HasNul(spec.cwd)) return Invalid("cwd", "must not hold a NUL character");
  }
  spec.pty = f.value("pty", false);
  spec.rows = static_cast<uint16_t>(f.value("rows", 24));
  spec.cols = static_cast<uint16_t>(f.value("cols", 80));
  if (!spec.pty && (f.contains("rows") || f.contains("cols"))) return Invalid("rows", "needs 'pty': true");
  spec.stdin = f.value("stdin", false);
  if (spec.pty && spec.stdin) return Invalid("stdin", "is for pipes; a pty always takes input");
  spec.tag = f.value("tag", "");
  return spec;
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
  const json& value = (*fields)["signal"];
  std::optional<int> signal;
  if (value.is_string()) signal = engine::SignalNumber(value.get<std::string>());
  if (value.is_number_integer() && value.get<int64_t>() >= 1 && value.get<int64_t>() <= 64)
    signal = static_cast<int>(value.get<int64_t>());
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
