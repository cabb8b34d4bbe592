#include "api/http/auth.h"

#include <openssl/crypto.h>

#include <cstdio>
#include <cstdlib>

#include "base/random.h"
#include "base/sha256.h"

namespace execbox::api {

namespace {

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

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    auto lower = [](char ch) { return ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch - 'A' + 'a') : ch; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

bool IsSpace(char ch) { return ch == ' ' || ch == '\t'; }

// RFC 6750 3.1: a request with no credentials gets the plain challenge; one whose token is
// malformed or unknown gets error="invalid_token" (both 401: 403 is for a known key that may
// not do the thing).
Problem Unauthorized(std::string detail, bool token_sent) {
  std::string challenge = "Bearer realm=\"execbox\"";
  if (token_sent) challenge += ", error=\"invalid_token\", error_description=\"" + detail + "\"";
  return Problem{.status = 401,
                 .type = "unauthorized",
                 .title = "Unauthorized",
                 .detail = std::move(detail),
                 .headers = {{"WWW-Authenticate", challenge}}};
}

}  // namespace

std::string GenerateToken() {
  auto token = RandomToken(32);
  if (!token) {
    // Never hand out a predictable token.
    std::fprintf(stderr, "execbox: %s\n", token.error().message.c_str());
    std::abort();
  }
  return std::move(*token);
}

engine::Caller CallerOf(const ApiKey& key) {
  return engine::Caller{.id = key.id,
                        .max_concurrent = key.max_concurrent,
                        .rate_per_second = key.rate_per_second,
                        .burst = key.burst,
                        .caps = key.caps};
}

std::expected<ApiKey, Problem> AuthenticateLocal(const LocalPeer& peer, uid_t server_uid, gid_t server_gid) {
  bool member = peer.gid == server_gid;
  for (gid_t g : peer.groups) member = member || g == server_gid;
  if (peer.uid != server_uid && peer.uid != 0 && !member) {
    return std::unexpected(Problem{.status = 403,
                                   .type = "forbidden",
                                   .title = "Forbidden",
                                   .detail = "this socket serves the server's own user, root and members of "
                                             "its group; send 'Authorization: Bearer <token>' otherwise"});
  }
  return ApiKey{.id = "local-uid-" + std::to_string(peer.uid)};
}

Authenticator::Authenticator(std::vector<ApiKey> keys) : keys_(std::move(keys)) {
  digests_.resize(keys_.size());
  valid_.resize(keys_.size());
  for (size_t i = 0; i < keys_.size(); ++i)
    valid_[i] = DecodeDigest(keys_[i].sha256_hex, digests_[i]) ? 1 : 0;
}

std::expected<ApiKey, Problem> Authenticator::Authenticate(std::string_view authorization) const {
  std::string_view value = authorization;
  while (!value.empty() && IsSpace(value.front())) value.remove_prefix(1);
  while (!value.empty() && IsSpace(value.back())) value.remove_suffix(1);
  if (value.empty()) {
    return std::unexpected(
        Unauthorized("missing Authorization header; send 'Authorization: Bearer <token>'", false));
  }
  size_t space = 0;
  while (space < value.size() && !IsSpace(value[space])) ++space;
  const std::string_view scheme = value.substr(0, space);
  std::string_view token = value.substr(space);
  while (!token.empty() && IsSpace(token.front())) token.remove_prefix(1);
  if (!EqualsIgnoreCase(scheme, "Bearer") || token.empty()) {
    return std::unexpected(Unauthorized("the Authorization header must be 'Bearer <token>'", true));
  }
  for (char ch : token) {
    if (IsSpace(ch))
      return std::unexpected(Unauthorized("the Authorization header must be 'Bearer <token>'", true));
  }
  auto key = KeyOfToken(token);
  if (!key) return std::unexpected(Unauthorized("the bearer token matches no API key", true));
  return std::move(*key);
}

std::optional<ApiKey> Authenticator::KeyOfToken(std::string_view token) const {
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
  if (!matched) return std::nullopt;
  return keys_[found];
}

std::optional<ApiKey> Authenticator::KeyWithId(std::string_view id) const {
  for (const auto& key : keys_) {
    if (key.id == id) return key;
  }
  return std::nullopt;
}

}  // namespace execbox::api
