// gzip (RFC 1952), for HTTP's Content-Encoding: gzip on uploads and downloads.
#pragma once

#include <cstddef>
#include <expected>
#include <string>
#include <string_view>

namespace execbox {

// `data` as one gzip member, compressed for speed (a download waits for it).
std::string Gzip(std::string_view data);

// The content of gzip data (one member or several, concatenated, as RFC 1952 allows), or why
// it is not: malformed, truncated, or more than `max_bytes` once inflated (a small body that
// inflates without bound is refused before it is held).
enum class GunzipError { kMalformed, kTooLarge };
struct GunzipFailure {
  GunzipError kind;
  std::string message;
};
std::expected<std::string, GunzipFailure> Gunzip(std::string_view data, size_t max_bytes);

// An Accept-Encoding header value admits gzip: the token gzip (or x-gzip) or *, without q=0.
bool AcceptsGzip(std::string_view accept_encoding);

}  // namespace execbox
