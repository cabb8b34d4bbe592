#include "engine/net_hosts.h"

#include <algorithm>

#include "engine/net_policy.h"

namespace execbox::engine {

const std::vector<std::array<uint8_t, 16>>* NetHosts::Find(std::string_view host) const {
  if (names.empty()) return nullptr;
  auto name = HostName(host);
  if (!name) return nullptr;
  auto it = names.find(*name);
  return it == names.end() ? nullptr : &it->second;
}

Expected<NetHosts> ParseNetHosts(std::string_view text) {
  if (text.size() > kMaxNetHostsBytes)
    return Fail("larger than " + std::to_string(kMaxNetHostsBytes >> 20) + " MiB");
  NetHosts hosts;
  size_t line_number = 0;
  while (!text.empty()) {
    ++line_number;
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    std::vector<std::string_view> words;
    for (size_t at = 0; at < line.size();) {
      const size_t start = line.find_first_not_of(" \t\r", at);
      if (start == std::string_view::npos) break;
      const size_t stop = std::min(line.find_first_of(" \t\r", start), line.size());
      words.push_back(line.substr(start, stop - start));
      at = stop;
    }
    if (words.empty()) continue;
    const std::string where = "line " + std::to_string(line_number) + ": ";
    auto address = ParseAddress(words[0]);
    if (!address) return Fail(where + "expected an IP address first, as in /etc/hosts");
    if (words.size() < 2) return Fail(where + "an address without a name");
    for (size_t i = 1; i < words.size(); ++i) {
      auto name = HostName(words[i]);
      if (!name || ParseAddress(words[i]))
        return Fail(where + "'" + std::string(words[i].substr(0, 64)) + "' is not a host name");
      auto& list = hosts.names[*name];
      if (hosts.names.size() > kMaxNetHostsNames)
        return Fail(where + "more than " + std::to_string(kMaxNetHostsNames) + " names");
      if (std::find(list.begin(), list.end(), *address) != list.end()) continue;
      if (list.size() >= kMaxAddressesPerName)
        return Fail(where + "more than " + std::to_string(kMaxAddressesPerName) + " addresses for one name");
      list.push_back(*address);
    }
  }
  return hosts;
}

}  // namespace execbox::engine
