#include "base/random.h"

#include <sys/random.h>

#include <cerrno>

#include "base/base64.h"

namespace execbox {

Expected<std::string> RandomBytes(size_t n) {
  std::string bytes(n, '\0');
  size_t filled = 0;
  while (filled < n) {
    const ssize_t got = ::getrandom(bytes.data() + filled, n - filled, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return FailErrno("getrandom");
    }
    filled += static_cast<size_t>(got);
  }
  return bytes;
}

Expected<std::string> RandomHex(size_t n) {
  auto bytes = RandomBytes(n);
  if (!bytes) return bytes;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * n);
  for (unsigned char b : *bytes) {
    hex.push_back(kHex[b >> 4]);
    hex.push_back(kHex[b & 15]);
  }
  return hex;
}

Expected<std::string> RandomToken(size_t n) {
  auto bytes = RandomBytes(n);
  if (!bytes) return bytes;
  std::string token = Base64Encode(*bytes);
  std::fill(bytes->begin(), bytes->end(), '\0');
  while (!token.empty() && token.back() == '=') token.pop_back();
  for (char& ch : token) {
    if (ch == '+') ch = '-';
    if (ch == '/') ch = '_';
  }
  return token;
}

}  // namespace execbox
