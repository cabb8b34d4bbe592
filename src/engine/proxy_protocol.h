// What the sandbox's code says to the host's proxy before its bytes are relayed: an HTTP proxy
// request head (CONNECT host:port, or an absolute http:// URI) or SOCKS5 (RFC 1928, CONNECT
// only, no authentication, with IPv4, IPv6 or a domain name). Pure functions over the bytes
// received so far, for hostile input: every length is bounded, nothing is trusted.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace execbox::engine {

// The longest HTTP request head the proxy reads (request line and headers).
inline constexpr size_t kMaxProxyHeadBytes = 16 << 10;
inline constexpr size_t kMaxProxyHeaders = 100;

enum class ParseState { kNeedMore, kDone, kBad };

struct ProxyRequest {
  ParseState state = ParseState::kNeedMore;
  std::string error;       // kBad: for the client, e.g. "the request head is longer than 16384 bytes"
  size_t consumed = 0;     // kDone: the bytes of the head; what follows is the body's
  std::string host;        // as asked (a name, or an address literal without brackets)
  uint16_t port = 0;
  bool tunnel = false;     // CONNECT (or SOCKS5): a byte stream after the answer
  std::string forward;     // an http:// request: its head as the upstream server gets it
  uint8_t socks_reply = 0; // kBad in SOCKS5: the reply code to send (RFC 1928 REP)
};

// An HTTP proxy request head: "CONNECT host:port HTTP/1.1" or "GET http://host[:port]/path
// HTTP/1.1" with its headers. An http:// request is forwarded with an origin-form target,
// without the proxy's own headers (Proxy-*), and with "Connection: close": one request per
// connection, so every request reaches the host that was checked.
ProxyRequest ParseHttpProxyHead(std::string_view bytes);

// SOCKS5's greeting: version 5 and a list of methods that must hold 0 (no authentication).
// kDone: answer "\x05\x00"; kBad: answer "\x05\xff" and close.
ProxyRequest ParseSocksGreeting(std::string_view bytes);
// SOCKS5's request after the greeting: CONNECT to an IPv4, IPv6 or domain address.
ProxyRequest ParseSocksRequest(std::string_view bytes);
// The reply to a SOCKS5 request: `code` 0 for success (bound address 0.0.0.0:0).
std::string SocksReply(uint8_t code);

// An HTTP answer from the proxy itself ("HTTP/1.1 403 Forbidden" with `text` as its body).
std::string ProxyAnswer(int status, std::string_view reason, std::string_view text);

}  // namespace execbox::engine
