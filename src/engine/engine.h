// The engine: one entry point shared by the CLI and (later) the servers. Today each
// execution gets a cold jail; the warm pool and sessions come behind the same call.
#pragma once

#include <atomic>
#include <functional>
#include <string_view>

#include "base/error.h"
#include "engine/result.h"
#include "runtime/python_program.h"

namespace execbox::engine {

struct ExecuteOptions {
  // Live output as it arrives; may be empty.
  std::function<void(jail::Stream, std::string_view)> on_output;
  // Set from another thread to stop the execution (status killed, "cancelled"); may be null.
  const std::atomic<bool>* cancel = nullptr;
  // Called once the gate has given the execution its running slot, before it starts; may be empty.
  std::function<void()> on_started;
};

// Runs one program to completion. Everything that happens to the code is in the Result
// (status internal_error included); an Error means the request itself was bad.
Expected<Result> Execute(const runtime::PythonProgram& program, const ExecuteOptions& options = {});

// Turns what the jail saw (and the agent reported) into the Result; shared by every path.
Result AssembleResult(const runtime::PythonProgram& program, const jail::Limits& limits,
                      jail::Outcome& outcome);

}  // namespace execbox::engine
