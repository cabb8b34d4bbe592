#include "engine/cold_execution.h"

#include "engine/egress_proxy.h"
#include "engine/result_assembly.h"

namespace execbox::engine {

Expected<Result> ExecuteCold(const runtime::PythonProgram& given, const ExecuteOptions& options) {
  // With a network policy, the host's proxy runs for the time of the jail and the jail gets
  // its connector (egress_proxy.h).
  std::unique_ptr<EgressProxy> proxy;
  runtime::PythonProgram with_egress;
  if (options.network != nullptr) {
    EgressLimits limits;
    if (options.max_connections != 0) limits.max_connections = options.max_connections;
    if (options.max_bytes != 0) limits.max_bytes = options.max_bytes;
    auto started = EgressProxy::Start(*options.network, limits, options.hosts);
    if (!started) return std::unexpected(Context("network proxy", started.error()));
    proxy = std::move(*started);
    with_egress = given;
    with_egress.egress = true;
  }
  const runtime::PythonProgram& program = proxy ? with_egress : given;
  auto made = runtime::MakePolicy(program);
  if (!made) return std::unexpected(made.error());
  jail::Policy& policy = *made;
  if (proxy) policy.egress_fd = proxy->sandbox_fd();
  jail::RunHooks hooks{.on_output = options.on_output,
                       .on_report = DisplayFeed(options),
                       .cancel = options.cancel,
                       .cpu_weight = options.cpu_weight};
  auto outcome = jail::Run(policy, hooks);
  if (!outcome) return std::unexpected(outcome.error());
  Result r = AssembleResult(program, policy.limits, *outcome);
  if (proxy) {
    proxy->CloseSandboxEnd();
    r.network = proxy->Finish();
  }
  return r;
}

}  // namespace execbox::engine
