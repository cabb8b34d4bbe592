#include "engine/proxy_protocol.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <vector>

namespace execbox::engine {
namespace {

ProxyRequest Bad(std::string error, uint8_t socks_reply = 1) {
  ProxyRequest r;
  r.state = ParseState::kBad;
  r.error = std::move(error);
  r.socks_reply = socks_reply;
  return r;
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
           c == '.' || c == '!' || c == '#' || c == '$' || c == '%' || c == '&' || c == '\'' || c == '*' ||
           c == '+' || c == '^' || c == '`' || c == '|' || c == '~';
  });
}

// Visible ASCII and tabs/spaces only: no CR, LF, NUL or other control bytes.
bool IsFieldText(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u == '\t' || u >= 0x20;
  }) && s.find('\x7f') == std::string_view::npos;
}

bool EqualsNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
           return lower(x) == lower(y);
         });
}

// "host:port", "[v6]:port" or (with a default port) "host"; the host must be non-empty and
// hold no '@', '/', whitespace or control bytes.
bool SplitAuthority(std::string_view authority, uint16_t default_port, std::string& host, uint16_t& port) {
  std::string_view h = authority, p;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return false;
    h = authority.substr(1, close - 1);
    std::string_view rest = authority.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return false;
      p = rest.substr(1);
      if (p.empty()) return false;
    }
  } else if (const size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    h = authority.substr(0, colon);
    p = authority.substr(colon + 1);
    if (p.empty() || h.find(':') != std::string_view::npos) return false;
  }
  if (h.empty() || h.size() > 255) return false;
  for (char c : h) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f || c == '@' || c == '/' || c == '[' || c == ']' || c == '?' || c == '#') return false;
  }
  if (p.empty()) {
    if (default_port == 0) return false;
    port = default_port;
  } else {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), value);
    if (ec != std::errc() || end != p.data() + p.size() || value == 0 || value > 65535) return false;
    port = static_cast<uint16_t>(value);
  }
  host = std::string(h);
  return true;
}

}  // namespace

ProxyRequest ParseHttpProxyHead(std::string_view bytes) {
  const size_t end = bytes.substr(0, kMaxProxyHeadBytes).find("\r\n\r\n");
  if (end == std::string_view::npos) {
    if (bytes.size() >= kMaxProxyHeadBytes)
      return Bad("the request head is longer than " + std::to_string(kMaxProxyHeadBytes) + " bytes");
    return {};
  }
  const std::string_view head = bytes.substr(0, end + 2);  // each line ends with CRLF
  std::vector<std::string_view> lines;
  for (size_t pos = 0; pos < head.size();) {
    const size_t eol = head.find("\r\n", pos);
    lines.push_back(head.substr(pos, eol - pos));
    pos = eol + 2;
  }
  if (lines.size() > kMaxProxyHeaders + 1) return Bad("more than " + std::to_string(kMaxProxyHeaders) + " headers");
  const std::string_view line = lines[0];
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return Bad("the request line is not 'METHOD TARGET HTTP/1.x'");
  const std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                         version = line.substr(sp2 + 1);
  if (!IsToken(method) || method.size() > 32) return Bad("not an HTTP method");
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return Bad("only HTTP/1.0 and HTTP/1.1 are proxied");
  if (!IsFieldText(target) || target.empty()) return Bad("the request target holds control bytes");

  ProxyRequest r;
  r.consumed = end + 4;
  if (method == "CONNECT") {
    if (!SplitAuthority(target, 0, r.host, r.port)) return Bad("CONNECT needs host:port");
    r.tunnel = true;
    r.state = ParseState::kDone;
    return r;
  }
  constexpr std::string_view kScheme = "http://";
  if (target.size() <= kScheme.size() || !EqualsNoCase(target.substr(0, kScheme.size()), kScheme)) {
    if (target.size() > 8 && EqualsNoCase(target.substr(0, 8), "https://"))
      return Bad("an https:// URL goes through CONNECT (set HTTPS_PROXY), never as a plain request");
    return Bad("a proxied request names an absolute http:// URL");
  }
  const std::string_view rest = target.substr(kScheme.size());
  const size_t path_at = rest.find_first_of("/?");
  const std::string_view authority = rest.substr(0, path_at);
  if (authority.find('@') != std::string_view::npos) return Bad("credentials in the URL are not proxied");
  if (!SplitAuthority(authority, 80, r.host, r.port)) return Bad("the URL's host or port is not valid");
  std::string path = path_at == std::string_view::npos ? "/" : std::string(rest.substr(path_at));
  if (path.front() == '?') path.insert(0, "/");

  std::string out;
  out.reserve(head.size() + 32);
  out.append(method).append(" ").append(path).append(" ").append(version).append("\r\n");
  bool has_host = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string_view h = lines[i];
    const size_t colon = h.find(':');
    if (colon == std::string_view::npos || !IsToken(h.substr(0, colon)) || !IsFieldText(h))
      return Bad("a header line is not 'Name: value'");
    const std::string_view name = h.substr(0, colon);
    // The proxy's own headers and the connection's: one request, then the connection closes.
    if (EqualsNoCase(name, "Connection") || EqualsNoCase(name, "Keep-Alive") ||
        EqualsNoCase(name, "Proxy-Connection") || EqualsNoCase(name, "Proxy-Authorization") ||
        EqualsNoCase(name, "Proxy-Authenticate") || EqualsNoCase(name, "Upgrade") || EqualsNoCase(name, "TE"))
      continue;
    if (EqualsNoCase(name, "Host")) has_host = true;
    out.append(h).append("\r\n");
  }
  if (!has_host) out.append("Host: ").append(authority).append("\r\n");
  out.append("Connection: close\r\n\r\n");
  r.forward = std::move(out);
  r.state = ParseState::kDone;
  return r;
}

ProxyRequest ParseSocksGreeting(std::string_view bytes) {
  if (bytes.size() < 2) return {};
  if (static_cast<uint8_t>(bytes[0]) != 5) return Bad("not SOCKS version 5");
  const size_t n = static_cast<uint8_t>(bytes[1]);
  if (n == 0) return Bad("SOCKS5 greeting offers no method");
  if (bytes.size() < 2 + n) return {};
  const std::string_view methods = bytes.substr(2, n);
  if (methods.find('\0') == std::string_view::npos) return Bad("SOCKS5 without authentication only");
  ProxyRequest r;
  r.state = ParseState::kDone;
  r.consumed = 2 + n;
  return r;
}

ProxyRequest ParseSocksRequest(std::string_view bytes) {
  if (bytes.size() < 5) return {};
  const auto at = [&](size_t i) { return static_cast<uint8_t>(bytes[i]); };
  if (at(0) != 5 || at(2) != 0) return Bad("not a SOCKS5 request", 1);
  if (at(1) != 1) return Bad("SOCKS5: only CONNECT is proxied", 7);
  ProxyRequest r;
  size_t addr_end = 0;
  switch (at(3)) {
    case 1: {  // IPv4
      addr_end = 4 + 4;
      if (bytes.size() < addr_end + 2) return {};
      char text[16];
      std::snprintf(text, sizeof text, "%u.%u.%u.%u", at(4), at(5), at(6), at(7));
      r.host = text;
      break;
    }
    case 3: {  // a domain name: a length byte, then the name
      const size_t len = at(4);
      if (len == 0) return Bad("SOCKS5: an empty domain name", 1);
      addr_end = 5 + len;
      if (bytes.size() < addr_end + 2) return {};
      r.host = std::string(bytes.substr(5, len));
      for (char c : r.host) {
        const auto u = static_cast<unsigned char>(c);
        if (u <= 0x20 || u >= 0x7f) return Bad("SOCKS5: the domain name holds control bytes", 1);
      }
      break;
    }
    case 4: {  // IPv6
      addr_end = 4 + 16;
      if (bytes.size() < addr_end + 2) return {};
      char text[48];
      int n = 0;
      for (size_t i = 0; i < 16; i += 2)
        n += std::snprintf(text + n, sizeof text - static_cast<size_t>(n), i == 0 ? "%x" : ":%x",
                           (at(4 + i) << 8) | at(5 + i));
      r.host = text;
      break;
    }
    default:
      return Bad("SOCKS5: unknown address type", 8);
  }
  const unsigned port = (static_cast<unsigned>(at(addr_end)) << 8) | at(addr_end + 1);
  if (port == 0) return Bad("SOCKS5: port 0", 1);
  r.port = static_cast<uint16_t>(port);
  r.tunnel = true;
  r.consumed = addr_end + 2;
  r.state = ParseState::kDone;
  return r;
}

std::string SocksReply(uint8_t code) { return std::string("\x05", 1) + static_cast<char>(code) + std::string("\x00\x01\x00\x00\x00\x00\x00\x00", 8); }

std::string ProxyAnswer(int status, std::string_view reason, std::string_view text) {
  std::string body = "execbox: " + std::string(text) + "\n";
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) +
         "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace execbox::engine
