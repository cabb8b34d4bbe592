// The limit and policy options that `execbox run` and `execbox repl` share, made from the limit
// schema (engine/limit_schema.h): one option per row, its default in --help from the built-in
// defaults, its value checked by the gate like any other request's.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>

#include "base/error.h"
#include "engine/gate.h"

namespace execbox::cli {

// What was given on the command line, by limit name, as typed.
struct LimitArgs {
  std::map<std::string, std::string> given;
};

// One option per limit (--timeout, --cpu-time, --memory, --max-processes, --output-limit,
// --disk). Sizes take K/M/G suffixes (256M); times are seconds.
void AddLimitOptions(CLI::App& command, LimitArgs& args);
// --policy. The name is checked with runtime::LintProfile when the program is made: its error
// lists the profiles there are.
void AddLintProfileOption(CLI::App& command, std::string& profile);

// The overrides the options give, in the schema's units; an error names the option.
Expected<engine::LimitOverrides> LimitOverridesOf(const LimitArgs& args);

// What the command line may ask for: the built-in defaults, up to the schema's hard maxima
// (the user of the command is the operator of the machine).
engine::LimitsConfig CommandLineLimits();
// The local user, for the gate: one execution at a time, no rate.
engine::Caller LocalCaller();
// A refusal of the gate as a message for stderr, and the exit status it means (2 bad usage,
// 70 when the sandbox failed).
int ReportRefusal(const std::string& command, const engine::Refusal& refusal);

}  // namespace execbox::cli
