#include "cli/run_command.h"

#include <unistd.h>

#include <iostream>

#include "base/io.h"
#include "cli/keep_files.h"
#include "cli/limit_options.h"
#include "cli/local_server.h"
#include "cli/source.h"
#include "engine/gate.h"
#include "engine/result_json.h"
#include "engine/result_text.h"

namespace execbox::cli {
namespace {

struct RunArgs {
  std::string source;  // FILE or "-"
  std::string code;    // -c
  bool json = false;
  LimitArgs limits;
  std::string stdin_file;
  std::vector<std::string> files;
  std::string keep_files;
  std::string lint_profile = "permissive";  // --policy
  std::string server = "auto";              // auto, always, never
  std::vector<std::string> allow_net;       // --allow-net
  std::vector<std::string> deny_net;        // --deny-net
  std::string guard = "off";                // --guard
};

const char* const kExitCodes =
    "Exit status: the code's own exit status when it ran to the end (0 ok, 1 uncaught exception or\n"
    "syntax error, n for sys.exit(n)); 124 timeout (wall or CPU); 137 memory limit; 125 output limit;\n"
    "128+N killed by signal N; 70 internal error (the jail could not be built); 2 bad usage.";

// The request for the gate; the work dir's size (resolved here too) caps the input files read.
Expected<engine::ExecutionRequest> MakeRequest(const RunArgs& a) {
  engine::ExecutionRequest request;
  runtime::PythonProgram& p = request.program;
  auto source = ReadSource(a.source, a.code);
  if (!source) return std::unexpected(source.error());
  p.code = std::move(source->code);
  p.display_name = std::move(source->display_name);
  if (auto profile = runtime::LintProfile(a.lint_profile); !profile) return std::unexpected(profile.error());
  p.lint_profile = a.lint_profile;
  p.guard = *runtime::GuardNamed(a.guard);
  if (!a.stdin_file.empty()) {
    auto in = ReadFile(a.stdin_file);
    if (!in) return std::unexpected(in.error());
    p.stdin_data = std::move(*in);
  }
  auto overrides = LimitOverridesOf(a.limits);
  if (!overrides) return std::unexpected(overrides.error());
  auto limits = engine::ApplyLimitOverrides(CommandLineLimits(), jail::Limits{}, *overrides);
  if (!limits) return Fail(limits.error().detail);
  request.limits = std::move(*overrides);
  p.limits = *limits;
  // Each input is read with the room left in the work dir as its cap, so a file that cannot
  // fit is refused before it is held in memory.
  uint64_t room = p.limits.work_dir_bytes;
  for (const auto& spec : a.files) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos) return Fail("--file wants NAME=PATH, got '" + spec + "'");
    if (auto valid = jail::ValidateRelativeName(spec.substr(0, eq)); !valid) {
      return Fail("--file " + spec + ": " + valid.error().message);
    }
    auto content = ReadFile(spec.substr(eq + 1), room);
    if (!content) {
      return Fail("--file " + spec + ": " + content.error().message + " (the work dir holds " +
                  std::to_string(p.limits.work_dir_bytes) + " bytes in all; see --disk)");
    }
    room -= content->size();
    p.inputs.push_back({spec.substr(0, eq), std::move(*content)});
  }
  p.collect_files = !a.keep_files.empty() || a.json;
  if (!a.allow_net.empty() || !a.deny_net.empty()) {
    auto network = engine::ParseNetPolicy(a.allow_net, a.deny_net);
    if (!network) return Fail("--allow-net/--deny-net: " + network.error().message);
    request.network = std::move(*network);
  }
  return request;
}

// What follows the code's own output, whichever engine ran it; the exit status.
int Finish(const RunArgs& a, engine::Result& result, const nlohmann::json& json) {
  if (!a.keep_files.empty()) {
    if (auto s = WriteFilesUnder(a.keep_files, result.files); !s) {
      std::cerr << "execbox run: --keep-files: " << s.error().message << "\n";
    }
  }
  if (a.json) {
    std::cout << engine::Dump(json, 2) << std::endl;
    return engine::ProcessExitCode(result);
  }
  // The code's output and traceback streamed live; the rest of the one text rendering follows.
  for (const auto& part : engine::RenderText(result, {.streams = false})) {
    (void)WriteAll(part.to_stderr ? STDERR_FILENO : STDOUT_FILENO, part.text + "\n");
  }
  return engine::ProcessExitCode(result);
}

int Run(const RunArgs& a) {
  auto request = MakeRequest(a);
  if (!request) {
    std::cerr << "execbox run: " << request.error().message << "\n";
    return 2;
  }
  if (a.server != "never") {
    ServerAttempt attempt = RunOnLocalServer(*request, !a.json);
    if (attempt.result) {
      // A server collects files always; a run that did not ask for them shows none.
      if (!request->program.collect_files) {
        attempt.result->files.clear();
        attempt.result->skipped_files.clear();
      }
      return Finish(a, *attempt.result, attempt.json);
    }
    if (attempt.output_started || a.server == "always") {
      std::cerr << "execbox run: " << attempt.why_not << "\n";
      return attempt.http_status >= 400 && attempt.http_status < 500 ? 2 : 70;
    }
  }
  // A cold jail of our own: nothing to keep warm for one execution.
  auto engine = engine::Engine::Create({.warm = false});
  if (!engine) {
    std::cerr << "execbox run: " << engine.error().message << "\n";
    return 70;
  }
  // The command line's own policy is its bound: whoever runs `execbox run` is the host's user.
  engine::NetPolicy bound = request->network.value_or(engine::NetPolicy{});
  engine::Gate gate(**engine,
                    {.limits = CommandLineLimits(), .max_running = 1, .max_queue = 0, .network = std::move(bound)});
  engine::ExecuteOptions options;
  if (!a.json) {
    options.on_output = [](jail::Stream s, std::string_view data) {
      (void)WriteAll(s == jail::Stream::kStdout ? STDOUT_FILENO : STDERR_FILENO, data);
    };
  }
  auto result =
      gate.Execute(LocalCaller(), std::move(*request), {.transport = engine::Transport::kCli}, options);
  if (!result) return ReportRefusal("run", result.error());
  return Finish(a, *result, engine::ToJson(*result));
}

}  // namespace

void AddRunCommand(CLI::App& app, int& exit_status) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* run = app.add_subcommand("run", "Run Python code in a fresh sandbox");
  run->footer(kExitCodes);
  run->add_option("source", args->source, "Python file to run, or - for standard input");
  run->add_option("-c,--code", args->code, "Python code to run");
  run->add_flag("--json", args->json, "Print one JSON result instead of streaming output");
  AddLimitOptions(*run, args->limits);
  run->add_option("--stdin", args->stdin_file, "File given to the code as standard input");
  run->add_option("--file", args->files, "NAME=PATH: copy PATH into the work dir as NAME (repeatable)");
  run->add_option("--keep-files", args->keep_files, "Copy the files the code wrote into this directory");
  AddLintProfileOption(*run, args->lint_profile);
  run->add_option("--allow-net", args->allow_net,
                  "HOST: let the code reach HOST through the host's proxy (repeatable): a name, *.suffix,\n"
                  "an IP or CIDR, each optionally :PORT. The code sees HTTP_PROXY/HTTPS_PROXY/ALL_PROXY;\n"
                  "loopback and private addresses only by an IP/CIDR entry; every attempt is listed.\n"
                  "Default: no network at all (docs/security.md, \"Network\")");
  run->add_option("--guard", args->guard,
                  "audit: audit hooks in the interpreter refuse what the sandbox forbids (writing outside\n"
                  "the work dir, /tmp and /dev/shm; the network; programs; native libraries from outside\n"
                  "the interpreter's), as PermissionError, listed under the result's guard")
      ->check(CLI::IsMember({"off", "audit"}))
      ->default_str("off");
  run->add_option("--deny-net", args->deny_net, "HOST: refuse HOST even where --allow-net matches (repeatable)");
  run->add_option("--server", args->server,
                  "auto: run on a local `execbox serve --unix` when one answers (EXECBOX_SOCKET, else\n"
                  "$XDG_RUNTIME_DIR/execbox/execbox.sock, then /run/execbox/execbox.sock) and takes the\n"
                  "request, else in a cold jail; always: only there; never: always cold")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->default_str("auto");
  run->callback([args, &exit_status] { exit_status = Run(*args); });
}

}  // namespace execbox::cli
