// Which zygote serves a one-shot execution: the smallest whose preloads cover what the code
// imports (SOCK, USENIX ATC'18). The rule lives here and only here; Engine::Execute asks it.
#pragma once

#include "engine/pool.h"
#include "runtime/python_program.h"

namespace execbox::engine {

// kLean when the code imports only standard library modules (runtime::ScanImports), names no
// dynamic import, and asks for no packages (or is only checked, not run); kFull otherwise. Either answer runs
// the code correctly: a lean child imports anything else at run time, only slower than a full child that has
// it preloaded.
ZygoteKind ChooseZygote(const runtime::PythonProgram& program);

}  // namespace execbox::engine
