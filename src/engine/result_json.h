#pragma once

#include <nlohmann/json.hpp>

#include "engine/result.h"

namespace execbox::engine {

// The JSON form of a Result. Strings hold whatever bytes the code wrote; serialize with
// nlohmann::json::error_handler_t::replace so invalid UTF-8 becomes U+FFFD, never a failure.
nlohmann::json ToJson(const Result& r);
// Its "usage" object alone (for the audit log).
nlohmann::json UsageJson(const Result& r);

// Serialized with invalid UTF-8 replaced.
std::string Dump(const nlohmann::json& j, int indent = -1);

}  // namespace execbox::engine
