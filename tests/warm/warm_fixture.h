// What the warm suites share (warm_test.cc, session_copy_test.cc): one Engine for the whole
// binary (set up by warm_test.cc's environment), and fixtures for one-shot executions and
// for sessions of a named owner.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "engine/engine.h"
#include "engine/result_json.h"

namespace execbox::engine {

extern Engine* g_engine;  // null when the pool could not start (g_unavailable says why)
extern std::string g_unavailable;

class Warm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (g_engine == nullptr) {
      // Only acceptable where the host gives this user no cgroups (cgroup v1 as non-root):
      // warm children take their per-execution limits from cgroups. The VM stage (tests/vm)
      // gives the unprivileged user a delegated cgroup v2 group, where the pool must start.
      ASSERT_NE(::geteuid(), 0u) << "the warm pool must start as root: " << g_unavailable;
      ASSERT_EQ(std::getenv("EXECBOX_TEST_CGROUP"), nullptr)
          << "the warm pool must start in a delegated group: " << g_unavailable;
      ASSERT_NE(g_unavailable.find("cgroup"), std::string::npos) << g_unavailable;
      GTEST_SKIP() << "warm pool unavailable for this user: " << g_unavailable;
    }
  }

  static runtime::PythonProgram Program(const std::string& code) {
    runtime::PythonProgram p;
    p.code = code;
    p.limits.wall_time = std::chrono::seconds(20);
    return p;
  }

  static Result Run(const std::string& code, jail::Limits limits = Program("").limits) {
    auto p = Program(code);
    p.limits = limits;
    auto r = g_engine->Execute(p);
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
    if (r) {
      EXPECT_EQ(r->engine, "warm") << "fell back to the cold path";
    }
    return r ? std::move(*r) : Result{.status = Status::kInternalError};
  }

  static std::string Out(const Result& r) { return r.stdout_text.text; }
  static std::string Describe(const Result& r) { return Dump(ToJson(r)).substr(0, 3000); }
};

class OwnedSessions {
 public:
  OwnedSessions(Sessions& sessions, std::string owner) : s_(sessions), owner_(std::move(owner)) {}
  auto Create() { return s_.Create(owner_, g_engine->pool()->options().limits); }
  auto Execute(const std::string& id, const runtime::PythonProgram& p, const ExecuteOptions& o = {}) {
    return s_.Execute(owner_, id, p, o);
  }
  auto Info(const std::string& id) { return s_.Info(owner_, id); }
  auto List() { return s_.List(owner_); }
  auto Fork(const std::string& id) { return s_.Fork(owner_, id); }
  auto Undo(const std::string& id) { return s_.Undo(owner_, id); }
  auto Pause(const std::string& id) { return s_.Pause(owner_, id); }
  auto Resume(const std::string& id) { return s_.Resume(owner_, id); }
  auto Paused(const std::string& id) { return s_.Paused(owner_, id); }
  auto SetPauseAtExpiry(const std::string& id, bool pause) { return s_.SetPauseAtExpiry(owner_, id, pause); }
  auto SetExpiry(const std::string& id, std::optional<std::chrono::system_clock::time_point> at) {
    return s_.SetExpiry(owner_, id, at);
  }
  auto CreateWithCheckpoints() { return s_.Create(owner_, g_engine->pool()->options().limits, true); }
  auto CreateWithNetwork(const SessionNetwork& network) {
    return s_.Create(owner_, g_engine->pool()->options().limits, false, network);
  }
  auto Delete(const std::string& id) { return s_.Delete(owner_, id); }
  auto WriteFile(const std::string& id, const std::string& path, std::string content) {
    return s_.WriteFile(owner_, id, path, std::move(content));
  }
  auto ReadFile(const std::string& id, const std::string& path, uint64_t max_bytes) {
    return s_.ReadFile(owner_, id, path, max_bytes);
  }
  size_t size() { return s_.size(); }
  size_t SweepIdle() { return s_.SweepIdle(); }

 private:
  Sessions& s_;
  std::string owner_;
};

class WarmSessions : public Warm {
 protected:
  OwnedSessions S(const std::string& owner = "test") { return {*g_engine->sessions(), owner}; }
  Result Exec(const std::string& id, const std::string& code, jail::Limits limits = Program("").limits) {
    auto p = Program(code);
    p.limits = limits;
    auto r = S().Execute(id, p);
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
    return r ? std::move(*r) : Result{.status = Status::kInternalError};
  }
};

}  // namespace execbox::engine
