#include "engine/warm_engine.h"

#include <optional>

namespace execbox::engine {

Expected<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& options) {
  if (!options.sessions.instance.empty()) {
    if (auto s = ValidateInstanceName(options.sessions.instance); !s) return std::unexpected(s.error());
  }
  std::unique_ptr<Engine> e(new Engine());
  e->instance_ = options.sessions.instance;
  e->wheelhouse_ = options.pool.worker.wheelhouse;
  if (!options.warm) return e;
  auto pool = Pool::Start(options.pool);
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
    return engine::Execute(cold_program, options);
  };
  const runtime::PythonProgram& program = given;
  if (!pool_) return cold();
  auto request = runtime::MakeRequest(program, true);
  if (!request) return std::unexpected(request.error());
  jail::RunHooks hooks{.on_output = options.on_output, .cancel = options.cancel};
  // A child whose worker died an instant ago fails before the code starts (nothing reported):
  // another child, then the cold path, serves the request instead. Running the code again
  // is harmless: nothing of the first attempt outlived it.
  std::optional<jail::Outcome> outcome;
  for (int attempt = 0; attempt < 2 && !outcome; ++attempt) {
    auto child = pool_->Acquire(program.limits, false);
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
