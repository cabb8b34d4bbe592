#include "cli/limit_options.h"

#include "base/io.h"

namespace execbox::cli {

void AddLimitOptions(CLI::App& command, LimitArgs& args) {
  jail::Limits defaults;
  command.add_option("--timeout", args.timeout, "Wall-time limit in seconds")
      ->check(CLI::PositiveNumber)
      ->default_str(std::to_string(defaults.wall_time.count() / 1000));
  command.add_option("--cpu-time", args.cpu_time, "CPU-time limit in seconds")
      ->check(CLI::PositiveNumber)
      ->default_str(std::to_string(defaults.cpu_time.count() / 1000));
  command.add_option("--memory", args.memory, "Memory limit (e.g. 256M)")->default_str("256M");
  command.add_option("--max-processes", args.max_processes, "Processes + threads")
      ->check(CLI::Range(1u, 100000u))
      ->default_str(std::to_string(defaults.max_processes));
  command.add_option("--output-limit", args.output_limit, "Bytes kept per output stream (head + tail)")
      ->default_str("1M");
}

void AddPolicyOption(CLI::App& command, std::string& policy) {
  command
      .add_option("--policy", policy,
                  "Lint profile checked before running: permissive (refuses nothing) or strict")
      ->default_str("permissive");
}

Status ApplyLimits(const LimitArgs& a, jail::Limits& l) {
  if (a.timeout > 0) l.wall_time = std::chrono::milliseconds(static_cast<int64_t>(a.timeout * 1000));
  if (a.cpu_time > 0) l.cpu_time = std::chrono::milliseconds(static_cast<int64_t>(a.cpu_time * 1000));
  if (a.max_processes > 0) l.max_processes = a.max_processes;
  auto size = [](const std::string& text, uint64_t& out) -> Status {
    if (text.empty()) return {};
    auto v = ParseSize(text);
    if (!v) return std::unexpected(v.error());
    out = *v;
    return {};
  };
  if (auto s = size(a.memory, l.memory_bytes); !s) return s;
  if (auto s = size(a.output_limit, l.output_bytes); !s) return s;
  if (auto s = size(a.disk, l.work_dir_bytes); !s) return s;
  return {};
}

}  // namespace execbox::cli
