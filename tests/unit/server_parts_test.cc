// The HTTP server's parts that stand alone: configuration, authentication and metrics.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/http/auth.h"
#include "api/http/config.h"
#include "api/http/metrics.h"

namespace execbox::api {
namespace {

using namespace std::chrono_literals;

// A directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "server_parts_test.XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string File(const std::string& name, const std::string& content = "") const {
    const std::string path = (path_ / name).string();
    std::ofstream(path) << content;
    return path;
  }
  std::string Path(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

std::string Header(const Problem& p, const std::string& name) {
  for (const auto& [k, v] : p.headers) {
    if (k == name) return v;
  }
  return "";
}

// ---- auth ----

TEST(Auth, Sha256KnownVectors) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex(std::string(1000, 'a')),
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

TEST(Auth, GeneratedTokensAreUrlSafeAndFresh) {
  const std::string a = GenerateToken(), b = GenerateToken();
  EXPECT_EQ(a.size(), 43u);  // 32 bytes, base64 without padding
  EXPECT_NE(a, b);
  for (char ch : a + b) {
    EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_') << ch;
  }
}

class AuthenticatorTest : public ::testing::Test {
 protected:
  const std::string alice_token = "alice-token-0123456789";
  const std::string bob_token = "bob-token-0123456789";
  Authenticator auth{{
      ApiKey{.id = "broken", .sha256_hex = "not hex at all"},
      ApiKey{.id = "alice", .sha256_hex = Sha256Hex(alice_token)},
      ApiKey{.id = "bob", .sha256_hex = Sha256Hex(bob_token)},
  }};
};

TEST_F(AuthenticatorTest, MissingOrMalformedIs401WithChallenge) {
  for (const char* value : {"", "   ", "Basic YWxpY2U6cHc=", "Bearer", "Bearer   ", "Bearertoken",
                            "Token abc", "Bearer two tokens"}) {
    auto r = auth.Authenticate(value);
    ASSERT_FALSE(r.has_value()) << value;
    EXPECT_EQ(r.error().status, 401) << value;
    EXPECT_EQ(r.error().type, "unauthorized");
    // RFC 6750 3.1: no credentials, the plain challenge; malformed ones, invalid_token.
    const bool none = std::string_view(value).find_first_not_of(' ') == std::string_view::npos;
    if (none) {
      EXPECT_EQ(Header(r.error(), "WWW-Authenticate"), "Bearer realm=\"execbox\"") << value;
    } else {
      EXPECT_TRUE(Header(r.error(), "WWW-Authenticate")
                      .starts_with("Bearer realm=\"execbox\", error=\"invalid_token\""))
          << value << ": " << Header(r.error(), "WWW-Authenticate");
    }
  }
}

TEST_F(AuthenticatorTest, UnknownTokenIs401InvalidToken) {
  for (const char* value : {"Bearer wrong", "Bearer alice-token-012345678", "Bearer not-hex-at-all"}) {
    auto r = auth.Authenticate(value);
    ASSERT_FALSE(r.has_value()) << value;
    EXPECT_EQ(r.error().status, 401);
    EXPECT_EQ(r.error().type, "unauthorized");
    EXPECT_NE(Header(r.error(), "WWW-Authenticate").find("error=\"invalid_token\""), std::string::npos);
  }
}

TEST_F(AuthenticatorTest, KnownTokenGivesItsKey) {
  auto a = auth.Authenticate("Bearer " + alice_token);
  ASSERT_TRUE(a.has_value()) << a.error().detail;
  EXPECT_EQ(a->id, "alice");
  auto b = auth.Authenticate("bEaReR  " + bob_token + " ");  // scheme case-insensitive, spaces tolerated
  ASSERT_TRUE(b.has_value()) << b.error().detail;
  EXPECT_EQ(b->id, "bob");
}

TEST(Auth, UpperCaseHexInKeyStillMatches) {
  std::string hex = Sha256Hex("some-token-0123456789");
  for (char& ch : hex) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  Authenticator auth({ApiKey{.id = "k", .sha256_hex = hex}});
  EXPECT_TRUE(auth.Authenticate("Bearer some-token-0123456789").has_value());
}

TEST(Auth, NoKeysRefusesEveryToken) {
  Authenticator auth({});
  auto r = auth.Authenticate("Bearer anything-at-all-here");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().status, 401);
}

// ---- metrics ----

TEST(Metrics, RendersFamiliesWithCumulativeBuckets) {
  Metrics m;
  m.Finished("http", "execute", "ok", 0.003);
  m.Finished("http", "execute", "ok", 0.2);
  m.Finished("http", "execute", "timeout", 45);
  m.Finished("http", "execute", "ok", 1000);  // past the last bucket
  m.Finished("http", "session", "ok", 1);
  m.Finished("mcp_http", "execute", "ok", 1);
  m.Rejected("queue_full");
  m.Refused("http", "queue_full");
  m.Refused("mcp_http", "rate_limited");
  m.Response(200);
  m.Response(429);
  const std::string text = m.Render(Gauges{.running = 3,
                                           .queued = 4,
                                           .warm_workers = 2,
                                           .prepared_children = 1,
                                           .sessions = 5,
                                           .connections = 7,
                                           .children_ended = 9,
                                           .zygote_cpu_ns = 1'500'000'000,
                                           .child_setup_cpu_ns = 250'000'000,
                                           .child_execution_cpu_ns = 3'000'000'000,
                                           .child_exit_cpu_ns = 125'000'000});

  for (const char* line : {
           "# TYPE execbox_executions_total counter",
           "execbox_executions_total{transport=\"http\",route=\"execute\",status=\"ok\"} 3",
           "execbox_executions_total{transport=\"http\",route=\"execute\",status=\"timeout\"} 1",
           "execbox_executions_total{transport=\"http\",route=\"session\",status=\"ok\"} 1",
           "execbox_executions_total{transport=\"mcp_http\",route=\"execute\",status=\"ok\"} 1",
           "# TYPE execbox_execution_duration_seconds histogram",
           "execbox_execution_duration_seconds_bucket{transport=\"http\",route=\"execute\",le=\"0.005\"} 1",
           "execbox_execution_duration_seconds_bucket{transport=\"http\",route=\"execute\",le=\"0.25\"} 2",
           "execbox_execution_duration_seconds_bucket{transport=\"http\",route=\"execute\",le=\"30\"} 2",
           "execbox_execution_duration_seconds_bucket{transport=\"http\",route=\"execute\",le=\"60\"} 3",
           "execbox_execution_duration_seconds_bucket{transport=\"http\",route=\"execute\",le=\"300\"} 3",
           "execbox_execution_duration_seconds_bucket{transport=\"http\",route=\"execute\",le=\"+Inf\"} 4",
           "execbox_execution_duration_seconds_sum{transport=\"http\",route=\"execute\"} 1045.203",
           "execbox_execution_duration_seconds_count{transport=\"http\",route=\"execute\"} 4",
           "execbox_execution_duration_seconds_bucket{transport=\"http\",route=\"session\",le=\"0.5\"} 0",
           "execbox_execution_duration_seconds_bucket{transport=\"http\",route=\"session\",le=\"1\"} 1",
           "execbox_rejected_requests_total{transport=\"http\",reason=\"queue_full\"} 2",
           "execbox_rejected_requests_total{transport=\"mcp_http\",reason=\"rate_limited\"} 1",
           "execbox_http_responses_total{code=\"200\"} 1",
           "execbox_http_responses_total{code=\"429\"} 1",
           "# HELP execbox_connections_dropped_total ",  // no samples, still described
           "# TYPE execbox_connections_dropped_total counter",
           "# TYPE execbox_running_executions gauge",
           "execbox_running_executions 3",
           "execbox_queue_depth 4",
           "execbox_warm_workers 2",
           "execbox_prepared_children 1",
           "execbox_sessions 5",
           "execbox_open_connections 7",
           "# TYPE execbox_warm_children_ended_total counter",
           "execbox_warm_children_ended_total 9",
           "# TYPE execbox_warm_cpu_seconds_total counter",
           "execbox_warm_cpu_seconds_total{phase=\"zygote\"} 1.5",
           "execbox_warm_cpu_seconds_total{phase=\"setup\"} 0.25",
           "execbox_warm_cpu_seconds_total{phase=\"execution\"} 3",
           "execbox_warm_cpu_seconds_total{phase=\"exit\"} 0.125",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << "missing: " << line << "\n" << text;
  }
  EXPECT_EQ(text.find("execbox_connections_dropped_total{"), std::string::npos);

  // Every sample line is "name{labels} value" or "name value"; buckets never decrease.
  std::istringstream in(text);
  std::string line;
  uint64_t previous = 0;
  std::string previous_route;
  const std::regex sample(R"(^[a-z_]+(\{[^}]*\})? [0-9.e+]+$)");
  const std::regex bucket(
      R"re(^execbox_execution_duration_seconds_bucket\{transport="[^"]*",route="([^"]*)",le="[^"]+"\} (\d+)$)re");
  while (std::getline(in, line)) {
    ASSERT_FALSE(line.empty());
    if (line.starts_with("# ")) continue;
    EXPECT_TRUE(std::regex_match(line, sample)) << line;
    std::smatch m2;
    if (std::regex_match(line, m2, bucket)) {
      const uint64_t value = std::stoull(m2[2]);
      if (m2[1] == previous_route) {
        EXPECT_GE(value, previous) << line;
      }
      previous_route = m2[1];
      previous = value;
    }
  }
  EXPECT_TRUE(text.ends_with("\n"));
}

TEST(Metrics, EmptyRegistryStillDescribesEveryFamily) {
  const std::string text = Metrics().Render({});
  for (const char* family :
       {"execbox_executions_total counter", "execbox_execution_duration_seconds histogram",
        "execbox_rejected_requests_total counter", "execbox_http_responses_total counter",
        "execbox_connections_dropped_total counter", "execbox_running_executions gauge",
        "execbox_queue_depth gauge", "execbox_warm_workers gauge", "execbox_prepared_children gauge",
        "execbox_sessions gauge", "execbox_open_connections gauge",
        "execbox_warm_children_ended_total counter", "execbox_warm_cpu_seconds_total counter"}) {
    EXPECT_NE(text.find(std::string("# TYPE ") + family + "\n"), std::string::npos) << family;
  }
}

TEST(Metrics, EscapesLabelValues) {
  Metrics m;
  m.Rejected("a\\b\"c\nd");
  const std::string text = m.Render({});
  EXPECT_NE(text.find("execbox_rejected_requests_total{transport=\"http\",reason=\"a\\\\b\\\"c\\nd\"} 1\n"),
            std::string::npos)
      << text;
}

// ---- config ----

const std::string kAliceHash = Sha256Hex("alice-token-0123456789");

Expected<ServerConfig> Load(const std::string& toml) {
  TempDir dir;
  const std::string path = dir.File("execbox.toml", toml);
  ServerConfig config = DefaultConfig();
  if (auto s = LoadConfigFile(path, config); !s) return std::unexpected(s.error());
  return config;
}

std::string LoadError(const std::string& toml) {
  auto c = Load(toml);
  return c.has_value() ? "(loaded)" : c.error().message;
}

TEST(Config, DefaultMaxLimits) {
  const jail::Limits m = engine::LimitsConfig::DefaultMaxima();
  const jail::Limits d;
  EXPECT_EQ(m.wall_time, std::chrono::seconds(300));
  EXPECT_EQ(m.cpu_time, std::chrono::seconds(300));
  EXPECT_EQ(m.memory_bytes, 4ull << 30);
  EXPECT_EQ(m.max_processes, 1024u);
  EXPECT_EQ(m.output_bytes, 16ull << 20);
  EXPECT_EQ(m.work_dir_bytes, 1ull << 30);
  EXPECT_EQ(m.tmp_bytes, d.tmp_bytes);
  EXPECT_EQ(m.open_files, d.open_files);
  EXPECT_EQ(DefaultConfig().limits.maxima.memory_bytes, 4ull << 30);
}

TEST(Config, SampleFileIsRead) {
  auto c = Load(R"(
listen = "0.0.0.0:9000"
audit_log = "/var/log/execbox/audit.log"
audit_code = true
shutdown_grace_seconds = 10
allowed_origins = ["http://localhost:3000", "https://app.example.com"]

[http]
max_connections = 100
max_header_bytes = 8192
max_body_bytes = 1048576
header_timeout_seconds = 5
body_timeout_seconds = 30
idle_timeout_seconds = 15
max_requests_per_connection = 50
io_threads = 4

[admission]
max_running = 6
max_queue = 12

[engine]
warm = false
workers = 3
max_sessions = 8
session_idle_ttl_seconds = 600

[limits.default]
timeout_seconds = 10
cpu_seconds = 2.5
memory_mb = 512
max_processes = 32
output_bytes = 65536
disk_mb = 32

[limits.max]
timeout_seconds = 120
memory_mb = 2048

[[keys]]
id = "alice"
sha256 = ")" + kAliceHash +
                R"("
max_concurrent = 2
rate_per_second = 0.5
burst = 5

[[keys]]
id = "bob"
sha256 = "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855"
)");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->listen, "0.0.0.0:9000");
  EXPECT_EQ(c->audit_log, "/var/log/execbox/audit.log");
  EXPECT_TRUE(c->audit_code);
  EXPECT_EQ(c->shutdown_grace, std::chrono::seconds(10));
  EXPECT_EQ(c->allowed_origins,
            (std::vector<std::string>{"http://localhost:3000", "https://app.example.com"}));
  EXPECT_EQ(c->max_connections, 100u);
  EXPECT_EQ(c->max_header_bytes, 8192u);
  EXPECT_EQ(c->max_body_bytes, 1048576u);
  EXPECT_EQ(c->header_timeout, std::chrono::seconds(5));
  EXPECT_EQ(c->body_timeout, std::chrono::seconds(30));
  EXPECT_EQ(c->idle_timeout, std::chrono::seconds(15));
  EXPECT_EQ(c->max_requests_per_connection, 50u);
  EXPECT_EQ(c->io_threads, 4u);
  EXPECT_EQ(c->max_running, 6u);
  EXPECT_EQ(c->max_queue, 12u);
  EXPECT_FALSE(c->warm);
  EXPECT_EQ(c->workers, 3u);
  EXPECT_EQ(c->max_sessions, 8u);
  EXPECT_EQ(c->session_idle_ttl, std::chrono::seconds(600));
  EXPECT_EQ(c->limits.defaults.wall_time, std::chrono::seconds(10));
  EXPECT_EQ(c->limits.defaults.cpu_time, std::chrono::milliseconds(2500));
  EXPECT_EQ(c->limits.defaults.memory_bytes, 512ull << 20);
  EXPECT_EQ(c->limits.defaults.max_processes, 32u);
  EXPECT_EQ(c->limits.defaults.output_bytes, 65536u);
  EXPECT_EQ(c->limits.defaults.work_dir_bytes, 32ull << 20);
  EXPECT_EQ(c->limits.maxima.wall_time, std::chrono::seconds(120));
  EXPECT_EQ(c->limits.maxima.memory_bytes, 2048ull << 20);
  EXPECT_EQ(c->limits.maxima.max_processes, 1024u);  // untouched: DefaultMaxLimits
  ASSERT_EQ(c->keys.size(), 2u);
  EXPECT_EQ(c->keys[0].id, "alice");
  EXPECT_EQ(c->keys[0].sha256_hex, kAliceHash);
  EXPECT_EQ(c->keys[0].max_concurrent, 2u);
  EXPECT_DOUBLE_EQ(c->keys[0].rate_per_second, 0.5);
  EXPECT_DOUBLE_EQ(c->keys[0].burst, 5);
  EXPECT_EQ(c->keys[1].id, "bob");
  EXPECT_EQ(c->keys[1].sha256_hex, Sha256Hex(""));  // lower-cased
  EXPECT_EQ(c->keys[1].max_concurrent, ApiKey{}.max_concurrent);

  // The hash in the file authenticates the token.
  Authenticator auth(c->keys);
  auto key = auth.Authenticate("Bearer alice-token-0123456789");
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(key->id, "alice");
}

TEST(Config, EmptyFileKeepsDefaults) {
  auto c = Load("# nothing\n");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->listen, "127.0.0.1:8080");
  EXPECT_EQ(c->limits.maxima.wall_time, std::chrono::seconds(300));
  EXPECT_TRUE(c->keys.empty());
}

TEST(Config, UnknownKeysAreNamed) {
  EXPECT_NE(LoadError("[http]\nmax_conections = 5\n").find("http.max_conections: unknown key"),
            std::string::npos);
  EXPECT_NE(LoadError("lisen = \"127.0.0.1:1\"\n").find("lisen: unknown key"), std::string::npos);
  EXPECT_NE(LoadError("[limits.default]\nmemory = 5\n").find("limits.default.memory: unknown key"),
            std::string::npos);
  EXPECT_NE(LoadError("[limits.min]\n").find("limits.min: unknown key"), std::string::npos);
  EXPECT_NE(LoadError("[[keys]]\nid = \"a\"\nsha256 = \"" + kAliceHash + "\"\ntoken = \"x\"\n")
                .find("keys[0].token: unknown key"),
            std::string::npos);
}

TEST(Config, WrongTypesAreNamed) {
  EXPECT_NE(
      LoadError("[http]\nmax_connections = \"many\"\n").find("http.max_connections: expected an integer"),
      std::string::npos);
  EXPECT_NE(LoadError("audit_code = 1\n").find("audit_code: expected a boolean"), std::string::npos);
  EXPECT_NE(LoadError("http = 3\n").find("http: expected a table"), std::string::npos);
  EXPECT_NE(LoadError("allowed_origins = [1]\n").find("allowed_origins[0]: expected a string"),
            std::string::npos);
  EXPECT_NE(LoadError("[admission]\nmax_queue = -1\n").find("admission.max_queue: must be between"),
            std::string::npos);
  EXPECT_NE(LoadError("listen = \"localhost\"\n").find("listen: expected host:port"), std::string::npos);
  EXPECT_NE(LoadError("[[keys]]\nid = \"a\"\n").find("keys[0].sha256: missing"), std::string::npos);
}

TEST(Config, InstanceIsADnsLabel) {
  auto c = Load("instance = \"execbox-0\"\n");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->instance, "execbox-0");
  EXPECT_EQ(DefaultConfig().instance, "");
  for (const char* bad : {"Execbox", "a_b", "-a", "a-", "", "a.b"}) {
    EXPECT_NE(LoadError(std::string("instance = \"") + bad + "\"\n").find("instance: instance name"),
              std::string::npos)
        << bad << ": " << LoadError(std::string("instance = \"") + bad + "\"\n");
  }
  EXPECT_NE(LoadError("instance = \"" + std::string(64, 'a') + "\"\n").find("1-63 of a-z"),
            std::string::npos);
}

TEST(Config, BadSha256IsRejected) {
  const std::string error = LoadError("[[keys]]\nid = \"alice\"\nsha256 = \"abc123\"\n");
  EXPECT_NE(error.find("keys[0].sha256"), std::string::npos) << error;
  EXPECT_NE(error.find("64 hex"), std::string::npos) << error;
  const std::string not_hex =
      LoadError("[[keys]]\nid = \"alice\"\nsha256 = \"" + std::string(63, 'a') + "g\"\n");
  EXPECT_NE(not_hex.find("keys[0].sha256"), std::string::npos) << not_hex;
  const std::string dup = LoadError("[[keys]]\nid = \"a\"\nsha256 = \"" + kAliceHash +
                                    "\"\n[[keys]]\nid = \"a\"\nsha256 = \"" + Sha256Hex("x") + "\"\n");
  EXPECT_NE(dup.find("keys[1].id: duplicate"), std::string::npos) << dup;
}

TEST(Config, DefaultsAboveMaximaAreRejected) {
  const std::string error = LoadError("[limits.default]\ntimeout_seconds = 600\n");
  EXPECT_NE(error.find("limits.default.timeout_seconds"), std::string::npos) << error;
  EXPECT_NE(error.find("exceeds limits.max.timeout_seconds"), std::string::npos) << error;
  const std::string lowered = LoadError("[limits.max]\nmemory_mb = 128\n");  // default is 256 MiB
  EXPECT_NE(lowered.find("limits.default.memory_mb"), std::string::npos) << lowered;
  EXPECT_TRUE(
      Load("[limits.default]\ntimeout_seconds = 300\n[limits.max]\ntimeout_seconds = 300\n").has_value());
}

TEST(Config, ParseErrorsCarryLineAndColumn) {
  const std::string error = LoadError("listen = \"127.0.0.1:8080\"\n[http\nio_threads = 2\n");
  EXPECT_NE(error.find("execbox.toml:2:"), std::string::npos) << error;
  EXPECT_NE(LoadError("a = \n").find("execbox.toml:1:"), std::string::npos);
}

TEST(Config, MissingFileIsAnError) {
  ServerConfig config = DefaultConfig();
  auto s = LoadConfigFile("/nonexistent/execbox.toml", config);
  ASSERT_FALSE(s.has_value());
  EXPECT_NE(s.error().message.find("/nonexistent/execbox.toml"), std::string::npos);
}

TEST(Config, FailedLoadLeavesConfigUntouched) {
  TempDir dir;
  ServerConfig config = DefaultConfig();
  ASSERT_FALSE(LoadConfigFile(dir.File("c.toml", "listen = \"0.0.0.0:1\"\n[http]\nbogus = 1\n"), config));
  EXPECT_EQ(config.listen, "127.0.0.1:8080");
}

class EnvironmentTest : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv("EXECBOX_API_KEYS"); }
};

TEST_F(EnvironmentTest, TokensBecomeHashedKeys) {
  setenv("EXECBOX_API_KEYS", " first-token-0123456789 ,, ,second-token-0123456789", 1);
  ServerConfig config = DefaultConfig();
  config.keys.push_back(ApiKey{.id = "alice", .sha256_hex = kAliceHash});
  ASSERT_TRUE(ApplyEnvironment(config).has_value());
  ASSERT_EQ(config.keys.size(), 3u);
  EXPECT_EQ(config.keys[1].id, "env-1");
  EXPECT_EQ(config.keys[1].sha256_hex, Sha256Hex("first-token-0123456789"));
  EXPECT_EQ(config.keys[2].id, "env-2");
  EXPECT_EQ(config.keys[2].sha256_hex, Sha256Hex("second-token-0123456789"));
  Authenticator auth(config.keys);
  auto key = auth.Authenticate("Bearer second-token-0123456789");
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(key->id, "env-2");
}

TEST_F(EnvironmentTest, ShortTokenIsAnErrorThatDoesNotShowIt) {
  setenv("EXECBOX_API_KEYS", "long-enough-token-0123,short", 1);
  ServerConfig config = DefaultConfig();
  auto s = ApplyEnvironment(config);
  ASSERT_FALSE(s.has_value());
  EXPECT_NE(s.error().message.find("token 2"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("16"), std::string::npos);
  EXPECT_EQ(s.error().message.find("short"), s.error().message.find("shorter"));  // only in "shorter"
  EXPECT_TRUE(config.keys.empty());
}

TEST_F(EnvironmentTest, UnsetOrEmptyAddsNothing) {
  ServerConfig config = DefaultConfig();
  ASSERT_TRUE(ApplyEnvironment(config).has_value());
  EXPECT_TRUE(config.keys.empty());
  setenv("EXECBOX_API_KEYS", " , ", 1);
  ASSERT_TRUE(ApplyEnvironment(config).has_value());
  EXPECT_TRUE(config.keys.empty());
}

}  // namespace
}  // namespace execbox::api
