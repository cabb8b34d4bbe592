// Network under a policy, the gate's part (docs/security.md, "Network"): what a caller may ask
// for (its key's bound within the server's) and whether a request's policy fits it. Every front
// end's network reaches the proxy only through here.
#include "engine/gate.h"

namespace execbox::engine {
namespace {

Refusal NotAllowed(std::string detail, nlohmann::json extra = nlohmann::json::object()) {
  extra["field"] = "network";
  return MakeRefusal(RefusalReason::kNetworkNotAllowed, std::move(detail), std::move(extra));
}

}  // namespace

NetPolicy Gate::NetworkBound(const Caller& caller) const {
  const NetPolicy& server = options_.network;
  const std::optional<NetPolicy>& key = WithCaps(caller).caps.network;
  if (!key) return server;
  // A key's allow entries were checked against the server's when the configuration was read;
  // they are checked again here, so that a bound made otherwise (a test, the library) holds too.
  NetPolicy bound;
  for (const NetRule& rule : key->allow) {
    if (!FirstEntryBeyond(NetPolicy{.allow = {rule}, .deny = {}}, server)) bound.allow.push_back(rule);
  }
  bound.deny = key->deny;
  bound.deny.insert(bound.deny.end(), server.deny.begin(), server.deny.end());
  return bound;
}

Refused<NetPolicy> Gate::NetworkWithin(const Caller& caller, NetPolicy asked) const {
  const bool own = WithCaps(caller).caps.network.has_value();
  const std::string whose = own ? "key '" + caller.id + "'" : std::string("this server");
  const NetPolicy bound = NetworkBound(caller);
  if (bound.allow.empty()) {
    return std::unexpected(
        NotAllowed(own ? whose + " may have no network (its [[keys]] network allows nothing)"
                       : "this server allows no network (its configuration's [network] allow is empty)"));
  }
  if (auto beyond = FirstEntryBeyond(asked, bound)) {
    return std::unexpected(NotAllowed(
        "network.allow entry '" + *beyond + "' is beyond what " + whose + " allows", {{"entry", *beyond}}));
  }
  return Within(std::move(asked), bound);
}

Refused<void> Gate::CheckNetwork(const Caller& caller, ExecutionRequest& request) const {
  if (!request.network) return {};
  auto within = NetworkWithin(caller, std::move(*request.network));
  if (!within) return std::unexpected(std::move(within.error()));
  if (request.session_id)
    return std::unexpected(NotAllowed(
        "a session's network is the policy it was created with; an execution in it cannot ask for another"));
  if (request.program.mode != runtime::Mode::kRun)
    return std::unexpected(NotAllowed("a network policy is for code that runs"));
  request.network = std::move(*within);
  return {};
}

}  // namespace execbox::engine
