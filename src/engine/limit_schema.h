// The one table of the limits a request, a server or a command line can set. Each row names
// the limit on the wire, in TOML, in MCP arguments and in the Result ("timeout_seconds"), its
// `execbox run` option, unit, bounds, whether it may change per execution and what enforces
// it. Every surface is generated from this table or checked against it by a test: the CLI
// options, the TOML reader, the HTTP and MCP request parsers, the MCP inputSchema, the OpenAPI
// `Limits` schema, the Result's "limits" and the README table. The built-in defaults are
// jail::Limits{}'s (jail/policy.h), read through the table.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "engine/refusal.h"
#include "jail/policy.h"
#include "jail/sandbox.h"

namespace execbox::engine {

enum class LimitUnit { kSeconds, kMebibytes, kBytes, kCount };

enum class LimitScope {
  kPerExecution,   // any execution may set it, one in a session included
  kChildCreation,  // fixed when the sandbox's process is made: a one-shot execution gets a
                   // child made for it; a session takes it when it is created, and only then
};

struct LimitSpec {
  std::string_view name;  // wire, TOML, MCP and Result name
  std::string_view cli;   // option of `execbox run` and `execbox repl`
  LimitUnit unit;
  double min;         // in the unit
  double server_max;  // the most a server allows when its [limits.max] does not say
  double hard_max;    // the most any server may allow
  LimitScope scope;
  std::string_view enforced_by;  // what stops the code at the limit (documentation)
  std::string_view description;
  uint64_t (*get)(const jail::Limits&);  // in base units: milliseconds, bytes or a count
  void (*set)(jail::Limits&, uint64_t);
  const std::string jail::Enforcement::*enforcement;  // what really enforced it in a run

  bool integer() const { return unit != LimitUnit::kSeconds; }
  // Base units per unit: 1000 ms per second, 2^20 bytes per MiB, else 1.
  uint64_t scale() const;
  // " s", " MiB", " bytes" or "" (for messages: "300 s").
  std::string_view suffix() const;
  // The limit's value in `limits`, in its unit.
  double Value(const jail::Limits& limits) const;
  // A value in the unit, as base units (seconds round up to the next millisecond).
  uint64_t Base(double value) const;
};

std::span<const LimitSpec> LimitTable();
// The row named `name`, or null.
const LimitSpec* FindLimit(std::string_view name);

// What a server allows: what a request gets by default, and the most it may ask for.
struct LimitsConfig {
  jail::Limits defaults;
  jail::Limits maxima = DefaultMaxima();
  static jail::Limits DefaultMaxima();  // every row's server_max
  static jail::Limits HardMaxima();     // every row's hard_max: the command line's ceiling
};

// A value in the limit's unit is one it may take anywhere: whole where the unit is, within
// [min, hard_max]. The message says what it must be ("must be between 16 and 1048576 MiB").
Status CheckLimitValue(const LimitSpec& spec, double value);
// Every default and maximum passes CheckLimitValue, and no default is above its maximum; the
// error names the limit ("limits.default.memory_mb ...").
Status ValidateLimitsConfig(const LimitsConfig& config);

// One limit a request names, in its unit, with the JSON it came as (for the refusal's echo)
// and the name the request gave it ("limits.memory_mb", "memory_mb", "--memory").
struct LimitOverride {
  const LimitSpec* spec = nullptr;
  double value = 0;
  nlohmann::json sent;
  std::string field;
};
using LimitOverrides = std::vector<LimitOverride>;

// {"timeout_seconds": 10, ...}: each name a row of the table, each value a positive number
// (whole where the unit is); null is the same as absent. Refusals name the field as
// `field_prefix` + name ("limits.memory_mb" over HTTP, "memory_mb" for MCP's arguments).
Refused<LimitOverrides> ReadLimitOverrides(const nlohmann::json& object, std::string_view field_prefix);
// One value, for a caller that reads the object itself; nullopt for null.
Refused<std::optional<LimitOverride>> ReadLimitOverride(const LimitSpec& spec, const nlohmann::json& value,
                                                        std::string_view field_prefix);

// `base` with the overrides applied, each checked against the server's maximum (422
// "limit-exceeded", naming it) and the table's minimum (400 "invalid-value"). When the request
// raises the wall time above the CPU time and does not name the CPU time, the CPU time follows
// the wall time (up to its maximum): a longer timeout asked for is meant to be usable.
Refused<jail::Limits> ApplyLimitOverrides(const LimitsConfig& config, const jail::Limits& base,
                                          const LimitOverrides& overrides);

// What a client sent, for a refusal's detail: a number as written, anything else by its type
// ("a string", "an array", "null").
std::string Described(const nlohmann::json& value);

// The Result's "limits": {name: {"value": v, "enforced_by": "cgroup-v2"}} in the table's units.
nlohmann::json LimitsResultJson(const jail::Limits& limits, const jail::Enforcement& enforcement);

// JSON Schema of the limits a request may set on this server: {"type": "object", "properties":
// {name: {type, minimum, maximum, default, description}}, "additionalProperties": false}, with
// `config`'s defaults and maxima. `per_execution_only` leaves out the rows fixed at creation.
nlohmann::json LimitsJsonSchema(const LimitsConfig& config, bool per_execution_only = false);
nlohmann::json LimitJsonSchema(const LimitSpec& spec, const LimitsConfig& config);

}  // namespace execbox::engine
