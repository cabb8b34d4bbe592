// Turns what the jail saw (and the agent reported) into the Result: one assembly shared by the
// cold path, warm children, sessions and state copies, so a status means the same on each.
#pragma once

#include "engine/result.h"
#include "jail/sandbox.h"
#include "runtime/python_program.h"

namespace execbox::engine {

Result AssembleResult(const runtime::PythonProgram& program, const jail::Limits& limits,
                      jail::Outcome& outcome);

}  // namespace execbox::engine
