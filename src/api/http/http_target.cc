#include "api/http/http_target.h"

namespace execbox::api {

RequestTarget SplitTarget(std::string_view target) {
  size_t q = target.find('?');
  if (q == std::string_view::npos) return {.path = target, .query = {}};
  return {.path = target.substr(0, q), .query = target.substr(q + 1)};
}

std::optional<std::string> PercentDecode(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out.push_back(in[i]);
      continue;
    }
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    if (i + 2 >= in.size()) return std::nullopt;
    int hi = hex(in[i + 1]), lo = hex(in[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

}  // namespace execbox::api
