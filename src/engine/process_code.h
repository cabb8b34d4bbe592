// Code run by a process of a session that runs what its stdin gives it (E2B's bash and
// javascript contexts), as Gate::RunProcessCode runs it: what the caller gives, and how the
// execution ended. What the process makes of its input and how its output says an execution is
// over are the caller's (api/e2b/e2b_kernel_wire.h); admission, limits and the audit are the
// gate's.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "engine/session_processes.h"

namespace execbox::engine {

struct ProcessCode {
  int32_t pid = 0;
  std::string input;  // written to the process's stdin
  std::string code;   // what the audit records: the code as the caller sent it
  uint64_t from = 0;  // where this execution's output starts in the process's output
  // The caller's follower of the process (SessionProcesses::Follow), if it has one: nothing
  // the process writes is dropped before on_output has it.
  SessionProcesses::Follower* follower = nullptr;
  // Once the execution holds a running slot, before the input is written.
  std::function<void()> on_started;
  // Each piece of the process's stdout or stderr from `from` on, in order, at its offset in the
  // process's output; true once the execution's output is complete (the process runs on).
  std::function<bool(OutputStream stream, std::string_view data, uint64_t offset)> on_output;
};

enum class ProcessCodeEnd {
  kComplete,     // on_output said so
  kExited,       // the process ended first (its own exit, a signal, its sandbox's end)
  kTimedOut,     // past the session's wall time: the process was killed
  kOutputLimit,  // more than output_kill_factor × output_bytes written: the process was killed
  kShutdown,     // the server began shutting down: the process was killed
};

struct ProcessCodeRun {
  ProcessCodeEnd end = ProcessCodeEnd::kComplete;
  ProcessInfo info;  // the process as last read
  // For every end but kComplete: one sentence saying what ended the execution.
  std::string why;
};

}  // namespace execbox::engine
