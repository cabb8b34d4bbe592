// The Engine every front end shares: the warm pool (or the cold path) and the sessions.
#pragma once

#include <memory>

#include "engine/cold_execution.h"
#include "engine/package_sets.h"
#include "engine/pool.h"
#include "engine/sessions.h"

namespace execbox::engine {

struct EngineOptions {
  bool warm = true;  // false (--no-pool): every execution gets a cold jail; no sessions
  PoolOptions pool;
  SessionOptions sessions;
  // Where one-shot executions' package sets are kept (package_sets.h; a directory of this
  // server's own is made in it): DefaultPackageSetsParent() for a server, "" for none.
  std::string package_sets_parent;
};

class Engine {
 public:
  // With warm set, starts the pool and waits for the first warm worker.
  static Expected<std::unique_ptr<Engine>> Create(const EngineOptions& options);
  ~Engine();

  // One stateless execution: a prepared warm child when the pool has one (or can fork one),
  // the cold jail otherwise. Errors only for a bad request, as engine::Execute.
  Expected<Result> Execute(const runtime::PythonProgram& program, const ExecuteOptions& options = {});

  bool warm() const { return pool_ != nullptr; }
  Pool* pool() { return pool_.get(); }
  // Null when the engine is cold (sessions need warm workers).
  Sessions* sessions() { return sessions_.get(); }
  // This server's name among several (SessionOptions::instance), "" when alone.
  const std::string& instance() const { return instance_; }
  // The operator's wheelhouse (runtime::WorkerOptions::wheelhouse), "" for none.
  const std::string& wheelhouse() const { return wheelhouse_; }
  // One-shot executions' packages, installed once (package_sets.h): null without a wheelhouse,
  // warm workers or a cache dir to keep them in.
  PackageSets* package_sets() { return package_sets_.get(); }

 private:
  Engine() = default;
  std::string instance_;
  std::string wheelhouse_;
  std::unique_ptr<PackageSets> package_sets_;  // outlives the pool, whose zygotes bind its dir
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<Sessions> sessions_;  // declared after the pool: destroyed first
};

}  // namespace execbox::engine
