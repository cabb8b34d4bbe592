#include "cli/toml_precheck.h"

#include <string>

namespace execbox::cli {

Status CheckTomlText(std::string_view text, const std::string& path) {
  size_t line = 1, line_start = 0, i = 0;
  auto at = [&](std::string_view s) { return text.substr(i, s.size()) == s; };
  // Past a string's closing delimiter; a multi-line one may end with one or two more quotes,
  // which belong to its content (TOML 1.0: `"""a""""` is `a"`).
  auto skip_string = [&](std::string_view delim, bool escapes) {
    const bool multi = delim.size() == 3;
    i += delim.size();
    while (i < text.size()) {
      const char c = text[i];
      if (c == '\n') {
        if (!multi) return;  // an unterminated string: toml++ says so
        ++line;
        line_start = i + 1;
      }
      if (escapes && c == '\\') {
        i += 2;
        if (i - 1 < text.size() && text[i - 1] == '\n') {
          ++line;
          line_start = i;
        }
        continue;
      }
      if (at(delim)) {
        i += delim.size();
        for (int extra = 0; multi && extra < 2 && i < text.size() && text[i] == delim[0]; ++extra) ++i;
        return;
      }
      ++i;
    }
  };
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      ++line;
      line_start = ++i;
    } else if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (at("\"\"\"")) {
      skip_string("\"\"\"", true);
    } else if (at("'''")) {
      skip_string("'''", false);
    } else if (c == '"') {
      skip_string("\"", true);
    } else if (c == '\'') {
      skip_string("'", false);
    } else if (c >= 0x80) {
      return Fail(path + ":" + std::to_string(line) + ":" + std::to_string(i - line_start + 1) +
                  ": a non-ASCII character outside a string or a comment (a bare key is made of "
                  "A-Z a-z 0-9 _ -; put any other name in quotes)");
    } else {
      ++i;
    }
  }
  return {};
}

}  // namespace execbox::cli
