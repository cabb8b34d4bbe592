// The cold path: one program in a jail made for it alone (no zygote, no pool). What `execbox
// run --server never` uses, what the engine falls back to without warm workers, and how
// package sets are built.
#pragma once

#include "base/error.h"
#include "engine/execute_options.h"
#include "engine/result.h"
#include "runtime/python_program.h"

namespace execbox::engine {

// Runs one program to completion. Everything that happens to the code is in the Result
// (status internal_error included); an Error means the request itself was bad.
Expected<Result> ExecuteCold(const runtime::PythonProgram& program, const ExecuteOptions& options = {});

}  // namespace execbox::engine
