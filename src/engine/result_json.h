#pragma once

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "engine/result.h"

namespace execbox::engine {

// The JSON form of a Result. Strings hold whatever bytes the code wrote; serialize with
// nlohmann::json::error_handler_t::replace so invalid UTF-8 becomes U+FFFD, never a failure.
nlohmann::json ToJson(const Result& r);
// Its "usage" object alone (for the audit log).
nlohmann::json UsageJson(const Result& r);
// Its "installed" array alone ([{name, version, modules}]; also a session's creation's answer).
// {connections: [{protocol, host, port, address, allowed, reason?, rule?, bytes_sent,
// bytes_received, duration_ms}], omitted}: the Result's `network`.
nlohmann::json NetworkJson(const NetRecord& record);
// {allow: [entry, ...], deny: [...]}, each entry as written: a policy as granted (a session's).
nlohmann::json NetPolicyJson(const NetPolicy& policy);
nlohmann::json InstalledJson(const std::vector<InstalledPackage>& installed);
// {mode, refused: [{event, detail}], omitted}: the Result's `guard`.
nlohmann::json GuardJson(const GuardRecord& record);

// A Result read back from ToJson's form, as a client of the API renders it (`execbox run`
// through a local server): everything RenderText, ProcessExitCode and --keep-files read
// (status, exit, streams, result, display, error, findings, session, usage, files). "limits" and
// "isolation" are not read back: such a client passes the JSON itself on where it shows them.
// An error says which field is missing or of the wrong type.
Expected<Result> ResultFromJson(const nlohmann::json& j);

// Serialized with invalid UTF-8 replaced.
std::string Dump(const nlohmann::json& j, int indent = -1);

}  // namespace execbox::engine
