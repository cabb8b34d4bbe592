#include "engine/cold_execution.h"

#include "engine/result_assembly.h"

namespace execbox::engine {

Expected<Result> ExecuteCold(const runtime::PythonProgram& program, const ExecuteOptions& options) {
  auto made = runtime::MakePolicy(program);
  if (!made) return std::unexpected(made.error());
  const jail::Policy& policy = *made;
  jail::RunHooks hooks{.on_output = options.on_output, .cancel = options.cancel};
  auto outcome = jail::Run(policy, hooks);
  if (!outcome) return std::unexpected(outcome.error());
  return AssembleResult(program, policy.limits, *outcome);
}

}  // namespace execbox::engine
