// The two kinds of zygote (engine/pool.h): the lean one serves standard-library code, the full
// one the rest, and which one ran a program must not show in its result. Each program below
// runs on a child of each kind and the results are compared whole, less the usage figures.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/result_assembly.h"
#include "runtime/python_program.h"
#include "warm/warm_fixture.h"

namespace execbox::engine {
namespace {

class ZygoteKinds : public Warm {
 protected:
  // `code` on a child of `kind`, as Engine::Execute runs it; fails the test when the pool gave
  // a child of the other kind.
  static Result RunOn(ZygoteKind kind, const std::string& code, const std::string& stdin_data = "") {
    auto p = Program(code);
    // A lean child imports the scientific stack at run time: seconds here, far more under the
    // VM stage's emulated CPU. The limits must never be what tells the two results apart.
    p.limits.wall_time = std::chrono::seconds(300);
    p.limits.cpu_time = std::chrono::seconds(300);
    p.stdin_data = stdin_data;
    auto request = runtime::MakeRequest(p, true);
    EXPECT_TRUE(request.has_value());
    Pool& pool = *g_engine->pool();
    const PoolStats before = pool.Stats();
    auto child = pool.Acquire(p.limits, false, -1, kind);
    EXPECT_TRUE(child.has_value()) << (child ? "" : child.error().message);
    if (!child || !request) return Result{.status = Status::kInternalError};
    auto outcome = (*child)->Execute(*request, p.stdin_data, p.limits, {});
    pool.Retire(std::move(*child));
    const PoolStats after = pool.Stats();
    EXPECT_EQ(after.served_lean - before.served_lean, kind == ZygoteKind::kLean ? 1u : 0u);
    EXPECT_EQ(after.served_full - before.served_full, kind == ZygoteKind::kFull ? 1u : 0u);
    EXPECT_TRUE(outcome.has_value()) << (outcome ? "" : outcome.error().message);
    if (!outcome) return Result{.status = Status::kInternalError};
    return AssembleResult(p, p.limits, *outcome);
  }
  // What must be the same whichever zygote ran it: everything but the resources used, and the
  // note matplotlib writes where it finds no font list (a user with no writable cache dir gets
  // no seed, runtime/font_cache.h): a child that imports matplotlib at run time builds the list
  // and says so; a full zygote built it before forking. The same note a cold run prints there.
  static nlohmann::json Comparable(const Result& r) {
    nlohmann::json j = ToJson(r);
    j.erase("usage");
    static const std::string kFontNote = "Matplotlib is building the font cache; this may take a moment.\n";
    if (auto err = j.value("stderr", std::string()); err.find(kFontNote) != std::string::npos) {
      err.erase(err.find(kFontNote), kFontNote.size());
      j["stderr"] = err;
      j["stderr_bytes"] = j["stderr_bytes"].get<uint64_t>() - kFontNote.size();
      nlohmann::json streams = nlohmann::json::array();
      for (const auto& s : j["streams"]) {
        if (s.value("text", "") != kFontNote) streams.push_back(s);
      }
      j["streams"] = streams;
    }
    return j;
  }
  void SetUp() override {
    Warm::SetUp();
    if (g_engine != nullptr && g_engine->pool()->Stats().lean_workers == 0) {
      // The refill thread starts the lean worker after the first full one: wait for it.
      for (int i = 0; i < 3000 && g_engine->pool()->Stats().lean_workers == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      ASSERT_GT(g_engine->pool()->Stats().lean_workers, 0u) << "no lean worker started";
    }
  }
};

TEST_F(ZygoteKinds, TheLeanZygoteHasNoScientificStack) {
  const std::string code =
      "import sys\nprint(sorted(m for m in ('numpy', 'pandas', 'json') if m in sys.modules))";
  EXPECT_EQ(Out(RunOn(ZygoteKind::kLean, code)), "['json']\n");
  EXPECT_EQ(Out(RunOn(ZygoteKind::kFull, code)), "['json', 'numpy', 'pandas']\n");
}

TEST_F(ZygoteKinds, EitherZygoteGivesTheSameResult) {
  const std::vector<std::pair<std::string, std::string>> programs = {
      {"print('out')\nimport sys\nprint('err', file=sys.stderr)\n{'a': [1, 2]}", ""},
      {"def f(x):\n    return 1 / x\nf(0)", ""},
      {"print((1,)\nx = ", ""},
      {"import sys\nprint('bye')\nsys.exit(3)", ""},
      {"name = input()\nprint('hello', name)", "world\n"},
      {"import json, pathlib\npathlib.Path('out.json').write_text(json.dumps({'k': 1}))\n"
       "pathlib.Path('sub').mkdir()\nopen('sub/b.txt', 'w').write('b')",
       ""},
      // Code that imports beyond the standard library: preloaded on one, imported at run time
      // on the other.
      {"import numpy as np\nnp.arange(6).reshape(2, 3)", ""},
      {"import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})", ""},
      {"import matplotlib.pyplot as plt\nplt.plot([0, 1, 2], [1, 0, 1])\nplt.title('t')\nplt.show()", ""},
  };
  std::vector<Result> on_lean;
  for (const auto& [code, stdin_data] : programs) {
    Result lean = RunOn(ZygoteKind::kLean, code, stdin_data);
    Result full = RunOn(ZygoteKind::kFull, code, stdin_data);
    EXPECT_EQ(Comparable(lean), Comparable(full)) << code;
    on_lean.push_back(std::move(lean));
  }
  // And the results are what the programs do, not the same failure twice.
  EXPECT_EQ(on_lean[0].status, Status::kOk) << Describe(on_lean[0]);
  EXPECT_EQ(on_lean[1].status, Status::kError);
  EXPECT_EQ(on_lean[2].status, Status::kSyntaxError);
  EXPECT_EQ(Out(on_lean[4]), "hello world\n");
  EXPECT_EQ(on_lean[5].files.size(), 2u) << Describe(on_lean[5]);
  EXPECT_EQ(on_lean[7].status, Status::kOk) << Describe(on_lean[7]);
  ASSERT_EQ(on_lean[8].display.size(), 1u) << Describe(on_lean[8]);
  EXPECT_TRUE(on_lean[8].display[0]["data"].contains("image/png"));
}

TEST_F(ZygoteKinds, TheEngineRoutesByImports) {
  Pool& pool = *g_engine->pool();
  auto served = [&](const std::string& code) {
    const PoolStats before = pool.Stats();
    Result r = Run(code);
    EXPECT_EQ(r.status, Status::kOk) << Describe(r);
    const PoolStats after = pool.Stats();
    return std::make_pair(after.served_lean - before.served_lean, after.served_full - before.served_full);
  };
  using Served = std::pair<uint64_t, uint64_t>;  // lean, full
  EXPECT_EQ(served("import json\nprint(json.dumps([1]))"), Served(1, 0));
  EXPECT_EQ(served("import numpy\nprint(numpy.ones(2).sum())"), Served(0, 1));
  EXPECT_EQ(served("np = __import__('numpy')\nprint(np.ones(2).sum())"), Served(0, 1));
}

}  // namespace
}  // namespace execbox::engine
