#include "engine/engine.h"

#include <cstdio>
#include <optional>

#include "engine/result_assembly.h"
#include "engine/zygote_choice.h"

namespace execbox::engine {

Expected<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& options) {
  if (!options.sessions.instance.empty()) {
    if (auto s = ValidateInstanceName(options.sessions.instance); !s) return std::unexpected(s.error());
  }
  std::unique_ptr<Engine> e(new Engine());
  e->instance_ = options.sessions.instance;
  e->wheelhouse_ = options.pool.worker.wheelhouse;
  if (!options.warm) return e;
  PoolOptions pool_options = options.pool;
  if (!e->wheelhouse_.empty() && !options.package_sets_parent.empty()) {
    auto sets = PackageSets::Open(options.package_sets_parent, e->wheelhouse_);
    if (sets) {
      e->package_sets_ = std::move(*sets);
      pool_options.worker.package_sets = e->package_sets_->dir();
    } else {  // every execution with packages then installs them itself, as a session does
      std::fprintf(stderr, "execbox: one-shot packages are not kept between executions: %s\n",
                   sets.error().message.c_str());
    }
  }
  auto pool = Pool::Start(pool_options);
  if (!pool) return std::unexpected(pool.error());
  e->pool_ = std::move(*pool);
  e->sessions_ = std::make_unique<Sessions>(*e->pool_, options.sessions);
  if (auto opened = e->sessions_->Open(); !opened)
    return std::unexpected(Context("sessions", opened.error()));
  return e;
}

Engine::~Engine() {
  sessions_.reset();  // their children live in the pool's workers
  pool_.reset();
}

Expected<Result> Engine::Execute(const runtime::PythonProgram& given, const ExecuteOptions& options) {
  // The cold path binds the wheelhouse itself; warm children have it from their zygote.
  runtime::PythonProgram cold_program;
  auto cold = [&]() -> Expected<Result> {
    cold_program = given;
    cold_program.wheelhouse = wheelhouse_;
    return ExecuteCold(cold_program, options);
  };
  // Network goes through a proxy handed to a cold jail only (warm children have no egress yet).
  if (!pool_ || options.network != nullptr) return cold();
  // Packages come from a package set built once (or the execution installs them itself).
  runtime::PythonProgram with_set;
  std::optional<PackageSets::Lease> lease = package_sets_ != nullptr && !given.packages.empty()
                                                ? package_sets_->Acquire(given, options)
                                                : std::nullopt;
  if (lease) {
    with_set = given;
    with_set.package_set = lease->name();
  }
  const runtime::PythonProgram& program = lease ? with_set : given;
  auto request = runtime::MakeRequest(program, true);
  if (!request) return std::unexpected(request.error());
  jail::RunHooks hooks{.on_output = options.on_output,
                       .on_report = DisplayFeed(options),
                       .cancel = options.cancel,
                       .cpu_weight = options.cpu_weight};
  // A child whose worker died an instant ago fails before the code starts (nothing reported):
  // another child, then the cold path, serves the request instead. Running the code again
  // is harmless: nothing of the first attempt outlived it.
  std::optional<jail::Outcome> outcome;
  const ZygoteKind kind = pool_->has_lean() ? ChooseZygote(program) : ZygoteKind::kFull;
  for (int attempt = 0; attempt < 2 && !outcome; ++attempt) {
    auto child = pool_->Acquire(program.limits, false, -1, kind, options.light);
    if (!child) break;
    auto o = (*child)->Execute(*request, program.stdin_data, program.limits, hooks);
    pool_->Retire(std::move(*child));
    bool never_started = !o || (o->ending == jail::Ending::kSetupFailed && o->report.empty());
    if (!never_started) outcome = std::move(*o);
  }
  if (!outcome) return cold();
  Result r = AssembleResult(program, program.limits, *outcome);
  r.engine = "warm";
  if (!program.collect_files || program.mode != runtime::Mode::kRun) {
    r.files.clear();
    r.skipped_files.clear();
  }
  return r;
}

}  // namespace execbox::engine
