#pragma once

#include <string>
#include <string_view>

namespace execbox::engine {

// The MIME type of a returned file, from its content (magic numbers, UTF-8 validity), with the
// name's extension only to tell text formats apart.
std::string SniffMimeType(std::string_view name, std::string_view content);

bool IsValidUtf8(std::string_view s);

}  // namespace execbox::engine
