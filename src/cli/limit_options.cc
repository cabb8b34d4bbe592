#include "cli/limit_options.h"

#include <cmath>
#include <iostream>

#include "base/io.h"

namespace execbox::cli {
namespace {

// The built-in default as an option's value would be written: "30", "256M", "1M", "64".
std::string DefaultText(const engine::LimitSpec& spec) {
  const uint64_t base = spec.get(jail::Limits{});
  switch (spec.unit) {
    case engine::LimitUnit::kSeconds: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", static_cast<double>(base) / 1000);
      return buf;
    }
    case engine::LimitUnit::kMebibytes:
    case engine::LimitUnit::kBytes:
      if (base % (1ull << 20) == 0) return std::to_string(base >> 20) + "M";
      if (base % 1024 == 0) return std::to_string(base >> 10) + "K";
      return std::to_string(base);
    case engine::LimitUnit::kCount:
      break;
  }
  return std::to_string(base);
}

std::string Help(const engine::LimitSpec& spec) {
  std::string help(spec.description);
  switch (spec.unit) {
    case engine::LimitUnit::kSeconds:
      return help + ", in seconds";
    case engine::LimitUnit::kMebibytes:
    case engine::LimitUnit::kBytes:
      return help + " (a size: 64K, 256M, 1G)";
    case engine::LimitUnit::kCount:
      break;
  }
  return help;
}

// The option's text as a value in the limit's unit.
Expected<double> ValueOf(const engine::LimitSpec& spec, const std::string& text) {
  const std::string option(spec.cli);
  switch (spec.unit) {
    case engine::LimitUnit::kSeconds: {
      size_t used = 0;
      double v = 0;
      try {
        v = std::stod(text, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != text.size() || !std::isfinite(v))
        return Fail(option + ": '" + text + "' is not a number of seconds");
      return v;
    }
    case engine::LimitUnit::kMebibytes: {
      auto bytes = ParseSize(text);
      if (!bytes) return Fail(option + ": " + bytes.error().message);
      if (*bytes % (1ull << 20) != 0)
        return Fail(option + ": '" + text + "' is not a whole number of MiB (e.g. 256M)");
      return static_cast<double>(*bytes >> 20);
    }
    case engine::LimitUnit::kBytes: {
      auto bytes = ParseSize(text);
      if (!bytes) return Fail(option + ": " + bytes.error().message);
      return static_cast<double>(*bytes);
    }
    case engine::LimitUnit::kCount:
      break;
  }
  auto n = ParseU64(text);
  if (!n) return Fail(option + ": '" + text + "' is not a whole number");
  return static_cast<double>(*n);
}

}  // namespace

void AddLimitOptions(CLI::App& command, LimitArgs& args) {
  for (const auto& spec : engine::LimitTable()) {
    const std::string name(spec.name);
    command
        .add_option_function<std::string>(
            std::string(spec.cli), [&args, name](const std::string& value) { args.given[name] = value; },
            Help(spec))
        ->default_str(DefaultText(spec));
  }
}

void AddLintProfileOption(CLI::App& command, std::string& profile) {
  command
      .add_option("--policy", profile,
                  "Lint profile checked before running: permissive (refuses nothing) or strict")
      ->default_str("permissive");
}

Expected<engine::LimitOverrides> LimitOverridesOf(const LimitArgs& args) {
  engine::LimitOverrides out;
  for (const auto& [name, text] : args.given) {
    const engine::LimitSpec* spec = engine::FindLimit(name);
    auto value = ValueOf(*spec, text);
    if (!value) return std::unexpected(value.error());
    if (!(*value > 0)) return Fail(std::string(spec->cli) + ": must be positive, not '" + text + "'");
    out.push_back({.spec = spec, .value = *value, .sent = *value, .field = std::string(spec->cli)});
  }
  return out;
}

engine::LimitsConfig CommandLineLimits() {
  return engine::LimitsConfig{.defaults = jail::Limits{}, .maxima = engine::LimitsConfig::HardMaxima()};
}

engine::Caller LocalCaller() {
  return engine::Caller{.id = "local", .max_concurrent = 1, .rate_per_second = 0};
}

int ReportRefusal(const std::string& command, const engine::Refusal& refusal) {
  std::cerr << "execbox " << command << ": " << refusal.detail << "\n";
  return refusal.kind == engine::RefusalKind::kInternal ? 70 : 2;
}

}  // namespace execbox::cli
