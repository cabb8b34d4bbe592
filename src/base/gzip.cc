#include "base/gzip.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <climits>

namespace execbox {
namespace {

// windowBits for deflateInit2 and inflateInit2: 15 (the largest window) + 16 (a gzip wrapper,
// not zlib's).
constexpr int kGzipWindow = 15 + 16;
constexpr size_t kChunk = 64 << 10;

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string Gzip(std::string_view data) {
  z_stream z{};
  if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, kGzipWindow, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return {};
  std::string out;
  std::string chunk(kChunk, '\0');
  size_t at = 0;
  int flush = Z_NO_FLUSH;
  do {
    // zlib counts in uInt: feed at most that much at a time.
    const size_t take = std::min<size_t>(data.size() - at, UINT_MAX);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + at));
    z.avail_in = static_cast<uInt>(take);
    at += take;
    flush = at == data.size() ? Z_FINISH : Z_NO_FLUSH;
    do {
      z.next_out = reinterpret_cast<Bytef*>(chunk.data());
      z.avail_out = static_cast<uInt>(chunk.size());
      deflate(&z, flush);
      out.append(chunk.data(), chunk.size() - z.avail_out);
    } while (z.avail_out == 0);
  } while (flush != Z_FINISH);
  deflateEnd(&z);
  return out;
}

std::expected<std::string, GunzipFailure> Gunzip(std::string_view data, size_t max_bytes) {
  auto malformed = [](std::string message) {
    return std::unexpected(GunzipFailure{GunzipError::kMalformed, std::move(message)});
  };
  if (data.size() > UINT_MAX) return malformed("the gzip data is too large");
  z_stream z{};
  if (inflateInit2(&z, kGzipWindow) != Z_OK) return malformed("gzip: could not start inflating");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  std::string out;
  std::string chunk(kChunk, '\0');
  for (;;) {
    z.next_out = reinterpret_cast<Bytef*>(chunk.data());
    z.avail_out = static_cast<uInt>(chunk.size());
    const int rc = inflate(&z, Z_NO_FLUSH);
    const size_t got = chunk.size() - z.avail_out;
    if (out.size() + got > max_bytes) {
      inflateEnd(&z);
      return std::unexpected(GunzipFailure{
          GunzipError::kTooLarge, "the body inflates to more than " + std::to_string(max_bytes) + " bytes"});
    }
    out.append(chunk.data(), got);
    if (rc == Z_STREAM_END) {
      if (z.avail_in == 0) break;
      // Another member follows.
      if (inflateReset(&z) == Z_OK) continue;
    }
    // Z_BUF_ERROR: no progress was possible, all input taken before the member's end.
    if (rc != Z_OK || (z.avail_in == 0 && got < chunk.size())) {
      inflateEnd(&z);
      return malformed(rc == Z_OK || rc == Z_BUF_ERROR ? "the gzip data is truncated"
                                                       : "the body is not valid gzip data");
    }
  }
  inflateEnd(&z);
  return out;
}

bool AcceptsGzip(std::string_view accept_encoding) {
  bool star = false;
  std::string_view rest = accept_encoding;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view item = Trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    std::string_view coding = Trim(item.substr(0, item.find(';')));
    bool refused = false;
    if (const size_t semi = item.find(';'); semi != std::string_view::npos) {
      std::string params = Lower(item.substr(semi + 1));
      params.erase(std::remove(params.begin(), params.end(), ' '), params.end());
      // q=0, q=0.0, q=0.000: "not acceptable" (RFC 9110 12.4.2).
      if (params.starts_with("q=0") && params.find_first_not_of("0.", 2) == std::string::npos) refused = true;
    }
    const std::string name = Lower(coding);
    if (name == "gzip" || name == "x-gzip") return !refused;
    if (name == "*") star = !refused;
  }
  return star;
}

}  // namespace execbox
