#include "api/schema/network_schema.h"

#include <string>
#include <vector>

namespace execbox::api {
namespace {

using nlohmann::json;

FieldFault Invalid(const std::string& field, const std::string& detail) {
  return FieldFault{.type = "invalid-value", .field = field, .detail = "'" + field + "' " + detail};
}

json Described(json schema, std::string_view description) {
  schema["description"] = description;
  return schema;
}

json Count(std::string_view description = {}) {
  json s = {{"type", "integer"}, {"minimum", 0}};
  if (!description.empty()) s["description"] = description;
  return s;
}

}  // namespace

json NetworkPolicySchema(std::string_view description) {
  json entries = {{"type", "array"},
                  {"items", {{"type", "string"}, {"minLength", 1}, {"maxLength", engine::kMaxNetRuleBytes}}},
                  {"maxItems", engine::kMaxNetRules}};
  return {{"type", "object"},
          {"properties",
           {{"allow",
             Described(entries,
                       "Destinations the code may reach: `host.name`, `*.suffix`, `1.2.3.4`, `10.0.0.0/8`, "
                       "`[2001:db8::1]`, each optionally `:port`.")},
            {"deny", Described(entries, "Destinations refused even when an allow entry matches.")}}},
          {"additionalProperties", false},
          {"description", description}};
}

std::expected<engine::NetPolicy, FieldFault> ReadNetworkPolicy(const json& value) {
  if (!value.is_object()) return std::unexpected(Invalid("network", "must be an object"));
  std::vector<std::string> lists[2];
  const char* names[2] = {"allow", "deny"};
  for (const auto& item : value.items()) {
    if (item.key() != names[0] && item.key() != names[1])
      return std::unexpected(
          Invalid("network", "takes 'allow' and 'deny', not '" + item.key().substr(0, 64) + "'"));
  }
  for (int i = 0; i < 2; ++i) {
    auto it = value.find(names[i]);
    if (it == value.end() || it->is_null()) continue;
    const std::string at = std::string("network.") + names[i];
    if (!it->is_array()) return std::unexpected(Invalid(at, "must be an array of strings"));
    if (it->size() > engine::kMaxNetRules)
      return std::unexpected(
          Invalid(at, "holds at most " + std::to_string(engine::kMaxNetRules) + " entries"));
    for (const json& entry : *it) {
      if (!entry.is_string()) return std::unexpected(Invalid(at, "must be an array of strings"));
      lists[i].push_back(entry.get<std::string>());
    }
  }
  auto policy = engine::ParseNetPolicy(lists[0], lists[1]);
  if (!policy) return std::unexpected(Invalid("network", "entry " + policy.error().message));
  return std::move(*policy);
}

json NetworkConnectionSchema() {
  json str = {{"type", "string"}};
  return {
      {"type", "object"},
      {"properties",
       {{"protocol", Described(str,
                               "`http` (an http:// request), `connect` (HTTP CONNECT), `socks5`, or empty "
                               "when the request could not be read.")},
        {"host", Described(str, "The host as the code asked for it (a name or an address).")},
        {"port", Count()},
        {"address",
         {{"anyOf",
           {Described(str,
                      "The address connected to, or refused; null when none was "
                      "resolved."),
            {{"type", "null"}}}}}},
        {"allowed",
         {{"type", "boolean"},
          {"description",
           "Whether the policy allowed it (a connection that then failed is "
           "allowed, with a `reason`)."}}},
        {"reason", Described(str,
                             "Why it was refused or failed: `not in allowlist`, `denied by rule`, `private "
                             "address`, `limit`, `bad request: ...`, `name not resolved: ...`, `connect: "
                             "...`; `byte limit` for an allowed one cut where the execution's bytes ran "
                             "out.")},
        {"rule", Described(str, "The policy entry that decided, as written.")},
        {"bytes_sent", Count("To the destination.")},
        {"bytes_received", Count("From the destination.")},
        {"duration_ms", Count()}}},
      {"required",
       {"protocol", "host", "port", "address", "allowed", "bytes_sent", "bytes_received", "duration_ms"}},
      {"additionalProperties", false}};
}

json NetworkRecordSchema(json connection) {
  return {{"type", "object"},
          {"properties",
           {{"connections",
             {{"type", "array"},
              {"items", std::move(connection)},
              {"description", "Each attempt through the proxy, in order."}}},
            {"omitted", Count("Attempts not listed (past the list's bound, or not a connection at all).")}}},
          {"required", {"connections", "omitted"}},
          {"additionalProperties", false},
          {"description",
           "Present when the execution ran under a network policy: every connection attempt its code made "
           "through the server's proxy."}};
}

}  // namespace execbox::api
