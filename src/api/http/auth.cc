#include "api/http/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/random.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/base64.h"

namespace execbox::api {

namespace {

constexpr char kHex[] = "0123456789abcdef";

int HexValue(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

// false when the text is not 64 hex digits.
bool DecodeDigest(std::string_view hex, std::array<unsigned char, 32>& out) {
  out.fill(0);
  if (hex.size() != 64) return false;
  for (size_t i = 0; i < 32; ++i) {
    const int hi = HexValue(hex[2 * i]), lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<unsigned char>(hi << 4 | lo);
  }
  return true;
}

std::array<unsigned char, 32> Sha256(std::string_view data) {
  std::array<unsigned char, 32> digest{};
  unsigned int length = 0;
  if (EVP_Digest(data.data(), data.size(), digest.data(), &length, EVP_sha256(), nullptr) != 1 ||
      length != 32) {
    // Only on allocation failure inside OpenSSL; a wrong digest would be worse than stopping.
    std::fputs("execbox: SHA-256 (OpenSSL EVP_Digest) failed\n", stderr);
    std::abort();
  }
  return digest;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    auto lower = [](char ch) { return ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch - 'A' + 'a') : ch; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

bool IsSpace(char ch) { return ch == ' ' || ch == '\t'; }

Problem Unauthorized(std::string detail) {
  return Problem{.status = 401,
                 .type = "unauthorized",
                 .title = "Unauthorized",
                 .detail = std::move(detail),
                 .headers = {{"WWW-Authenticate", "Bearer realm=\"execbox\""}}};
}

}  // namespace

std::string Sha256Hex(std::string_view data) {
  const auto digest = Sha256(data);
  std::string hex;
  hex.reserve(64);
  for (unsigned char byte : digest) {
    hex.push_back(kHex[byte >> 4]);
    hex.push_back(kHex[byte & 0xf]);
  }
  return hex;
}

std::string GenerateToken() {
  unsigned char bytes[32];
  size_t filled = 0;
  while (filled < sizeof bytes) {
    const ssize_t n = getrandom(bytes + filled, sizeof bytes - filled, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      // Never hand out a predictable token.
      std::fprintf(stderr, "execbox: getrandom failed: %s\n", std::strerror(errno));
      std::abort();
    }
    filled += static_cast<size_t>(n);
  }
  std::string token = Base64Encode(std::string_view(reinterpret_cast<const char*>(bytes), sizeof bytes));
  OPENSSL_cleanse(bytes, sizeof bytes);
  while (!token.empty() && token.back() == '=') token.pop_back();
  for (char& ch : token) {
    if (ch == '+') ch = '-';
    if (ch == '/') ch = '_';
  }
  return token;
}

Authenticator::Authenticator(std::vector<ApiKey> keys) : keys_(std::move(keys)) {
  digests_.resize(keys_.size());
  valid_.resize(keys_.size());
  for (size_t i = 0; i < keys_.size(); ++i)
    valid_[i] = DecodeDigest(keys_[i].sha256_hex, digests_[i]) ? 1 : 0;
}

std::expected<const ApiKey*, Problem> Authenticator::Authenticate(std::string_view authorization) const {
  std::string_view value = authorization;
  while (!value.empty() && IsSpace(value.front())) value.remove_prefix(1);
  while (!value.empty() && IsSpace(value.back())) value.remove_suffix(1);
  if (value.empty()) {
    return std::unexpected(
        Unauthorized("missing Authorization header; send 'Authorization: Bearer <token>'"));
  }
  size_t space = 0;
  while (space < value.size() && !IsSpace(value[space])) ++space;
  const std::string_view scheme = value.substr(0, space);
  std::string_view token = value.substr(space);
  while (!token.empty() && IsSpace(token.front())) token.remove_prefix(1);
  if (!EqualsIgnoreCase(scheme, "Bearer") || token.empty()) {
    return std::unexpected(Unauthorized("the Authorization header must be 'Bearer <token>'"));
  }
  for (char ch : token) {
    if (IsSpace(ch))
      return std::unexpected(Unauthorized("the Authorization header must be 'Bearer <token>'"));
  }

  // Every key is compared, in constant time, whatever matched before it.
  const auto digest = Sha256(token);
  size_t found = 0;
  unsigned char matched = 0;
  for (size_t i = 0; i < digests_.size(); ++i) {
    const unsigned char equal =
        static_cast<unsigned char>(CRYPTO_memcmp(digest.data(), digests_[i].data(), digest.size()) == 0) &
        valid_[i];
    const unsigned char take = equal & static_cast<unsigned char>(matched ^ 1);
    const size_t mask = static_cast<size_t>(0) - static_cast<size_t>(take);
    found = (found & ~mask) | (i & mask);
    matched |= equal;
  }
  if (!matched) {
    return std::unexpected(Problem{.status = 403,
                                   .type = "forbidden",
                                   .title = "Forbidden",
                                   .detail = "the bearer token matches no API key"});
  }
  return &keys_[found];
}

}  // namespace execbox::api
