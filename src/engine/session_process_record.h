// Inside SessionProcesses (session_processes.cc, session_process_calls.cc): one process as the
// table keeps it, a start waiting for its answer, and the failures both files make.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/session_processes.h"

namespace execbox::engine {

inline std::unexpected<ProcessFailure> ProcessFailed(ProcessError kind, std::string message) {
  return std::unexpected(ProcessFailure{kind, std::move(message)});
}

inline std::unexpected<ProcessFailure> NoProcess(int32_t pid) {
  return ProcessFailed(ProcessError::kNotFound, "no process " + std::to_string(pid) + " in this session");
}

struct SessionProcesses::Record {
  explicit Record(size_t cap) : log(cap) {}
  int32_t pid = 0;
  const jail::InitLink* link = nullptr;  // the sandbox it runs in
  std::vector<std::string> argv;
  std::string command, tag;
  bool pty = false;
  uint16_t rows = 0, cols = 0;
  std::chrono::system_clock::time_point started;
  std::optional<std::chrono::system_clock::time_point> ended;
  std::optional<int> status;  // its wait status, when known
  bool running = true;
  std::shared_ptr<UniqueFd> input;       // the stdin pipe's end, or the pty's master
  std::shared_ptr<UniqueFd> pty_master;  // for resizes
  std::vector<std::pair<std::shared_ptr<UniqueFd>, OutputStream>> outputs;
  std::vector<ProcessPoller::Token> watches;
  std::mutex write_mu;  // one write at a time: two requests' input never interleaves
  OutputLog log;
  std::map<uint64_t, uint64_t> followers;  // Follower id -> the offset it has read up to
  bool held = false;                       // its pipes are not read (Hold): a follower lags
  // Output from here on is kept for a follower that has not read it.
  uint64_t keep_from() const {
    uint64_t least = UINT64_MAX;
    for (const auto& [id, offset] : followers) least = std::min(least, offset);
    return least;
  }
};

struct SessionProcesses::Pending {
  ProcessSpec spec;
  std::vector<std::string> argv;
  std::shared_ptr<UniqueFd> out, err, in;  // the host's ends of the pipes
  bool answered = false;
  bool follow = false;  // a follower from the first byte, for Start's caller
  std::unique_ptr<SessionProcesses::Follower> follower;
  std::optional<ProcessInfo> info;
  ProcessFailure failure{ProcessError::kInternal, ""};
};

}  // namespace execbox::engine
