// A session's contexts, per-execution env and cwd, and its operations besides Python (shell
// commands, directory listings, dropping a context; runtime/python_program.h, Mode), end to end
// on real warm children in real jails.
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/gate.h"
#include "warm/warm_fixture.h"

namespace execbox::engine {
namespace {

using runtime::Mode;

class SessionContext : public WarmSessions {
 protected:
  void SetUp() override {
    WarmSessions::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto s = S().Create();
    ASSERT_TRUE(s.has_value()) << s.error().message;
    id_ = s->id;
  }
  void TearDown() override {
    if (!id_.empty()) {
      EXPECT_TRUE(S().Delete(id_).has_value());
    }
  }

  static runtime::PythonProgram Op(Mode mode, const std::string& code, const std::string& context = "") {
    auto p = Program(code);
    p.mode = mode;
    p.context = context;
    return p;
  }
  Result Do(const runtime::PythonProgram& p, const ExecuteOptions& o = {}) {
    auto r = S().Execute(id_, p, o);
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
    return r ? std::move(*r) : Result{.status = Status::kInternalError};
  }
  // The text of the result of `code` run in `context`.
  std::string Value(const std::string& code, const std::string& context = "") {
    Result r = Do(Op(Mode::kRun, code, context));
    EXPECT_EQ(r.status, Status::kOk) << Describe(r);
    return r.result ? (*r.result)["data"].value("text/plain", "") : "";
  }
  static nlohmann::json Json(const Result& r) {
    return r.result ? (*r.result)["data"].value("application/json", nlohmann::json()) : nlohmann::json();
  }

  std::string id_;
};

TEST_F(SessionContext, ContextsKeepSeparateGlobalsButShareTheWorkDir) {
  EXPECT_EQ(Value("x = 'default'\nx"), "'default'");
  EXPECT_EQ(Value("x = 'a'\nopen('shared.txt', 'w').write('from a')\nx", "a"), "'a'");
  // A context is a real __main__: classes defined there pickle, tracebacks show its lines.
  EXPECT_EQ(
      Value("import pickle\nclass P:\n    pass\ntype(pickle.loads(pickle.dumps(P()))).__name__, __name__",
            "a"),
      "('P', '__main__')");
  EXPECT_EQ(Value("'x' in globals(), open('shared.txt').read()", "b"), "(False, 'from a')");
  EXPECT_EQ(Value("x"), "'default'");
  EXPECT_EQ(Value("x", "a"), "'a'");
  Result r = Do(Op(Mode::kRun, "def f():\n    return 1 / 0\nf()", "b"));
  ASSERT_TRUE(r.error.has_value()) << Describe(r);
  EXPECT_EQ(r.error->ename, "ZeroDivisionError");
  std::string tb;
  for (const auto& line : r.error->traceback) tb += line + "\n";
  EXPECT_NE(tb.find("return 1 / 0"), std::string::npos) << tb;
}

// Each context other than the default one is an interpreter process of its own (E2B's contexts
// are separate kernels): what one does to its interpreter is not another's, and its crash is its
// own. Its output, display items and files reach the execution as the default context's do.
TEST_F(SessionContext, EachOtherContextIsAnInterpreterOfItsOwn) {
  const std::string kernel = Value("import os\nos.environ['MARK'] = 'kernel'\nos.getpid()");
  // Made at its first execution as a copy of the kernel's interpreter, with the sandbox's own
  // environment, the work dir and empty globals.
  const std::string a = Value("import os\nos.getpid()", "a");
  const std::string b = Value("import os\nos.getpid()", "b");
  EXPECT_NE(a, kernel);
  EXPECT_NE(b, kernel);
  EXPECT_NE(a, b);
  EXPECT_EQ(Value("import os\nos.getpid(), repr(os.environ.get('MARK')), os.getcwd()", "a"),
            "(" + a + ", 'None', '/home/user')")
      << "the same process from one execution to the next";
  // From then on, what one does to its interpreter is no other's.
  EXPECT_EQ(
      Value("import json\njson.dumps = len\nos.environ['MARK'] = 'a'\nos.chdir('/tmp')\njson.dumps([1])",
            "a"),
      "1");
  EXPECT_EQ(Value("import json, os\njson.dumps([1]), repr(os.environ.get('MARK')), os.getcwd()", "b"),
            "('[1]', 'None', '/home/user')");
  EXPECT_EQ(Value("import json\njson.dumps([1]), os.environ['MARK']"), "('[1]', 'kernel')");
  // Output, a figure and a file, as in the default context.
  Result fig = Do(Op(Mode::kRun,
                     "import matplotlib.pyplot as plt\nprint('drawing')\nplt.plot([1, 2])\nplt.show()\n"
                     "open('/home/user/from_a.txt', 'w').write('a')\n'done'",
                     "a"));
  ASSERT_EQ(fig.status, Status::kOk) << Describe(fig);
  EXPECT_EQ(Out(fig), "drawing\n");
  ASSERT_EQ(fig.display.size(), 1u) << Describe(fig);
  EXPECT_TRUE(fig.display[0]["data"].contains("image/png")) << Describe(fig);
  EXPECT_EQ(Value("open('/home/user/from_a.txt').read()"), "'a'");
  // A crash ends that context's process only: the execution says so, the next one starts anew.
  Result crash = Do(Op(Mode::kRun, "import os\nprint('bye', flush=True)\nos._exit(7)", "a"));
  ASSERT_TRUE(crash.error.has_value()) << Describe(crash);
  EXPECT_EQ(crash.error->ename, "KernelEnded");
  EXPECT_NE(crash.error->evalue.find("status 7"), std::string::npos) << crash.error->evalue;
  EXPECT_EQ(crash.exit_code, 7);
  EXPECT_EQ(Out(crash), "bye\n");
  ASSERT_TRUE(crash.session.has_value());
  EXPECT_TRUE(crash.session->preserved) << Describe(crash);
  EXPECT_EQ(Value("'json' in globals(), 'MARK' in __import__('os').environ", "a"), "(False, False)");
  EXPECT_EQ(Value("import os\nos.getpid()", "b"), b);
  EXPECT_EQ(Value("import os\nos.environ['MARK']"), "'kernel'");
  // Dropping a context ends its process; the kernel's end (a timeout) ends them all.
  EXPECT_EQ(Json(Do(Op(Mode::kDropContext, "", "b"))), nlohmann::json({{"context", "b"}, {"dropped", true}}));
  EXPECT_NE(Value("import os\nos.getpid()", "b"), b);
  jail::Limits limits = Program("").limits;
  limits.wall_time = std::chrono::seconds(2);
  auto spin = Op(Mode::kRun, "while True:\n    pass", "a");
  spin.limits = limits;
  Result spun = Do(spin);
  EXPECT_EQ(spun.status, Status::kTimeout) << Describe(spun);
  EXPECT_EQ(Value("'x' in globals()", "b"), "False");
  EXPECT_EQ(Value("import os\n'MARK' in os.environ"), "False");
}

// Hostile: a context's code cuts its process off from the kernel (closes every descriptor above
// stdio, its channel among them). The execution ends saying so; the next one starts anew.
TEST_F(SessionContext, AContextThatClosesItsChannelEndsAloneAndStartsAgain) {
  EXPECT_EQ(Value("k = 1\nk"), "1");
  const std::string before = Value("import os\nos.getpid()", "a");
  Result cut = Do(Op(Mode::kRun, "import os, time\nos.closerange(3, 65536)\ntime.sleep(30)", "a"));
  ASSERT_TRUE(cut.error.has_value()) << Describe(cut);
  EXPECT_EQ(cut.error->ename, "KernelEnded") << Describe(cut);
  ASSERT_TRUE(cut.session.has_value());
  EXPECT_TRUE(cut.session->preserved) << Describe(cut);
  EXPECT_NE(Value("import os\nos.getpid()", "a"), before);
  EXPECT_EQ(Value("k"), "1");
}

TEST_F(SessionContext, EnvAppliesToOneExecutionOnly) {
  auto p = Op(Mode::kRun, "import os\nos.environ['EXECBOX_T'], os.environ['HOME']");
  p.env = {{"EXECBOX_T", "set"}, {"HOME", "/elsewhere"}};
  Result r = Do(p);
  ASSERT_EQ(r.status, Status::kOk) << Describe(r);
  EXPECT_EQ((*r.result)["data"].value("text/plain", ""), "('set', '/elsewhere')");
  EXPECT_EQ(Value("os.environ.get('EXECBOX_T'), os.environ['HOME']"), "(None, '/home/user')");
}

TEST_F(SessionContext, CwdAppliesToOneExecutionAndAMissingOneIsTheExecutionsError) {
  const std::string work = Value("import os\nos.makedirs('sub/deeper')\nos.getcwd()");
  ASSERT_FALSE(work.empty());
  const std::string base = work.substr(1, work.size() - 2);  // without the quotes
  auto p = Op(Mode::kRun, "os.getcwd(), open('here.txt', 'w').write('x')");
  p.cwd = "sub/deeper";
  Result r = Do(p);
  ASSERT_EQ(r.status, Status::kOk) << Describe(r);
  EXPECT_EQ((*r.result)["data"].value("text/plain", ""), "('" + base + "/sub/deeper', 1)");
  EXPECT_EQ(Value("os.getcwd(), os.path.exists('sub/deeper/here.txt')"), "('" + base + "', True)");

  p = Op(Mode::kRun, "print('ran')");
  p.cwd = "missing";
  r = Do(p);
  EXPECT_EQ(r.status, Status::kError) << Describe(r);
  ASSERT_TRUE(r.error.has_value()) << Describe(r);
  EXPECT_EQ(r.error->ename, "FileNotFoundError");
  EXPECT_NE(r.error->evalue.find("missing"), std::string::npos) << r.error->evalue;
  EXPECT_EQ(Out(r), "");
  ASSERT_TRUE(r.session.has_value());
  EXPECT_TRUE(r.session->preserved);
  EXPECT_EQ(Value("os.getcwd()"), work);
}

TEST_F(SessionContext, CommandStreamsItsOutputLiveAndReportsItsExitCode) {
  Do(Op(Mode::kRun, "open('listed.txt', 'w').write('hello')"));
  std::mutex mu;
  std::string live_out, live_err;
  ExecuteOptions o;
  o.on_output = [&](jail::Stream s, std::string_view data) {
    std::lock_guard lock(mu);
    (s == jail::Stream::kStdout ? live_out : live_err).append(data);
  };
  Result r = Do(Op(Mode::kCommand, "ls -la; echo err >&2; exit 3"), o);
  EXPECT_EQ(r.status, Status::kOk) << Describe(r);
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(Json(r), nlohmann::json({{"exit_code", 3}})) << Describe(r);
  EXPECT_EQ((*r.result)["data"].value("text/plain", ""), "exit 3");
  EXPECT_NE(Out(r).find("listed.txt"), std::string::npos) << Describe(r);
  EXPECT_EQ(r.stderr_text.text, "err\n");
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(live_out, Out(r));
    EXPECT_EQ(live_err, "err\n");
  }
  // With env and cwd, in its own process group, and a signal counted as a shell does.
  auto p = Op(Mode::kCommand, "pwd; echo \"$GREETING\"; test -x /bin/bash && echo bash; kill -TERM $$");
  p.env = {{"GREETING", "hi there"}};
  p.cwd = "/tmp";
  r = Do(p);
  EXPECT_EQ(Out(r), "/tmp\nhi there\nbash\n") << Describe(r);
  EXPECT_EQ(Json(r), nlohmann::json({{"exit_code", 143}})) << Describe(r);
  // The session's Python is as it was.
  EXPECT_EQ(Value("import os\nos.getcwd() == os.environ['HOME'], 'GREETING' in os.environ"), "(True, False)");
}

TEST_F(SessionContext, ACommandWithLargeOutput) {
  Result r = Do(Op(Mode::kCommand, "seq 1 100000; seq 1 1000 >&2"));
  EXPECT_EQ(r.status, Status::kOk) << Describe(r);
  EXPECT_EQ(Json(r), nlohmann::json({{"exit_code", 0}}));
  EXPECT_EQ(r.stdout_text.total_bytes, 588895u);
  EXPECT_FALSE(r.stdout_text.truncated);
  EXPECT_EQ(Out(r).substr(0, 8), "1\n2\n3\n4\n");
  EXPECT_EQ(Out(r).substr(Out(r).size() - 13), "99999\n100000\n");
  EXPECT_EQ(r.stderr_text.total_bytes, 3893u);
}

TEST_F(SessionContext, ListDirShowsFilesDirsAndSymlinksAndRefusesWhatIsMissing) {
  const std::string work = Value(
      "import os\nos.makedirs('sub/inner')\nopen('a.txt', 'w').write('hello')\n"
      "open('sub/b.bin', 'wb').write(bytes(10))\nos.chmod('a.txt', 0o640)\nos.symlink('sub', 'link')\n"
      "os.getcwd()");
  const std::string base = work.substr(1, work.size() - 2);
  Result r = Do(Op(Mode::kListDir, "."));
  ASSERT_EQ(r.status, Status::kOk) << Describe(r);
  nlohmann::json listing = Json(r);
  EXPECT_EQ(listing["path"], base);
  EXPECT_EQ(listing["truncated"], false);
  std::map<std::string, nlohmann::json> entries;
  for (const auto& e : listing["entries"]) entries[e["name"].get<std::string>()] = e;
  ASSERT_EQ(entries.size(), 3u) << listing.dump();
  const auto& a = entries["a.txt"];
  EXPECT_EQ(a["type"], "file");
  EXPECT_EQ(a["size"], 5);
  EXPECT_EQ(a["mode"], 0640);
  EXPECT_EQ(a["permissions"], "-rw-r-----");
  EXPECT_EQ(a["path"], base + "/a.txt");
  EXPECT_TRUE(a["modified"].is_number_float());
  EXPECT_EQ(a["owner"], "user") << a.dump();  // uid and gid 1000, by /etc/passwd's names
  EXPECT_EQ(a["group"], "user") << a.dump();
  EXPECT_FALSE(a.contains("symlink_target"));
  EXPECT_EQ(entries["sub"]["type"], "dir");
  EXPECT_EQ(entries["link"]["type"], "symlink");
  EXPECT_EQ(entries["link"]["symlink_target"], "sub");

  // Deeper, breadth first, never through the link; relative to the cwd.
  auto p = Op(Mode::kListDir, "");
  p.list_depth = 3;
  r = Do(p);
  std::vector<std::string> paths;
  listing = Json(r);
  for (const auto& e : listing["entries"]) paths.push_back(e["path"]);
  EXPECT_EQ(paths, (std::vector<std::string>{base + "/a.txt", base + "/link", base + "/sub",
                                             base + "/sub/b.bin", base + "/sub/inner"}))
      << Describe(r);
  p = Op(Mode::kListDir, "inner");
  p.cwd = "sub";
  r = Do(p);
  EXPECT_EQ(Json(r)["path"], base + "/sub/inner") << Describe(r);
  EXPECT_EQ(Json(r)["entries"].size(), 0u);

  // A listing has a cap, and says so; the host takes the whole (large) result line.
  p = Op(Mode::kListDir, "/usr");
  p.list_depth = 50;
  // 10,000 lstat()s and owner lookups: under emulation (make test-v2) with a busy host, more
  // than the 20 s the other cases get.
  p.limits.wall_time = p.limits.cpu_time = std::chrono::seconds(120);
  r = Do(p);
  ASSERT_EQ(r.status, Status::kOk) << Describe(r);
  EXPECT_EQ(Json(r)["truncated"], true);
  EXPECT_EQ(Json(r)["entries"].size(), 10000u);

  r = Do(Op(Mode::kListDir, "nope"));
  EXPECT_EQ(r.status, Status::kError) << Describe(r);
  ASSERT_TRUE(r.error.has_value()) << Describe(r);
  EXPECT_EQ(r.error->ename, "FileNotFoundError");
  EXPECT_NE(r.error->evalue.find("nope"), std::string::npos) << r.error->evalue;
  EXPECT_FALSE(r.result.has_value());
  r = Do(Op(Mode::kListDir, "a.txt"));
  ASSERT_TRUE(r.error.has_value()) << Describe(r);
  EXPECT_EQ(r.error->ename, "NotADirectoryError");
  ASSERT_TRUE(r.session.has_value());
  EXPECT_TRUE(r.session->preserved);
}

TEST_F(SessionContext, DropContextEmptiesThatContextOnly) {
  Value("y = 1");
  Value("y = 2", "a");
  Value("y = 3", "b");
  Result r = Do(Op(Mode::kDropContext, "", "a"));
  EXPECT_EQ(r.status, Status::kOk) << Describe(r);
  EXPECT_EQ((*r.result)["data"].value("text/plain", ""), "dropped");
  EXPECT_EQ(Json(r), nlohmann::json({{"context", "a"}, {"dropped", true}}));
  EXPECT_EQ(Value("'y' in globals()", "a"), "False");
  EXPECT_EQ(Value("y"), "1");
  EXPECT_EQ(Value("y", "b"), "3");
  r = Do(Op(Mode::kDropContext, ""));  // the default one
  EXPECT_EQ(Json(r), nlohmann::json({{"context", ""}, {"dropped", true}}));
  EXPECT_EQ(Value("'y' in globals()"), "False");
  EXPECT_EQ(Value("y", "b"), "3");
}

// The guard in a session (docs/security.md "The guard"): installed by the first guarded execution,
// it stays in the kernel for the session's life, the agent's own later programs included; the
// session's own loopback is not the network; and a one-shot warm child has it for its one run.
TEST_F(SessionContext, TheGuardStaysInTheKernelFromItsFirstGuardedExecution) {
  EXPECT_EQ(Value("import subprocess\nsubprocess.run(['/bin/true']).returncode"), "0");
  auto guarded = Op(Mode::kRun,
                    "import socket, subprocess\n"
                    "s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
                    "s.bind(('127.0.0.1', 0))\n"
                    "s.listen()\n"
                    "c = socket.create_connection(s.getsockname())\n"
                    "c.close(), s.close()\n"
                    "subprocess.run(['/bin/true'])\n");
  guarded.guard = runtime::Guard::kAudit;
  Result r = Do(guarded);
  ASSERT_TRUE(r.error.has_value()) << Describe(r);
  EXPECT_EQ(r.error->ename, "PermissionError") << Describe(r);
  EXPECT_NE(r.error->evalue.find("subprocess.Popen refused"), std::string::npos) << r.error->evalue;
  ASSERT_TRUE(r.guard.has_value()) << Describe(r);
  ASSERT_EQ(r.guard->refused.size(), 1u) << Describe(r);
  EXPECT_EQ(r.guard->refused[0].event, "subprocess.Popen");
  // A later execution that does not ask for it still has it, and says so.
  r = Do(Op(Mode::kRun, "import os\nos.system('true')"));
  ASSERT_TRUE(r.error.has_value()) << Describe(r);
  EXPECT_EQ(r.error->ename, "PermissionError") << Describe(r);
  ASSERT_TRUE(r.guard.has_value()) << Describe(r);
  EXPECT_EQ(r.guard->refused.at(0).event, "os.system");
  // The kernel's own shell command is refused like the code's (the same interpreter).
  r = Do(Op(Mode::kCommand, "echo no"));
  EXPECT_NE(Describe(r).find("subprocess.Popen refused"), std::string::npos) << Describe(r);
  EXPECT_EQ(Out(r), "");
  // The variables are as they were.
  EXPECT_EQ(Value("type(s).__name__"), "'socket'");
  // A one-shot warm child has it for its one execution.
  auto once = Program("import subprocess\nsubprocess.run(['/bin/true'])");
  once.guard = runtime::Guard::kAudit;
  auto one = g_engine->Execute(once);
  ASSERT_TRUE(one.has_value()) << one.error().message;
  ASSERT_TRUE(one->error.has_value()) << Describe(*one);
  EXPECT_EQ(one->error->ename, "PermissionError") << Describe(*one);
  EXPECT_EQ(one->engine, "warm");
  ASSERT_TRUE(one->guard.has_value());
  one = g_engine->Execute(Program("import subprocess\nsubprocess.run(['/bin/true']).returncode"));
  ASSERT_TRUE(one.has_value()) << one.error().message;
  EXPECT_EQ(one->status, Status::kOk) << Describe(*one);
  EXPECT_FALSE(one->guard.has_value());
}

// The modes besides Python are a session's: a one-shot child refuses them, as the cold path does.
TEST_F(Warm, SessionOnlyModesAreRefusedOutsideASession) {
  auto p = Program("echo no");
  p.mode = Mode::kCommand;
  auto r = g_engine->Execute(p);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->status, Status::kInternalError) << Describe(*r);
  ASSERT_TRUE(r->error.has_value()) << Describe(*r);
  EXPECT_NE(r->error->evalue.find("for a session only"), std::string::npos) << r->error->evalue;
  EXPECT_EQ(Out(*r), "");
  auto policy = runtime::MakePolicy(p);
  ASSERT_FALSE(policy.has_value());
  EXPECT_NE(policy.error().message.find("for a session only"), std::string::npos);
}

}  // namespace
}  // namespace execbox::engine

namespace execbox::engine {

// A session given a lifetime (E2B's sandbox timeout) ends at it, used or not; the gate holds the
// maximum, and a session-only mode never runs one-shot nor, for a shell command, under a lint
// profile that refuses anything.
TEST_F(WarmSessions, ALifetimeEndsTheSessionAndTheGateHoldsItsMaximum) {
  Gate gate(*g_engine, GateOptions{.limits = LimitsConfig{}});
  const Caller caller{.id = "lifetime"};
  auto info = gate.CreateSession(caller, {}, {});
  ASSERT_TRUE(info.has_value()) << info.error().detail;
  const auto most = g_engine->sessions()->max_lifetime();
  auto over = gate.SetSessionLifetime(caller, info->id, most + std::chrono::seconds(1), {});
  ASSERT_FALSE(over.has_value());
  EXPECT_EQ(over.error().type, "limit-exceeded");
  EXPECT_NE(over.error().detail.find("at most"), std::string::npos) << over.error().detail;
  EXPECT_EQ(gate.SetSessionLifetime(Caller{.id = "someone-else"}, info->id, std::chrono::seconds(5), {})
                .error()
                .type,
            "session-not-found");

  ASSERT_TRUE(gate.SetSessionLifetime(caller, info->id, std::chrono::seconds(3600), {}).has_value());
  auto kept = gate.Session(caller, info->id);
  ASSERT_TRUE(kept.has_value());
  ASSERT_TRUE(kept->expires.has_value());
  EXPECT_EQ(g_engine->sessions()->SweepIdle(), 0u);  // an hour is not over
  ASSERT_TRUE(gate.SetSessionLifetime(caller, info->id, std::chrono::seconds(0), {}).has_value());
  // The background sweep, woken by the change, may be the one that closes it.
  g_engine->sessions()->SweepIdle();
  EXPECT_FALSE(gate.Session(caller, info->id).has_value());

  ExecutionRequest command{.program = Program("echo hi"), .limits = {}, .session_id = std::nullopt};
  command.program.mode = runtime::Mode::kCommand;
  auto one_shot = gate.Admit(caller, command, {});
  ASSERT_FALSE(one_shot.has_value());
  EXPECT_EQ(one_shot.error().type, "session-required");
  auto strict = gate.CreateSession(caller, {}, {});
  ASSERT_TRUE(strict.has_value());
  command.session_id = strict->id;
  command.program.lint_profile = "strict";
  auto refused = gate.Admit(caller, command, {});
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().type, "policy-violation");
  ASSERT_TRUE(gate.CloseSession(caller, strict->id, {}).has_value());
}

}  // namespace execbox::engine

namespace execbox::engine {

// A module the sandbox lacks: Python's own error, and a note saying that nothing can be
// fetched and what is installed instead (runtime/execbox_agent/missing.py).
TEST_F(Warm, AMissingModuleSaysWhatIsInstalledInstead) {
  Result r = Run("import nmupy as np\n");
  ASSERT_EQ(r.status, Status::kError) << Describe(r);
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.error->ename, "ModuleNotFoundError");
  EXPECT_EQ(r.error->evalue, "No module named 'nmupy'");
  ASSERT_FALSE(r.error->traceback.empty());
  const std::string& note = r.error->traceback.back();
  EXPECT_NE(note.find("no module named 'nmupy' is installed in this sandbox"), std::string::npos) << note;
  EXPECT_NE(note.find("installed instead: numpy"), std::string::npos) << note;
}

}  // namespace execbox::engine
