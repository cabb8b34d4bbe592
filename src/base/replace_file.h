// Replacing a file at once: a crash leaves the old file or the new one, never half of either.
#pragma once

#include <string>
#include <string_view>

#include "base/error.h"

namespace execbox {

// Writes `data` to "<path>.new" (created with `mode`, never through a symbolic link) and
// renames it over `path`.
Status ReplaceFile(const std::string& path, std::string_view data, unsigned mode = 0600);

}  // namespace execbox
