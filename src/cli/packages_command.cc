// The list comes from the sandbox's own interpreter, run in a cold jail like any execution
// (engine/packages.h): what this host's Python has elsewhere does not count.
#include "cli/packages_command.h"

#include <iostream>
#include <memory>

#include "cli/limit_options.h"
#include "engine/gate.h"
#include "engine/result_json.h"

namespace execbox::cli {
namespace {

int ListPackages(bool json) {
  auto engine = engine::Engine::Create({.warm = false});
  if (!engine) {
    std::cerr << "execbox packages: " << engine.error().message << "\n";
    return 70;
  }
  engine::Gate gate(**engine, {.limits = CommandLineLimits(), .max_running = 1, .max_queue = 0});
  auto catalog = gate.Packages();
  if (!catalog) return ReportRefusal("packages", catalog.error());
  if (json) {
    std::cout << engine::Dump(engine::ToJson(*catalog), 2) << std::endl;
    return 0;
  }
  std::cout << "Python " << catalog->python << ", " << catalog->packages.size()
            << " packages besides the standard library (no others can be installed: no network):\n";
  for (const auto& p : catalog->packages) {
    std::string modules;
    for (const auto& m : p.modules) modules += (modules.empty() ? "" : ", ") + m;
    std::cout << "  " << p.name << " " << p.version << (modules.empty() ? "" : "  (import " + modules + ")")
              << "\n";
  }
  return 0;
}

}  // namespace

void AddPackagesCommand(CLI::App& app, int& exit_status) {
  auto json = std::make_shared<bool>(false);
  CLI::App* packages = app.add_subcommand("packages", "List what the sandbox's Python can import");
  packages->footer(
      "Each installed distribution with its version and the modules it provides, as the sandbox's own\n"
      "interpreter reports them (the same list as GET /v1/packages). Exit status 0, or 70 when the\n"
      "sandbox could not be started.");
  packages->add_flag("--json", *json,
                     "Print the list as JSON ({python, packages: [{name, version, modules}]})");
  packages->callback([json, &exit_status] { exit_status = ListPackages(*json); });
}

}  // namespace execbox::cli
