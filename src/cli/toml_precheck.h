// What the config file must pass before toml++ reads it. toml++ 3.3.0 (Debian 12's) reaches
// undefined behaviour on a non-ASCII character outside a string or a comment (a bare key such
// as `é = 1`, or one after a value; fuzz/findings/README.md, "unicode-whitespace-unreachable"),
// so such a file is refused here, with where and why, and never parsed.
#pragma once

#include <string_view>

#include "base/error.h"

namespace execbox::cli {

// Refuses a byte at or above 0x80 anywhere but inside a string or a comment, naming its line
// and column (bare keys are A-Z a-z 0-9 _ -; any other name must be quoted).
Status CheckTomlText(std::string_view text, const std::string& path);

}  // namespace execbox::cli
