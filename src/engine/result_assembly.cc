#include "engine/result_assembly.h"

#include <csignal>
#include <cstring>
#include <nlohmann/json.hpp>

#include "engine/mime.h"
#include "engine/report.h"

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

ErrorInfo LimitError(const char* ename, std::string evalue) {
  return {.ename = ename, .evalue = evalue, .traceback = {std::string(ename) + ": " + evalue}};
}

// Whether a MemoryError is the sandbox's memory limit. Only where that limit is an rlimit
// (RLIMIT_DATA, no cgroups) does an allocation past it fail inside the code; with cgroups the
// limit is an OOM kill, read from the cgroup's events, and a MemoryError is the code's own (a
// `raise`, or an allocation larger than the host would ever give). Even in the rlimit tier, a
// `raise MemoryError` in the code is the code's: its innermost source line says so.
bool MemoryLimitError(const ErrorInfo& e, const jail::Enforcement& enforcement) {
  if (e.ename != "MemoryError" || enforcement.memory != "rlimit") return false;
  for (auto line = e.traceback.rbegin(); line != e.traceback.rend(); ++line) {
    std::string_view text(*line);
    if (!text.starts_with("    ")) continue;  // the innermost frame's source line ...
    text.remove_prefix(text.find_first_not_of(' '));
    if (text.find_first_not_of("^~") == std::string_view::npos) continue;  // ... not its carets
    return !(text == "raise" || text.starts_with("raise ") || text.starts_with("raise("));
  }
  return true;  // no source line (an allocation inside C code reported bare)
}

void Classify(const jail::Outcome& o, const AgentReport& report, const jail::Limits& limits, Result& r) {
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
      r.error = LimitError("TimeoutError",
                           "execution exceeded the time limit of " + Seconds(limits.wall_time) + " s");
      return;
    case Ending::kCpuTimeout:
      r.status = Status::kTimeout;
      r.error = LimitError("TimeoutError",
                           "execution exceeded the CPU-time limit of " + Seconds(limits.cpu_time) + " s");
      return;
    case Ending::kMemoryLimit:
      r.status = Status::kMemoryLimit;
      r.error =
          LimitError("MemoryError", "execution exceeded the memory limit of " +
                                        std::to_string(limits.memory_bytes >> 20) + " MiB and was killed");
      return;
    case Ending::kCancelled:
      r.status = Status::kKilled;
      r.error = LimitError("Cancelled", "the execution was cancelled by the client");
      return;
    case Ending::kOutputLimit:
      r.status = Status::kOutputLimit;
      r.error = LimitError("OutputLimitError",
                           "execution wrote more than " +
                               std::to_string((limits.output_bytes * limits.output_kill_factor) >> 20) +
                               " MiB to one stream and was stopped");
      return;
    case Ending::kForgedDone:
      r.status = Status::kError;
      r.error = LimitError("SandboxError",
                           "the code wrote to execbox's result channel (a forged end-of-execution marker) "
                           "and went on running; it was stopped");
      return;
    case Ending::kSignaled:
      r.status = Status::kKilled;
      r.error = LimitError("Killed", "the process was killed by " + SignalName(o.signal));
      return;
    case Ending::kExited:
      break;
  }
  r.error = report.error;
  if (r.error) {
    if (report.error_phase == "compile")
      r.status = Status::kSyntaxError;
    else if (report.error_phase == "policy")
      r.status = Status::kPolicyViolation;
    else if (report.error_phase == "internal")
      r.status = Status::kInternalError;  // the agent's own fault
    else if (MemoryLimitError(*r.error, o.enforcement))
      r.status = Status::kMemoryLimit;  // the rlimit tier
    else
      r.status = Status::kError;
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
    if (unchanged) continue;
    std::string mime = SniffMimeType(f.name, f.content);
    r.files.push_back(
        {.name = std::move(f.name), .mime_type = std::move(mime), .content = std::move(f.content)});
  }
  r.skipped_files = std::move(o.skipped_files);
}

}  // namespace

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

const char* StatusName(Status s) {
  switch (s) {
    case Status::kOk:
      return "ok";
    case Status::kError:
      return "error";
    case Status::kSyntaxError:
      return "syntax_error";
    case Status::kPolicyViolation:
      return "policy_violation";
    case Status::kTimeout:
      return "timeout";
    case Status::kMemoryLimit:
      return "memory_limit";
    case Status::kOutputLimit:
      return "output_limit";
    case Status::kKilled:
      return "killed";
    case Status::kInternalError:
      return "internal_error";
  }
  return "internal_error";
}

int ProcessExitCode(const Result& r) {
  switch (r.status) {
    case Status::kOk:
      return 0;
    case Status::kError:
      return r.exit_code != 0 ? r.exit_code : 1;
    case Status::kSyntaxError:
      return 1;
    case Status::kPolicyViolation:
      return 1;
    case Status::kTimeout:
      return 124;
    case Status::kMemoryLimit:
      return 137;
    case Status::kOutputLimit:
      return 125;
    case Status::kKilled:
      return 128 + r.signal;
    case Status::kInternalError:
      return 70;
  }
  return 70;
}

Result AssembleResult(const runtime::PythonProgram& program, const jail::Limits& limits,
                      jail::Outcome& outcome) {
  Result r;
  r.limits = limits;
  r.stdout_text = ToStream(outcome.stdout_capture);
  r.stderr_text = ToStream(outcome.stderr_capture);
  r.usage = outcome.usage;
  r.enforcement = outcome.enforcement;
  r.layers = outcome.layers;
  AgentReport report = ParseReport(outcome.report);
  if (outcome.ended_by_report && report.exit_code) outcome.exit_code = *report.exit_code;
  r.streams = std::move(report.streams);
  r.streams_truncated = report.streams_truncated || outcome.report_truncated;
  r.display = std::move(report.display);
  r.result = std::move(report.result);
  r.findings = std::move(report.findings);
  r.installed = std::move(report.installed);
  // The proxy's record, where there is one, is set by the caller over this.
  r.network = std::move(report.network_attempts);
  r.guard = std::move(report.guard);
  // A guarded run says so whatever its report says: the code may have hidden the agent's event
  // (or never reached the guard: a syntax error, a kill), and the host asked for the guard.
  if (!r.guard && program.guard == runtime::Guard::kAudit && program.mode == runtime::Mode::kRun)
    r.guard = GuardRecord{};
  Classify(outcome, report, limits, r);
  KeepChangedFiles(program, outcome, r);
  return r;
}
}  // namespace execbox::engine
