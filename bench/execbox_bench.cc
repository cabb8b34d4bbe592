// `make bench`: one table of p50, p95 and throughput, every row measured in the same run and
// given as a ratio to plain `python3 -c 'print(1)'` (plot rows also to the plain-python plot):
// plain python3, bubblewrap, the cold jail (`execbox run --server never`), `execbox run` through
// a local `execbox serve --unix` started for the bench, the warm pool (Engine::Execute; also with
// the guard's audit hooks) and a session (Sessions::Execute); then sustained throughput at
// concurrency 1, 2 and 8, memory per idle session, and the targets of docs/design.md,
// "Performance intent", met or not.
//
//   execbox_bench [EXECBOX] [--quick] [--runs N] [--workers N] [--seconds S] [--sessions N]
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "cli/local_client.h"
#include "engine/engine.h"
#include "engine/result_assembly.h"

extern char** environ;

namespace {

using namespace execbox;
using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "bench: %s\n", why.c_str());
  std::exit(1);
}

// A prepared command line: posix_spawn (no allocation after fork) so threads may share it.
struct Command {
  std::vector<std::string> argv;
  std::vector<char*> ptrs;
  explicit Command(std::vector<std::string> a) : argv(std::move(a)) {
    for (auto& s : argv) ptrs.push_back(s.data());
    ptrs.push_back(nullptr);
  }
  Command(const Command&) = delete;
};

// Runs to completion with stderr (and stdout, unless captured) to /dev/null; the wall time in ms.
double RunOnce(const Command& cmd, std::string* captured = nullptr) {
  int pipe_fds[2] = {-1, -1};
  if (captured != nullptr && ::pipe2(pipe_fds, O_CLOEXEC) != 0) Die("pipe");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  if (captured != nullptr) {
    posix_spawn_file_actions_adddup2(&fa, pipe_fds[1], 1);
  } else {
    posix_spawn_file_actions_adddup2(&fa, 2, 1);
  }
  auto start = Clock::now();
  pid_t pid = -1;
  int err = posix_spawn(&pid, cmd.ptrs[0], &fa, nullptr, cmd.ptrs.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err != 0) Die("cannot start " + cmd.argv[0]);
  if (captured != nullptr) {
    ::close(pipe_fds[1]);
    char buf[65536];
    ssize_t n;
    while ((n = ::read(pipe_fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
      if (n > 0) captured->append(buf, static_cast<size_t>(n));
    }
    ::close(pipe_fds[0]);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  double ms = MsSince(start);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    Die(cmd.argv[0] + " failed (status " + std::to_string(status) + ")");
  }
  return ms;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

double Mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

runtime::PythonProgram Program(const std::string& code) {
  runtime::PythonProgram p;
  p.code = code;
  p.limits.wall_time = std::chrono::seconds(60);
  return p;
}

engine::Result Check(Expected<engine::Result> r, const char* what, const char* engine_name) {
  if (!r) Die(std::string(what) + ": " + r.error().message);
  if (r->status != engine::Status::kOk) {
    Die(std::string(what) + ": status " + engine::StatusName(r->status) + ": " + r->stderr_text.text +
        (r->error ? r->error->ename + ": " + r->error->evalue : ""));
  }
  if (r->engine != engine_name)
    Die(std::string(what) + ": ran on engine " + r->engine + ", not " + engine_name);
  return std::move(*r);
}

// Waits until every worker is warm and holds its prepared children (a refill in the background
// would steal CPU from whatever row is measured next), then lets the machine settle.
void WaitPoolFull(engine::Pool& pool, std::chrono::milliseconds settle) {
  const auto& o = pool.options();
  auto deadline = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < deadline) {
    auto s = pool.Stats();
    if (s.warm_workers >= o.workers && s.lean_workers >= o.lean_workers && s.prepared >= s.prepared_target &&
        s.lean_prepared >= s.lean_prepared_target && s.prepared_sessions >= s.prepared_sessions_target) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::this_thread::sleep_for(settle);
}

struct LatencyRow {
  std::string name;
  bool plot = false;
  std::function<double()> run;  // one sample, ms
  std::vector<double> ms;
  std::string refused;  // non-empty: no numbers, this note instead
  uint64_t lean = 0, full = 0;  // the bench engine's children it took, by zygote
  std::string Zygote() const {
    if (lean == 0 && full == 0) return "";
    if (full == 0) return "lean";
    if (lean == 0) return "full";
    return "lean " + std::to_string(lean) + ", full " + std::to_string(full);
  }
};

// Busy CPU time of the whole machine so far (all cores, /proc/stat), in ms.
double BusyCpuMs() {
  FILE* f = std::fopen("/proc/stat", "r");
  if (f == nullptr) return 0;
  unsigned long long v[8] = {};
  int n = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
                      &v[5], &v[6], &v[7]);
  std::fclose(f);
  if (n < 8) return 0;
  unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];  // all but idle and iowait
  return static_cast<double>(busy) * 1000.0 / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// CPU time of this process (every thread: for the warm rows, the engine's host side).
double OwnCpuMs() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000.0 +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000.0;
}

// Runs `fn` in `n` threads for `seconds`; completed executions per second, the machine's busy
// CPU time per execution, and the part of it this process spent.
double Throughput(int n, double seconds, const std::function<void()>& fn, double* cpu_ms_per_exec,
                  double* own_ms_per_exec = nullptr) {
  std::atomic<long> done{0};
  double cpu_start = BusyCpuMs(), own_start = OwnCpuMs();
  auto start = Clock::now();
  auto deadline = start + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&] {
      while (Clock::now() < deadline) {
        fn();
        done.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  if (cpu_ms_per_exec != nullptr)
    *cpu_ms_per_exec = (BusyCpuMs() - cpu_start) / static_cast<double>(done.load());
  if (own_ms_per_exec != nullptr)
    *own_ms_per_exec = (OwnCpuMs() - own_start) / static_cast<double>(done.load());
  return static_cast<double>(done.load()) / (MsSince(start) / 1000.0);
}

// The pool's CPU counters over the warm throughput runs: the zygotes' and the ended children's
// by phase, per child ended.
struct CpuPhases {
  uint64_t children = 0, zygote_ns = 0, setup_ns = 0, execution_ns = 0, exit_ns = 0;
  uint64_t lean = 0, full = 0;  // children handed out, by zygote
  void Add(const engine::PoolStats& a, const engine::PoolStats& b) {
    children += b.children_ended - a.children_ended;
    lean += b.served_lean - a.served_lean;
    full += b.served_full - a.served_full;
    zygote_ns += b.zygote_cpu_ns - std::min(b.zygote_cpu_ns, a.zygote_cpu_ns);
    setup_ns += b.child_setup_ns - a.child_setup_ns;
    execution_ns += b.child_execution_ns - a.child_execution_ns;
    exit_ns += b.child_exit_ns - a.child_exit_ns;
  }
  std::string Zygote() const { return full == 0 ? "lean" : lean == 0 ? "full" : "both"; }
  double PerChild(uint64_t ns) const {
    return children == 0 ? 0.0 : static_cast<double>(ns) / 1e6 / static_cast<double>(children);
  }
};

std::string LoadAverage() {
  char buf[64] = {};
  FILE* f = std::fopen("/proc/loadavg", "r");
  if (f == nullptr) return "?";
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  std::string s(buf, n);
  // The 1, 5 and 15 minute averages.
  size_t cut = 0;
  for (int spaces = 0; cut < s.size() && spaces < 3; ++cut) spaces += s[cut] == ' ';
  return s.substr(0, cut > 0 ? cut - 1 : 0);
}

const char* Met(bool ok) { return ok ? "met" : "NOT met"; }

double Mb(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// `execbox serve --listen none --unix PATH --workers N`, for `execbox run` to find; its pid once
// the socket accepts connections.
pid_t StartLocalServer(const std::string& execbox, const std::string& path, int workers) {
  const Command serve(
      {execbox, "serve", "--listen", "none", "--unix", path, "--workers", std::to_string(workers)});
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  int err = posix_spawn(&pid, serve.ptrs[0], &fa, nullptr, serve.ptrs.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err != 0) Die("cannot start the local server");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  for (int i = 0; i < 1800; ++i) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    if (up) return pid;
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) Die("the local server exited at start");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  Die("the local server did not listen within 180 s");
}

// The local server refills its pool after each request: wait for that (its /metrics) outside
// the sample, as warm() does for the bench's own pool, or its forks land in the next row's.
void WaitServerFull(const std::string& path, size_t prepared, std::chrono::milliseconds settle) {
  const std::string gauge = "\nexecbox_prepared_children ";
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    auto client = cli::LocalClient::Connect(path);
    if (!client) Die("the local server: " + client.error().message);
    auto reply = (*client)->Send({.method = "GET", .target = "/metrics"});
    if (!reply || reply->status != 200) Die("the local server's /metrics did not answer");
    size_t at = reply->body.find(gauge);
    if (at == std::string::npos) Die("the local server's /metrics has no " + gauge.substr(1));
    if (std::strtoull(reply->body.c_str() + at + gauge.size(), nullptr, 10) >= prepared) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(settle);
}

}  // namespace

int main(int argc, char** argv) {
  std::string execbox = "build/execbox";
  int runs = 20;       // plot samples per row; print(1) rows get twice as many
  int workers = 1;     // chosen on the 2-core VM (see docs/performance.md): 1 beat 2
  double seconds = 4;  // per throughput measurement (two halves, interleaved)
  int session_count = 100;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] {
      if (i + 1 >= argc) Die(a + " needs a value");
      return std::string(argv[++i]);
    };
    if (a == "--quick") {
      quick = true;
    } else if (a == "--runs") {
      runs = std::stoi(next());
    } else if (a == "--workers") {
      workers = std::stoi(next());
    } else if (a == "--seconds") {
      seconds = std::stod(next());
    } else if (a == "--sessions") {
      session_count = std::stoi(next());
    } else if (a.starts_with("--")) {
      Die("unknown option " + a +
          " (usage: execbox_bench [EXECBOX] [--quick] [--runs N] [--workers N] [--seconds S] [--sessions "
          "N])");
    } else if (std::all_of(a.begin(), a.end(), ::isdigit)) {
      runs = std::stoi(a);  // the old positional form
    } else {
      execbox = a;
    }
  }
  if (quick) {
    runs = std::min(runs, 6);
    seconds = std::min(seconds, 1.5);
  }
  const int print_runs = 2 * runs;
  const std::string load_before = LoadAverage();
  auto total_start = Clock::now();

  const std::string print1 = "print(1)";
  // Code the lean zygote does not cover (numpy is not standard): served by a full one.
  const std::string numpy_print = "import numpy\nprint(numpy.zeros(2).sum())";
  // The same code everywhere: the stack imported, one small figure rendered to PNG in memory
  // and closed (so the agent has no open figure left to capture on top).
  const std::string plot =
      "import io, numpy, pandas, matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
      "fig, ax = plt.subplots(figsize=(4, 3))\nax.plot(numpy.arange(10), pandas.Series(range(10)) ** 2)\n"
      "buf = io.BytesIO()\nfig.savefig(buf, format='png')\nplt.close(fig)\n";
  std::vector<std::string> bwrap = {"/usr/bin/bwrap",
                                    "--unshare-all",
                                    "--die-with-parent",
                                    "--new-session",
                                    "--ro-bind",
                                    "/usr",
                                    "/usr",
                                    "--symlink",
                                    "usr/lib",
                                    "/lib",
                                    "--symlink",
                                    "usr/lib64",
                                    "/lib64",
                                    "--symlink",
                                    "usr/bin",
                                    "/bin",
                                    "--ro-bind",
                                    "/etc/alternatives",
                                    "/etc/alternatives",
                                    "--ro-bind",
                                    "/etc/matplotlibrc",
                                    "/etc/matplotlibrc",
                                    "--proc",
                                    "/proc",
                                    "--dev",
                                    "/dev",
                                    "--tmpfs",
                                    "/tmp",
                                    "--clearenv",
                                    "--setenv",
                                    "MPLBACKEND",
                                    "Agg",
                                    "--setenv",
                                    "HOME",
                                    "/tmp",
                                    "--"};
  auto with = [](std::vector<std::string> prefix, std::vector<std::string> rest) {
    prefix.insert(prefix.end(), rest.begin(), rest.end());
    return prefix;
  };
  const Command plain_print({"/usr/bin/python3", "-c", print1});
  const Command bwrap_print(with(bwrap, {"/usr/bin/python3", "-c", print1}));
  const Command cold_print({execbox, "run", "--server", "never", "-c", print1});
  const Command served_print({execbox, "run", "--server", "always", "-c", print1});
  const Command plain_plot({"/usr/bin/python3", "-c", plot});
  const Command bwrap_plot(with(bwrap, {"/usr/bin/python3", "-c", plot}));
  const Command cold_plot({execbox, "run", "--server", "never", "-c", plot});
  const Command served_plot({execbox, "run", "--server", "always", "-c", plot});
  // The local server `execbox run` uses: its own warm pool, beside the bench's engine.
  char socket_dir[] = "/tmp/execbox-bench-XXXXXX";
  if (::mkdtemp(socket_dir) == nullptr) Die("mkdtemp");
  const std::string socket_path = std::string(socket_dir) + "/execbox.sock";
  const pid_t server = StartLocalServer(execbox, socket_path, workers);
  ::setenv("EXECBOX_SOCKET", socket_path.c_str(), 1);

  engine::EngineOptions options;
  options.pool.workers = static_cast<size_t>(workers);
  options.pool.prepared_per_worker = 2;
  options.sessions.max_sessions = static_cast<size_t>(session_count) + 12;
  auto start = Clock::now();
  auto created = engine::Engine::Create(options);
  if (!created) Die("starting the warm engine: " + created.error().message);
  std::unique_ptr<engine::Engine> eng = std::move(*created);
  engine::Pool& pool = *eng->pool();
  engine::Sessions& sessions = *eng->sessions();
  WaitPoolFull(pool, std::chrono::milliseconds(0));
  double pool_start_ms = MsSince(start);

  auto session = sessions.Create("bench", options.pool.limits);
  if (!session) Die("creating a session: " + session.error().message);
  const std::string sid = session->id;
  // Sessions copied as state: this one's small state is forked, exported and imported (what a
  // restart's restore does); one with checkpoints is undone; one holding a 50 MB DataFrame is
  // forked a few times after the interleaved rows.
  auto run_in = [&](const std::string& id, const std::string& code) {
    auto r = sessions.Execute("bench", id, Program(code));
    if (!r) Die("session: " + r.error().message);
    Check(std::move(*r), "session", "session");
  };
  auto small = sessions.Create("bench", options.pool.limits);
  if (!small) Die("creating a session: " + small.error().message);
  run_in(small->id, "import numpy as np\nsmall = {'a': list(range(100))}\ndef f(x):\n    return x + 1");
  auto undoable = sessions.Create("bench", options.pool.limits, true);
  if (!undoable) Die("creating a session with checkpoints: " + undoable.error().message);
  jail::Limits big_limits = options.pool.limits;
  big_limits.memory_bytes = 1024ull << 20;
  big_limits.work_dir_bytes = 256ull << 20;
  auto big = sessions.Create("bench", big_limits);
  if (!big) Die("creating a session: " + big.error().message);
  run_in(big->id, "import numpy as np, pandas as pd\ndf = pd.DataFrame(np.random.rand(655_360, 10))");
  auto exported = sessions.Export("bench", small->id);
  if (!exported) Die("export: " + exported.error().message);
  auto fork_of = [&](const std::string& from) {
    auto t = Clock::now();
    auto f = sessions.Fork("bench", from);
    double ms = MsSince(t);
    if (!f) Die("fork: " + f.error().message);
    (void)sessions.Delete("bench", f->info.id);
    return ms;
  };
  auto undo = [&] {
    run_in(undoable->id, "n = 1");
    auto t = Clock::now();
    auto u = sessions.Undo("bench", undoable->id);
    double ms = MsSince(t);
    if (!u) Die("undo: " + u.error().message);
    return ms;
  };
  auto import = [&] {
    auto t = Clock::now();
    auto opened = sessions.OpenExport(exported->sealed);
    if (!opened) Die("import: " + opened.error().message);
    auto i = sessions.Import("bench", std::move(*opened), big_limits);
    double ms = MsSince(t);
    if (!i) Die("import: " + i.error().message);
    (void)sessions.Delete("bench", i->info.id);
    return ms;
  };

  const auto settle = std::chrono::milliseconds(75);
  std::vector<double> warm_setup_ms;
  auto warm = [&](const std::string& code, runtime::Guard guard = runtime::Guard::kOff) {
    auto p = Program(code);
    p.guard = guard;
    auto t = Clock::now();
    auto r = Check(eng->Execute(p), "warm pool", "warm");
    double ms = MsSince(t);
    warm_setup_ms.push_back(static_cast<double>(r.usage.setup_ms));
    WaitPoolFull(pool, settle);  // outside the sample: the next request finds a prepared child
    return ms;
  };
  auto served = [&](const Command& cmd) {
    double ms = RunOnce(cmd);
    WaitServerFull(socket_path, engine::PoolOptions{}.prepared_per_worker * static_cast<size_t>(workers),
                   settle);
    return ms;
  };
  auto in_session = [&](const std::string& code, const std::string& id) {
    auto p = Program(code);
    auto t = Clock::now();
    auto r = sessions.Execute("bench", id, p);
    double ms = MsSince(t);
    if (!r) Die("session: " + r.error().message);
    Check(std::move(*r), "session", "session");
    return ms;
  };

  std::vector<LatencyRow> rows = {
      {"python3 -c (baseline)", false, [&] { return RunOnce(plain_print); }},
      {"bwrap, locked down", false, [&] { return RunOnce(bwrap_print); }},
      {"execbox run (cold jail)", false, [&] { return RunOnce(cold_print); }},
      {"execbox run (local server)", false, [&] { return served(served_print); }},
      {"warm pool (Engine::Execute)", false, [&] { return warm(print1); }},
      {"  import numpy (not standard)", false, [&] { return warm(numpy_print); }},
      {"  with guard: audit", false, [&] { return warm(print1, runtime::Guard::kAudit); }},
      {"session (Sessions::Execute)", false, [&] { return in_session(print1, sid); }},
      {"  with checkpoint: true", false, [&] { return in_session(print1, undoable->id); }},
      {"python3 -c (baseline for plots)", true, [&] { return RunOnce(plain_plot); }},
      {"bwrap, locked down", true, [&] { return RunOnce(bwrap_plot); }},
      {"execbox run (cold jail)", true, [&] { return RunOnce(cold_plot); }},
      {"execbox run (local server)", true, [&] { return served(served_plot); }},
      {"warm pool (Engine::Execute)", true, [&] { return warm(plot); }},
      {"  with guard: audit", true, [&] { return warm(plot, runtime::Guard::kAudit); }},
      {"session (Sessions::Execute)", true, [&] { return in_session(plot, sid); }},
  };
  enum {
    kPlain = 0,
    kBwrap,
    kCold,
    kServed,
    kWarm,
    kWarmNumpy,
    kWarmGuarded,
    kSession,
    kCheckpointed,
    kPlainPlot,
    kBwrapPlot,
    kColdPlot,
    kServedPlot,
    kWarmPlot,
    kWarmPlotGuarded,
    kSessionPlot
  };

  // Warm-up: page cache, matplotlib's font cache for plain python3, the session's first plot.
  for (int i = 0; i < 2; ++i) {
    for (auto& row : rows) {
      if (row.run && (i == 0 || !row.plot)) row.run();
    }
  }
  warm_setup_ms.clear();
  const uint64_t on_demand_before = pool.Stats().spawned_on_demand;
  // Interleaved, so a burst of machine noise hits every row alike.
  for (int i = 0; i < print_runs; ++i) {
    for (auto& row : rows) {
      if (!row.run || (row.plot && i % 2 == 1)) continue;
      const auto before = pool.Stats();
      row.ms.push_back(row.run());
      const auto after = pool.Stats();
      row.lean += after.served_lean - before.served_lean;
      row.full += after.served_full - before.served_full;
    }
  }

  const uint64_t warm_on_demand = pool.Stats().spawned_on_demand - on_demand_before;
  // Sessions copied as state, after the rows above (each takes a session child from the pool),
  // interleaved with each other; like the warm rows, each sample finds the pool refilled.
  std::vector<LatencyRow> copy_rows = {
      {"session fork, small state", false, [&] { return fork_of(small->id); }},
      {"session undo", false, undo},
      {"session import (= restore)", false, import},
  };
  for (int i = 0; i < runs; ++i) {
    for (auto& row : copy_rows) {
      row.ms.push_back(row.run());
      WaitPoolFull(pool, settle);
    }
  }
  // Forks back to back, as an agent exploring alternatives asks for them: no pause for the
  // pool, so after the prepared session child each one forks its own.
  LatencyRow burst{"session fork, 8 back to back", false, nullptr};
  for (int i = 0; i < std::max(1, runs / 3); ++i) {
    for (int k = 0; k < 8; ++k) burst.ms.push_back(fork_of(small->id));
    WaitPoolFull(pool, settle);
  }
  copy_rows.push_back(std::move(burst));
  // Where a warm print(1) spends its time: Engine::Execute's steps, timed one by one.
  std::vector<double> acquire_ms, handover_ms, run_ms, rest_ms, assemble_ms, release_ms;
  for (int i = 0; i < std::max(6, runs / 2); ++i) {
    auto p = Program(print1);
    auto t0 = Clock::now();
    auto request = runtime::MakeRequest(p, true);
    auto child = pool.Acquire(p.limits, false);
    if (!request || !child) Die("warm breakdown: acquire failed");
    auto t1 = Clock::now();
    auto outcome = (*child)->Execute(*request, p.stdin_data, p.limits, {});
    if (!outcome) Die("warm breakdown: " + outcome.error().message);
    auto t15 = Clock::now();
    engine::Result r = engine::AssembleResult(p, p.limits, *outcome);
    auto t2 = Clock::now();
    assemble_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t15).count());
    child->reset();
    auto t3 = Clock::now();
    acquire_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    handover_ms.push_back(static_cast<double>(r.usage.setup_ms));
    run_ms.push_back(static_cast<double>(r.usage.wall_ms));
    rest_ms.push_back(std::chrono::duration<double, std::milli>(t15 - t1).count() -
                      static_cast<double>(r.usage.setup_ms + r.usage.wall_ms));
    release_ms.push_back(std::chrono::duration<double, std::milli>(t3 - t2).count());
    WaitPoolFull(pool, settle);
  }

  // What the pool does per execution off the request path: fork + isolate a child, and end one.
  std::vector<double> spawn_ms, kill_ms;
  // Limits no prepared child was made for (a larger /tmp): the pool forks one on demand.
  jail::Limits unprepared = options.pool.limits;
  unprepared.tmp_bytes += 1 << 20;
  for (int i = 0; i < std::max(6, runs / 2); ++i) {
    auto t = Clock::now();
    auto child = pool.Acquire(unprepared, true);
    if (!child) Die("spawn on demand: " + child.error().message);
    spawn_ms.push_back(MsSince(t));
    t = Clock::now();
    child->reset();
    kill_ms.push_back(MsSince(t));
    std::this_thread::sleep_for(settle);
  }

  // And where a cold `execbox run` spends its time, from its own --json report.
  const Command cold_json({execbox, "run", "--server", "never", "--json", "-c", print1});
  std::vector<double> cold_total_ms, cold_setup_ms, cold_wall_ms;
  for (int i = 0; i < std::max(6, runs / 2); ++i) {
    std::string out;
    cold_total_ms.push_back(RunOnce(cold_json, &out));
    auto j = nlohmann::json::parse(out, nullptr, false);
    if (j.is_discarded() || !j.contains("usage")) Die("execbox run --json: unreadable output: " + out);
    cold_setup_ms.push_back(j["usage"].value("setup_ms", 0.0));
    cold_wall_ms.push_back(j["usage"].value("wall_ms", 0.0));
  }

  // Sustained throughput: no pauses. Each figure is two halves, plain and warm alternating.
  const int levels[] = {1, 2, 8};
  double plain_rate[3] = {}, warm_rate[3] = {}, plain_cpu[3] = {}, warm_cpu[3] = {}, warm_host_cpu[3] = {};
  CpuPhases phases[3];
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < 3; ++l) {
      double cpu = 0, own = 0;
      plain_rate[l] += Throughput(
                           levels[l], seconds / 2, [&] { RunOnce(plain_print); }, &cpu) /
                       2;
      plain_cpu[l] += cpu / 2;
      WaitPoolFull(pool, settle);
      auto before = pool.Stats();
      warm_rate[l] +=
          Throughput(
              levels[l], seconds / 2,
              [&] { Check(eng->Execute(Program(print1)), "warm pool throughput", "warm"); }, &cpu, &own) /
          2;
      warm_cpu[l] += cpu / 2;
      warm_host_cpu[l] += own / 2;
      WaitPoolFull(pool, settle);  // the used children are ended and counted by then
      auto after = pool.Stats();
      phases[l].Add(before, after);
    }
  }
  auto stats = pool.Stats();

  // Memory: one idle session, then `session_count` of them.
  auto one = sessions.Create("bench", options.pool.limits);
  if (!one) Die("creating a session: " + one.error().message);
  if (auto r = sessions.Execute("bench", one->id, Program("x = 1")); !r) Die("session: " + r.error().message);
  auto one_info = sessions.Info("bench", one->id);
  if (!one_info) Die("session info: " + one_info.error().message);
  (void)sessions.Delete("bench", one->id);
  (void)sessions.Delete("bench", sid);
  start = Clock::now();
  std::vector<std::string> many;
  for (int i = 0; i < session_count; ++i) {
    auto s = sessions.Create("bench", options.pool.limits);
    if (!s) Die("creating session " + std::to_string(i + 1) + ": " + s.error().message);
    if (auto r = sessions.Execute("bench", s->id, Program("x = 1")); !r) Die("session: " + r.error().message);
    many.push_back(s->id);
  }
  double create_many_ms = MsSince(start);
  uint64_t many_private = 0, many_pss = 0;
  size_t listed = 0;
  for (const auto& info : sessions.List("bench")) {
    many_private += info.private_bytes;
    many_pss += info.pss_bytes;
    ++listed;
  }
  for (const auto& id : many) (void)sessions.Delete("bench", id);

  // The table.
  double base = Percentile(rows[kPlain].ms, 0.5);
  double plot_base = Percentile(rows[kPlainPlot].ms, 0.5);
  std::printf(
      "execbox bench: %d print(1) and %d plot samples per row, interleaved; %d CPUs; load average %s "
      "at start, %s at end\n",
      print_runs, runs, static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)), load_before.c_str(),
      LoadAverage().c_str());
  std::printf(
      "warm pool: %zu worker(s), %zu prepared per worker, full after %.0f ms%s.\n"
      "Latency rows wait for the pool to refill + %lld ms after each warm sample, so each finds a\n"
      "prepared child; throughput rows run without pauses. Ratios are of p50s.\n\n",
      pool.options().workers, pool.options().prepared_per_worker, pool_start_ms,
      workers == 1 ? " (1 worker: 2 gave no more throughput on 2 cores,\nfor twice the zygote memory; "
                     "--workers N to change)"
                   : "",
      static_cast<long long>(settle.count()));
  std::printf("%-34s %9s %9s %9s %11s %11s  %s\n", "print(1)", "p50 ms", "p95 ms", "1/p50 /s", "vs print(1)",
              "vs py plot", "zygote");
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    if (i == kPlainPlot) {
      std::printf("%-34s\n", "import numpy,pandas,matplotlib + PNG");
    }
    if (!row.refused.empty()) {
      std::printf("  %-32s n/a (refused: see note)\n", row.name.c_str());
      continue;
    }
    double p50 = Percentile(row.ms, 0.5);
    std::printf("  %-32s %9.1f %9.1f %9.1f %10.2fx", row.name.c_str(), p50, Percentile(row.ms, 0.95),
                1000.0 / p50, p50 / base);
    if (row.plot) {
      std::printf(" %10.2fx", p50 / plot_base);
    } else if (!row.Zygote().empty()) {
      std::printf(" %11s", "");
    }
    if (!row.Zygote().empty()) std::printf("  %s", row.Zygote().c_str());
    std::printf("\n");
  }
  std::printf("sessions copied as state\n");
  for (const auto& row : copy_rows) {
    double p50 = Percentile(row.ms, 0.5);
    std::printf("  %-32s %9.1f %9.1f %9.1f %10.2fx\n", row.name.c_str(), p50, Percentile(row.ms, 0.95),
                1000.0 / p50, p50 / base);
  }
  std::printf("%-34s %9s %9s %9s\n", "throughput print(1), execs/s", "c=1", "c=2", "c=8");
  std::printf("  %-32s %9.1f %9.1f %9.1f\n", "python3 -c, N at a time", plain_rate[0], plain_rate[1],
              plain_rate[2]);
  std::printf("  %-32s %9.1f %9.1f %9.1f\n", "warm pool, N threads", warm_rate[0], warm_rate[1],
              warm_rate[2]);
  std::printf("  %-32s %8.2fx %8.2fx %8.2fx\n", "warm / plain", warm_rate[0] / plain_rate[0],
              warm_rate[1] / plain_rate[1], warm_rate[2] / plain_rate[2]);
  std::printf("  %-32s %9.1f %9.1f %9.1f\n", "CPU ms/exec (machine): python3", plain_cpu[0], plain_cpu[1],
              plain_cpu[2]);
  std::printf("  %-32s %9.1f %9.1f %9.1f\n", "CPU ms/exec (machine): warm", warm_cpu[0], warm_cpu[1],
              warm_cpu[2]);
  // The host's engine (pool refills, cgroups, watching, results) against the rest: the
  // zygotes' forks, the children's setup, code and exits, and the kernel's own work for them.
  std::printf("  %-32s %9.1f %9.1f %9.1f\n", "  of which the host (engine)", warm_host_cpu[0],
              warm_host_cpu[1], warm_host_cpu[2]);
  // The rest, by phase, from the cgroups: each child's own (its exit included) and the zygote's.
  auto phase_row = [&](const char* name, auto&& of) {
    std::printf("  %-32s %9.1f %9.1f %9.1f\n", name, of(0), of(1), of(2));
  };
  phase_row("  of which the zygote (fork)", [&](int l) { return phases[l].PerChild(phases[l].zygote_ns); });
  phase_row("  child: isolate + warm-up", [&](int l) { return phases[l].PerChild(phases[l].setup_ns); });
  phase_row("  child: the code (request)", [&](int l) { return phases[l].PerChild(phases[l].execution_ns); });
  phase_row("  child: exit", [&](int l) { return phases[l].PerChild(phases[l].exit_ns); });
  phase_row("  elsewhere (kernel threads...)", [&](int l) {
    return warm_cpu[l] - warm_host_cpu[l] -
           phases[l].PerChild(phases[l].zygote_ns + phases[l].setup_ns + phases[l].execution_ns +
                              phases[l].exit_ns);
  });
  std::printf("  %-32s %9s %9s %9s\n", "  served by the zygote", phases[0].Zygote().c_str(),
              phases[1].Zygote().c_str(), phases[2].Zygote().c_str());
  std::printf("%-34s %9s %9s\n", "memory (smaps_rollup), MB", "private", "PSS");
  std::printf("  %-32s %9.1f %9.1f\n", "1 idle session (after x = 1)", Mb(one_info->private_bytes),
              Mb(one_info->pss_bytes));
  std::printf("  %-32s %9.1f %9.1f\n", (std::to_string(listed) + " idle sessions, total").c_str(),
              Mb(many_private), Mb(many_pss));
  std::printf("  %-32s %9.1f %9.1f\n", "  per session", Mb(many_private) / static_cast<double>(listed),
              Mb(many_pss) / static_cast<double>(listed));
  std::printf("  %-32s %9.1f %9s\n", "full zygote (cgroup peak)", Mb(stats.full_zygote_peak_bytes), "");
  std::printf("  %-32s %9.1f %9s\n", "lean zygote (cgroup peak)", Mb(stats.lean_zygote_peak_bytes), "");

  std::vector<double> big_fork_ms;
  for (int i = 0; i < 5; ++i) big_fork_ms.push_back(fork_of(big->id));
  auto big_export = sessions.Export("bench", big->id);
  std::printf(
      "\nsession fork with a 50 MB DataFrame (5 runs): p50 %.0f ms, max %.0f ms; its snapshot %.1f MB "
      "(a small state's: %.1f KB)\n",
      Percentile(big_fork_ms, 0.5), Percentile(big_fork_ms, 1.0),
      big_export ? Mb(big_export->sealed.size()) : 0.0, static_cast<double>(exported->sealed.size()) / 1024);
  std::printf(
      "warm print(1), where the time goes (mean of %zu): acquire %.2f ms, hand-over (setup_ms) %.1f ms,\n"
      "  code to exit (wall_ms) %.1f ms, after exit %.1f ms, assemble %.2f ms, release child %.2f ms;\n"
      "  setup_ms in the warm rows above: mean %.1f ms\n",
      acquire_ms.size(), Mean(acquire_ms), Mean(handover_ms), Mean(run_ms), Mean(rest_ms), Mean(assemble_ms),
      Mean(release_ms), Mean(warm_setup_ms));
  std::printf(
      "off the request path, per execution: fork + isolate a child %.1f ms, end an idle one %.1f ms\n",
      Mean(spawn_ms), Mean(kill_ms));
  std::printf(
      "cold `execbox run --json` print(1) (mean of %zu): %.1f ms = jail set-up (setup_ms) %.1f ms\n"
      "  + interpreter, agent, code and exit (wall_ms) %.1f ms + the CLI's own start and report %.1f ms\n",
      cold_total_ms.size(), Mean(cold_total_ms), Mean(cold_setup_ms), Mean(cold_wall_ms),
      Mean(cold_total_ms) - Mean(cold_setup_ms) - Mean(cold_wall_ms));
  std::printf("warm latency samples that found no prepared child: %llu of %zu\n",
              static_cast<unsigned long long>(warm_on_demand),
              rows[kWarm].ms.size() + rows[kWarmPlot].ms.size());
  std::printf(
      "pool over the run: %llu spawned on demand, %llu workers replaced; %zu sessions created in %.1f s\n",
      static_cast<unsigned long long>(stats.spawned_on_demand),
      static_cast<unsigned long long>(stats.workers_replaced), listed, create_many_ms / 1000.0);

  double warm_r = Percentile(rows[kWarm].ms, 0.5) / base;
  double warm_plot_r = Percentile(rows[kWarmPlot].ms, 0.5) / plot_base;
  double cold_r = Percentile(rows[kCold].ms, 0.5) / base;
  double served_r = Percentile(rows[kServed].ms, 0.5) / base;
  double tput_r = warm_rate[2] / plain_rate[2];
  double idle_mb = Mb(one_info->private_bytes);
  double fork_r = Percentile(copy_rows[0].ms, 0.5) / base;
  double burst_r = Percentile(copy_rows.back().ms, 0.5) / base;
  std::printf("\ntargets (docs/design.md; issue 33):\n");
  std::printf("  warm print(1) p50 <= 0.15x plain          %6.3fx %s\n", warm_r, Met(warm_r <= 0.15));
  std::printf("  warm plot p50 <= 0.12x plain plot         %6.3fx %s\n", warm_plot_r,
              Met(warm_plot_r <= 0.12));
  std::printf("  cold jail print(1) p50 <= 1.3x plain      %6.3fx %s\n", cold_r, Met(cold_r <= 1.3));
  std::printf("  execbox run print(1) p50 <= 1.3x plain    %6.3fx %s (local server)\n", served_r,
              Met(served_r <= 1.3));
  std::printf("  warm throughput c=8 >= 2x plain c=8       %6.3fx %s\n", tput_r, Met(tput_r >= 2.0));
  std::printf("  idle session <= 10 MB private             %6.1f MB %s\n", idle_mb, Met(idle_mb <= 10.0));
  std::printf("  session fork, small state p50 <= 0.5x     %6.3fx %s\n", fork_r, Met(fork_r <= 0.5));
  std::printf("  session fork, 8 back to back p50 <= 0.5x  %6.3fx %s\n", burst_r, Met(burst_r <= 0.5));
  ::kill(server, SIGTERM);
  ::waitpid(server, nullptr, 0);
  ::rmdir(socket_dir);
  std::printf("\n(bench took %.0f s)\n", MsSince(total_start) / 1000.0);
  return 0;
}
