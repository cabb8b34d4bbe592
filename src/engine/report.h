// The agent's report: JSON Lines events written to fd 3 inside the jail. It is produced by
// code that runs in the sandbox, so every field is type-checked and bounded here.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/result.h"

namespace execbox::engine {

struct AgentReport {
  std::vector<Finding> findings;
  std::vector<StreamEvent> streams;
  bool streams_truncated = false;
  size_t stream_bytes = 0;
  std::vector<MimeBundle> display;
  std::vector<InstalledPackage> installed;
  // Where the sandbox has no network: the destinations its code asked for, as the agent noted
  // them (netwatch.py); said by the sandbox, so listed as such and counted nowhere.
  std::optional<NetRecord> network_attempts;
  std::optional<MimeBundle> result;
  std::optional<ErrorInfo> error;
  std::string error_phase;  // "policy", "compile" or "run" when error is set
  std::optional<int> exit_code;
  uint32_t malformed_lines = 0;
};

AgentReport ParseReport(const std::string& jsonl);

}  // namespace execbox::engine
