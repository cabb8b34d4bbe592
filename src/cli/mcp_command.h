#pragma once

#include <CLI/CLI.hpp>

namespace execbox::cli {

// Adds `execbox mcp`: an MCP server on standard input and output (one JSON-RPC message per
// line; logs on stderr only).
void AddMcpCommand(CLI::App& app, int& exit_status);

}  // namespace execbox::cli
