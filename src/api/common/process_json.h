// A session's process as every front end answers with it (HTTP's /v1/sessions/{id}/processes and
// the MCP process tools): one shape, so a client that uses both reads the same names.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/session_processes.h"

namespace execbox::api {

// {pid, argv, command?, tag, pty, started, running, stdin_open, output_bytes, exit_code, signal,
// ended?, ended_by?, size?}.
nlohmann::json ProcessInfoJson(const engine::ProcessInfo& p);

}  // namespace execbox::api
