// The one result shape every front end returns (DESIGN.md), with Jupyter's names.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "jail/sandbox.h"

namespace execbox::engine {

enum class Status { kOk, kError, kSyntaxError, kTimeout, kMemoryLimit, kOutputLimit, kKilled, kInternalError };
const char* StatusName(Status s);

struct ErrorInfo {
  std::string ename;
  std::string evalue;
  std::vector<std::string> traceback;
};

struct StreamText {
  std::string text;  // head and tail, joined by a marker when bytes were dropped
  bool truncated = false;
  uint64_t total_bytes = 0;
  uint64_t dropped_bytes = 0;
};

struct Result {
  Status status = Status::kOk;
  int exit_code = 0;
  int signal = 0;
  StreamText stdout_text, stderr_text;
  std::optional<ErrorInfo> error;
  jail::Usage usage;
  jail::Limits limits;
  jail::Enforcement enforcement;
  jail::Layers layers;
  std::vector<jail::CollectedFile> files;
  std::vector<std::string> skipped_files;
};

// Exit status of `execbox run`, documented in --help.
int ProcessExitCode(const Result& r);

}  // namespace execbox::engine
