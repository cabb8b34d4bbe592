#include "engine/mime.h"

#include <array>
#include <utility>

namespace execbox::engine {
namespace {

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string_view TextTypeFor(std::string_view name, std::string_view content) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 10> kByExtension = {{
      {".csv", "text/csv"},
      {".tsv", "text/tab-separated-values"},
      {".json", "application/json"},
      {".html", "text/html"},
      {".htm", "text/html"},
      {".md", "text/markdown"},
      {".svg", "image/svg+xml"},
      {".xml", "application/xml"},
      {".py", "text/x-python"},
      {".js", "text/javascript"},
  }};
  for (const auto& [ext, type] : kByExtension) {
    if (EndsWith(name, ext)) return type;
  }
  size_t start = content.find_first_not_of(" \t\r\n");
  std::string_view body = start == std::string_view::npos ? std::string_view() : content.substr(start);
  if (StartsWith(body, "<svg") ||
      (StartsWith(body, "<?xml") && body.find("<svg") != std::string_view::npos)) {
    return "image/svg+xml";
  }
  return "text/plain";
}

}  // namespace

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    for (size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 0x2) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff)) {
      return false;
    }
    i += len;
  }
  return true;
}

std::string SniffMimeType(std::string_view name, std::string_view content) {
  if (StartsWith(content, "\x89PNG\r\n\x1a\n")) return "image/png";
  if (StartsWith(content, "\xff\xd8\xff")) return "image/jpeg";
  if (StartsWith(content, "GIF87a") || StartsWith(content, "GIF89a")) return "image/gif";
  if (StartsWith(content, "RIFF") && content.substr(8, 4) == "WEBP") return "image/webp";
  if (StartsWith(content, "%PDF-")) return "application/pdf";
  if (StartsWith(content, "PK\x03\x04")) {
    if (EndsWith(name, ".xlsx")) return "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet";
    if (EndsWith(name, ".docx"))
      return "application/vnd.openxmlformats-officedocument.wordprocessingml.document";
    return "application/zip";
  }
  if (StartsWith(content, "\x1f\x8b")) return "application/gzip";
  if (StartsWith(content, "\x93NUMPY")) return "application/x-npy";
  if (StartsWith(content, "SQLite format 3")) return "application/vnd.sqlite3";
  if (content.find('\0') == std::string_view::npos && IsValidUtf8(content)) {
    return std::string(TextTypeFor(name, content));
  }
  return "application/octet-stream";
}

}  // namespace execbox::engine
