#pragma once

#include <CLI/CLI.hpp>

namespace execbox::cli {

// Adds `execbox repl`: an interactive sandboxed Python prompt on one warm session (standard
// input may be piped too). The callback runs it and gives the exit status.
void AddReplCommand(CLI::App& app, int& exit_status);

}  // namespace execbox::cli
