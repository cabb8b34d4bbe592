#include "cli/doctor_command.h"

#include <iostream>

#include "jail/doctor.h"

namespace execbox::cli {

void AddDoctorCommand(CLI::App& app, int& exit_status) {
  CLI::App* doctor = app.add_subcommand("doctor",
                                        "Check, by trying each one, which isolation layers this host gives "
                                        "(exit 1 if a required one is missing)");
  doctor->callback([&exit_status] {
    bool usable = true;
    for (const auto& c : jail::Diagnose()) {
      const char* mark = c.ok ? "ok  " : (c.required ? "FAIL" : "warn");
      std::cout << mark << "  " << c.layer << ": " << c.detail << "\n";
      if (!c.ok) std::cout << "      fix: " << c.fix << "\n";
      if (!c.ok && c.required) usable = false;
    }
    std::cout << (usable ? "execbox can run on this host\n" : "execbox cannot run on this host as it is\n");
    exit_status = usable ? 0 : 1;
  });
}

}  // namespace execbox::cli
