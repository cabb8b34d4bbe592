#pragma once

#include <CLI/CLI.hpp>

namespace execbox::cli {

// `execbox check`: syntax check and policy lint only; the code never runs.
void AddCheckCommand(CLI::App& app, int& exit_status);

}  // namespace execbox::cli
