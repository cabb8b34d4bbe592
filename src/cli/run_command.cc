#include "cli/run_command.h"

#include <unistd.h>

#include <iostream>

#include "base/io.h"
#include "cli/keep_files.h"
#include "cli/limit_options.h"
#include "cli/source.h"
#include "engine/engine.h"
#include "engine/result_json.h"

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
  std::string policy = "permissive";
};

const char* const kExitCodes =
    "Exit status: the code's own exit status when it ran to the end (0 ok, 1 uncaught exception or\n"
    "syntax error, n for sys.exit(n)); 124 timeout (wall or CPU); 137 memory limit; 125 output limit;\n"
    "128+N killed by signal N; 70 internal error (the jail could not be built); 2 bad usage.";

Expected<runtime::PythonProgram> MakeProgram(const RunArgs& a) {
  runtime::PythonProgram p;
  auto source = ReadSource(a.source, a.code);
  if (!source) return std::unexpected(source.error());
  p.code = std::move(source->code);
  p.display_name = std::move(source->display_name);
  if (auto profile = runtime::PolicyProfile(a.policy); !profile) return std::unexpected(profile.error());
  p.policy = a.policy;
  if (!a.stdin_file.empty()) {
    auto in = ReadFile(a.stdin_file);
    if (!in) return std::unexpected(in.error());
    p.stdin_data = std::move(*in);
  }
  if (auto s = ApplyLimits(a.limits, p.limits); !s) return std::unexpected(s.error());
  if (auto s = jail::ValidateLimits(p.limits); !s) return std::unexpected(s.error());
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
  return p;
}

// A bundle for a terminal: its text/plain, or a note for what a terminal cannot show.
std::string ForTerminal(const engine::MimeBundle& bundle) {
  const auto& data = bundle["data"];
  for (const char* image : {"image/png", "image/jpeg", "image/svg+xml"}) {
    if (!data.contains(image)) continue;
    std::string note = std::string("[") + image;
    const auto& meta = bundle["metadata"];
    if (meta.contains("width") && meta.contains("height")) {
      note += " " + meta["width"].dump() + "x" + meta["height"].dump();
    }
    return note + "; use --json to get it]";
  }
  return data.contains("text/plain") && data["text/plain"].is_string() ? data["text/plain"].get<std::string>()
                                                                       : "";
}

void PrintRichOutput(const engine::Result& r) {
  std::string text;
  for (const auto& d : r.display) text += ForTerminal(d) + "\n";
  if (r.result) text += ForTerminal(*r.result) + "\n";
  (void)WriteAll(STDOUT_FILENO, text);
}

void PrintFindings(const engine::Result& r) {
  for (const auto& f : r.findings) {
    std::cerr << "execbox: policy " << f.severity << " [" << f.rule << "] line " << f.line << ":" << f.column
              << ": " << f.message;
    if (!f.suggestion.empty()) std::cerr << " (" << f.suggestion << ")";
    std::cerr << "\n";
  }
}

int Run(const RunArgs& a) {
  auto program = MakeProgram(a);
  if (!program) {
    std::cerr << "execbox run: " << program.error().message << "\n";
    return 2;
  }
  engine::ExecuteOptions options;
  if (!a.json) {
    options.on_output = [](jail::Stream s, std::string_view data) {
      (void)WriteAll(s == jail::Stream::kStdout ? STDOUT_FILENO : STDERR_FILENO, data);
    };
  }
  auto result = engine::Execute(*program, options);
  if (!result) {
    std::cerr << "execbox run: " << result.error().message << "\n";
    return 70;
  }
  if (!a.keep_files.empty()) {
    if (auto s = WriteFilesUnder(a.keep_files, result->files); !s) {
      std::cerr << "execbox run: --keep-files: " << s.error().message << "\n";
    }
  }
  if (a.json) {
    std::cout << engine::Dump(engine::ToJson(*result), 2) << std::endl;
    return engine::ProcessExitCode(*result);
  }
  PrintRichOutput(*result);
  PrintFindings(*result);
  if (result->status != engine::Status::kOk && result->status != engine::Status::kError &&
      result->status != engine::Status::kSyntaxError && result->error) {
    // The code's own traceback is already on stderr; limits are explained here.
    std::cerr << "execbox: " << result->error->ename << ": " << result->error->evalue << "\n";
  }
  return engine::ProcessExitCode(*result);
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
  run->add_option("--disk", args->limits.disk, "Size of the work dir (and the largest file)")
      ->default_str("64M");
  run->add_option("--stdin", args->stdin_file, "File given to the code as standard input");
  run->add_option("--file", args->files, "NAME=PATH: copy PATH into the work dir as NAME (repeatable)");
  run->add_option("--keep-files", args->keep_files, "Copy the files the code wrote into this directory");
  AddPolicyOption(*run, args->policy);
  run->callback([args, &exit_status] { exit_status = Run(*args); });
}

}  // namespace execbox::cli
