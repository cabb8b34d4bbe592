// The bodies of a session's process routes (/v1/sessions/{id}/processes...), read strictly:
// which fields each carries and their types are the request schema's
// (api/schema/request_schema.h); a bad body is a 400 problem naming the field.
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

#include "api/http/problem.h"
#include "engine/session_processes.h"

namespace execbox::api {

// POST .../processes: {argv | command, env?, cwd?, pty?, rows?, cols?, stdin?, tag?}.
std::expected<engine::ProcessSpec, Problem> ParseProcessStartBody(std::string_view body);
// POST .../input: {data} or {data_base64}: the bytes to write.
std::expected<std::string, Problem> ParseProcessInputBody(std::string_view body);
// POST .../signal: {signal: "SIGTERM" | 15}: the signal's number.
std::expected<int, Problem> ParseProcessSignalBody(std::string_view body);
// POST .../resize: {rows, cols}.
struct PtySize {
  uint16_t rows = 0, cols = 0;
};
std::expected<PtySize, Problem> ParseProcessResizeBody(std::string_view body);

}  // namespace execbox::api
