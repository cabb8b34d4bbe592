// The warm worker: a jail whose process is execbox-worker (worker_main.cc), an embedded
// CPython that preloads the scientific stack once and forks an isolated child per execution.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "jail/policy.h"

namespace execbox::runtime {

inline constexpr const char* kWorkerPath = "/opt/execbox/execbox-worker";
inline constexpr const char* kWorkerConfigPath = "/opt/execbox/worker.json";

struct WorkerOptions {
  // Imported once in the zygote; every child starts with them loaded. The scientific stack, and
  // the standard set's modules models import most: `make bench-options` (docs/performance.md,
  // "The warm path's options") measured those ten costing ~0.5 s in each execution that imports
  // them, against ~30 MB more zygote and no change in a print(1) or a session's private memory.
  std::vector<std::string> preload = {"numpy",    "pandas",     "matplotlib", "matplotlib.pyplot",
                                      "scipy",    "requests",   "tqdm",       "jinja2",
                                      "tabulate", "sqlalchemy", "plotly",     "xlrd",
                                      "docx",     "yaml",       "bs4"};
  // Draw one plot in the zygote (fonts and the Agg renderer loaded once for every child).
  bool warm_plot = true;
  // gc.freeze() in the zygote: a child's collections then skip (and so never copy) the
  // zygote's objects. Off only to measure what it buys.
  bool gc_freeze = true;
  // The zygote's memory collapsed into huge pages once warm (jail::CollapseIntoHugePages): on
  // the 2-core VM of bench/ the forks' machine CPU fell by about a fifth. Off only to measure.
  bool huge_pages = true;
  // The operator's wheelhouse, a host directory ("" for none): bound into the zygote, and so
  // into every child (PythonProgram::wheelhouse).
  std::string wheelhouse;
  // The engine's package sets (engine/package_sets.h), a host directory ("" for none): bound
  // read-only into the zygote, and so into every child, at kPackageSetsDir.
  std::string package_sets;
  // Empty: DefaultWorkerBinary().
  std::string worker_binary;
  // The zygote's own cgroup: the warm interpreter (~150 MB with the default preload).
  uint64_t memory_bytes = 1ull << 30;
};

// The lean zygote's preload (engine/zygote_choice.h): the standard library modules model code
// imports most, and nothing else. With the agent and the interpreter its zygote is ~30 MB
// against the full one's ~130 MB, and a fork copies the page tables of what is mapped.
inline const std::vector<std::string> kLeanPreload = {
    "argparse",    "asyncio",      "base64",      "bisect",   "calendar", "collections", "contextlib",
    "copy",        "csv",          "dataclasses", "datetime", "decimal",  "difflib",     "enum",
    "fractions",   "functools",    "glob",        "gzip",     "hashlib",  "heapq",       "html",
    "io",          "itertools",    "json",        "logging",  "math",     "operator",    "pathlib",
    "pprint",      "queue",        "random",      "re",       "secrets",  "shutil",      "sqlite3",
    "statistics",  "string",       "struct",      "tempfile", "textwrap", "time",        "typing",
    "unicodedata", "urllib.parse", "uuid",        "zipfile",  "zoneinfo"};

// The lean zygote's options beside the full one's `full`: the same binary, wheelhouse and
// package sets, kLeanPreload, no warm-up plot and no huge pages (too little to collapse), and
// its own memory bound.
WorkerOptions LeanWorkerOptions(const WorkerOptions& full, uint64_t memory_bytes);

// Where execbox-worker is, found from the running executable, never from the source or build
// tree: $EXECBOX_WORKER; else next to it (a build tree); else ../libexec/execbox/ from its
// directory (an installed tree: PREFIX/bin/execbox, PREFIX/libexec/execbox/execbox-worker).
std::string DefaultWorkerBinary();

// The zygote's jail: like a cold Python jail, running the worker binary with Policy::zygote.
Expected<jail::Policy> MakeWorkerPolicy(const WorkerOptions& options);

}  // namespace execbox::runtime
