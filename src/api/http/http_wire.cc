#include "api/http/http_wire.h"

#include <boost/beast/http.hpp>
#include <cstdio>
#include <ctime>

namespace execbox::api {
namespace {

namespace http = boost::beast::http;

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

std::string HttpDate() {
  char buf[64];
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return buf;
}

std::string StatusLine(int status) {
  std::string reason(http::obsolete_reason(static_cast<http::status>(status)));
  if (reason.empty() || reason == "<unknown-status>") reason = "Status";
  return "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\n";
}

// Header values never carry CR or LF from a handler into the response.
std::string Clean(std::string_view value) {
  std::string out(value);
  for (char& c : out) {
    if (c == '\r' || c == '\n') c = ' ';
  }
  return out;
}

}  // namespace

std::string Essence(std::string_view media_type) {
  return Lower(Trim(media_type.substr(0, media_type.find(';'))));
}

bool Accepts(std::string_view accept, std::string_view type) {
  const std::string any_subtype = std::string(type.substr(0, type.find('/'))) + "/*";
  while (!accept.empty()) {
    size_t comma = accept.find(',');
    std::string range = Essence(accept.substr(0, comma));
    if (range == type || range == any_subtype || range == "*/*") return true;
    if (comma == std::string_view::npos) break;
    accept.remove_prefix(comma + 1);
  }
  return false;
}

bool IsLoopbackOrigin(std::string_view origin) {
  const std::string lower = Lower(origin);
  std::string_view rest = lower;
  if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else if (rest.starts_with("https://")) {
    rest.remove_prefix(8);
  } else {
    return false;
  }
  bool host_ok = false;
  for (std::string_view host : {"localhost", "127.0.0.1", "[::1]"}) {
    if (rest.starts_with(host) && (rest.size() == host.size() || rest[host.size()] == ':')) {
      rest.remove_prefix(host.size());
      host_ok = true;
      break;
    }
  }
  if (!host_ok) return false;
  if (rest.empty()) return true;
  rest.remove_prefix(1);  // ':'
  if (rest.empty() || rest.size() > 5) return false;
  for (char c : rest) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::string SerializeHead(int status, const std::string& content_type,
                          const std::vector<std::pair<std::string, std::string>>& headers, bool keep_alive) {
  std::string head = StatusLine(status);
  head += "Date: " + HttpDate() + "\r\nServer: execbox\r\n";
  if (!content_type.empty()) head += "Content-Type: " + Clean(content_type) + "\r\n";
  for (const auto& [name, value] : headers) head += Clean(name) + ": " + Clean(value) + "\r\n";
  head += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  return head;
}

std::string Chunk(std::string_view data) {
  char size[32];
  int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string out(size, static_cast<size_t>(n));
  out.append(data);
  out += "\r\n";
  return out;
}

std::string WholeUtf8(std::string& carry, std::string_view data) {
  carry.append(data);
  size_t end = carry.size();
  for (size_t back = 1; back <= 3 && back <= carry.size(); ++back) {
    unsigned char c = static_cast<unsigned char>(carry[carry.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (need > back) end = carry.size() - back;
    break;
  }
  std::string out = carry.substr(0, end);
  carry.erase(0, end);
  return out;
}

}  // namespace execbox::api
