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

}  // namespace execbox
