#pragma once

#include <CLI/CLI.hpp>

namespace execbox::cli {

// Adds `execbox serve`: the HTTP API and MCP over Streamable HTTP (/mcp) on one port.
void AddServeCommand(CLI::App& app, int& exit_status);

}  // namespace execbox::cli
