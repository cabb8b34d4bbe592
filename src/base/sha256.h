// SHA-256 (OpenSSL): API keys are kept only as the digest of their token, and the audit log
// records the digest of the code rather than the code.
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace execbox {

std::array<unsigned char, 32> Sha256(std::string_view data);
// Lower-case hex, 64 digits.
std::string Sha256Hex(std::string_view data);

// HMAC-SHA-256 of `data` under `key` (RFC 2104): seals what the server writes and reads back.
std::array<unsigned char, 32> HmacSha256(std::string_view key, std::string_view data);
// Compares two MACs in time that does not depend on where they differ.
bool SameMac(const unsigned char* a, const unsigned char* b, size_t size);

}  // namespace execbox
