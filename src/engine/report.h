// The agent's report: JSON Lines events written to fd 3 inside the jail. It is produced by
// code that runs in the sandbox, so every field is type-checked and bounded here.
#pragma once

#include <functional>
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
  std::optional<GuardRecord> guard;  // the guard's event (guard.py), when it was installed
  std::optional<MimeBundle> result;
  std::optional<ErrorInfo> error;
  std::string error_phase;  // "policy", "compile" or "run" when error is set
  std::optional<int> exit_code;
  uint32_t malformed_lines = 0;
};

AgentReport ParseReport(const std::string& jsonl);

// The report's display items as the report arrives (ExecuteOptions::on_display): fed its bytes
// in order, it calls `on_display` for each display event as its line completes, parsed as
// ParseReport parses it, so the items given are the first of the Result's `display`, in order.
class DisplayFollower {
 public:
  explicit DisplayFollower(std::function<void(const MimeBundle&)> on_display)
      : on_display_(std::move(on_display)) {}
  void Feed(std::string_view bytes);

 private:
  std::function<void(const MimeBundle&)> on_display_;
  std::string pending_;  // an unfinished line
  size_t given_ = 0;
};

}  // namespace execbox::engine
