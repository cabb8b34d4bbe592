// A request's fields checked against the request schema's table (request_schema.h), once for
// every front end that reads them: the HTTP process routes' bodies and the MCP process tools'
// arguments say the same of the same mistake.
#include "api/schema/request_schema.h"
#include "engine/limit_schema.h"
#include "engine/session_processes.h"

namespace execbox::api {
namespace {

using nlohmann::json;

std::unexpected<FieldFault> Fault(std::string type, const std::string& field, std::string detail) {
  return std::unexpected(FieldFault{.type = std::move(type), .field = field, .detail = std::move(detail)});
}

std::unexpected<FieldFault> Invalid(const std::string& field, const std::string& why) {
  return Fault("invalid-value", field, "'" + field + "' " + why);
}

// An integer within the field's bounds. A large unsigned number does not fit an int64: it is
// out of bounds all the same.
bool InBounds(const RequestField& field, const json& value) {
  if (value.is_number_unsigned()) {
    const uint64_t n = value.get<uint64_t>();
    return n <= static_cast<uint64_t>(field.maximum) && static_cast<int64_t>(n) >= field.minimum;
  }
  const int64_t n = value.get<int64_t>();
  return n <= field.maximum && n >= field.minimum;
}

bool HasNul(const std::string& s) { return s.find('\0') != std::string::npos; }

}  // namespace

std::expected<json, FieldFault> CheckFields(const json& object, Request request) {
  if (!object.is_object()) return Fault("wrong-type", "", "the request must be a JSON object");
  for (const auto& item : object.items()) {
    if (FindField(request, item.key()) == nullptr) {
      const std::string key = item.key().substr(0, 100);
      return Fault("unknown-field", key,
                   "unknown field '" + key + "' (allowed: " + AllowedNames(request) + ")");
    }
  }
  json fields = json::object();
  for (const RequestField* field : FieldsOf(request)) {
    const std::string name(field->name);
    auto it = object.find(name);
    if (it == object.end() || (it->is_null() && field->nullable)) {
      if (IsRequired(*field, request)) return Fault("missing-field", name, "'" + name + "' is required");
      continue;
    }
    if (!HasType(*field, *it)) {
      return Fault("wrong-type", name,
                   "'" + name + "' must be " + ExpectedType(*field) + ", not " + engine::Described(*it));
    }
    if (field->type == JsonType::kArray) {
      for (const auto& item : *it) {
        if (!ItemHasType(*field, item))
          return Invalid(name, "must hold only items that are " + ExpectedType(field->items));
      }
      if (field->max_items > 0 && it->size() > field->max_items)
        return Invalid(name, "holds more than " + std::to_string(field->max_items) + " items");
    }
    if (field->type == JsonType::kInteger && field->maximum > 0 && !InBounds(*field, *it)) {
      return Invalid(name,
                     "must be " + std::to_string(field->minimum) + " to " + std::to_string(field->maximum));
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

std::expected<engine::ProcessSpec, FieldFault> ReadProcessSpec(const json& f) {
  engine::ProcessSpec spec;
  if (f.contains("argv")) spec.argv = f["argv"].get<std::vector<std::string>>();
  if (f.contains("command")) spec.command = f["command"].get<std::string>();
  if (spec.argv.empty() == spec.command.empty()) {
    return Fault("invalid-value", spec.argv.empty() ? "command" : "argv",
                 "give either 'command' (a shell command) or 'argv' (a program and its arguments)");
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

std::optional<int> ReadSignal(const json& value) {
  if (value.is_string()) return engine::SignalNumber(value.get<std::string>());
  if (value.is_number_integer() && value.get<int64_t>() >= 1 && value.get<int64_t>() <= 64)
    return static_cast<int>(value.get<int64_t>());
  return std::nullopt;
}

json SignalSchema() {
  return {{"anyOf",
           {{{"type", "string"},
             {"minLength", 1},
             {"maxLength", 16},
             {"description", "A name, in any case, with or without `SIG`: `SIGTERM`, `TERM`, `kill`, ..."}},
            {{"type", "integer"}, {"minimum", 1}, {"maximum", 64}}}}};
}

}  // namespace execbox::api
