// The one result shape every front end returns (docs/design.md, "Result"), with Jupyter's names.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/net_policy.h"
#include "jail/sandbox.h"

namespace execbox::engine {

enum class Status {
  kOk,
  kError,
  kSyntaxError,
  kPolicyViolation,
  kTimeout,
  kMemoryLimit,
  kOutputLimit,
  kKilled,
  kInternalError
};
const char* StatusName(Status s);

struct ErrorInfo {
  std::string ename;
  std::string evalue;
  std::vector<std::string> traceback;
  // For syntax errors: where, as CPython reports it (line and column 1-based).
  std::optional<int64_t> line, column;
  std::optional<std::string> text;
};

// A Jupyter MIME bundle: {"data": {mime: value}, "metadata": {...}}; text/plain always present.
using MimeBundle = nlohmann::json;

struct StreamEvent {
  std::string name;  // "stdout" or "stderr"
  std::string text;
};

// One policy-lint finding.
struct Finding {
  std::string rule;
  std::string severity;  // "error" (refused) or "warning"
  // A finding of the seed's linters (PythonProgram::analyzers): "pyflakes", "flake8" or
  // "bandit", and its code ("F821", "B602"; "unavailable" when the analyzer could not run), the
  // same as `rule`. Both empty for the policy lint's own findings.
  std::string tool;
  std::string code;
  int64_t line = 0;
  int64_t column = 0;
  std::string message;
  std::string suggestion;
};

struct StreamText {
  std::string text;  // head and tail, joined by a marker when bytes were dropped
  bool truncated = false;
  uint64_t total_bytes = 0;
  uint64_t dropped_bytes = 0;
};

struct OutputFile {
  std::string name;
  std::string mime_type;
  std::string content;
};

// A global (or a work-dir entry) that a snapshot of a session could not hold, or a restore
// could not bring back: its name, its type, and why.
struct LeftOut {
  std::string name;
  std::string type;
  std::string reason;
};

// Whether a session's Python state survived up to this reply (docs/design.md, "Result": a model is
// never told its variables exist when they don't).
struct SessionState {
  std::string id;
  uint64_t generation = 0;  // +1 every time the session restarts from a fresh state
  bool preserved = true;    // false: the state this code ran against (or left) is gone
  std::string lost_reason;  // "timeout", "memory_limit", "output_limit", "crash", ...
  // When lost: only the kernel restarted; the sandbox's files and the session's processes are
  // as they were.
  bool files_kept = false;
  // The state was restored from a snapshot after the server restarted (said once, in the first
  // reply after): what of it came back (`restored_note`) and what did not.
  bool restored = false;
  std::string restored_note;
  std::vector<LeftOut> not_restored;
};

// A distribution: in the sandbox's catalog (packages.h), or installed by an execution from the
// wheelhouse (Result::installed).
struct InstalledPackage {
  std::string name;
  std::string version;
  std::vector<std::string> modules;  // importable top-level names ("sklearn" for scikit-learn)
};

// What the guard (runtime::Guard) refused, as the sandbox's agent listed it: each event once
// with what the policy forbids; past the list's bound only counted.
struct GuardEvent {
  std::string event;   // the audit event: "open", "subprocess.Popen", "socket.__new__", ...
  std::string detail;  // what it was and why it is refused
};
struct GuardRecord {
  std::string mode = "audit";
  std::vector<GuardEvent> refused;
  uint64_t omitted = 0;
};

struct Result {
  Status status = Status::kOk;
  int exit_code = 0;
  int signal = 0;
  StreamText stdout_text, stderr_text;
  std::vector<StreamEvent> streams;  // Python-level writes in order (both streams interleaved)
  bool streams_truncated = false;
  std::optional<MimeBundle> result;  // the last expression's value
  std::vector<MimeBundle> display;   // display() calls and figures, in order
  std::optional<ErrorInfo> error;
  std::vector<Finding> findings;
  // What the request's `packages` installed from the wheelhouse before the code ran (each one
  // imported); empty when nothing was asked for or everything was there already.
  std::vector<InstalledPackage> installed;
  jail::Usage usage;
  jail::Limits limits;
  jail::Enforcement enforcement;
  jail::Layers layers;
  std::vector<OutputFile> files;
  std::vector<std::string> skipped_files;
  // "cold" (a fresh jail), "warm" (a pre-forked child of a zygote) or "session".
  std::string engine = "cold";
  std::optional<SessionState> session;
  // Every connection the code tried through the host's proxy; set only when the execution had
  // a network policy (without one there is no network and nothing to list).
  std::optional<NetRecord> network;
  // Set when the guard was in the interpreter that ran the code (said by the sandbox itself).
  std::optional<GuardRecord> guard;
};

// "SIGKILL" for 9; "signal N" where the C library has no name.
std::string SignalName(int sig);

// Exit status of `execbox run`, documented in --help.
int ProcessExitCode(const Result& r);

}  // namespace execbox::engine
