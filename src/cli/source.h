#pragma once

#include <string>

#include "base/error.h"

namespace execbox::cli {

struct Source {
  std::string code;
  std::string display_name;  // "<cell>" for -c, "<stdin>" for -, else the path
};

// The code from -c CODE, a FILE, or "-" for standard input.
Expected<Source> ReadSource(const std::string& path, const std::string& inline_code);

}  // namespace execbox::cli
