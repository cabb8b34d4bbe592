// `execbox prepare`: builds what execbox keeps between runs (matplotlib's font list) now, rather
// than on the first run that plots. The Debian package runs it at installation.
#pragma once

#include <CLI/CLI.hpp>

namespace execbox::cli {

void AddPrepareCommand(CLI::App& app, int& exit_status);

}  // namespace execbox::cli
