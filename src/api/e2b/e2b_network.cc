#include "api/e2b/e2b_network.h"

#include <vector>

namespace execbox::api::e2b {

using nlohmann::json;

namespace {

// E2B's name for every destination (ALL_TRAFFIC), in either family.
bool IsAllTraffic(const std::string& entry) {
  return entry == "0.0.0.0/0" || entry == "::/0" || entry == "[::]/0";
}

std::expected<std::vector<std::string>, std::string> Entries(const json& network, const char* field) {
  std::vector<std::string> out;
  auto it = network.find(field);
  if (it == network.end() || it->is_null()) return out;
  if (!it->is_array())
    return std::unexpected(std::string("network.") + field + " must be an array of strings");
  if (it->size() > engine::kMaxNetRules)
    return std::unexpected(std::string("network.") + field + " holds at most " +
                           std::to_string(engine::kMaxNetRules) + " entries");
  for (const json& entry : *it) {
    if (!entry.is_string())
      return std::unexpected(std::string("network.") + field + " must be an array of strings");
    out.push_back(entry.get<std::string>());
  }
  return out;
}

}  // namespace

std::expected<std::optional<engine::NetPolicy>, std::string> NetworkAsk(const json& body,
                                                                        const engine::NetPolicy& widest) {
  bool internet = true;
  if (auto it = body.find("allow_internet_access"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return std::unexpected(std::string("allow_internet_access must be a boolean"));
    internet = it->get<bool>();
  }
  std::vector<std::string> allow, deny;
  bool deny_all = false;
  if (auto it = body.find("network"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return std::unexpected(std::string("network must be an object"));
    for (const auto& [name, value] : it->items()) {
      if (name == "allowOut" || name == "denyOut") continue;
      // Nothing here is reachable from outside anyway: refusing public traffic asks for what is.
      if (name == "allowPublicTraffic" && value == false) continue;
      return std::unexpected("network." + name.substr(0, 64) + " is not available in execbox");
    }
    auto allow_out = Entries(*it, "allowOut");
    if (!allow_out) return std::unexpected(allow_out.error());
    auto deny_out = Entries(*it, "denyOut");
    if (!deny_out) return std::unexpected(deny_out.error());
    allow = std::move(*allow_out);
    for (auto& entry : *deny_out) {
      if (IsAllTraffic(entry))
        deny_all = true;
      else
        deny.push_back(std::move(entry));
    }
  }
  auto parsed = engine::ParseNetPolicy(allow, deny);
  if (!parsed) return std::unexpected("network: " + parsed.error().message);
  if (!parsed->allow.empty()) return std::optional<engine::NetPolicy>(std::move(*parsed));
  if (!internet || deny_all || widest.allow.empty()) return std::optional<engine::NetPolicy>();
  parsed->allow = widest.allow;
  return std::optional<engine::NetPolicy>(std::move(*parsed));
}

}  // namespace execbox::api::e2b
