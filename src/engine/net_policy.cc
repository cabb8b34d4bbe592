#include "engine/net_policy.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace execbox::engine {
namespace {

using Address = std::array<uint8_t, 16>;

std::unexpected<Error> Bad(std::string_view text, const std::string& why) {
  const bool printable = text.size() <= kMaxNetRuleBytes &&
                         std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
  return Fail((printable ? "'" + std::string(text) + "'" : std::string("an entry")) + ": " + why);
}

}  // namespace

std::optional<std::string> HostName(std::string_view s) {
  if (!s.empty() && s.back() == '.') s.remove_suffix(1);
  if (s.empty() || s.size() > 253) return std::nullopt;
  std::string out;
  size_t label = 0;
  for (char c : s) {
    if (c == '.') {
      if (label == 0) return std::nullopt;
      label = 0;
      out += c;
      continue;
    }
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '_';
    if (!ok || ++label > 63) return std::nullopt;
    out += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  if (label == 0) return std::nullopt;
  return out;
}

namespace {

bool InPrefix(const Address& a, const Address& net, int prefix) {
  for (int bit = 0; bit < prefix; ++bit) {
    const int byte = bit / 8, shift = 7 - bit % 8;
    if (((a[byte] >> shift) & 1) != ((net[byte] >> shift) & 1)) return false;
  }
  return true;
}

bool IsV4(const Address& a) {
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::equal(a.begin(), a.begin() + 12, kMapped);
}

bool PortMatches(const NetRule& r, uint16_t port) { return r.port == 0 || r.port == port; }

// A name entry that matches `host` (already lower case, no trailing dot).
bool NameMatches(const NetRule& r, std::string_view host) {
  if (r.kind == NetRule::Kind::kHost) return host == r.host;
  if (r.kind == NetRule::Kind::kSuffix)
    return host.size() > r.host.size() + 1 && host.ends_with(r.host) &&
           host[host.size() - r.host.size() - 1] == '.';
  return false;
}

bool AddressMatches(const NetRule& r, const Address& a) {
  return r.kind == NetRule::Kind::kAddress && InPrefix(a, r.address, r.prefix);
}

const NetRule* FindName(const std::vector<NetRule>& rules, std::string_view host, uint16_t port) {
  for (const NetRule& r : rules)
    if (PortMatches(r, port) && NameMatches(r, host)) return &r;
  return nullptr;
}

const NetRule* FindAddress(const std::vector<NetRule>& rules, const Address& a, uint16_t port) {
  for (const NetRule& r : rules)
    if (PortMatches(r, port) && AddressMatches(r, a)) return &r;
  return nullptr;
}

std::string Lower(std::string_view host) {
  auto name = HostName(host);
  return name ? *name : std::string(host);
}

NetVerdict Refusal(std::string reason, const NetRule* rule = nullptr) {
  return {.allowed = false, .reason = std::move(reason), .rule = rule != nullptr ? rule->text : ""};
}

}  // namespace

std::optional<Address> ParseAddress(std::string_view text) {
  if (text.empty() || text.size() > 45) return std::nullopt;
  const std::string s(text);
  Address a{};
  in_addr v4{};
  if (::inet_pton(AF_INET, s.c_str(), &v4) == 1) {
    a[10] = a[11] = 0xff;
    std::memcpy(a.data() + 12, &v4, 4);
    return a;
  }
  in6_addr v6{};
  if (::inet_pton(AF_INET6, s.c_str(), &v6) == 1) {
    std::memcpy(a.data(), &v6, 16);
    return a;
  }
  return std::nullopt;
}

std::string AddressText(const Address& a) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (IsV4(a)) {
    ::inet_ntop(AF_INET, a.data() + 12, buf, sizeof buf);
  } else {
    ::inet_ntop(AF_INET6, a.data(), buf, sizeof buf);
  }
  return buf;
}

bool IsSpecialAddress(const Address& a) {
  struct Range {
    const char* net;
    int prefix;  // of the address family's own bits
  };
  static constexpr Range kV4[] = {{"0.0.0.0", 8},     {"10.0.0.0", 8},      {"100.64.0.0", 10}, {"127.0.0.0", 8},
                                  {"169.254.0.0", 16}, {"172.16.0.0", 12},   {"192.0.0.0", 24},  {"192.0.2.0", 24},
                                  {"192.168.0.0", 16}, {"198.18.0.0", 15},   {"198.51.100.0", 24},
                                  {"203.0.113.0", 24}, {"224.0.0.0", 4},     {"240.0.0.0", 4}};
  static constexpr Range kV6[] = {{"::", 127},  // :: and ::1
                                  {"64:ff9b::", 96}, {"100::", 64}, {"2001:db8::", 32}, {"fc00::", 7},
                                  {"fe80::", 10},    {"fec0::", 10}, {"ff00::", 8}};
  if (IsV4(a)) {
    for (const Range& r : kV4)
      if (InPrefix(a, *ParseAddress(r.net), 96 + r.prefix)) return true;
    return false;
  }
  for (const Range& r : kV6)
    if (InPrefix(a, *ParseAddress(r.net), r.prefix)) return true;
  return false;
}

Expected<NetRule> ParseNetRule(std::string_view text) {
  if (text.empty()) return Fail("an empty entry");
  if (text.size() > kMaxNetRuleBytes)
    return Bad(text, "longer than " + std::to_string(kMaxNetRuleBytes) + " bytes");
  NetRule rule;
  rule.text = std::string(text);
  std::string_view body = text, port;
  if (text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return Bad(text, "'[' without ']'");
    body = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return Bad(text, "only ':port' may follow ']'");
      port = rest.substr(1);
      if (port.empty()) return Bad(text, "an empty port");
    }
  } else if (std::count(text.begin(), text.end(), ':') == 1) {
    const size_t colon = text.find(':');
    body = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (port.empty()) return Bad(text, "an empty port");
  }
  if (!port.empty()) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535)
      return Bad(text, "the port must be a number from 1 to 65535");
    rule.port = static_cast<uint16_t>(value);
  }
  if (body.empty()) return Bad(text, "no host");
  std::string_view addr = body;
  std::optional<int> prefix;
  if (const size_t slash = body.find('/'); slash != std::string_view::npos) {
    addr = body.substr(0, slash);
    std::string_view bits = body.substr(slash + 1);
    int value = -1;
    auto [end, ec] = std::from_chars(bits.data(), bits.data() + bits.size(), value);
    if (bits.empty() || ec != std::errc() || end != bits.data() + bits.size() || value < 0)
      return Bad(text, "a CIDR's prefix must be a number");
    prefix = value;
  }
  if (auto a = ParseAddress(addr)) {
    const bool v4 = IsV4(*a);
    const int bits = prefix.value_or(v4 ? 32 : 128);
    if (bits > (v4 ? 32 : 128)) return Bad(text, "the prefix is longer than the address");
    rule.kind = NetRule::Kind::kAddress;
    rule.prefix = v4 ? 96 + bits : bits;
    rule.address = *a;
    // The host part must be zero: "10.1.2.3/8" is a typo more often than a network.
    Address masked{};
    for (int bit = 0; bit < rule.prefix; ++bit) {
      const int byte = bit / 8, shift = 7 - bit % 8;
      masked[byte] |= static_cast<uint8_t>(((a->at(byte) >> shift) & 1) << shift);
    }
    if (masked != *a) return Bad(text, "the address has bits set beyond the prefix (write the network)");
    return rule;
  }
  if (prefix) return Bad(text, "a prefix needs an IP address before it");
  if (text.front() == '[') return Bad(text, "not an IPv6 address in brackets");
  if (body.find(':') != std::string_view::npos) return Bad(text, "not an IP address, name or suffix");
  if (body.starts_with("*.")) {
    auto name = HostName(body.substr(2));
    if (!name) return Bad(text, "not a name after '*.'");
    rule.kind = NetRule::Kind::kSuffix;
    rule.host = std::move(*name);
    return rule;
  }
  if (body.find('*') != std::string_view::npos) return Bad(text, "'*' only as '*.suffix'");
  auto name = HostName(body);
  if (!name) return Bad(text, "not a host name (letters, digits, '-', '_' and dots)");
  rule.kind = NetRule::Kind::kHost;
  rule.host = std::move(*name);
  return rule;
}

Expected<NetPolicy> ParseNetPolicy(const std::vector<std::string>& allow, const std::vector<std::string>& deny) {
  NetPolicy policy;
  auto read = [](const char* list, const std::vector<std::string>& in, std::vector<NetRule>& out) -> Status {
    if (in.size() > kMaxNetRules)
      return Fail(std::string(list) + ": at most " + std::to_string(kMaxNetRules) + " entries");
    for (size_t i = 0; i < in.size(); ++i) {
      auto rule = ParseNetRule(in[i]);
      if (!rule) return std::unexpected(Context(std::string(list) + "[" + std::to_string(i) + "]", rule.error()));
      out.push_back(std::move(*rule));
    }
    return {};
  };
  if (auto s = read("allow", allow, policy.allow); !s) return std::unexpected(s.error());
  if (auto s = read("deny", deny, policy.deny); !s) return std::unexpected(s.error());
  return policy;
}

std::optional<std::string> FirstEntryBeyond(const NetPolicy& asked, const NetPolicy& bound) {
  auto covers = [](const NetRule& b, const NetRule& a) {
    if (b.port != 0 && b.port != a.port) return false;
    switch (a.kind) {
      case NetRule::Kind::kHost:
        return NameMatches(b, a.host);
      case NetRule::Kind::kSuffix:
        return b.kind == NetRule::Kind::kSuffix && (a.host == b.host || NameMatches(b, a.host));
      case NetRule::Kind::kAddress:
        return b.kind == NetRule::Kind::kAddress && b.prefix <= a.prefix && InPrefix(a.address, b.address, b.prefix);
    }
    return false;
  };
  for (const NetRule& a : asked.allow) {
    if (std::none_of(bound.allow.begin(), bound.allow.end(), [&](const NetRule& b) { return covers(b, a); }))
      return a.text;
  }
  return std::nullopt;
}

NetPolicy Within(NetPolicy asked, const NetPolicy& bound) {
  for (const NetRule& d : bound.deny) {
    const bool there =
        std::any_of(asked.deny.begin(), asked.deny.end(), [&](const NetRule& r) { return r.text == d.text; });
    if (!there) asked.deny.push_back(d);  // a policy bounded before (an import) keeps one of each
  }
  return asked;
}

NetVerdict CheckName(const NetPolicy& policy, std::string_view asked, uint16_t port) {
  if (auto literal = ParseAddress(asked)) {
    if (const NetRule* d = FindAddress(policy.deny, *literal, port)) return Refusal("denied by rule", d);
    if (FindAddress(policy.allow, *literal, port) == nullptr) return Refusal("not in allowlist");
    return {.allowed = true};
  }
  const std::string host = Lower(asked);
  if (!HostName(asked)) return Refusal("not a host name");
  if (const NetRule* d = FindName(policy.deny, host, port)) return Refusal("denied by rule", d);
  // A name may still be allowed by the address it resolves to (CheckAddress), when an
  // address entry exists for this port.
  if (FindName(policy.allow, host, port) != nullptr) return {.allowed = true};
  for (const NetRule& r : policy.allow)
    if (r.kind == NetRule::Kind::kAddress && PortMatches(r, port)) return {.allowed = true};
  return Refusal("not in allowlist");
}

NetVerdict CheckAddress(const NetPolicy& policy, std::string_view asked, const Address& address,
                        uint16_t port, bool operator_named) {
  if (const NetRule* d = FindAddress(policy.deny, address, port)) return Refusal("denied by rule", d);
  const NetRule* by_address = FindAddress(policy.allow, address, port);
  if (by_address != nullptr) return {.allowed = true, .rule = by_address->text};
  if (!operator_named && IsSpecialAddress(address)) return Refusal("private address");
  const NetRule* by_name = ParseAddress(asked) ? nullptr : FindName(policy.allow, Lower(asked), port);
  if (by_name == nullptr) return Refusal("not in allowlist");
  return {.allowed = true, .rule = by_name->text};
}

}  // namespace execbox::engine
