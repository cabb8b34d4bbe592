// Network under a policy (docs/security.md, "Network"): which destinations an execution's
// code may reach through the host's proxy (engine/egress_proxy.h). Parsed and checked here,
// and only here: the server's bound, a request's policy and each connection's verdict.
//
// An entry is a host name (`pypi.example.test`), a suffix (`*.example.test`: the names below
// it, not the name itself), an IP address or a CIDR (`10.1.2.0/24`, `[fd00::]/8`), each
// optionally with `:port` (IPv6 in brackets then). Deny entries win over allow entries.
// Loopback, private, link-local (169.254.169.254 above all), multicast and other special
// addresses are refused unless an IP/CIDR allow entry names them: an allowed *name* that
// resolves to one (DNS rebinding) is refused.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace execbox::engine {

struct NetRule {
  enum class Kind { kHost, kSuffix, kAddress };
  Kind kind = Kind::kHost;
  std::string host;                     // kHost: the name; kSuffix: "example.test" (lower case)
  std::array<uint8_t, 16> address{};    // kAddress: IPv6, or IPv4 mapped (::ffff:a.b.c.d)
  int prefix = 128;                     // kAddress: bits, of the 128
  uint16_t port = 0;                    // 0: any port
  std::string text;                     // as written, for refusals and the Result
};

// At most this many entries per list, each at most kMaxNetRuleBytes.
inline constexpr size_t kMaxNetRules = 64;
inline constexpr size_t kMaxNetRuleBytes = 260;

// One entry; the error names it and says what is wrong.
Expected<NetRule> ParseNetRule(std::string_view text);

struct NetPolicy {
  std::vector<NetRule> allow;
  std::vector<NetRule> deny;
  bool empty() const { return allow.empty() && deny.empty(); }
};

// Both lists; the error names the first bad entry ("allow[2] '...': ...").
Expected<NetPolicy> ParseNetPolicy(const std::vector<std::string>& allow, const std::vector<std::string>& deny);

// The first allow entry of `asked` that `bound`'s allow entries do not cover (a name by the
// same name or a suffix above it, a CIDR by a CIDR holding it, a port by the same port or
// any), or nullopt when all are covered.
std::optional<std::string> FirstEntryBeyond(const NetPolicy& asked, const NetPolicy& bound);

// `asked` with `bound`'s deny entries added (those it has not already): what an execution runs
// under.
NetPolicy Within(NetPolicy asked, const NetPolicy& bound);

// A DNS name (labels of letters, digits, '-' and '_', 1-63 bytes, 253 in all), lower-cased and
// without a trailing dot; nullopt when `text` is not one.
std::optional<std::string> HostName(std::string_view text);

// An IP address as 16 bytes (IPv4 mapped); nullopt when `text` is not an address literal.
std::optional<std::array<uint8_t, 16>> ParseAddress(std::string_view text);
std::string AddressText(const std::array<uint8_t, 16>& address);
// Loopback, private, link-local, CGNAT, multicast, unspecified, documentation, reserved.
bool IsSpecialAddress(const std::array<uint8_t, 16>& address);

struct NetVerdict {
  bool allowed = false;
  std::string reason;  // refused: "not in allowlist", "denied by rule", "private address"
  std::string rule;    // the entry that decided, as written ("" for none)
};

// The name (or address literal) as asked, before it is resolved: a deny by name, or a name no
// entry could allow (neither a name entry nor, for a literal, an address entry).
NetVerdict CheckName(const NetPolicy& policy, std::string_view host, uint16_t port);
// One resolved address of `host`: a deny by address, a special address without an address
// entry, or neither the name nor the address allowed. `operator_named`: the address is the
// server operator's own answer for the name ([network] hosts_file, net_hosts.h), which counts
// as public however private its range.
NetVerdict CheckAddress(const NetPolicy& policy, std::string_view host,
                        const std::array<uint8_t, 16>& address, uint16_t port, bool operator_named = false);

// One connection attempt from the sandbox, as the Result lists it (`network.connections`).
struct NetConnection {
  std::string protocol;  // "http" (an http:// request), "connect" (HTTP CONNECT) or "socks5"; "" unknown
  std::string host;      // as asked
  uint16_t port = 0;
  std::string address;  // the address connected to (or refused); "" when none was resolved
  bool allowed = false;
  std::string reason;  // refused: "not in allowlist", "denied by rule", "private address", "limit", ...
  std::string rule;    // the entry that decided, as written
  uint64_t bytes_sent = 0;      // to the destination
  uint64_t bytes_received = 0;  // from it
  uint64_t duration_ms = 0;
};

// Every attempt of one execution, in order; past the record's bound only counted.
struct NetRecord {
  std::vector<NetConnection> connections;
  uint64_t omitted = 0;  // attempts not listed (the list is full, or not even a connection)
  // Every attempt, listed or not, by the policy's answer (per key in /metrics; not in the
  // Result's JSON, whose list says the same of the attempts it holds).
  uint64_t allowed = 0, refused = 0;
};

}  // namespace execbox::engine
