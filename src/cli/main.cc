// execbox: run untrusted Python in a fresh Linux sandbox.
#include <CLI/CLI.hpp>

#include "base/build_info.h"
#include "cli/check_command.h"
#include "cli/doctor_command.h"
#include "cli/mcp_command.h"
#include "cli/packages_command.h"
#include "cli/prepare_command.h"
#include "cli/repl_command.h"
#include "cli/run_command.h"
#include "cli/serve_command.h"
#include "jail/container_cgroups.h"

int main(int argc, char** argv) {
  CLI::App app{"execbox: runs untrusted Python in a Linux sandbox and reports exactly what happened"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("execbox ") + execbox::kVersion);
  int exit_status = 0;
  execbox::cli::AddRunCommand(app, exit_status);
  execbox::cli::AddReplCommand(app, exit_status);
  execbox::cli::AddCheckCommand(app, exit_status);
  execbox::cli::AddPackagesCommand(app, exit_status);
  execbox::cli::AddDoctorCommand(app, exit_status);
  execbox::cli::AddPrepareCommand(app, exit_status);
  execbox::cli::AddMcpCommand(app, exit_status);
  execbox::cli::AddServeCommand(app, exit_status);
  // Before any command starts a thread: in a container whose cgroup filesystem is read-only,
  // execbox takes its own writable view of its group (jail/container_cgroups.h). `check` runs
  // no code and needs none.
  app.parse_complete_callback([&app] {
    if (!app.got_subcommand("check")) (void)execbox::jail::TakeContainerCgroups();
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return exit_status;
}
