// Bearer API keys: the token's SHA-256 compared in constant time with every key's, so neither
// the match nor its position leaks through timing.
#pragma once

#include <array>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/http/http_types.h"
#include "api/http/problem.h"
#include "base/sha256.h"
#include "engine/admission.h"

namespace execbox::api {

// One API key. Only the SHA-256 of the token is kept in memory and on disk.
struct ApiKey {
  std::string id;               // shown in logs, metrics and the audit log; never the token
  std::string sha256_hex;       // of the bearer token, lower-case hex
  size_t max_concurrent = 8;    // executions of this key running or queued at once
  double rate_per_second = 20;  // sustained requests per second (token bucket) ...
  double burst = 40;            // ... with this many at once
  engine::KeyCaps caps;         // max_sessions, max_queued, ...; unset: the server's defaults
};

using execbox::Sha256Hex;
// A fresh random token (32 bytes from getrandom, URL-safe base64 without padding).
std::string GenerateToken();
// The engine's view of a key: who it is and what it may run at once and per second.
engine::Caller CallerOf(const ApiKey& key);

// A client on the Unix socket that sends no bearer token: the kernel's word on who it is
// (HttpRequest::local_peer). The server's own user, root, and members of the server's group
// (whom the socket's mode 0660 lets connect) are let in; anyone else gets 403. Each user is a
// caller of its own, "local-uid-N", with an API key's default rate and concurrency, so one local
// user never reaches another's sessions.
std::expected<ApiKey, Problem> AuthenticateLocal(const LocalPeer& peer, uid_t server_uid, gid_t server_gid);

class Authenticator {
 public:
  explicit Authenticator(std::vector<ApiKey> keys);
  // The key for an Authorization header value, else 401 with WWW-Authenticate: Bearer (plain
  // when no credentials were sent; error="invalid_token" when they are malformed or unknown).
  std::expected<ApiKey, Problem> Authenticate(std::string_view authorization) const;
  // The key whose token this is (compared as above), for a front end with a header of its own.
  std::optional<ApiKey> KeyOfToken(std::string_view token) const;
  // The key with this id, while it is still configured (a key removed by a reload is gone).
  std::optional<ApiKey> KeyWithId(std::string_view id) const;

 private:
  std::vector<ApiKey> keys_;
  // keys_[i]'s SHA-256 decoded; a key whose sha256_hex is not 64 hex digits never matches.
  std::vector<std::array<unsigned char, 32>> digests_;
  std::vector<unsigned char> valid_;
};

}  // namespace execbox::api
