// The warm engine end to end: a real pool of zygote workers in real jails on the real kernel.
// Every "nothing leaks" claim is a pair of executions: the first leaves a trap or a change, the
// second (on a child of the same zygote) must not see it.
//
// One process runs every case against one Engine (a worker's start-up preloads the stack, a
// few seconds). ctest runs it twice: as root, and as the unprivileged user execbox-test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/random.h"
#include "engine/engine.h"
#include "engine/result_json.h"
#include "jail/launch.h"
#include "warm/warm_fixture.h"

namespace execbox::engine {

Engine* g_engine = nullptr;
std::string g_unavailable;

namespace {

class WarmEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    EngineOptions o;
    o.pool.workers = 1;
    o.pool.prepared_per_worker = 2;
    o.sessions.max_sessions = 3;
    auto e = Engine::Create(o);
    if (!e) {
      g_unavailable = e.error().message;
      return;
    }
    engine_ = std::move(*e);
    g_engine = engine_.get();
  }
  void TearDown() override {
    g_engine = nullptr;
    engine_.reset();
  }

 private:
  std::unique_ptr<Engine> engine_;
};

TEST_F(Warm, PrintRunsOnAWarmChild) {
  Result r = Run("print(1)\n2 + 3");
  EXPECT_EQ(r.status, Status::kOk) << Describe(r);
  EXPECT_EQ(r.engine, "warm");
  EXPECT_EQ(Out(r), "1\n");
  ASSERT_TRUE(r.result.has_value());
  EXPECT_EQ((*r.result)["data"]["text/plain"], "5");
  EXPECT_TRUE(r.layers.seccomp && r.layers.pid_ns && r.layers.net_ns && r.layers.mount_ns);
}

TEST_F(Warm, TheStackIsPreloaded) {
  // Code that imports numpy is served by a full zygote (zygote_choice.h): the rest of the
  // stack is there without being imported.
  Result r = Run(
      "import sys, numpy\nprint(all(m in sys.modules for m in ['pandas', 'matplotlib.pyplot', 'scipy']))");
  EXPECT_EQ(Out(r), "True\n") << Describe(r);
}

TEST_F(Warm, FilesDoNotSurviveIntoTheNextExecution) {
  Result a =
      Run("open('/work/trap.txt', 'w').write('x')\nopen('/tmp/trap', 'w').write('x')\n"
          "open('/dev/shm/trap', 'w').write('x')\nprint('planted')");
  EXPECT_EQ(Out(a), "planted\n") << Describe(a);
  ASSERT_EQ(a.files.size(), 1u);
  EXPECT_EQ(a.files[0].name, "trap.txt");
  Result b =
      Run("import os\nprint([os.path.exists(p) for p in ['/work/trap.txt', '/tmp/trap', '/dev/shm/trap']])");
  EXPECT_EQ(Out(b), "[False, False, False]\n") << Describe(b);
  EXPECT_TRUE(b.files.empty());
}

TEST_F(Warm, ModulesBuiltinsAndLibrariesAreFreshEachTime) {
  Result a =
      Run("import sys, builtins, json, numpy\nsys.modules['planted'] = sys\nbuiltins.len = lambda x: 42\n"
          "json.dumps = lambda *a, **k: 'patched'\nnumpy.sum = None\nimport os\nos.environ['PLANTED'] = '1'\n"
          "print(len([1]))");
  EXPECT_EQ(Out(a), "42\n") << Describe(a);
  Result b = Run(
      "import sys, json, numpy, os\n"
      "print('planted' in sys.modules, len([1]), json.dumps(1), numpy.sum([1, 2]), 'PLANTED' in os.environ)");
  EXPECT_EQ(Out(b), "False 1 1 3 False\n") << Describe(b);
}

// A child runs a throwaway cell before its first request (warm.py's prewarm): nothing of it may
// show in the execution, and what it set up (the open() tracker, the streams) must serve the
// real one: a file left open and text left in a wrapper of sys.stdout.buffer still arrive.
TEST_F(Warm, TheChildsWarmUpLeavesNothingBehind) {
  Result r =
      Run("import sys, linecache, io\n"
          "names = sorted(n for n in globals() if not n.startswith('__'))\n"
          "print(names, sys.argv, [n for n in linecache.cache if 'prewarm' in n], 'x' in globals())\n"
          "w = io.TextIOWrapper(sys.stdout.buffer)\nw.write('through the buffer\\n')\n"
          "1 / 0");
  EXPECT_EQ(Out(r), "['io', 'linecache', 'sys'] ['<cell>'] [] False\nthrough the buffer\n") << Describe(r);
  ASSERT_TRUE(r.error.has_value()) << Describe(r);
  EXPECT_EQ(r.error->ename, "ZeroDivisionError");
  EXPECT_EQ(r.error->line, 6) << Describe(r);
  Result f = Run("left = open('left.txt', 'w')\nleft.write('kept')");
  ASSERT_EQ(f.files.size(), 1u) << Describe(f);
  EXPECT_EQ(f.files[0].name, "left.txt");
  EXPECT_EQ(f.files[0].content, "kept");
}

// A one-shot child can end between its done marker and the host's request for its files; the
// zygote then sends them unasked and closes its socket. They must still be read (they were lost
// in about 3 % of executions through a busy server). The delay makes that order certain.
TEST_F(Warm, FilesComeBackEvenWhenTheChildEndsBeforeTheyAreAskedFor) {
  struct Delay {
    Delay() { jail::DelayCollectForTesting(std::chrono::milliseconds(500)); }
    ~Delay() { jail::DelayCollectForTesting(std::chrono::milliseconds(0)); }
  } delay;
  for (int i = 0; i < 3; ++i) {
    Result r = Run("open('out.txt', 'w').write('" + std::to_string(i) + "')\nprint('wrote')");
    EXPECT_EQ(r.status, Status::kOk) << Describe(r);
    EXPECT_EQ(Out(r), "wrote\n") << Describe(r);
    ASSERT_EQ(r.files.size(), 1u) << Describe(r);
    EXPECT_EQ(r.files[0].content, std::to_string(i));
  }
}

TEST_F(Warm, ThreadsAndProcessesDoNotSurvive) {
  Result a =
      Run("import threading, time, subprocess\n"
          "threading.Thread(target=time.sleep, args=(1000,), daemon=True).start()\n"
          "subprocess.Popen(['sleep', '1000'], start_new_session=True)\n"
          "print(threading.active_count())");
  EXPECT_EQ(Out(a), "2\n") << Describe(a);
  Result b =
      Run("import threading, os\nprint(threading.active_count(), sorted(int(p) for p in os.listdir('/proc') "
          "if p.isdigit()))");
  EXPECT_EQ(Out(b), "1 [1]\n") << Describe(b);
}

TEST_F(Warm, RandomnessIsReseededInEveryChild) {
  const char* code = "import random, numpy\nprint(random.random(), numpy.random.rand())";
  Result a = Run(code);
  Result b = Run(code);
  EXPECT_EQ(a.status, Status::kOk) << Describe(a);
  EXPECT_NE(Out(a), Out(b));
}

TEST_F(Warm, MatplotlibStateIsFresh) {
  Result a = Run(
      "import matplotlib.pyplot as plt\nplt.rcParams['lines.linewidth'] = 7\nplt.figure()\nplt.plot([1, 2])\n"
      "plt.style.use('ggplot')");
  EXPECT_EQ(a.display.size(), 1u) << Describe(a);
  Result b =
      Run("import matplotlib.pyplot as plt\nprint(plt.rcParams['lines.linewidth'], plt.get_fignums())");
  EXPECT_EQ(Out(b), "1.5 []\n") << Describe(b);
}

TEST_F(Warm, APlotComesBackAsPng) {
  Result r = Run("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()");
  ASSERT_EQ(r.display.size(), 1u) << Describe(r);
  EXPECT_TRUE(r.display[0]["data"].contains("image/png"));
}

TEST_F(Warm, TheZygoteIsOutOfReach) {
  // The code is pid 1 of its own namespace: every other pid is unnameable, ptrace is refused.
  Result r =
      Run("import os, signal, ctypes\nhits = []\n"
          "for pid in range(2, 4000):\n"
          "    try:\n        os.kill(pid, 0); hits.append(pid)\n    except OSError:\n        pass\n"
          "libc = ctypes.CDLL(None)\n"
          "print(hits, os.getpid(), libc.ptrace(16, 1, 0, 0), os.getppid())");
  EXPECT_EQ(Out(r), "[] 1 -1 0\n") << Describe(r);
}

TEST_F(Warm, NoCapabilitiesAndNoNewPrivileges) {
  Result r =
      Run("for line in open('/proc/self/status'):\n"
          "    if line.split(':')[0] in ('CapEff', 'CapPrm', 'CapBnd', 'NoNewPrivs', 'Seccomp'):\n"
          "        print(line.split()[1])");
  EXPECT_EQ(Out(r), "0000000000000000\n0000000000000000\n0000000000000000\n1\n2\n") << Describe(r);
}

TEST_F(Warm, NoNetworkAndNoNamespaceEscape) {
  Result r =
      Run("import socket, os\nres = []\n"
          "for fam in (socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK):\n"
          "    try:\n        socket.socket(fam, socket.SOCK_STREAM if fam != socket.AF_NETLINK else "
          "socket.SOCK_RAW); res.append('open')\n"
          "    except OSError as e:\n        res.append(e.errno)\n"
          "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
          "res.append('unshared' if libc.unshare(0x10000000) == 0 else ctypes.get_errno())\n"
          "print(res)");
  EXPECT_EQ(r.status, Status::kOk) << Describe(r);
  EXPECT_EQ(Out(r).find("open"), std::string::npos) << Out(r);
  EXPECT_EQ(Out(r).find("unshared"), std::string::npos) << Out(r);
}

TEST_F(Warm, LimitsArePerExecutionAndThePoolStaysHealthy) {
  jail::Limits limits = Program("").limits;
  limits.memory_bytes = 128ull << 20;
  Result mem = Run("x = bytearray(400 << 20)\nx[::4096] = b'1' * len(x[::4096])", limits);
  EXPECT_EQ(mem.status, Status::kMemoryLimit) << Describe(mem);
  limits = Program("").limits;
  limits.wall_time = std::chrono::seconds(2);
  Result slow = Run("while True: pass", limits);
  EXPECT_EQ(slow.status, Status::kTimeout) << Describe(slow);
  ASSERT_TRUE(slow.error.has_value());
  EXPECT_EQ(slow.error->ename, "TimeoutError");
  EXPECT_GE(slow.usage.wall_ms, 1800u);
  limits = Program("").limits;
  limits.max_processes = 16;
  Result bomb =
      Run("import os\nn = 0\nfor _ in range(100):\n    try:\n        if os.fork() == 0:\n            import "
          "time; time.sleep(30)\n"
          "        n += 1\n    except OSError:\n        break\nprint(n < 20)",
          limits);
  EXPECT_EQ(Out(bomb), "True\n") << Describe(bomb);
  Result after = Run("print('healthy')");
  EXPECT_EQ(Out(after), "healthy\n") << Describe(after);
  EXPECT_LT(after.usage.cpu_ms, 2000u) << "CPU of earlier executions counted in this one";
}

TEST_F(Warm, LimitsAreEnforcedByTheHostsCgroupTier) {
  Result r = Run("pass");
  auto json = ToJson(r);
  std::string memory = json["limits"]["memory_mb"]["enforced_by"].get<std::string>();
  EXPECT_EQ(memory.rfind("cgroup-v", 0), 0u) << Describe(r);
  // EXECBOX_TEST_CGROUP: set by the VM stage (tests/vm) to the tier that host must give.
  if (const char* tier = std::getenv("EXECBOX_TEST_CGROUP")) {
    EXPECT_EQ(memory, tier) << Describe(r);
    EXPECT_EQ(json["limits"]["max_processes"]["enforced_by"], std::string(tier) + "+rlimit") << Describe(r);
    EXPECT_EQ(json["limits"]["cpu_seconds"]["enforced_by"].get<std::string>().rfind(tier, 0), 0u)
        << Describe(r);
  }
}

TEST_F(Warm, ACancelledExecutionIsKilled) {
  std::atomic<bool> cancel{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    cancel = true;
  });
  auto r = g_engine->Execute(Program("while True: pass"), {.cancel = &cancel});
  canceller.join();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, Status::kKilled) << Describe(*r);
  ASSERT_TRUE(r->error.has_value());
  EXPECT_EQ(r->error->ename, "Cancelled");
  EXPECT_LT(r->usage.wall_ms, 10'000u);
}

TEST_F(Warm, InputFilesAndStdinArrive) {
  auto p = Program("import sys\nprint(open('data/in.csv').read(), sys.stdin.read())");
  p.inputs.push_back({.name = "data/in.csv", .content = "a,b"});
  p.stdin_data = "from stdin";
  auto r = g_engine->Execute(p);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(Out(*r), "a,b from stdin\n") << Describe(*r);
  EXPECT_TRUE(r->files.empty()) << "an unchanged input file is not returned";
}

TEST_F(Warm, ErrorsPointAtTheUsersLine) {
  Result r = Run("x = 1\n1 / 0");
  EXPECT_EQ(r.status, Status::kError);
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.error->ename, "ZeroDivisionError");
  Result s = Run("def f(:\n  pass");
  EXPECT_EQ(s.status, Status::kSyntaxError) << Describe(s);
  Result exit3 = Run("import sys\nsys.exit(3)");
  EXPECT_EQ(exit3.status, Status::kError) << Describe(exit3);
  EXPECT_EQ(exit3.exit_code, 3);
}

TEST_F(Warm, TheEnvironmentIsTheSandboxsOwn) {
  // Nothing of the host's environment (or the zygote's secrets, of which it holds none): the
  // base policy's, pip's settings for installs from the wheelhouse included (no wheelhouse here).
  Result r = Run("import os\nprint(sorted(os.environ))");
  EXPECT_EQ(
      Out(r),
      "['HOME', 'LANG', 'LC_ALL', 'MKL_NUM_THREADS', 'MPLBACKEND', 'MPLCONFIGDIR', 'NUMEXPR_MAX_THREADS', "
      "'OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'PATH', 'PIP_BREAK_SYSTEM_PACKAGES', "
      "'PIP_DISABLE_PIP_VERSION_CHECK', 'PIP_NO_CACHE_DIR', 'PIP_NO_INDEX', 'PIP_ONLY_BINARY', "
      "'PIP_ROOT_USER_ACTION', 'PIP_USER', 'PYTHONDONTWRITEBYTECODE', 'PYTHONIOENCODING', 'PYTHONUSERBASE', "
      "'TMPDIR', 'XDG_CACHE_HOME', 'XDG_CONFIG_HOME']\n")
      << Describe(r);
}

TEST_F(Warm, AChildHoldsOnlyItsOwnDescriptors) {
  // Its pipes, its own channel (fd 3) and /dev/null: nothing of the zygote's (the command
  // socket, its log pipes) or of another child.
  Result r = Run(
      "import os\nfds = {}\nfor f in os.listdir('/proc/self/fd'):\n    try:\n        fds[int(f)] = "
      "os.readlink('/proc/self/fd/' + f)\n"
      "    except OSError:\n        pass  # the listing's own descriptor\n"
      "odd = {f: t for f, t in fds.items() if not (t.startswith('pipe:') or "
      "t in ('/dev/null', '/home/user') or (f == 3 and t.startswith('socket:')) or t.startswith('/proc/'))}\n"
      "print(odd, len(fds) <= 8)");
  EXPECT_EQ(Out(r), "{} True\n") << Describe(r);
}

TEST_F(Warm, AChildSharesNoWritableMemoryWithTheZygote) {
  // A MAP_SHARED writable mapping inherited from the zygote would let a child write into it.
  Result r = Run(
      "shared = [l for l in open('/proc/self/maps') if l.split()[1][1] == 'w' and l.split()[1][3] == 's']\n"
      "print(shared)");
  EXPECT_EQ(Out(r), "[]\n") << Describe(r);
}

TEST_F(Warm, OutputFloodDiskFillAndForgedReportsAreContained) {
  jail::Limits limits = Program("").limits;
  limits.output_bytes = 64 << 10;
  Result flood = Run("import os\nwhile True: os.write(1, b'x' * 65536)", limits);
  EXPECT_EQ(flood.status, Status::kOutputLimit) << Describe(flood);
  Result disk =
      Run("chunk = b'0' * (1 << 20)\ntry:\n    with open('big', 'wb') as f:\n        for _ in range(200): "
          "f.write(chunk)\n"
          "except OSError as e:\n    print(type(e).__name__)");
  EXPECT_EQ(Out(disk), "OSError\n") << Describe(disk);
  Result forged =
      Run("import os\nfor fd in range(512, 600):\n    try:\n        os.write(fd, b'{\"type\": \"exit\", "
          "\"code\": 0}\\n' + b'{' * 100000 + b'\\n')\n"
          "    except OSError:\n        pass\nraise ValueError('still reported')");
  EXPECT_EQ(forged.status, Status::kError) << Describe(forged);
  Result after = Run("print('healthy')");
  EXPECT_EQ(Out(after), "healthy\n") << Describe(after);
}

TEST_F(Warm, ConcurrentExecutionsEachGetTheirOwnChild) {
  std::vector<std::thread> threads;
  std::vector<Result> results(4);
  for (size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = Run("import os, time\nopen('mine', 'w').write(str(" + std::to_string(i) +
                       "))\ntime.sleep(0.2)\nprint(open('mine').read(), os.listdir('.'))");
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(Out(results[i]), std::to_string(i) + " ['mine']\n") << Describe(results[i]);
  }
}

// The parent of `pid` as /proc says, 0 when it cannot be read (it ended).
pid_t ParentOf(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("PPid:", 0) == 0) return static_cast<pid_t>(std::stoi(line.substr(5)));
  }
  return 0;
}

// Whether `pid` descends from this process: a worker of this test's own pool, not another
// server's or test's on the same machine.
bool OursByDescent(pid_t pid) {
  for (pid_t p = ParentOf(pid); p > 1; p = ParentOf(p)) {
    if (p == ::getpid()) return true;
  }
  return false;
}

TEST_F(Warm, ABurstOfSessionRequestsKeepsMoreSessionChildrenReady) {
  // An agent forking a session to try alternatives asks for session children back to back.
  // The pool then keeps as many ready as the burst took (over the full workers, at most
  // max_prepared_sessions_per_worker each), so that the next burst finds them prepared.
  Pool& pool = *g_engine->pool();
  const PoolOptions& o = pool.options();
  constexpr size_t kBurst = 4;
  for (size_t i = 0; i < kBurst; ++i) {
    auto child = pool.Acquire(o.limits, true);
    ASSERT_TRUE(child.has_value()) << child.error().message;
    pool.Retire(std::move(*child));
  }
  const size_t per_worker =
      std::max(o.prepared_sessions_per_worker,
               std::min((kBurst + o.workers - 1) / o.workers, o.max_prepared_sessions_per_worker));
  const PoolStats s = pool.Stats();
  ASSERT_GT(per_worker, o.prepared_sessions_per_worker) << "the burst is too small to show";
  EXPECT_GE(s.prepared_sessions_target, s.warm_workers * per_worker);
  bool ready = false;  // the refill makes them (seconds here; the VM stage emulates the CPU)
  for (int i = 0; i < 600 && !ready; ++i) {
    ready = pool.Stats().prepared_sessions >= s.prepared_sessions_target;
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  ASSERT_TRUE(ready) << pool.Stats().prepared_sessions << " of " << s.prepared_sessions_target;
  // The next burst, held all at once, takes prepared children only: none forked on demand.
  const uint64_t on_demand = pool.Stats().spawned_on_demand;
  std::vector<std::unique_ptr<jail::WarmChild>> held;
  for (size_t i = 0; i < s.prepared_sessions_target; ++i) {
    auto child = pool.Acquire(o.limits, true);
    ASSERT_TRUE(child.has_value()) << child.error().message;
    held.push_back(std::move(*child));
  }
  EXPECT_EQ(pool.Stats().spawned_on_demand, on_demand);
  for (auto& child : held) pool.Retire(std::move(child));
}

TEST_F(Warm, ADeadWorkerIsReplaced) {
  // Kill the jail's init of each of this pool's zygotes, by pid: the whole worker dies with it.
  // Only this process's own workers: other tests and servers on the machine run theirs.
  uint64_t replaced_before = g_engine->pool()->Stats().workers_replaced;
  int killed = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream comm(entry.path() / "comm");
    std::string command;
    std::getline(comm, command);
    if (command != "execbox-worker") continue;
    const pid_t worker = static_cast<pid_t>(std::stoi(name));
    if (!OursByDescent(worker)) continue;
    const pid_t init = ParentOf(worker);
    if (init > 1 && init != ::getpid() && ::kill(init, SIGKILL) == 0) ++killed;
  }
  ASSERT_GT(killed, 0) << "no zygote found";
  // Requests keep being served meanwhile (cold if no warm worker is up yet) ...
  Result during = g_engine->Execute(Program("print('served')")).value_or(Result{});
  EXPECT_EQ(Out(during), "served\n") << Describe(during);
  // ... and a warm worker is back within the start-up time.
  bool warm_again = false;
  for (int i = 0; i < 120 && !warm_again; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    auto r = g_engine->Execute(Program("print(1)"));
    warm_again = r && r->engine == "warm" && r->status == Status::kOk;
  }
  EXPECT_TRUE(warm_again);
  // ... and every worker is: print(1) is served by the lean one, which starts far sooner than a
  // full one; what follows needs the full one (sessions, the scientific stack).
  const PoolOptions& o = g_engine->pool()->options();
  bool whole = false;
  for (int i = 0; i < 480 && !whole; ++i) {
    const PoolStats s = g_engine->pool()->Stats();
    whole = s.warm_workers >= o.workers && s.lean_workers >= o.lean_workers;
    if (!whole) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  EXPECT_TRUE(whole);
  EXPECT_GT(g_engine->pool()->Stats().workers_replaced, replaced_before);
}

// ---- sessions ----

// One owner's view of the engine's sessions (every Sessions call names its owner).
TEST_F(WarmSessions, StateImportsAndFilesPersistInOrder) {
  auto s = S().Create();
  ASSERT_TRUE(s.has_value()) << s.error().message;
  Result a = Exec(
      s->id,
      "import numpy as np\nx = np.arange(4)\ndef f():\n    return 1 / 0\nopen('kept.txt', 'w').write('k')");
  EXPECT_EQ(a.status, Status::kOk) << Describe(a);
  ASSERT_TRUE(a.session.has_value());
  EXPECT_TRUE(a.session->preserved);
  Result b = Exec(s->id, "print(x.sum(), np.__name__, open('kept.txt').read())\nf()");
  EXPECT_EQ(Out(b), "6 numpy k\n") << Describe(b);
  EXPECT_EQ(b.status, Status::kError);
  ASSERT_TRUE(b.error.has_value());
  bool points_at_f = false;
  for (const auto& line : b.error->traceback) points_at_f |= line.find("return 1 / 0") != std::string::npos;
  EXPECT_TRUE(points_at_f) << Describe(b);
  EXPECT_TRUE(b.session->preserved);
  EXPECT_TRUE(b.files.empty()) << "only files changed by this execution come back: " << Describe(b);
  EXPECT_TRUE(S().Delete(s->id).has_value());
}

TEST_F(WarmSessions, AKillLosesTheStateAndTheRepliesSaySo) {
  auto s = S().Create();
  ASSERT_TRUE(s.has_value()) << s.error().message;
  Exec(s->id, "x = 41");
  jail::Limits limits = Program("").limits;
  limits.wall_time = std::chrono::seconds(2);
  Result killed = Exec(s->id, "while True: pass", limits);
  EXPECT_EQ(killed.status, Status::kTimeout);
  ASSERT_TRUE(killed.session.has_value());
  EXPECT_FALSE(killed.session->preserved);
  EXPECT_EQ(killed.session->lost_reason, "timeout");
  EXPECT_TRUE(killed.session->files_kept) << "only the kernel restarted";
  Result next = Exec(s->id, "print('x' in globals())");
  EXPECT_EQ(Out(next), "False\n") << Describe(next);
  EXPECT_FALSE(next.session->preserved) << "the first reply after a loss says so";
  EXPECT_EQ(next.session->generation, killed.session->generation + 1);
  Result later = Exec(s->id, "x = 1");
  EXPECT_TRUE(later.session->preserved);
  EXPECT_TRUE(S().Delete(s->id).has_value());
}

TEST_F(WarmSessions, SessionsCannotReachEachOther) {
  auto a = S().Create();
  auto b = S().Create();
  ASSERT_TRUE(a.has_value() && b.has_value());
  Result planted =
      Exec(a->id,
           "import socket\nsrv = socket.socket(socket.AF_UNIX)\nsrv.bind('\\0execbox-trap')\nsrv.listen()\n"
           "open('/tmp/a-secret', 'w').write('s')\nprint('ok')");
  EXPECT_EQ(Out(planted), "ok\n") << Describe(planted);
  Result probe = Exec(
      b->id,
      "import socket, os\nc = socket.socket(socket.AF_UNIX)\n"
      "try:\n    c.connect('\\0execbox-trap'); print('reached')\nexcept OSError as e:\n    print('refused')\n"
      "print(os.path.exists('/tmp/a-secret'), sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))");
  // A session's own processes only: its init (pid 1) and its kernel (pid 2).
  EXPECT_EQ(Out(probe), "refused\nFalse [1, 2]\n") << Describe(probe);
  EXPECT_TRUE(S().Delete(a->id).has_value());
  EXPECT_TRUE(S().Delete(b->id).has_value());
}

TEST_F(WarmSessions, FullRefusesAndDeleteFreesASlot) {
  std::vector<std::string> ids;
  for (size_t i = 0; i < 3; ++i) {
    auto s = S().Create();
    ASSERT_TRUE(s.has_value()) << s.error().message;
    ids.push_back(s->id);
  }
  auto over = S().Create();
  ASSERT_FALSE(over.has_value());
  EXPECT_EQ(over.error().kind, SessionError::kFull);
  EXPECT_TRUE(S().Delete(ids[0]).has_value());
  auto again = S().Create();
  EXPECT_TRUE(again.has_value());
  if (again) ids[0] = again->id;
  for (const auto& id : ids) EXPECT_TRUE(S().Delete(id).has_value());
  EXPECT_EQ(S().Delete("s_nope").error().kind, SessionError::kNotFound);
  EXPECT_EQ(S().size(), 0u);
}

TEST_F(WarmSessions, PlantedLinksAreNotFollowedAndExitLosesTheState) {
  auto s = S().Create();
  ASSERT_TRUE(s.has_value()) << s.error().message;
  Result planted = Exec(s->id,
                        "import os\nos.symlink('/etc/passwd', 'link')\nos.mkfifo('fifo')\n"
                        "open('real.txt', 'w').write('r')");
  EXPECT_EQ(planted.status, Status::kOk) << Describe(planted);
  ASSERT_EQ(planted.files.size(), 1u) << Describe(planted);
  EXPECT_EQ(planted.files[0].name, "real.txt");
  EXPECT_EQ(planted.skipped_files.size(), 2u) << Describe(planted);
  Result exited = Exec(s->id, "import os\nos._exit(3)");
  EXPECT_EQ(exited.exit_code, 3) << Describe(exited);
  ASSERT_TRUE(exited.session.has_value());
  EXPECT_FALSE(exited.session->preserved);
  EXPECT_EQ(exited.session->lost_reason, "exited");
  EXPECT_TRUE(exited.session->files_kept) << Describe(exited);
  Result kept = Exec(s->id, "import os\nprint(sorted(os.listdir('.')))");
  EXPECT_EQ(Out(kept), "['fifo', 'link', 'real.txt']\n") << "a new kernel, the same sandbox";
  EXPECT_TRUE(S().Delete(s->id).has_value());
}

TEST_F(WarmSessions, TheMemoryLimitLosesTheStateWithItsReason) {
  auto s = S().Create();
  ASSERT_TRUE(s.has_value()) << s.error().message;
  Exec(s->id, "keep = 1");
  Result oom = Exec(s->id, "x = bytearray(1 << 30)\nx[::4096] = b'1' * len(x[::4096])");
  EXPECT_EQ(oom.status, Status::kMemoryLimit) << Describe(oom);
  ASSERT_TRUE(oom.session.has_value());
  EXPECT_FALSE(oom.session->preserved);
  EXPECT_EQ(oom.session->lost_reason, "memory_limit");
  EXPECT_TRUE(S().Delete(s->id).has_value());
}

TEST_F(WarmSessions, IdleSessionsExpire) {
  Sessions expiring(*g_engine->pool(), {.max_sessions = 2, .idle_ttl = std::chrono::seconds(1)});
  OwnedSessions short_lived(expiring, "test");
  auto s = short_lived.Create();
  ASSERT_TRUE(s.has_value()) << s.error().message;
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(short_lived.SweepIdle(), 1u);
  auto gone = short_lived.Info(s->id);
  ASSERT_FALSE(gone.has_value());
  EXPECT_EQ(gone.error().kind, SessionError::kNotFound);
}

TEST_F(WarmSessions, JunkOnItsOwnChannelDoesNotConfuseTheHost) {
  // The code can write to the socket the agent answers on; anything but the agent's "D" is
  // ignored, and the session goes on.
  auto s = S().Create();
  ASSERT_TRUE(s.has_value()) << s.error().message;
  Result junk =
      Exec(s->id,
           "import os\nkeep = 7\nfor f in os.listdir('/proc/self/fd'):\n    try:\n"
           "        if os.readlink('/proc/self/fd/' + f).startswith('socket:'):\n"
           "            os.write(int(f), b'junk\\x00\\xff' * 1000)\n    except OSError:\n        pass\n"
           "print('wrote')");
  EXPECT_EQ(Out(junk), "wrote\n") << Describe(junk);
  EXPECT_EQ(junk.status, Status::kOk);
  Result next = Exec(s->id, "print(keep)");
  EXPECT_EQ(Out(next), "7\n") << Describe(next);
  EXPECT_TRUE(next.session->preserved);
  EXPECT_TRUE(S().Delete(s->id).has_value());
}

// ---- session files (Sessions::WriteFile / ReadFile) ----

std::string AllByteValues() {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  return all;
}

// 3 MiB that numpy in the session can rebuild: byte i is ((i * 2654435761) >> 13) & 255.
std::string ThreeMiB() {
  std::string big(3u << 20, '\0');
  for (uint64_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 2654435761ull >> 13) & 255);
  return big;
}

TEST_F(WarmSessions, FilesGoInAndOutByteForByteAndTheStateStays) {
  auto s = S().Create();
  ASSERT_TRUE(s.has_value()) << s.error().message;
  Exec(s->id, "x = 41");
  const std::string all = AllByteValues(), big = ThreeMiB();
  auto w1 = S().WriteFile(s->id, "data.bin", all);
  ASSERT_TRUE(w1.has_value()) << w1.error().message;
  auto w2 = S().WriteFile(s->id, "big.bin", big);
  ASSERT_TRUE(w2.has_value()) << w2.error().message;
  auto w3 = S().WriteFile(s->id, "a/b/c.txt", "nested");
  ASSERT_TRUE(w3.has_value()) << w3.error().message;
  auto w4 = S().WriteFile(s->id, "empty", "");
  ASSERT_TRUE(w4.has_value()) << w4.error().message;

  Result seen =
      Exec(s->id,
           "import numpy as np, os\n"
           "want = ((np.arange(3 << 20, dtype=np.uint64) * np.uint64(2654435761)) >> np.uint64(13)) "
           "& np.uint64(255)\n"
           "print(open('data.bin', 'rb').read() == bytes(range(256)),\n"
           "      open('big.bin', 'rb').read() == want.astype(np.uint8).tobytes(),\n"
           "      open('a/b/c.txt').read(), os.path.getsize('empty'), x,\n"
           "      sorted(n for n in os.listdir('.') if n.startswith('.')))\n"
           "open('out.bin', 'wb').write(bytes(range(255, -1, -1)))");
  EXPECT_EQ(Out(seen), "True True nested 0 41 []\n") << Describe(seen);
  ASSERT_TRUE(seen.session.has_value());
  EXPECT_TRUE(seen.session->preserved);
  ASSERT_EQ(seen.files.size(), 1u) << "uploaded files are not the code's: " << Describe(seen);
  EXPECT_EQ(seen.files[0].name, "out.bin");

  auto r1 = S().ReadFile(s->id, "data.bin", 1 << 20);
  ASSERT_TRUE(r1.has_value()) << r1.error().message;
  EXPECT_EQ(*r1, all);
  auto r2 = S().ReadFile(s->id, "big.bin", 8 << 20);
  ASSERT_TRUE(r2.has_value()) << r2.error().message;
  EXPECT_TRUE(*r2 == big) << "3 MiB came back different (" << r2->size() << " bytes)";
  auto r3 = S().ReadFile(s->id, "./a//b/c.txt", 100);
  ASSERT_TRUE(r3.has_value()) << r3.error().message;
  EXPECT_EQ(*r3, "nested");
  auto r4 = S().ReadFile(s->id, "out.bin", 256);
  ASSERT_TRUE(r4.has_value()) << r4.error().message;
  EXPECT_EQ(*r4, std::string(all.rbegin(), all.rend()));
  auto r5 = S().ReadFile(s->id, "empty", 0);
  ASSERT_TRUE(r5.has_value()) << r5.error().message;
  EXPECT_EQ(*r5, "");

  // Overwriting replaces the content; a file the code then changes comes back as the code's.
  ASSERT_TRUE(S().WriteFile(s->id, "data.bin", "v2").has_value());
  Result after = Exec(s->id, "print(open('data.bin', 'rb').read(), x)\nopen('a/b/c.txt', 'a').write('!')");
  EXPECT_EQ(Out(after), "b'v2' 41\n") << Describe(after);
  ASSERT_EQ(after.files.size(), 1u) << Describe(after);
  EXPECT_EQ(after.files[0].name, "a/b/c.txt");
  EXPECT_TRUE(after.session->preserved);

  auto info = S().Info(s->id);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->executions, 3u) << "file transfers are not executions";
  EXPECT_EQ(info->generation, 0u);
  EXPECT_TRUE(S().Delete(s->id).has_value());
}

// The zygote reads and writes the children's files (collections, uploads, downloads, a
// one-shot's outputs), and every child forked afterwards starts as a copy of its memory: no
// name or content of one child's files may be found in a later child's memory.
TEST_F(WarmSessions, NoLaterChildFindsAnotherChildsFilesInItsMemory) {
  std::vector<std::string> marks;
  for (int i = 0; i < 6; ++i) {
    auto hex = RandomHex(16);
    ASSERT_TRUE(hex.has_value());
    marks.push_back(*hex);
  }
  auto s = S().Create();
  ASSERT_TRUE(s.has_value()) << s.error().message;
  Result wrote = Exec(s->id, "open('leak" + marks[0] + ".txt', 'w').write('leak" + marks[1] + "' * 300)");
  ASSERT_EQ(wrote.status, Status::kOk) << Describe(wrote);
  ASSERT_EQ(wrote.files.size(), 1u) << Describe(wrote);
  std::string content;
  for (int i = 0; i < 300; ++i) content += "leak" + marks[3];
  auto up = S().WriteFile(s->id, "leak" + marks[2] + ".txt", content);
  ASSERT_TRUE(up.has_value()) << up.error().message;
  auto down = S().ReadFile(s->id, "leak" + marks[2] + ".txt", 1 << 20);
  ASSERT_TRUE(down.has_value()) << down.error().message;
  Result one_shot = Run("open('leak" + marks[4] + ".txt', 'w').write('leak" + marks[5] + "' * 300)");
  ASSERT_EQ(one_shot.files.size(), 1u) << Describe(one_shot);
  EXPECT_TRUE(S().Delete(s->id).has_value());

  // Each mark is looked for as "leak" + mark; neither the scan's code nor its strings hold the
  // two side by side, except the control, made at run time, which the scan must find.
  std::string list;
  for (const auto& m : marks) list += "'" + m + "', ";
  const std::string scan =
      "K = 'kael'[::-1].encode()\n"
      "marks = [m.encode() for m in [" +
      list +
      "]]\n"
      "control = K + b'%032x' % 7\n"
      "found = {m: 0 for m in marks + [control[4:]]}\n"
      "import ctypes, sys\n"
      "if 'libasan' in open('/proc/self/maps').read():\n"
      "    print('asan')\n"
      "    sys.exit()\n"
      "for line in open('/proc/self/maps').read().splitlines():\n"
      "    f = line.split()\n"
      "    lo, hi = (int(x, 16) for x in f[0].split('-'))\n"
      "    # Private writable memory (heap, stack, anonymous): where the zygote's data would be.\n"
      "    if f[1][:2] != 'rw' or f[4] != '0' or (len(f) > 5 and f[5] not in ('[heap]', '[stack]')):\n"
      "        continue\n"
      "    data = ctypes.string_at(lo, hi - lo)\n"
      "    i = data.find(K)\n"
      "    while i >= 0:\n"
      "        for m in found:\n"
      "            if data[i + 4:i + 4 + len(m)] == m:\n"
      "                found[m] += 1\n"
      "        i = data.find(K, i + 1)\n"
      "print(sum(found[m] for m in marks), found[control[4:]] > 0)\n";
  // The pool forked its prepared children before the marks: the later ones come after.
  for (int i = 0; i < 4; ++i) {
    Result r = Run(scan);
    // Reading memory AddressSanitizer has poisoned is an error of its own: the plain build scans.
    if (Out(r) == "asan\n") GTEST_SKIP() << "the worker runs under AddressSanitizer";
    EXPECT_EQ(Out(r), "0 True\n") << "child " << i << ": " << Describe(r);
  }
}

TEST_F(WarmSessions, FileErrorsAreTyped) {
  EXPECT_EQ(S().WriteFile("s_nope", "a.txt", "x").error().kind, SessionError::kNotFound);
  EXPECT_EQ(S().ReadFile("s_nope", "a.txt", 10).error().kind, SessionError::kNotFound);
  auto s = S().Create();
  ASSERT_TRUE(s.has_value()) << s.error().message;
  Result made = Exec(s->id,
                     "import os\nos.mkdir('dir')\nopen('k1000', 'wb').write(b'k' * 1000)\n"
                     "with open('sparse', 'wb') as f:\n    f.truncate(50 << 20)\nkeep = 'kept'");
  EXPECT_EQ(made.status, Status::kOk) << Describe(made);
  auto missing = S().ReadFile(s->id, "missing.txt", 10);
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().kind, SessionError::kFileNotFound) << missing.error().message;
  EXPECT_EQ(S().ReadFile(s->id, "dir", 10).error().kind, SessionError::kFileNotFound);
  EXPECT_EQ(S().ReadFile(s->id, "dir/missing", 10).error().kind, SessionError::kFileNotFound);
  EXPECT_EQ(S().ReadFile(s->id, "k1000/below", 10).error().kind, SessionError::kFileNotFound);
  auto over = S().ReadFile(s->id, "k1000", 999);
  ASSERT_FALSE(over.has_value());
  EXPECT_EQ(over.error().kind, SessionError::kTooLarge) << over.error().message;
  auto exact = S().ReadFile(s->id, "k1000", 1000);
  ASSERT_TRUE(exact.has_value()) << exact.error().message;
  EXPECT_EQ(*exact, std::string(1000, 'k'));
  auto t0 = std::chrono::steady_clock::now();
  auto sparse = S().ReadFile(s->id, "sparse", 1 << 20);
  ASSERT_FALSE(sparse.has_value());
  EXPECT_EQ(sparse.error().kind, SessionError::kTooLarge);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2)) << "a sparse file is not read";
  // Paths that leave the work dir never reach the keeper.
  for (const char* bad : {"../etc/passwd", "/etc/passwd", "a/../../x", "", "."}) {
    EXPECT_EQ(S().ReadFile(s->id, bad, 1 << 20).error().kind, SessionError::kInvalid) << bad;
    EXPECT_EQ(S().WriteFile(s->id, bad, "x").error().kind, SessionError::kInvalid) << bad;
  }
  // A directory at the path, or a file where a parent should be: refused, nothing changed.
  EXPECT_EQ(S().WriteFile(s->id, "dir", "x").error().kind, SessionError::kRefused);
  EXPECT_EQ(S().WriteFile(s->id, "k1000/x", "x").error().kind, SessionError::kRefused);
  // Larger than the work dir, or than what is left of it (the keeper's write fails: ENOSPC).
  const uint64_t disk = Program("").limits.work_dir_bytes;
  EXPECT_EQ(S().WriteFile(s->id, "huge", std::string(disk + 1, 'h')).error().kind, SessionError::kTooLarge);
  ASSERT_TRUE(S().WriteFile(s->id, "half1", std::string(disk * 6 / 10, '1')).has_value());
  auto full = S().WriteFile(s->id, "half2", std::string(disk * 6 / 10, '2'));
  ASSERT_FALSE(full.has_value());
  EXPECT_EQ(full.error().kind, SessionError::kTooLarge) << full.error().message;
  Result left = Exec(s->id,
                     "import os\nprint(keep, os.path.isdir('dir'), os.path.getsize('k1000'), "
                     "sorted(n for n in os.listdir('.') if n.startswith('.') or n.startswith('half')))");
  EXPECT_EQ(Out(left), "kept True 1000 ['half1']\n")
      << "a failed write leaves nothing behind: " << Describe(left);
  EXPECT_TRUE(left.session->preserved);
  EXPECT_TRUE(S().Delete(s->id).has_value());
}

TEST_F(WarmSessions, FileDownloadsFollowNothingTheCodePlanted) {
  auto s = S().Create();
  ASSERT_TRUE(s.has_value()) << s.error().message;
  Result planted =
      Exec(s->id,
           "import os, threading\nopen('real.txt', 'w').write('r')\n"
           "os.symlink('/etc/passwd', 'link')\nos.symlink('/etc', 'd')\nos.symlink('/', 'root')\n"
           "os.symlink('real.txt', 'rel')\nos.symlink('.', 'here')\nos.mkdir('sub')\n"
           "os.symlink('../real.txt', 'sub/up')\nos.mkfifo('f')\nos.mkfifo('waited')\n"
           "writer = threading.Thread(target=lambda: open('waited', 'w').write('x'), daemon=True)\n"
           "writer.start()\nkeep = 3");
  EXPECT_EQ(planted.status, Status::kOk) << Describe(planted);
  for (const char* path :
       {"link", "d/passwd", "root/etc/passwd", "rel", "here/real.txt", "sub/up", "d", "root"}) {
    auto r = S().ReadFile(s->id, path, 1 << 20);
    ASSERT_FALSE(r.has_value()) << path << " was read: " << r->substr(0, 100);
    EXPECT_EQ(r.error().kind, SessionError::kFileNotFound) << path << ": " << r.error().message;
    EXPECT_EQ(r.error().message.find("root:x:"), std::string::npos) << r.error().message;
  }
  for (const char* fifo : {"f", "waited"}) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = S().ReadFile(s->id, fifo, 1 << 20);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2)) << fifo;
    ASSERT_FALSE(r.has_value()) << fifo;
    EXPECT_EQ(r.error().kind, SessionError::kFileNotFound) << r.error().message;
  }
  auto real = S().ReadFile(s->id, "real.txt", 10);
  ASSERT_TRUE(real.has_value()) << real.error().message;
  EXPECT_EQ(*real, "r");
  // The FIFO was looked at, never opened: the code's writer still waits for a reader.
  Result after = Exec(s->id, "print(writer.is_alive(), keep)");
  EXPECT_EQ(Out(after), "True 3\n") << Describe(after);
  EXPECT_TRUE(after.session->preserved);
  EXPECT_TRUE(S().Delete(s->id).has_value());
}

TEST_F(WarmSessions, FileUploadsWriteThroughNoPlantedLink) {
  auto s = S().Create();
  ASSERT_TRUE(s.has_value()) << s.error().message;
  // Targets named after this process, so that the host's own /tmp can be checked too.
  const std::string tag = "execbox-upload-probe-" + std::to_string(::getpid());
  Result planted =
      Exec(s->id, "import os\nos.symlink('/tmp', 'd')\nos.mkdir('/tmp/" + tag +
                      "-dir')\n"
                      "os.symlink('/tmp/" +
                      tag + "-dir', 'e')\nos.symlink('/tmp/" + tag +
                      "', 'ln')\n"
                      "os.mkdir('inner')\nos.symlink('../d', 'inner/up')\nos.mkfifo('pipe')\nkeep = 5");
  EXPECT_EQ(planted.status, Status::kOk) << Describe(planted);
  for (const std::string& path :
       std::vector<std::string>{"d/" + tag, "e/x", "inner/up/" + tag, "d/new/" + tag}) {
    auto w = S().WriteFile(s->id, path, "planted?");
    ASSERT_FALSE(w.has_value()) << path << " was written";
    EXPECT_EQ(w.error().kind, SessionError::kRefused) << w.error().message;
    EXPECT_NE(w.error().message.find("symbolic link"), std::string::npos) << w.error().message;
  }
  // A symbolic link or FIFO at the path itself is replaced by the file, not written through.
  ASSERT_TRUE(S().WriteFile(s->id, "ln", "new").has_value());
  ASSERT_TRUE(S().WriteFile(s->id, "pipe", "not a fifo").has_value());
  Result seen =
      Exec(s->id,
           "import os, stat\n"
           "print(os.path.islink('ln'), open('ln').read(), stat.S_ISREG(os.lstat('pipe').st_mode),\n"
           "      open('pipe').read(), sorted(os.listdir('/tmp')), os.listdir('/tmp/" +
               tag +
               "-dir'),\n"
               "      os.path.islink('d'), keep)");
  EXPECT_EQ(Out(seen), "False new True not a fifo ['" + tag + "-dir'] [] True 5\n") << Describe(seen);
  EXPECT_TRUE(seen.session->preserved);
  EXPECT_FALSE(std::filesystem::exists("/tmp/" + tag)) << "written on the host";
  EXPECT_FALSE(std::filesystem::exists("/tmp/" + tag + "-dir")) << "written on the host";
  EXPECT_TRUE(S().Delete(s->id).has_value());
}

TEST_F(WarmSessions, FilesOfASessionWhoseProcessEndedBetweenExecutions) {
  auto s = S().Create();
  ASSERT_TRUE(s.has_value()) << s.error().message;
  Result a = Exec(s->id,
                  "import os, threading\nopen('old.txt', 'w').write('o')\nx = 1\n"
                  "threading.Timer(0.3, os._exit, (0,)).start()");
  EXPECT_EQ(a.status, Status::kOk) << Describe(a);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  // The sandbox outlives its kernel: the files are there, read and written between executions.
  auto kept = S().ReadFile(s->id, "old.txt", 10);
  ASSERT_TRUE(kept.has_value()) << kept.error().message;
  EXPECT_EQ(*kept, "o");
  auto w = S().WriteFile(s->id, "new.txt", "n");
  ASSERT_TRUE(w.has_value()) << w.error().message;
  // The next execution runs on a new kernel, and its reply says that the state was lost.
  Result b = Exec(s->id, "import os\nprint(sorted(os.listdir('.')), 'x' in globals())");
  EXPECT_EQ(Out(b), "['new.txt', 'old.txt'] False\n") << Describe(b);
  ASSERT_TRUE(b.session.has_value());
  EXPECT_FALSE(b.session->preserved);
  EXPECT_TRUE(b.session->files_kept);
  EXPECT_EQ(b.session->lost_reason, "exited");
  EXPECT_TRUE(b.files.empty()) << Describe(b);
  EXPECT_TRUE(S().Delete(s->id).has_value());
}

TEST_F(WarmSessions, ASessionExistsOnlyForItsOwner) {
  auto mine = S("alice").Create();
  ASSERT_TRUE(mine.has_value()) << mine.error().message;
  EXPECT_EQ(mine->owner, "alice");
  auto set = S("alice").Execute(mine->id, Program("secret = 'alice-only'"));
  ASSERT_TRUE(set.has_value());
  // To another owner the session does not exist, for every call, and nothing of it leaks.
  OwnedSessions bob = S("bob");
  auto run = bob.Execute(mine->id, Program("print(secret)"));
  ASSERT_FALSE(run.has_value()) << run->stdout_text.text;
  EXPECT_EQ(run.error().kind, SessionError::kNotFound);
  EXPECT_EQ(bob.Info(mine->id).error().kind, SessionError::kNotFound);
  EXPECT_EQ(bob.ReadFile(mine->id, "x", 10).error().kind, SessionError::kNotFound);
  EXPECT_EQ(bob.WriteFile(mine->id, "x", "planted").error().kind, SessionError::kNotFound);
  EXPECT_EQ(bob.Fork(mine->id).error().kind, SessionError::kNotFound);
  EXPECT_EQ(bob.Delete(mine->id).error().kind, SessionError::kNotFound);
  for (const auto& info : bob.List()) EXPECT_NE(info.id, mine->id);
  EXPECT_EQ(g_engine->sessions()->CreatedWith("bob", mine->id).error().kind, SessionError::kNotFound);
  // The owner still has it, state and all.
  auto still = S("alice").Execute(mine->id, Program("print(secret)"));
  ASSERT_TRUE(still.has_value());
  EXPECT_EQ(still->stdout_text.text, "alice-only\n");
  EXPECT_TRUE(S("alice").Delete(mine->id).has_value());
}

// ---- non-ASCII file names: the warm interpreter runs in UTF-8 mode, as the cold one does ----

// The interpreter's encodings, on one line: the same in a warm child and a cold jail.
constexpr const char* kEncodings =
    "import sys, locale\n"
    "print(sys.getfilesystemencoding(), sys.getfilesystemencodeerrors(), sys.flags.utf8_mode,\n"
    "      locale.getpreferredencoding(False), sys.stdin.encoding, sys.stdout.encoding, sys.stderr.encoding)";

TEST_F(Warm, EncodingsAreUtf8AsInAColdRun) {
  Result warm = Run(kEncodings);
  EXPECT_EQ(warm.status, Status::kOk) << Describe(warm);
  EXPECT_EQ(Out(warm), "utf-8 surrogateescape 1 utf-8 utf-8 utf-8 utf-8\n") << Describe(warm);
  auto cold = ExecuteCold(Program(kEncodings));
  ASSERT_TRUE(cold.has_value()) << cold.error().message;
  EXPECT_EQ(cold->engine, "cold");
  EXPECT_EQ(Out(*cold), Out(warm)) << Describe(*cold);
}

TEST_F(Warm, NonAsciiFileNamesAreWrittenReadAndReturned) {
  auto p = Program(
      "import os\nopen('données.csv', 'w').write('a,b\\n')\nos.mkdir('été')\n"
      "open('été/août.txt', 'wb').write(b'x')\nprint(open('entrée.txt').read(), sorted(os.listdir('.')))");
  p.inputs = {{.name = "entrée.txt", .content = "arrivée"}};
  auto r = g_engine->Execute(p);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->engine, "warm");
  EXPECT_EQ(r->status, Status::kOk) << Describe(*r);
  EXPECT_EQ(Out(*r), "arrivée ['données.csv', 'entrée.txt', 'été']\n") << Describe(*r);
  auto returned = [&](const std::string& name) {
    for (const auto& f : r->files) {
      if (f.name == name) return true;
    }
    return false;
  };
  EXPECT_TRUE(returned("données.csv")) << Describe(*r);
  EXPECT_TRUE(returned("été/août.txt")) << Describe(*r);
}

TEST_F(WarmSessions, NonAsciiFileNamesGoBothWays) {
  auto s = S().Create();
  ASSERT_TRUE(s.has_value()) << s.error().message;
  Result wrote =
      Exec(s->id, "import sys\nopen('données.csv', 'w').write('x')\nprint(sys.getfilesystemencoding())");
  EXPECT_EQ(wrote.status, Status::kOk) << Describe(wrote);
  EXPECT_EQ(Out(wrote), "utf-8\n") << Describe(wrote);
  ASSERT_EQ(wrote.files.size(), 1u) << Describe(wrote);
  EXPECT_EQ(wrote.files[0].name, "données.csv");
  // The file API and the code agree on the names, in both directions.
  auto put = S().WriteFile(s->id, "résumé/naïve.txt", "café");
  ASSERT_TRUE(put.has_value()) << put.error().message;
  auto got = S().ReadFile(s->id, "résumé/naïve.txt", 1 << 20);
  ASSERT_TRUE(got.has_value()) << got.error().message;
  EXPECT_EQ(*got, "café");
  Result seen = Exec(s->id,
                     "import os\nprint(os.listdir('résumé'), open('résumé/naïve.txt').read())\n"
                     "open('résumé/été.txt', 'w').write('soleil')");
  EXPECT_EQ(seen.status, Status::kOk) << Describe(seen);
  EXPECT_EQ(Out(seen), "['naïve.txt'] café\n") << Describe(seen);
  auto summer = S().ReadFile(s->id, "résumé/été.txt", 1 << 20);
  ASSERT_TRUE(summer.has_value()) << summer.error().message;
  EXPECT_EQ(*summer, "soleil");
  EXPECT_TRUE(S().Delete(s->id).has_value());
}

// ---- the channel out of the code's reach, and what the code can still forge ----
// A one-shot child closes its channel before the code runs: its report's end (checked by the
// host's /proc: the process is exiting) ends the execution. A session's kernel holds a channel
// to its init, which passes up nothing but a 'D', and the host believes a 'D' only once the
// kernel shows the process doing what the agent does next: waiting on its channel for the next
// request. A claim followed by anything else is reported as the code's doing, never as ok.

constexpr const char* kForgeDoneThenSpin =
    "import os\nos.write(3, b'D')\nprint('after', flush=True)\nwhile True: pass";

// The report fd (the agent keeps it high): an exit event written on it and the fd closed, as the
// agent's os._exit would.
constexpr const char* kForgeReportEnd =
    "import os\nfor fd in [int(f) for f in os.listdir('/proc/self/fd')]:\n"
    "    if fd >= 100:\n"
    "        try:\n            os.write(fd, b'{\"type\":\"exit\",\"code\":0}\\n'); os.close(fd)\n"
    "        except OSError: pass\n";

void ExpectForged(const Result& r, const std::string& describe) {
  EXPECT_EQ(r.status, Status::kError) << describe;
  ASSERT_TRUE(r.error.has_value()) << describe;
  EXPECT_EQ(r.error->ename, "SandboxError") << describe;
  EXPECT_NE(r.error->evalue.find("result channel"), std::string::npos) << describe;
}

TEST_F(Warm, AOneShotChildsCodeHoldsNoSocket) {
  Result r =
      Run("import os, stat\nfds = [int(f) for f in os.listdir('/proc/self/fd')]\n"
          "socks = []\nfor fd in fds:\n    try:\n        if stat.S_ISSOCK(os.fstat(fd).st_mode): "
          "socks.append(fd)\n"
          "    except OSError: pass\nprint(socks)\n"
          "try:\n    os.write(3, b'D')\nexcept OSError as e:\n    print(e.errno)");
  EXPECT_EQ(r.status, Status::kOk) << Describe(r);
  EXPECT_EQ(Out(r), "[]\n9\n") << Describe(r);
}

TEST_F(Warm, AForgedReportEndDoesNotEndAnExecutionAsOk) {
  jail::Limits limits = Program("").limits;
  limits.wall_time = std::chrono::seconds(3);
  Result r = Run(std::string(kForgeReportEnd) + "print('after', flush=True)\nwhile True: pass", limits);
  EXPECT_EQ(r.status, Status::kTimeout) << Describe(r);
  EXPECT_EQ(Out(r), "after\n") << "what the code printed after its report's end is kept: " << Describe(r);
  Result after = Run("print('healthy')");
  EXPECT_EQ(after.status, Status::kOk) << Describe(after);
  EXPECT_EQ(Out(after), "healthy\n") << Describe(after);
}

TEST_F(Warm, AForgedReportEndThenTheMemoryLimitIsNeverOk) {
  jail::Limits limits = Program("").limits;
  limits.wall_time = std::chrono::seconds(10);
  Result r = Run(std::string(kForgeReportEnd) +
                     "x = bytearray(1 << 30)\nx[::4096] = b'1' * len(x[::4096])\nwhile True: pass",
                 limits);
  EXPECT_EQ(r.status, Status::kMemoryLimit) << Describe(r);
}

TEST_F(Warm, NormalExecutionsWithThreadsLeftRunningAreOk) {
  for (int i = 0; i < 5; ++i) {
    Result r = Run("print(1)");
    EXPECT_EQ(r.status, Status::kOk) << Describe(r);
  }
  // A daemon thread still running when the one-shot agent exits: the process exits anyway.
  Result daemon =
      Run("import threading, time\ndef spin():\n    while True: time.sleep(0.01)\n"
          "threading.Thread(target=spin, daemon=True).start()\nprint('started')");
  EXPECT_EQ(daemon.status, Status::kOk) << Describe(daemon);
  EXPECT_EQ(Out(daemon), "started\n") << Describe(daemon);
}

TEST_F(WarmSessions, AForgedDoneMarkerLosesTheSessionAndTheNextExecutionWorks) {
  auto s = S().Create();
  ASSERT_TRUE(s.has_value()) << s.error().message;
  Result kept = Exec(s->id, "x = 41");
  EXPECT_EQ(kept.status, Status::kOk) << Describe(kept);
  jail::Limits limits = Program("").limits;
  limits.wall_time = std::chrono::seconds(3);
  Result forged = Exec(s->id, kForgeDoneThenSpin, limits);
  EXPECT_NE(forged.status, Status::kOk) << Describe(forged);
  ExpectForged(forged, Describe(forged));
  ASSERT_TRUE(forged.session.has_value());
  EXPECT_FALSE(forged.session->preserved) << Describe(forged);
  Result next = Exec(s->id, "print('x' in globals())");
  EXPECT_EQ(next.status, Status::kOk) << Describe(next);
  EXPECT_EQ(Out(next), "False\n") << Describe(next);
  Result later = Exec(s->id, "print('later')");
  EXPECT_EQ(Out(later), "later\n") << Describe(later);
  EXPECT_TRUE(later.session->preserved) << Describe(later);
  EXPECT_TRUE(S().Delete(s->id).has_value());
}

// The kernel's channel closed by the code: its init closes the host's end too, so the host
// neither believes the kernel still serves nor waits on a relay nobody reads; the session gets a
// new kernel and the next execution runs.
TEST_F(WarmSessions, ACodeThatClosesItsChannelLosesTheKernelNotTheSession) {
  auto s = S().Create();
  ASSERT_TRUE(s.has_value()) << s.error().message;
  Result first = Exec(s->id, "open('kept.txt', 'w').write('file')\nx = 1");
  EXPECT_EQ(first.status, Status::kOk) << Describe(first);
  jail::Limits limits = Program("").limits;
  limits.wall_time = std::chrono::seconds(10);
  Result closed = Exec(s->id, "import os\nos.close(3)\nprint('closed')", limits);
  EXPECT_NE(closed.status, Status::kOk) << Describe(closed);
  EXPECT_EQ(Out(closed), "closed\n") << Describe(closed);
  for (const char* code : {"print('x' in globals(), open('kept.txt').read())", "print('again')"}) {
    Result next = Exec(s->id, code);
    EXPECT_EQ(next.status, Status::kOk) << Describe(next);
    EXPECT_EQ(Out(next), code[7] == 'x' ? "False file\n" : "again\n") << Describe(next);
  }
  EXPECT_TRUE(S().Delete(s->id).has_value());
}

TEST_F(WarmSessions, AForgedDoneMarkerThenTheMemoryLimitIsNeverOk) {
  auto s = S().Create();
  ASSERT_TRUE(s.has_value()) << s.error().message;
  jail::Limits limits = Program("").limits;
  limits.wall_time = std::chrono::seconds(10);
  Result r = Exec(s->id,
                  "import os\nos.write(3, b'D')\nx = bytearray(1 << 30)\nx[::4096] = b'1' * len(x[::4096])\n"
                  "while True: pass",
                  limits);
  EXPECT_NE(r.status, Status::kOk) << Describe(r);
  EXPECT_TRUE(r.status == Status::kMemoryLimit || (r.error && r.error->ename == "SandboxError"))
      << Describe(r);
  ASSERT_TRUE(r.session.has_value());
  EXPECT_FALSE(r.session->preserved) << Describe(r);
  EXPECT_TRUE(S().Delete(s->id).has_value());
}

TEST_F(WarmSessions, ABackgroundThreadThatOutlivesTheCellIsNotAForgery) {
  auto s = S().Create();
  ASSERT_TRUE(s.has_value()) << s.error().message;
  Result started = Exec(s->id,
                        "import threading, time\nticks = [0]\ndef tick():\n    while True:\n"
                        "        ticks[0] += 1\n        time.sleep(0.01)\n"
                        "threading.Thread(target=tick, daemon=True).start()\nprint('started')");
  EXPECT_EQ(started.status, Status::kOk) << Describe(started);
  EXPECT_TRUE(started.session->preserved);
  for (int i = 0; i < 3; ++i) {
    Result next = Exec(s->id, "import threading\nprint(threading.active_count(), ticks[0] > 0)");
    EXPECT_EQ(next.status, Status::kOk) << Describe(next);
    EXPECT_EQ(Out(next), "2 True\n") << Describe(next);
    EXPECT_TRUE(next.session->preserved) << Describe(next);
  }
  // A thread that spins on the CPU (and so holds the GIL half the time) does not stop the
  // agent from reaching its channel either.
  Result spinning =
      Exec(s->id, "def spin():\n    while True: pass\nthreading.Thread(target=spin, daemon=True).start()");
  EXPECT_EQ(spinning.status, Status::kOk) << Describe(spinning);
  EXPECT_TRUE(spinning.session->preserved) << Describe(spinning);
  EXPECT_TRUE(S().Delete(s->id).has_value());
}

// Where the host may not read /proc/<pid>/syscall, the check falls back to "the main thread is
// asleep and has not run": it must still tell a forgery from an agent waiting for its channel.
TEST_F(WarmSessions, TheFallbackCheckStillTellsAForgeryFromAParkedAgent) {
  struct Fallback {
    Fallback() { jail::UseDoneCheckFallbackForTesting(true); }
    ~Fallback() { jail::UseDoneCheckFallbackForTesting(false); }
  } fallback;
  auto s = S().Create();
  ASSERT_TRUE(s.has_value()) << s.error().message;
  Result kept = Exec(s->id,
                     "import threading, time\ndef tick():\n    while True: time.sleep(0.01)\n"
                     "threading.Thread(target=tick, daemon=True).start()\nx = 41");
  EXPECT_EQ(kept.status, Status::kOk) << Describe(kept);
  Result again = Exec(s->id, "print(x + 1)");
  EXPECT_EQ(Out(again), "42\n") << Describe(again);
  EXPECT_TRUE(again.session->preserved) << Describe(again);
  jail::Limits limits = Program("").limits;
  limits.wall_time = std::chrono::seconds(3);
  Result forged = Exec(s->id, kForgeDoneThenSpin, limits);
  ExpectForged(forged, Describe(forged));
  EXPECT_FALSE(forged.session->preserved) << Describe(forged);
  // A forgery followed by sleep (asleep and idle, as a parked agent is): the kernel's wchan
  // names the wait, and it is not the channel's.
  Result asleep = Exec(s->id, "import os, time\nos.write(3, b'D')\ntime.sleep(30)", limits);
  EXPECT_NE(asleep.status, Status::kOk) << Describe(asleep);
  EXPECT_TRUE(S().Delete(s->id).has_value());
}

}  // namespace
}  // namespace execbox::engine

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new execbox::engine::WarmEnvironment());
  return RUN_ALL_TESTS();
}
