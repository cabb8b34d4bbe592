#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace execbox {

std::string Base64Encode(std::string_view data);
// Standard alphabet with padding; whitespace is not accepted. nullopt when malformed.
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace execbox
