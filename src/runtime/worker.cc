#include "runtime/worker.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "base/io.h"
#include "runtime/font_cache.h"
#include "runtime/python_program.h"

namespace execbox::runtime {

std::string DefaultWorkerBinary() {
  if (const char* env = std::getenv("EXECBOX_WORKER"); env != nullptr && *env != '\0') return env;
  const std::string& path = ExecutablePath();
  if (path.empty()) return "execbox-worker";
  const std::string dir = path.substr(0, path.rfind('/') + 1);
  const std::string beside = dir + "execbox-worker";
  const std::string installed = dir + "../libexec/execbox/execbox-worker";
  if (::access(beside.c_str(), X_OK) != 0 && ::access(installed.c_str(), X_OK) == 0) return installed;
  return beside;
}

WorkerOptions LeanWorkerOptions(const WorkerOptions& full, uint64_t memory_bytes) {
  WorkerOptions lean = full;
  lean.preload = kLeanPreload;
  lean.warm_plot = false;
  lean.huge_pages = false;
  lean.memory_bytes = memory_bytes;
  return lean;
}

Expected<jail::Policy> MakeWorkerPolicy(const WorkerOptions& options) {
  std::string binary_path = options.worker_binary.empty() ? DefaultWorkerBinary() : options.worker_binary;
  auto binary = ReadFile(binary_path, 256ull << 20);
  if (!binary) return std::unexpected(Context("reading the worker binary " + binary_path, binary.error()));
  jail::Policy p = BasePythonPolicy(options.wheelhouse, options.package_sets);
  nlohmann::json config = {
      {"agent", kAgentDir},
      {"preload", options.preload},
      {"warm_plot", options.warm_plot},
      {"gc_freeze", options.gc_freeze},
      {"huge_pages", options.huge_pages},
  };
  p.argv = {kWorkerPath, kWorkerConfigPath};
  p.files.push_back({.path = kWorkerPath, .content = std::move(*binary), .mode = 0555});
  p.files.push_back({.path = kWorkerConfigPath, .content = config.dump()});
  for (const auto& f : MatplotlibSeedFiles()) p.files.push_back(f);
  p.zygote = true;
  // The zygote's own limits. Every child gets its own cgroup, rlimits and tmpfs mounts; these
  // bound only the worker (and RLIMIT_NPROC counts every process of the worker's user).
  p.limits.memory_bytes = options.memory_bytes;
  p.limits.max_processes = 4096;
  p.limits.cpu_time = std::chrono::hours(24 * 365);
  p.limits.wall_time = std::chrono::hours(24 * 365);
  // Children set their own rlimits and may only lower what they inherit: these are ceilings.
  struct rlimit nofile {};
  ::getrlimit(RLIMIT_NOFILE, &nofile);  // the jail cannot raise what the host allows
  p.limits.open_files = static_cast<uint32_t>(std::min<rlim_t>(nofile.rlim_max, 65536));
  p.limits.work_dir_bytes = 1ull << 40;
  p.collect.enabled = false;
  return p;
}

}  // namespace execbox::runtime
