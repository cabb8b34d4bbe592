// The network's shapes, written once for every front end: the `network` a request carries
// (HTTP's /v1/execute body, MCP execute_python's argument) with its reader, and the `network` a
// Result carries (engine/result.h's NetRecord), as the OpenAPI document and MCP's outputSchema
// show them. What an entry may be is engine/net_policy.h's to say; here it is only read.
#pragma once

#include <expected>
#include <nlohmann/json.hpp>
#include <string_view>

#include "api/schema/request_schema.h"
#include "engine/net_policy.h"

namespace execbox::api {

// {allow?: [entry], deny?: [entry]}, with `description` as the object's.
nlohmann::json NetworkPolicySchema(std::string_view description);
// A request's `network` value, each entry parsed; a fault names the list or the entry.
std::expected<engine::NetPolicy, FieldFault> ReadNetworkPolicy(const nlohmann::json& value);

// One attempt of Result.network.connections.
nlohmann::json NetworkConnectionSchema();
// Result.network: {connections: [connection], omitted}; `connection` is the schema of one (or
// a reference to it).
nlohmann::json NetworkRecordSchema(nlohmann::json connection);

}  // namespace execbox::api
