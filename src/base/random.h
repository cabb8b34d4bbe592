// The one source of random identifiers and secrets: the kernel's CSPRNG (getrandom), never a
// counter or a clock. Session ids, MCP session ids, incident ids and API tokens all come from here.
#pragma once

#include <cstddef>
#include <string>

#include "base/error.h"

namespace execbox {

// `n` bytes from getrandom(2); an error (never a weaker fallback) when the kernel has none.
Expected<std::string> RandomBytes(size_t n);
// `n` random bytes as 2n lower-case hex digits.
Expected<std::string> RandomHex(size_t n);
// `n` random bytes as URL-safe base64 without padding (tokens).
Expected<std::string> RandomToken(size_t n);

}  // namespace execbox
