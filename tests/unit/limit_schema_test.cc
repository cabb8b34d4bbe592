// The limit schema (engine/limit_schema.h): the table itself, the JSON it reads, the rules it
// applies, and the README's limits table, which must say what the table says. The OpenAPI
// document and the MCP inputSchema are checked against it in execute_request_test.cc.
#include "engine/limit_schema.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "lib/test_paths.h"

namespace execbox::engine {
namespace {

using nlohmann::json;

std::string Number(double v) {
  if (v == std::floor(v)) return std::to_string(static_cast<int64_t>(v));
  std::ostringstream out;
  out << v;
  return out.str();
}

TEST(LimitTable, NamesAreUniqueAndBoundsAreOrdered) {
  std::set<std::string_view> names, options;
  const jail::Limits defaults;
  for (const auto& spec : LimitTable()) {
    EXPECT_TRUE(names.insert(spec.name).second) << spec.name;
    EXPECT_TRUE(options.insert(spec.cli).second) << spec.cli;
    EXPECT_TRUE(spec.cli.starts_with("--")) << spec.cli;
    EXPECT_FALSE(spec.description.empty());
    EXPECT_FALSE(spec.enforced_by.empty());
    const double d = spec.Value(defaults);
    EXPECT_LE(spec.min, d) << spec.name;
    EXPECT_LE(d, spec.server_max) << spec.name;
    EXPECT_LE(spec.server_max, spec.hard_max) << spec.name;
    EXPECT_TRUE(CheckLimitValue(spec, spec.min).has_value()) << spec.name;
    EXPECT_TRUE(CheckLimitValue(spec, spec.hard_max).has_value()) << spec.name;
    EXPECT_FALSE(CheckLimitValue(spec, spec.hard_max * 2).has_value()) << spec.name;
    EXPECT_EQ(FindLimit(spec.name), &spec);
  }
  EXPECT_EQ(FindLimit("gpu"), nullptr);
  // The table's floors are the jail's or above: a value the schema takes never fails there.
  jail::Limits floors;
  for (const auto& spec : LimitTable()) spec.set(floors, spec.Base(spec.min));
  EXPECT_TRUE(jail::ValidateLimits(floors).has_value()) << jail::ValidateLimits(floors).error().message;
  EXPECT_TRUE(ValidateLimitsConfig(LimitsConfig{}).has_value());
}

TEST(LimitTable, UnitsConvertBothWays) {
  const LimitSpec& timeout = *FindLimit("timeout_seconds");
  EXPECT_EQ(timeout.Base(2.5), 2500u);
  EXPECT_EQ(timeout.Base(0.1), 100u);
  EXPECT_EQ(timeout.Base(0.0015), 2u) << "a fraction of a millisecond still gets one";
  EXPECT_EQ(timeout.Value(jail::Limits{}), 30);
  const LimitSpec& memory = *FindLimit("memory_mb");
  EXPECT_EQ(memory.Base(512), 512ull << 20);
  EXPECT_EQ(memory.Value(jail::Limits{}), 256);
  EXPECT_FALSE(CheckLimitValue(memory, 16.5).has_value());
  EXPECT_FALSE(CheckLimitValue(memory, 8).has_value());
  EXPECT_EQ(FindLimit("disk_mb")->scope, LimitScope::kChildCreation);
}

Refusal Refused(const json& object) {
  auto r = ReadLimitOverrides(object, "limits.");
  EXPECT_FALSE(r.has_value()) << object.dump();
  return r ? Refusal{} : r.error();
}

TEST(ReadLimitOverrides, TypesAndNamesAreChecked) {
  auto ok = ReadLimitOverrides({{"timeout_seconds", 2.5}, {"memory_mb", 512.0}, {"cpu_seconds", nullptr}},
                               "limits.");
  ASSERT_TRUE(ok.has_value()) << ok.error().detail;
  ASSERT_EQ(ok->size(), 2u) << "null is absent";
  EXPECT_EQ(Refused({{"gpu", 1}}).type, "unknown-field");
  EXPECT_NE(Refused({{"gpu", 1}}).detail.find("'limits.gpu'"), std::string::npos);
  EXPECT_EQ(Refused({{"memory_mb", 1.5}}).type, "wrong-type");
  EXPECT_EQ(Refused({{"memory_mb", "512"}}).extra["expected"], "an integer");
  EXPECT_EQ(Refused({{"timeout_seconds", true}}).type, "wrong-type");
  EXPECT_EQ(Refused({{"max_processes", 0}}).type, "invalid-value");
  EXPECT_EQ(Refused({{"disk_mb", -3}}).kind, RefusalKind::kBadRequest);
}

LimitOverrides Overrides(const json& object) {
  auto r = ReadLimitOverrides(object, "limits.");
  EXPECT_TRUE(r.has_value()) << object.dump();
  return r.value_or(LimitOverrides{});
}

TEST(ApplyLimitOverrides, MaximaMinimaAndTheCpuThatFollowsTheTimeout) {
  LimitsConfig config;  // defaults 30 s / 30 s; maxima 300 s / 300 s
  auto above = ApplyLimitOverrides(config, config.defaults, Overrides({{"memory_mb", 8192}}));
  ASSERT_FALSE(above.has_value());
  EXPECT_EQ(above.error().kind, RefusalKind::kUnprocessable);
  EXPECT_EQ(above.error().type, "limit-exceeded");
  EXPECT_EQ(above.error().extra, json({{"limit", "memory_mb"}, {"requested", 8192}, {"maximum", 4096}}));
  auto below = ApplyLimitOverrides(config, config.defaults, Overrides({{"output_bytes", 100}}));
  ASSERT_FALSE(below.has_value());
  EXPECT_EQ(below.error().type, "invalid-value");
  EXPECT_NE(below.error().detail.find("1024"), std::string::npos);

  auto longer = ApplyLimitOverrides(config, config.defaults, Overrides({{"timeout_seconds", 120}}));
  ASSERT_TRUE(longer.has_value());
  EXPECT_EQ(longer->wall_time, std::chrono::seconds(120));
  EXPECT_EQ(longer->cpu_time, std::chrono::seconds(120))
      << "a longer timeout asked for is meant to be usable";
  auto named =
      ApplyLimitOverrides(config, config.defaults, Overrides({{"timeout_seconds", 120}, {"cpu_seconds", 5}}));
  ASSERT_TRUE(named.has_value());
  EXPECT_EQ(named->cpu_time, std::chrono::seconds(5));
  auto shorter = ApplyLimitOverrides(config, config.defaults, Overrides({{"timeout_seconds", 2}}));
  ASSERT_TRUE(shorter.has_value());
  EXPECT_EQ(shorter->cpu_time, std::chrono::seconds(30));
  config.maxima.cpu_time = std::chrono::seconds(60);
  auto capped = ApplyLimitOverrides(config, config.defaults, Overrides({{"timeout_seconds", 200}}));
  ASSERT_TRUE(capped.has_value());
  EXPECT_EQ(capped->cpu_time, std::chrono::seconds(60)) << "never past the CPU maximum";
}

TEST(ValidateLimitsConfig, NamesTheLimit) {
  LimitsConfig config;
  config.defaults.memory_bytes = 8192ull << 20;
  auto over = ValidateLimitsConfig(config);
  ASSERT_FALSE(over.has_value());
  EXPECT_NE(over.error().message.find("limits.default.memory_mb"), std::string::npos) << over.error().message;
  EXPECT_NE(over.error().message.find("exceeds limits.max.memory_mb"), std::string::npos);
  config = LimitsConfig{};
  config.maxima.max_processes = 5'000'000;
  auto hard = ValidateLimitsConfig(config);
  ASSERT_FALSE(hard.has_value());
  EXPECT_NE(hard.error().message.find("limits.max.max_processes"), std::string::npos) << hard.error().message;
}

TEST(LimitsJsonSchema, CarriesTheServersValues) {
  LimitsConfig config;
  config.defaults.memory_bytes = 200ull << 20;
  config.maxima.memory_bytes = 1024ull << 20;
  json schema = LimitsJsonSchema(config);
  EXPECT_EQ(schema["additionalProperties"], false);
  EXPECT_EQ(schema["properties"].size(), LimitTable().size());
  EXPECT_EQ(schema["properties"]["memory_mb"]["default"], 200);
  EXPECT_EQ(schema["properties"]["memory_mb"]["maximum"], 1024);
  EXPECT_EQ(schema["properties"]["memory_mb"]["minimum"], 16);
  EXPECT_EQ(schema["properties"]["memory_mb"]["type"], "integer");
  EXPECT_EQ(schema["properties"]["timeout_seconds"]["type"], "number");
  EXPECT_FALSE(LimitsJsonSchema(config, true)["properties"].contains("disk_mb"));
}

TEST(LimitsResultJson, UsesTheRequestNamesAndUnits) {
  jail::Limits l;
  l.wall_time = std::chrono::milliseconds(2500);
  jail::Enforcement e;
  e.memory = "cgroup-v2";
  json j = LimitsResultJson(l, e);
  EXPECT_EQ(j.size(), LimitTable().size());
  EXPECT_EQ(j["timeout_seconds"]["value"], 2.5);
  EXPECT_EQ(j["memory_mb"]["value"], 256);
  EXPECT_EQ(j["memory_mb"]["enforced_by"], "cgroup-v2");
  EXPECT_EQ(j["output_bytes"]["value"], 1 << 20);
}

// ---- the README's table -----------------------------------------------------------------

std::string UnitName(const LimitSpec& spec) {
  switch (spec.unit) {
    case LimitUnit::kSeconds:
      return "seconds";
    case LimitUnit::kMebibytes:
      return "MiB";
    case LimitUnit::kBytes:
      return "bytes";
    case LimitUnit::kCount:
      break;
  }
  return "count";
}

TEST(LimitTable, TheReadmeSaysWhatTheTableSays) {
  std::ifstream in(std::string(test::kSourceDir) + "/README.md");
  ASSERT_TRUE(in.good()) << "README.md not found";
  std::stringstream text;
  text << in.rdbuf();
  const std::string readme = text.str();
  size_t rows = 0;
  std::istringstream lines(readme);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("| `") && line.find("` | `--") != std::string::npos) ++rows;
  }
  EXPECT_EQ(rows, LimitTable().size()) << "one README row per limit";
  const jail::Limits defaults;
  for (const auto& spec : LimitTable()) {
    const std::string row =
        "| `" + std::string(spec.name) + "` | `" + std::string(spec.cli) + "` | " + UnitName(spec) + " | " +
        Number(spec.Value(defaults)) + " | " + Number(spec.server_max) + " | " + Number(spec.min) + " to " +
        Number(spec.hard_max) + " | " +
        (spec.scope == LimitScope::kPerExecution ? "per execution" : "at session creation") + " | " +
        std::string(spec.enforced_by) + " |";
    EXPECT_NE(readme.find(row), std::string::npos) << "README.md lacks the row\n" << row;
  }
}

}  // namespace
}  // namespace execbox::engine
