// The resource-limit and policy options that `execbox run` and `execbox repl` share, so that
// both read them the same way and show the same defaults in --help.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "base/error.h"
#include "jail/policy.h"

namespace execbox::cli {

struct LimitArgs {
  double timeout = 0, cpu_time = 0;  // seconds; 0 keeps the default
  std::string memory, output_limit, disk;
  uint32_t max_processes = 0;
};

// --timeout, --cpu-time, --memory, --max-processes, --output-limit (not --disk: a caller that
// takes it adds it itself).
void AddLimitOptions(CLI::App& command, LimitArgs& args);
// --policy. The name is checked with runtime::PolicyProfile when the program is made: its error
// lists the profiles there are.
void AddPolicyOption(CLI::App& command, std::string& policy);

// Sets the limits that were given; the rest keep their defaults. Fails for a malformed size.
Status ApplyLimits(const LimitArgs& args, jail::Limits& limits);

}  // namespace execbox::cli
