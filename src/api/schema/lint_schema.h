// The `lint` field's shape, written once for every front end (HTTP's bodies, MCP check_python's
// argument): {"block": [codes]}, its schema and its reader. What a code may be is the runtime's
// to say (runtime::CheckLintBlock, which the gate applies); here it is only read.
#pragma once

#include <expected>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "api/schema/request_schema.h"

namespace execbox::api {

// The object, with `description` as its own: OpenAPI's Lint component and the tool's argument.
nlohmann::json LintSchema(std::string_view description);
// A request's `lint` value: its block list; a fault for another field or a code not a string.
std::expected<std::vector<std::string>, FieldFault> ReadLint(const nlohmann::json& value);

}  // namespace execbox::api
