#pragma once

#include <CLI/CLI.hpp>

namespace execbox::cli {

// `execbox packages`: what the sandbox's Python can import, as GET /v1/packages lists it.
void AddPackagesCommand(CLI::App& app, int& exit_status);

}  // namespace execbox::cli
