#include "engine/zygote_choice.h"

#include "runtime/import_scan.h"

namespace execbox::engine {

ZygoteKind ChooseZygote(const runtime::PythonProgram& program) {
  if (program.mode == runtime::Mode::kCheck) return ZygoteKind::kLean;  // compiled and checked, not run
  if (program.mode != runtime::Mode::kRun || !program.packages.empty() || !program.package_set.empty())
    return ZygoteKind::kFull;
  const runtime::ImportScan scan = runtime::ScanImports(program.code);
  if (scan.dynamic) return ZygoteKind::kFull;
  for (const auto& m : scan.modules) {
    if (!runtime::IsStandardModule(m)) return ZygoteKind::kFull;
  }
  return ZygoteKind::kLean;
}

}  // namespace execbox::engine
