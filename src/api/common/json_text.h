// JSON as text, for every front end: a scan for nesting depth (to refuse a hostile document
// before any parser walks it), serializing that never throws on the code's bytes, and times.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace execbox::api {

// The deepest bracket nesting outside strings: a scan, so that a hostile document can be
// refused before it reaches a parser at all.
int MaxDepth(std::string_view text);

// Compact JSON: invalid UTF-8 (from the code's output) becomes U+FFFD, never an exception.
std::string Serialize(const nlohmann::json& value);

// RFC 3339 in UTC, to the second: "2026-12-03T06:08:18Z".
std::string Rfc3339(std::chrono::system_clock::time_point t);

}  // namespace execbox::api
