#pragma once

#include <CLI/CLI.hpp>

namespace execbox::cli {

// Adds `execbox run` to the app; the returned callback runs it and gives the exit status.
void AddRunCommand(CLI::App& app, int& exit_status);

}  // namespace execbox::cli
