// `make bench-options`: which warm-path choices win on this machine (issue 4 asks to measure
// them and keep the winners). Each configuration gets its own pool; rows are the p50/p95 of
// print(1) and of a small plot, and the private/PSS memory of one idle session:
//   prepared   children forked and locked down before the request (the default)
//   on-demand  the child is forked from the warm zygote when the request arrives
//   no-freeze  no gc.freeze() in the zygote
//   no-plot    the zygote does not draw a plot at start (fonts, Agg renderer cold)
//   no-huge    the zygote's memory stays in small pages (no MADV_COLLAPSE)
//   preload    what the zygote imports, cut down: the scientific stack without the standard set's
//              common imports (kStandardImports, issue 16), numpy only, or nothing (the plot
//              imports the rest)
// and a third workload, "imports": those common imports in one execution, which is what
// preloading them saves.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"

namespace {

using namespace execbox;
using Clock = std::chrono::steady_clock;

const char* kPlot =
    "import numpy, pandas, matplotlib.pyplot as plt\n"
    "df = pandas.DataFrame({'x': numpy.arange(50), 'y': numpy.random.rand(50)})\n"
    "df.plot(x='x', y='y')\nplt.savefig('plot.png')\nplt.close('all')";

// Modules of the standard package set (scripts/python-packages.txt) that models import often,
// preloaded by default since this bench measured them (runtime::WorkerOptions::preload).
const std::vector<std::string> kStandardImports = {"requests", "tqdm", "jinja2", "tabulate", "sqlalchemy",
                                                   "plotly",   "xlrd", "docx",   "yaml",     "bs4"};

std::string ImportCode() {
  std::string code = "import ";
  for (size_t i = 0; i < kStandardImports.size(); ++i) code += (i ? ", " : "") + kStandardImports[i];
  return code;
}

// The default preload without them: the scientific stack alone.
std::vector<std::string> ScientificPreload() {
  std::vector<std::string> preload;
  for (const auto& m : runtime::WorkerOptions{}.preload) {
    if (std::find(kStandardImports.begin(), kStandardImports.end(), m) == kStandardImports.end())
      preload.push_back(m);
  }
  return preload;
}

struct Stat {
  double p50 = 0, p95 = 0;
};

Stat Measure(engine::Engine& e, const std::string& code, int runs, bool pause) {
  std::vector<double> ms;
  for (int i = 0; i < runs + 2; ++i) {
    runtime::PythonProgram p;
    p.code = code;
    auto start = Clock::now();
    auto r = e.Execute(p);
    double took = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (!r || r->status != engine::Status::kOk) {
      std::fprintf(stderr, "bench-options: a run failed: %s\n",
                   r ? engine::StatusName(r->status) : r.error().message.c_str());
    }
    if (i >= 2) ms.push_back(took);                                          // two warm-up runs
    if (pause) std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let the pool refill
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms[std::min(ms.size() - 1, ms.size() * 95 / 100)]};
}

}  // namespace

int main(int argc, char** argv) {
  int runs = argc > 1 && std::string(argv[1]) == "--quick" ? 8 : 25;
  struct Config {
    const char* name;
    size_t prepared;
    bool freeze, plot, huge;
    std::vector<std::string> preload = runtime::WorkerOptions{}.preload;
  } configs[] = {
      // clang-format off
      {"prepared (default)", 2, true, true, true},
      {"on-demand fork", 0, true, true, true},
      {"prepared, no gc.freeze", 2, false, true, true},
      {"prepared, no warm-up plot", 2, true, false, true},
      {"prepared, no huge pages", 2, true, true, false},
      {"prepared, preload scientific", 2, true, true, true, ScientificPreload()},
      {"prepared, preload numpy", 2, true, true, true, {"numpy"}},
      {"prepared, preload nothing", 2, true, true, true, {}},
      // clang-format on
  };
  std::printf("%-28s %10s %10s %10s %10s %10s %12s %10s\n", "configuration", "print p50", "print p95",
              "plot p50", "plot p95", "import p50", "session priv", "sess PSS");
  for (const auto& c : configs) {
    engine::EngineOptions o;
    o.pool.workers = 1;
    o.pool.prepared_per_worker = c.prepared;
    o.pool.worker.gc_freeze = c.freeze;
    o.pool.worker.warm_plot = c.plot;
    o.pool.worker.huge_pages = c.huge;
    o.pool.worker.preload = c.preload;
    auto e = engine::Engine::Create(o);
    if (!e) {
      std::fprintf(stderr, "bench-options: %s\n", e.error().message.c_str());
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    Stat print = Measure(**e, "print(1)", runs, true);
    Stat plot = Measure(**e, kPlot, std::max(6, runs / 2), true);
    Stat imports = Measure(**e, ImportCode(), std::max(6, runs / 2), true);
    double priv = 0, pss = 0;
    if (auto s = (*e)->sessions()->Create("bench", o.pool.limits)) {
      runtime::PythonProgram p;
      p.code = "x = 1";
      (void)(*e)->sessions()->Execute("bench", s->id, p);
      if (auto info = (*e)->sessions()->Info("bench", s->id)) {
        priv = info->private_bytes / 1048576.0;
        pss = info->pss_bytes / 1048576.0;
      }
      (void)(*e)->sessions()->Delete("bench", s->id);
    }
    std::printf("%-28s %8.1fms %8.1fms %8.1fms %8.1fms %8.1fms %10.1fMB %8.1fMB\n", c.name, print.p50,
                print.p95, plot.p50, plot.p95, imports.p50, priv, pss);
    std::fflush(stdout);
  }
  return 0;
}
