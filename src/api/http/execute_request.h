// The HTTP API's request bodies, checked strictly: malformed JSON, too deep nesting, invalid
// UTF-8, wrong types, unknown fields, missing `code`, bad file names (NUL, absolute, "..",
// too long) and limits above the server's maxima each get a Problem with the right status
// (400, 413 or 422) and a detail naming the field.
#pragma once

#include <expected>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "api/http/problem.h"
#include "jail/policy.h"
#include "runtime/python_program.h"

namespace execbox::api {

struct RequestLimits {
  jail::Limits defaults;  // what a request gets for a limit it does not name
  jail::Limits maxima;    // a request naming more gets 422
  size_t max_files = 32;  // input files per request
};

struct ExecuteCall {
  runtime::PythonProgram program;        // mode kRun, limits and inputs filled
  std::optional<std::string> session_id;  // from the body ("session_id")
};

// A JSON body: 400 for malformed JSON, nesting deeper than 64 or invalid UTF-8 anywhere in
// it (strings included); 400 unless it is an object.
std::expected<nlohmann::json, Problem> ParseJsonObject(std::string_view body);

// POST /v1/execute and /v1/sessions/{id}/execute:
// {code, stdin?, files?: [{name, content_base64}], limits?: {timeout_seconds, cpu_seconds,
//  memory_mb, max_processes, output_bytes, disk_mb}, policy?: "permissive"|"strict"|...,
//  session_id?}. `allow_session_id` is false on the session route (the id is in the path).
std::expected<ExecuteCall, Problem> ParseExecuteBody(std::string_view body, const RequestLimits& limits,
                                                     bool allow_session_id);

// POST /v1/check: {code, policy?} -> a program in Mode::kCheck.
std::expected<runtime::PythonProgram, Problem> ParseCheckBody(std::string_view body, const RequestLimits& limits);

// A file path relative to the work dir, as in a files[] name or the {path} of
// /v1/sessions/{id}/files/{path}: UTF-8, no NUL or control characters, not absolute, no "."
// or ".." component, no empty component, at most 255 bytes per component and 1020 in all (what
// jail::ValidateRelativeName accepts). 400 ("invalid-path") with the reason otherwise.
std::expected<std::string, Problem> ValidateFilePath(std::string_view path);

// The OpenAPI 3.1 document the server serves at /v1/openapi.json (checked in as
// src/api/http/openapi.json, embedded at build time).
const std::string& OpenApiDocument();

}  // namespace execbox::api
