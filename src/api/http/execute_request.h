// The HTTP API's request bodies, checked strictly: malformed JSON, too deep nesting, invalid
// UTF-8, wrong types, unknown fields, missing `code`, bad file names (NUL, absolute, "..",
// too long) each get a Problem with the right status (400, 413 or 422) and a detail naming the
// field. Which fields each body carries and their types are the request schema's
// (api/schema/request_schema.h). Limits above the server's maxima are the gate's to refuse
// (engine/gate.h).
#pragma once

#include <expected>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "api/http/problem.h"
#include "engine/gate.h"
#include "jail/policy.h"
#include "runtime/python_program.h"

namespace execbox::api {

// Input files a request may carry, at most.
inline constexpr size_t kMaxInputFiles = 32;

// A JSON body: 400 for malformed JSON, nesting deeper than 64 or invalid UTF-8 anywhere in
// it (strings included); 400 unless it is an object.
std::expected<nlohmann::json, Problem> ParseJsonObject(std::string_view body);

// POST /v1/execute and /v1/sessions/{id}/execute:
// {code, stdin?, files?: [{name, content_base64}], limits?: {the limit schema's names},
//  policy?: "permissive"|"strict"|..., session_id?}. `allow_session_id` is false on the session
// route (the id is in the path). Limits are checked for type here, for bounds by the gate.
std::expected<engine::ExecutionRequest, Problem> ParseExecuteBody(std::string_view body,
                                                                  bool allow_session_id,
                                                                  size_t max_files = kMaxInputFiles);

// POST /v1/check: {code, policy?} -> a program in Mode::kCheck.
std::expected<engine::ExecutionRequest, Problem> ParseCheckBody(std::string_view body);

// POST /v1/sessions: {} or {limits?: {...}, checkpoint?: bool, packages?: [...], network?: {...}}
// (or an empty body).
struct SessionBody {
  engine::LimitOverrides limits;
  bool checkpoint = false;  // a snapshot before each execution, for /undo
  // Installed from the wheelhouse into the new session before it is answered for.
  std::vector<std::string> packages;
  std::optional<engine::NetPolicy> network;  // the session's, for its whole life; none: no network
};
std::expected<SessionBody, Problem> ParseSessionBody(std::string_view body);

// A file path relative to the work dir, as in a files[] name or the {path} of
// /v1/sessions/{id}/files/{path}: UTF-8, no NUL or control characters, not absolute, no "."
// or ".." component, no empty component, at most 255 bytes per component and 1020 in all (what
// jail::ValidateRelativeName accepts). 400 ("invalid-path") with the reason otherwise.
std::expected<std::string, Problem> ValidateFilePath(std::string_view path);

}  // namespace execbox::api
