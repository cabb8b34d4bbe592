// `make bench`: one table of p50, p95 and throughput, every row measured in the same run and
// given as a ratio to plain `python3 -c 'print(1)'`. Rows that need a later layer (warm pool,
// sessions) are added with that layer.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Row {
  std::string name;
  std::vector<std::string> argv;
  std::vector<double> ms;
};

double RunOnce(const std::vector<std::string>& argv) {
  auto start = Clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "bench: %s failed (status %d)\n", argv[0].c_str(), status);
    std::exit(1);
  }
  return ms;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  std::string execbox = argc > 1 ? argv[1] : "build/execbox";
  int runs = argc > 2 ? std::atoi(argv[2]) : 20;
  const std::string plot =
      "import numpy, pandas, matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
      "plt.plot([1, 2, 3])\nplt.savefig('/tmp/bench.png')\n";
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
  std::vector<Row> rows = {
      {"python3 -c 'print(1)' (baseline)", {"/usr/bin/python3", "-c", "print(1)"}, {}},
      {"bwrap python3 -c 'print(1)'", with(bwrap, {"/usr/bin/python3", "-c", "print(1)"}), {}},
      {"execbox run (cold jail) print(1)", {execbox, "run", "-c", "print(1)"}, {}},
      {"python3 plot (baseline for plots)", {"/usr/bin/python3", "-c", plot}, {}},
      {"bwrap python3 plot", with(bwrap, {"/usr/bin/python3", "-c", plot}), {}},
      {"execbox run (cold jail) plot", {execbox, "run", "-c", plot}, {}},
  };
  // Interleave rows so a burst of machine noise hits all of them alike.
  for (int i = 0; i < runs; ++i) {
    for (auto& row : rows) row.ms.push_back(RunOnce(row.argv));
  }
  double base = Percentile(rows[0].ms, 0.5);
  double plot_base = Percentile(rows[3].ms, 0.5);
  std::printf("%-40s %9s %9s %10s %14s\n", "row", "p50 ms", "p95 ms", "runs/s", "p50 ratio");
  for (size_t i = 0; i < rows.size(); ++i) {
    double p50 = Percentile(rows[i].ms, 0.5);
    double ref = i < 3 ? base : plot_base;
    std::printf("%-40s %9.1f %9.1f %10.1f %8.2fx %s\n", rows[i].name.c_str(), p50,
                Percentile(rows[i].ms, 0.95), 1000.0 / p50, p50 / ref, i < 3 ? "print" : "plot");
  }
  return 0;
}
