// The request-target of an HTTP request, split and decoded the way the server routes it: the
// path before the first '?', percent-decoded, and the raw query after it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace execbox::api {

struct RequestTarget {
  std::string_view path;   // still percent-encoded
  std::string_view query;  // without '?'; empty when there is none
};

// Splits at the first '?'.
RequestTarget SplitTarget(std::string_view target);

// "%41" -> "A"; nullopt for a malformed escape. '+' stays '+' (paths are not form data).
std::optional<std::string> PercentDecode(std::string_view in);

}  // namespace execbox::api
