#include "engine/limit_schema.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace execbox::engine {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

constexpr uint64_t kMiB = 1ull << 20;

const LimitSpec kTable[] = {
    {.name = "timeout_seconds",
     .cli = "--timeout",
     .unit = LimitUnit::kSeconds,
     .min = 0.001,
     .server_max = 300,
     .hard_max = 86400,
     .scope = LimitScope::kPerExecution,
     .enforced_by = "the supervisor's clock; the whole process tree is killed",
     .description = "Wall-clock time the execution may take",
     .get = [](const jail::Limits& l) { return static_cast<uint64_t>(l.wall_time.count()); },
     .set = [](jail::Limits& l, uint64_t v) { l.wall_time = milliseconds(static_cast<int64_t>(v)); },
     .enforcement = &jail::Enforcement::wall_time},
    {.name = "cpu_seconds",
     .cli = "--cpu-time",
     .unit = LimitUnit::kSeconds,
     .min = 0.001,
     .server_max = 300,
     .hard_max = 86400,
     .scope = LimitScope::kPerExecution,
     .enforced_by = "the cgroup's CPU usage, read by the supervisor; RLIMIT_CPU as well",
     .description = "CPU time of all the execution's processes together",
     .get = [](const jail::Limits& l) { return static_cast<uint64_t>(l.cpu_time.count()); },
     .set = [](jail::Limits& l, uint64_t v) { l.cpu_time = milliseconds(static_cast<int64_t>(v)); },
     .enforcement = &jail::Enforcement::cpu_time},
    {.name = "memory_mb",
     .cli = "--memory",
     .unit = LimitUnit::kMebibytes,
     .min = 16,
     .server_max = 4096,
     .hard_max = 1 << 20,
     .scope = LimitScope::kPerExecution,
     .enforced_by = "the cgroup's memory limit, without swap (its OOM kill is read from the cgroup's "
                    "events); RLIMIT_AS where there are no cgroups",
     .description = "Memory of all the execution's processes together, without swap",
     .get = [](const jail::Limits& l) { return l.memory_bytes; },
     .set = [](jail::Limits& l, uint64_t v) { l.memory_bytes = v; },
     .enforcement = &jail::Enforcement::memory},
    {.name = "max_processes",
     .cli = "--max-processes",
     .unit = LimitUnit::kCount,
     .min = 1,
     .server_max = 1024,
     .hard_max = 4194304,
     .scope = LimitScope::kPerExecution,
     .enforced_by = "the cgroup's pids limit; RLIMIT_NPROC where there are no cgroups",
     .description = "Processes and threads at once",
     .get = [](const jail::Limits& l) { return static_cast<uint64_t>(l.max_processes); },
     .set = [](jail::Limits& l, uint64_t v) { l.max_processes = static_cast<uint32_t>(v); },
     .enforcement = &jail::Enforcement::processes},
    {.name = "output_bytes",
     .cli = "--output-limit",
     .unit = LimitUnit::kBytes,
     .min = 1024,
     .server_max = 16 << 20,
     .hard_max = 1 << 30,
     .scope = LimitScope::kPerExecution,
     .enforced_by = "the supervisor: head and tail are kept; a stream past 64 times this is stopped",
     .description = "Bytes of stdout, and of stderr, kept in the result",
     .get = [](const jail::Limits& l) { return l.output_bytes; },
     .set = [](jail::Limits& l, uint64_t v) { l.output_bytes = v; },
     .enforcement = &jail::Enforcement::output},
    {.name = "disk_mb",
     .cli = "--disk",
     .unit = LimitUnit::kMebibytes,
     .min = 1,
     .server_max = 1024,
     .hard_max = 65536,
     .scope = LimitScope::kChildCreation,
     .enforced_by = "the size of the work dir's tmpfs; RLIMIT_FSIZE for the largest file",
     .description = "Size of the work dir, and of the largest file",
     .get = [](const jail::Limits& l) { return l.work_dir_bytes; },
     .set = [](jail::Limits& l, uint64_t v) { l.work_dir_bytes = v; },
     .enforcement = &jail::Enforcement::disk},
};

bool Whole(double v) { return std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9.0e15; }

// A whole number as a JSON integer, anything else as a double.
json NumberJson(double v) { return Whole(v) ? json(static_cast<int64_t>(v)) : json(v); }

std::string NumberText(double v) {
  if (!std::isfinite(v)) return v > 0 ? "infinity" : "-infinity";
  if (Whole(v)) return std::to_string(static_cast<int64_t>(v));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string AllNames() {
  std::string out;
  for (const auto& spec : kTable) out += (out.empty() ? "" : ", ") + std::string(spec.name);
  return out;
}

}  // namespace

std::string Described(const json& value) {
  switch (value.type()) {
    case json::value_t::number_float:
      return NumberText(value.get<double>());
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return value.dump();
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::null:
      return "null";
    default:
      return value.type_name();
  }
}

uint64_t LimitSpec::scale() const {
  switch (unit) {
    case LimitUnit::kSeconds:
      return 1000;
    case LimitUnit::kMebibytes:
      return kMiB;
    case LimitUnit::kBytes:
    case LimitUnit::kCount:
      break;
  }
  return 1;
}

std::string_view LimitSpec::suffix() const {
  switch (unit) {
    case LimitUnit::kSeconds:
      return " s";
    case LimitUnit::kMebibytes:
      return " MiB";
    case LimitUnit::kBytes:
      return " bytes";
    case LimitUnit::kCount:
      break;
  }
  return "";
}

double LimitSpec::Value(const jail::Limits& limits) const {
  return static_cast<double>(get(limits)) / static_cast<double>(scale());
}

uint64_t LimitSpec::Base(double value) const {
  // 0.1 s * 1000 is not exactly 100 in binary: a hair below a whole millisecond is that one.
  return static_cast<uint64_t>(std::ceil(value * static_cast<double>(scale()) - 1e-6));
}

std::span<const LimitSpec> LimitTable() { return kTable; }

const LimitSpec* FindLimit(std::string_view name) {
  for (const auto& spec : kTable) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

jail::Limits LimitsConfig::DefaultMaxima() {
  jail::Limits l;
  for (const auto& spec : kTable) spec.set(l, spec.Base(spec.server_max));
  return l;
}

jail::Limits LimitsConfig::HardMaxima() {
  jail::Limits l;
  for (const auto& spec : kTable) spec.set(l, spec.Base(spec.hard_max));
  return l;
}

Status CheckLimitValue(const LimitSpec& spec, double value) {
  if (spec.integer() && !Whole(value)) return Fail("must be a whole number" + std::string(spec.suffix()));
  if (!std::isfinite(value) || value < spec.min || value > spec.hard_max) {
    return Fail("must be between " + NumberText(spec.min) + " and " + NumberText(spec.hard_max) +
                std::string(spec.suffix()) + " (got " + NumberText(value) + ")");
  }
  return {};
}

Status ValidateLimitsConfig(const LimitsConfig& config) {
  for (const auto& spec : kTable) {
    const double d = spec.Value(config.defaults), m = spec.Value(config.maxima);
    if (auto s = CheckLimitValue(spec, d); !s) {
      return Fail("limits.default." + std::string(spec.name) + " " + s.error().message);
    }
    if (auto s = CheckLimitValue(spec, m); !s) {
      return Fail("limits.max." + std::string(spec.name) + " " + s.error().message);
    }
    if (spec.get(config.defaults) > spec.get(config.maxima)) {
      return Fail("limits.default." + std::string(spec.name) + " (" + NumberText(d) +
                  std::string(spec.suffix()) + ") exceeds limits.max." + std::string(spec.name) + " (" +
                  NumberText(m) + std::string(spec.suffix()) + ")");
    }
  }
  if (auto s = jail::ValidateLimits(config.defaults); !s) return Fail("limits.default: " + s.error().message);
  return {};
}

Refused<std::optional<LimitOverride>> ReadLimitOverride(const LimitSpec& spec, const json& value,
                                                        std::string_view field_prefix) {
  if (value.is_null()) return std::nullopt;
  const std::string field = std::string(field_prefix) + std::string(spec.name);
  const std::string expected = spec.integer() ? "an integer" : "a number";
  auto wrong_type = [&] {
    return Refuse(RefusalReason::kWrongType,
                  "'" + field + "' must be " + expected + ", not " + Described(value),
                  {{"field", field}, {"expected", expected}});
  };
  if (!value.is_number()) return wrong_type();
  const double v = value.get<double>();
  if (spec.integer() && std::isfinite(v) && v != std::floor(v)) return wrong_type();
  if (!(v > 0)) {
    return Refuse(RefusalReason::kInvalidValue, "'" + field + "' must be positive, not " + Described(value),
                  {{"field", field}});
  }
  return LimitOverride{.spec = &spec, .value = v, .sent = value, .field = field};
}

Refused<LimitOverrides> ReadLimitOverrides(const json& object, std::string_view field_prefix) {
  LimitOverrides out;
  for (const auto& item : object.items()) {
    const LimitSpec* spec = FindLimit(item.key());
    if (spec == nullptr) {
      std::string field = std::string(field_prefix) + item.key();
      if (field.size() > 100) field = field.substr(0, 100) + "...";
      return Refuse(RefusalReason::kUnknownField,
                    "unknown field '" + field + "' (allowed: " + AllNames() + ")", {{"field", field}});
    }
    auto one = ReadLimitOverride(*spec, item.value(), field_prefix);
    if (!one) return std::unexpected(std::move(one.error()));
    if (*one) out.push_back(std::move(**one));
  }
  return out;
}

Refused<jail::Limits> ApplyLimitOverrides(const LimitsConfig& config, const jail::Limits& base,
                                          const LimitOverrides& overrides) {
  jail::Limits out = base;
  bool wall_named = false, cpu_named = false;
  for (const auto& o : overrides) {
    const LimitSpec& spec = *o.spec;
    const std::string name(spec.name);
    const std::string field = o.field.empty() ? "limits." + name : o.field;
    const double maximum = spec.Value(config.maxima);
    if (!std::isfinite(o.value) || o.value > maximum) {
      return Refuse(RefusalReason::kLimitExceeded,
                    "'" + field + "' asks for " + Described(o.sent) + std::string(spec.suffix()) +
                        ", above the allowed maximum of " + NumberText(maximum) + std::string(spec.suffix()),
                    {{"limit", name}, {"requested", o.sent}, {"maximum", NumberJson(maximum)}});
    }
    if (o.value < spec.min) {
      return Refuse(RefusalReason::kInvalidValue,
                    "'" + field + "' must be at least " + NumberText(spec.min) + std::string(spec.suffix()),
                    {{"field", field}, {"limit", name}, {"minimum", NumberJson(spec.min)}});
    }
    spec.set(out, spec.Base(o.value));
    wall_named = wall_named || spec.name == "timeout_seconds";
    cpu_named = cpu_named || spec.name == "cpu_seconds";
  }
  if (wall_named && !cpu_named && out.wall_time > out.cpu_time) {
    out.cpu_time = std::min(out.wall_time, config.maxima.cpu_time);
  }
  if (auto valid = jail::ValidateLimits(out); !valid) {
    return Refuse(RefusalReason::kInvalidValue, valid.error().message, {{"field", "limits"}});
  }
  return out;
}

json LimitsResultJson(const jail::Limits& limits, const jail::Enforcement& enforcement) {
  json out = json::object();
  for (const auto& spec : kTable) {
    out[std::string(spec.name)] = {{"value", NumberJson(spec.Value(limits))},
                                   {"enforced_by", enforcement.*spec.enforcement}};
  }
  return out;
}

json LimitJsonSchema(const LimitSpec& spec, const LimitsConfig& config) {
  std::string description(spec.description);
  switch (spec.unit) {
    case LimitUnit::kSeconds:
      description += ", in seconds";
      break;
    case LimitUnit::kMebibytes:
      description += ", in MiB";
      break;
    case LimitUnit::kBytes:
      description += ", in bytes";
      break;
    case LimitUnit::kCount:
      break;
  }
  if (spec.scope == LimitScope::kChildCreation) description += "; a session takes it only when it is created";
  description += ".";
  return {{"type", spec.integer() ? "integer" : "number"},
          {"minimum", NumberJson(spec.min)},
          {"maximum", NumberJson(spec.Value(config.maxima))},
          {"default", NumberJson(spec.Value(config.defaults))},
          {"description", description}};
}

json LimitsJsonSchema(const LimitsConfig& config, bool per_execution_only) {
  json properties = json::object();
  for (const auto& spec : kTable) {
    if (per_execution_only && spec.scope != LimitScope::kPerExecution) continue;
    properties[std::string(spec.name)] = LimitJsonSchema(spec, config);
  }
  return {{"type", "object"}, {"properties", properties}, {"additionalProperties", false}};
}

}  // namespace execbox::engine
