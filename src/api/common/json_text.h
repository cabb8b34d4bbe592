// JSON as text, for every front end: a scan for nesting depth (to refuse a hostile document
// before any parser walks it) and serializing that never throws on the code's bytes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace execbox::api {

// The deepest bracket nesting outside strings: a scan, so that a hostile document can be
// refused before it reaches a parser at all.
int MaxDepth(std::string_view text);

// Compact JSON: invalid UTF-8 (from the code's output) becomes U+FFFD, never an exception.
std::string Serialize(const nlohmann::json& value);

}  // namespace execbox::api
