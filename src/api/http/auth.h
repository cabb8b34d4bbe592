// Bearer API keys: the token's SHA-256 compared in constant time with every key's, so neither
// the match nor its position leaks through timing.
#pragma once

#include <array>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

#include "api/http/config.h"
#include "api/http/problem.h"

namespace execbox::api {

std::string Sha256Hex(std::string_view data);
// A fresh random token (32 bytes from getrandom, URL-safe base64 without padding).
std::string GenerateToken();

class Authenticator {
 public:
  explicit Authenticator(std::vector<ApiKey> keys);
  // The key for an Authorization header value: 401 (with WWW-Authenticate: Bearer) when it is
  // missing or not "Bearer <token>", 403 when the token matches no key.
  std::expected<const ApiKey*, Problem> Authenticate(std::string_view authorization) const;

 private:
  std::vector<ApiKey> keys_;
  // keys_[i]'s SHA-256 decoded; a key whose sha256_hex is not 64 hex digits never matches.
  std::vector<std::array<unsigned char, 32>> digests_;
  std::vector<unsigned char> valid_;
};

}  // namespace execbox::api
