// The server operator's own answers for names ([network] hosts_file): lines `ADDRESS NAME...`,
// as in /etc/hosts. The host's proxy (egress_proxy.h) resolves such a name to exactly these
// addresses, without asking the system's resolver, and they count as public addresses: an
// allowlisted name the operator points at 10.0.0.5 or at a loopback test server is reached,
// where the same address from DNS would be refused as private (net_policy.h). Only names are
// looked up here; an address literal is never vouched for.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace execbox::engine {

inline constexpr size_t kMaxNetHostsBytes = 1 << 20;
inline constexpr size_t kMaxNetHostsNames = 10'000;
inline constexpr size_t kMaxAddressesPerName = 16;

struct NetHosts {
  // By lower-case name without a trailing dot; each name's addresses in the file's order.
  std::map<std::string, std::vector<std::array<uint8_t, 16>>, std::less<>> names;
  // The addresses the operator gave `host` (any case, a trailing dot or not), or null.
  const std::vector<std::array<uint8_t, 16>>* Find(std::string_view host) const;
};

// The file's text: '#' starts a comment, blank lines are skipped, each other line is an IP
// address and one or more names. The error names the line and what is wrong with it.
Expected<NetHosts> ParseNetHosts(std::string_view text);

}  // namespace execbox::engine
