#pragma once

#include <CLI/CLI.hpp>

namespace execbox::cli {

// `execbox doctor`: which isolation layers this host really gives, each found by trying.
void AddDoctorCommand(CLI::App& app, int& exit_status);

}  // namespace execbox::cli
