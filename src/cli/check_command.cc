// The check runs inside the same jail as a run, in the agent's check mode: parsing hostile
// source with the host's interpreter would put the parser itself in front of the code.
#include "cli/check_command.h"

#include <iostream>

#include "cli/limit_options.h"
#include "cli/source.h"
#include "engine/gate.h"
#include "engine/result_json.h"

namespace execbox::cli {
namespace {

struct CheckArgs {
  std::string source;
  std::string code;
  std::string lint_profile = "permissive";  // --policy
  std::vector<std::string> analyzers;       // --analyzers pyflakes,flake8,bandit
  std::vector<std::string> lint_block;      // --lint-block F821,B602
  bool json = false;
};

nlohmann::json CheckJson(const engine::Result& r) {
  nlohmann::json full = engine::ToJson(r);
  nlohmann::json j = {{"status", full["status"]}, {"error", full["error"]}, {"findings", full["findings"]}};
  return j;
}

int Check(const CheckArgs& a) {
  auto source = ReadSource(a.source, a.code);
  if (!source) {
    std::cerr << "execbox check: " << source.error().message << "\n";
    return 2;
  }
  if (auto profile = runtime::LintProfile(a.lint_profile); !profile) {
    std::cerr << "execbox check: " << profile.error().message << "\n";
    return 2;
  }
  for (auto checked : {runtime::CheckAnalyzerNames(a.analyzers), runtime::CheckLintBlock(a.lint_block)}) {
    if (!checked) {
      std::cerr << "execbox check: " << checked.error().message << "\n";
      return 2;
    }
  }
  engine::ExecutionRequest request;
  runtime::PythonProgram& p = request.program;
  p.mode = runtime::Mode::kCheck;
  p.code = std::move(source->code);
  p.display_name = std::move(source->display_name);
  p.lint_profile = a.lint_profile;
  p.analyzers = a.analyzers;
  p.lint_block = a.lint_block;
  p.collect_files = false;
  const std::string name = p.display_name;
  auto engine = engine::Engine::Create({.warm = false});
  if (!engine) {
    std::cerr << "execbox check: " << engine.error().message << "\n";
    return 70;
  }
  engine::Gate gate(**engine, {.limits = CommandLineLimits(), .max_running = 1, .max_queue = 0});
  auto result = gate.Execute(LocalCaller(), std::move(request), {.transport = engine::Transport::kCli});
  if (!result) return ReportRefusal("check", result.error());
  if (a.json) {
    std::cout << engine::Dump(CheckJson(*result), 2) << std::endl;
  } else {
    for (const auto& f : result->findings) {
      std::cout << name << ":" << f.line << ":" << f.column << ": " << f.severity << " ["
                << (f.tool.empty() ? "" : f.tool + " ") << f.rule << "] " << f.message;
      if (!f.suggestion.empty()) std::cout << " — " << f.suggestion;
      std::cout << "\n";
    }
    if (result->error && result->status != engine::Status::kPolicyViolation) {
      for (const auto& line : result->error->traceback) std::cout << line << "\n";
    }
    if (result->status == engine::Status::kOk) std::cout << name << ": ok\n";
  }
  switch (result->status) {
    case engine::Status::kOk:
      return 0;
    case engine::Status::kSyntaxError:
    case engine::Status::kPolicyViolation:
      return 1;
    default:
      return engine::ProcessExitCode(*result);
  }
}

}  // namespace

void AddCheckCommand(CLI::App& app, int& exit_status) {
  auto args = std::make_shared<CheckArgs>();
  CLI::App* check = app.add_subcommand(
      "check", "Syntax check, policy lint and the seed's linters, without running the code");
  check->footer("Exit status: 0 clean, 1 syntax error or refused by the policy, 2 bad usage.");
  check->add_option("source", args->source, "Python file to check, or - for standard input");
  check->add_option("-c,--code", args->code, "Python code to check");
  check->add_option("--policy", args->lint_profile, "Lint profile: permissive or strict")
      ->default_str("permissive");
  check
      ->add_option(
          "--analyzers", args->analyzers,
          "The seed's linters to run too, inside the sandbox: pyflakes, flake8, bandit (comma-separated)")
      ->delimiter(',')
      ->allow_extra_args(false);
  check
      ->add_option(
          "--lint-block", args->lint_block,
          "Codes (or prefixes) of their findings that refuse the code, e.g. F821,B602 (comma-separated)")
      ->delimiter(',')
      ->allow_extra_args(false);
  check->add_flag("--json", args->json, "Print {status, error, findings} as JSON");
  check->callback([args, &exit_status] { exit_status = Check(*args); });
}

}  // namespace execbox::cli
