#include "cli/source.h"

#include "base/io.h"

namespace execbox::cli {

Expected<Source> ReadSource(const std::string& path, const std::string& inline_code) {
  if (!inline_code.empty() && !path.empty()) return Fail("give either FILE or -c CODE, not both");
  if (!inline_code.empty()) return Source{inline_code, "<cell>"};
  if (path.empty()) return Fail("give a FILE, - for standard input, or -c CODE");
  auto code = ReadFile(path == "-" ? "/dev/stdin" : path);
  if (!code) return std::unexpected(code.error());
  return Source{std::move(*code), path == "-" ? "<stdin>" : path};
}

}  // namespace execbox::cli
