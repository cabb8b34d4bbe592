#include "engine/engine.h"

#include <csignal>
#include <cstring>

#include <nlohmann/json.hpp>

namespace execbox::engine {
namespace {

constexpr std::string_view kTruncationMarker = "\n[... output truncated by execbox ...]\n";

StreamText ToStream(const jail::Capture& c) {
  return {.text = c.Text(kTruncationMarker),
          .truncated = c.truncated(),
          .total_bytes = c.total_bytes(),
          .dropped_bytes = c.dropped_bytes()};
}

std::string Seconds(std::chrono::milliseconds ms) {
  auto s = ms.count() / 1000.0;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// The agent's report is written by code that runs in the sandbox: parse it defensively.
std::optional<ErrorInfo> ParseReportError(const std::string& report) {
  if (report.empty()) return std::nullopt;
  auto depth_cap = [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) { return depth <= 32; };
  nlohmann::json j = nlohmann::json::parse(report, depth_cap, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) return std::nullopt;
  const auto& e = j["error"];
  ErrorInfo info;
  if (e.contains("ename") && e["ename"].is_string()) info.ename = e["ename"].get<std::string>();
  if (e.contains("evalue") && e["evalue"].is_string()) info.evalue = e["evalue"].get<std::string>();
  if (e.contains("traceback") && e["traceback"].is_array()) {
    for (const auto& line : e["traceback"]) {
      if (line.is_string()) info.traceback.push_back(line.get<std::string>());
    }
  }
  if (info.ename.empty()) return std::nullopt;
  return info;
}

bool CompileFailed(const std::string& report) {
  return report.find("\"phase\": \"compile\"") != std::string::npos;
}

ErrorInfo LimitError(const char* ename, std::string evalue) {
  return {.ename = ename, .evalue = evalue, .traceback = {std::string(ename) + ": " + evalue}};
}

void Classify(const jail::Outcome& o, const jail::Limits& limits, Result& r) {
  using jail::Ending;
  r.exit_code = o.exit_code;
  r.signal = o.signal;
  switch (o.ending) {
    case Ending::kSetupFailed:
      r.status = Status::kInternalError;
      r.error = LimitError("InternalError", o.message);
      return;
    case Ending::kWallTimeout:
      r.status = Status::kTimeout;
      r.error = LimitError("TimeoutError", "execution exceeded the time limit of " + Seconds(limits.wall_time) + " s");
      return;
    case Ending::kCpuTimeout:
      r.status = Status::kTimeout;
      r.error = LimitError("TimeoutError", "execution exceeded the CPU-time limit of " + Seconds(limits.cpu_time) + " s");
      return;
    case Ending::kMemoryLimit:
      r.status = Status::kMemoryLimit;
      r.error = LimitError("MemoryError", "execution exceeded the memory limit of " +
                                              std::to_string(limits.memory_bytes >> 20) + " MiB and was killed");
      return;
    case Ending::kOutputLimit:
      r.status = Status::kOutputLimit;
      r.error = LimitError("OutputLimitError", "execution wrote more than " +
                                                   std::to_string((limits.output_bytes * limits.output_kill_factor) >> 20) +
                                                   " MiB to one stream and was stopped");
      return;
    case Ending::kSignaled:
      r.status = Status::kKilled;
      r.error = LimitError("Killed", "the process was killed by " + SignalName(o.signal));
      return;
    case Ending::kExited:
      break;
  }
  r.error = ParseReportError(o.report);
  if (r.error) {
    if (CompileFailed(o.report)) r.status = Status::kSyntaxError;
    else if (r.error->ename == "MemoryError") r.status = Status::kMemoryLimit;
    else r.status = Status::kError;
  } else if (o.exit_code != 0) {
    r.status = Status::kError;
    r.error = ErrorInfo{.ename = "SystemExit", .evalue = std::to_string(o.exit_code), .traceback = {}};
  } else {
    r.status = Status::kOk;
  }
}

// Input files come back only if the code changed them.
void KeepChangedFiles(const runtime::PythonProgram& program, jail::Outcome& o, Result& r) {
  for (auto& f : o.files) {
    bool unchanged = false;
    for (const auto& in : program.inputs) {
      if (in.name == f.name && in.content == f.content) unchanged = true;
    }
    if (!unchanged) r.files.push_back(std::move(f));
  }
  r.skipped_files = std::move(o.skipped_files);
}

}  // namespace

const char* StatusName(Status s) {
  switch (s) {
    case Status::kOk: return "ok";
    case Status::kError: return "error";
    case Status::kSyntaxError: return "syntax_error";
    case Status::kTimeout: return "timeout";
    case Status::kMemoryLimit: return "memory_limit";
    case Status::kOutputLimit: return "output_limit";
    case Status::kKilled: return "killed";
    case Status::kInternalError: return "internal_error";
  }
  return "internal_error";
}

int ProcessExitCode(const Result& r) {
  switch (r.status) {
    case Status::kOk: return 0;
    case Status::kError: return r.exit_code != 0 ? r.exit_code : 1;
    case Status::kSyntaxError: return 1;
    case Status::kTimeout: return 124;
    case Status::kMemoryLimit: return 137;
    case Status::kOutputLimit: return 125;
    case Status::kKilled: return 128 + r.signal;
    case Status::kInternalError: return 70;
  }
  return 70;
}

Expected<Result> Execute(const runtime::PythonProgram& program, const ExecuteOptions& options) {
  jail::Policy policy = runtime::MakePolicy(program);
  jail::RunHooks hooks{.on_output = options.on_output};
  auto outcome = jail::Run(policy, hooks);
  if (!outcome) return std::unexpected(outcome.error());
  Result r;
  r.limits = policy.limits;
  r.stdout_text = ToStream(outcome->stdout_capture);
  r.stderr_text = ToStream(outcome->stderr_capture);
  r.usage = outcome->usage;
  r.enforcement = outcome->enforcement;
  r.layers = outcome->layers;
  Classify(*outcome, policy.limits, r);
  KeepChangedFiles(program, *outcome, r);
  return r;
}

}  // namespace execbox::engine
