// E2B's network fields of a sandbox's creation (`allow_internet_access`, which the SDKs send as
// true unless told otherwise, and `network: {allowOut, denyOut}`) as the policy execbox asks
// its gate for. Only a translation: what a caller may have is the gate's to say
// (Gate::NetworkBound, Gate::CreateSession).
#pragma once

#include <expected>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "engine/net_policy.h"

namespace execbox::api::e2b {

// The policy asked for, or nullopt for none; a string saying what is wrong with the fields.
//  - allowOut entries are the allow list (names, IPs and CIDRs, as E2B takes them);
//  - denyOut's 0.0.0.0/0 (or ::/0: E2B's ALL_TRAFFIC) says "nothing else", which is the
//    policy's own default and adds nothing; other denyOut entries are deny entries, and win here
//    even over an allowOut entry inside them (E2B lets the allowOut entry win: here is stricter);
//  - allow_internet_access true (or absent) with no allowOut entries asks for `widest`, the
//    caller's whole bound (none when that allows nothing); false asks for none.
std::expected<std::optional<engine::NetPolicy>, std::string> NetworkAsk(const nlohmann::json& body,
                                                                        const engine::NetPolicy& widest);

}  // namespace execbox::api::e2b
