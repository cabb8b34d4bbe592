#include "api/schema/lint_schema.h"

#include "runtime/python_program.h"

namespace execbox::api {

using nlohmann::json;

json LintSchema(std::string_view description) {
  return {{"type", "object"},
          {"additionalProperties", false},
          {"description", description},
          {"properties",
           {{"block",
             {{"type", "array"},
              {"maxItems", runtime::kMaxLintBlockCodes},
              {"items", {{"type", "string"}, {"pattern", "^[A-Za-z0-9]{1,16}$"}}}}}}}};
}

std::expected<std::vector<std::string>, FieldFault> ReadLint(const json& value) {
  auto fault = [](std::string field, std::string detail) {
    return std::unexpected(
        FieldFault{.type = "invalid-value", .field = std::move(field), .detail = std::move(detail)});
  };
  if (!value.is_object()) return fault("lint", "'lint' must be an object: {\"block\": [codes]}");
  std::vector<std::string> codes;
  for (const auto& [key, item] : value.items()) {
    if (key != "block") return fault("lint", "'lint' has no field '" + key.substr(0, 40) + "' (only block)");
    if (!item.is_array()) return fault("lint.block", "'lint.block' must be an array of codes");
    for (const auto& code : item) {
      if (!code.is_string()) return fault("lint.block", "'lint.block' must be an array of codes (strings)");
      codes.push_back(code.get<std::string>());
    }
  }
  return codes;
}

}  // namespace execbox::api
