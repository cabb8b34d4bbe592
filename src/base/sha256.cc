#include "base/sha256.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdio>
#include <cstdlib>

namespace execbox {

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

std::string Sha256Hex(std::string_view data) {
  static constexpr char kHex[] = "0123456789abcdef";
  const auto digest = Sha256(data);
  std::string hex;
  hex.reserve(64);
  for (unsigned char byte : digest) {
    hex.push_back(kHex[byte >> 4]);
    hex.push_back(kHex[byte & 0xf]);
  }
  return hex;
}

std::array<unsigned char, 32> HmacSha256(std::string_view key, std::string_view data) {
  std::array<unsigned char, 32> mac{};
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac.data(),
           &length) == nullptr ||
      length != 32) {
    std::fputs("execbox: HMAC-SHA-256 (OpenSSL HMAC) failed\n", stderr);
    std::abort();
  }
  return mac;
}

bool SameMac(const unsigned char* a, const unsigned char* b, size_t size) {
  return CRYPTO_memcmp(a, b, size) == 0;
}

}  // namespace execbox
