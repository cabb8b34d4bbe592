// The server's configuration (cli/server_config.h): the TOML file, the environment, and what
// each refuses.
#include "cli/server_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

#include "api/http/auth.h"
#include "lib/temp_dir.h"

namespace execbox::cli {
namespace {

using api::ApiKey;
using api::Authenticator;
using test::TempDir;

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
lean_workers = 0
lean_memory_mb = 128
full_memory_mb = 512
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
  EXPECT_EQ(c->lean_workers, 0u);
  EXPECT_EQ(c->lean_memory_mb, 128u);
  EXPECT_EQ(c->full_memory_mb, 512u);
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

TEST(Config, LintBlockListsCodes) {
  auto c = Load("[lint]\nblock = [\"F821\", \"B6\"]\n");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->lint_block, (std::vector<std::string>{"F821", "B6"}));
  EXPECT_NE(LoadError("[lint]\nblock = [\"F 821\"]\n").find("lint.block"), std::string::npos);
  EXPECT_NE(LoadError("[lint]\nblock = \"F821\"\n").find("expected an array"), std::string::npos);
  EXPECT_NE(LoadError("[lint]\nallow = []\n").find("lint.allow: unknown key"), std::string::npos);
}

TEST(Config, GuardAndWhatItAllows) {
  auto c = Load("[engine]\nguard = \"audit\"\nguard_allow = [\"subprocess\"]\n");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->guard, runtime::Guard::kAudit);
  EXPECT_TRUE(c->guard_programs);
  c = Load("");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->guard, runtime::Guard::kOff);
  EXPECT_FALSE(c->guard_programs);
  EXPECT_NE(LoadError("[engine]\nguard = \"strict\"\n").find("engine.guard: must be \"off\" or \"audit\""),
            std::string::npos);
  EXPECT_NE(LoadError("[engine]\nguard_allow = [\"network\"]\n").find("engine.guard_allow: 'network'"),
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
  // A full zygote needs ~120 MB to start: a bound under 256 MB would only fail its start.
  EXPECT_NE(LoadError("[engine]\nfull_memory_mb = 100\n").find("engine.full_memory_mb: must be between 256"),
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

TEST(Config, E2bDomainIsADnsName) {
  auto c = Load("[e2b]\ndomain = \"sandbox.example.test\"\n");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->e2b_domain, "sandbox.example.test");
  EXPECT_EQ(DefaultConfig().e2b_domain, "");
  for (const char* bad : {"Example.test", "a..b", ".a", "a.", "-a.b", "a_b.c", "a b"}) {
    EXPECT_NE(
        LoadError(std::string("[e2b]\ndomain = \"") + bad + "\"\n").find("e2b.domain: expected a DNS name"),
        std::string::npos)
        << bad << ": " << LoadError(std::string("[e2b]\ndomain = \"") + bad + "\"\n");
  }
  EXPECT_NE(LoadError("[e2b]\nport = 1\n").find("e2b.port"), std::string::npos);
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

TEST(Config, KeyCapsAndTheirServerDefaults) {
  auto c = Load(R"(
[admission]
max_sessions_per_key = 4
max_session_state_mb_per_key = 100

[[keys]]
id = "alice"
sha256 = ")" + kAliceHash +
                R"("
max_sessions = 2
max_queued = 3
max_processes = 5
max_session_state_mb = 7
)");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  const engine::KeyCaps& k = c->keys.at(0).caps;
  EXPECT_EQ(k.max_sessions, 2u);
  EXPECT_EQ(k.max_queued, 3u);
  EXPECT_EQ(k.max_processes, 5u);
  EXPECT_EQ(k.max_session_state_bytes, 7ull << 20);
  EXPECT_EQ(c->key_defaults.max_sessions, 4u);
  EXPECT_EQ(c->key_defaults.max_session_state_bytes, 100ull << 20);
  EXPECT_EQ(c->key_defaults.max_queued, engine::DefaultKeyCaps().max_queued);  // unset: built in
  // A key's own cap wins; what it leaves unset comes from the server's.
  EXPECT_EQ(k.Or(c->key_defaults).max_sessions, 2u);
  EXPECT_EQ(engine::KeyCaps{}.Or(c->key_defaults).max_sessions, 4u);
  EXPECT_EQ(api::CallerOf(c->keys.at(0)).caps.max_processes, 5u);
  const std::string error = LoadError("[admission]\nmax_processes_per_key = -1\n");
  EXPECT_NE(error.find("admission.max_processes_per_key"), std::string::npos) << error;
}

TEST(Config, NonAsciiOutsideStringsIsRefusedBeforeParsing) {
  // toml++ 3.3.0 reaches undefined behaviour on these (fuzz/findings/README.md).
  for (const char* text :
       {"\xc3\xa9 = 1\n", "a = 1 \xca\x9e\n", "[t\xc3\xa9]\n", "listen = \"x\"\n[[keys]]\n\xc3\xa9 = 1"}) {
    const std::string error = LoadError(text);
    EXPECT_NE(error.find("non-ASCII character outside a string or a comment"), std::string::npos) << error;
    EXPECT_NE(error.find("execbox.toml:"), std::string::npos) << error;
  }
  const std::string where = LoadError("listen = \"x\"\n\n  \xc3\xa9 = 1");
  EXPECT_NE(where.find(":3:3: "), std::string::npos) << where;
  // Inside strings and comments it is fine (and a quoted key is a key like any other).
  auto c = Load("# caf\xc3\xa9\naudit_log = \"/tmp/caf\xc3\xa9\" # \xc3\xa9\n");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->audit_log, "/tmp/caf\xc3\xa9");
  // Multi-line strings, an escaped quote, and the two quotes a multi-line string may end with.
  c = Load("audit_log = '''\n\xc3\xa9'''\ninstance = \"\"\"\n\\\"\xc3\xa9\"\"\"\"\n");
  ASSERT_FALSE(c.has_value());  // the instance name is no DNS label: the scan got past both strings
  EXPECT_EQ(c.error().message.find("non-ASCII"), std::string::npos) << c.error().message;
  EXPECT_NE(LoadError("\"caf\xc3\xa9\" = 1\n").find("unknown key"), std::string::npos);
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
}  // namespace execbox::cli

namespace execbox::cli {
namespace {

TEST(Config, NetworkIsTheWidestPolicyAndABadEntryIsNamed) {
  auto c = Load("[network]\nallow = [\"*.example.test:443\", \"10.0.0.0/8\"]\ndeny = [\"secret.example.test\"]\n");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->network.allow.size(), 2u);
  EXPECT_EQ(c->network.deny.size(), 1u);
  EXPECT_TRUE(Load("# nothing\n")->network.empty());
  EXPECT_NE(LoadError("[network]\nallow = [\"10.0.0.1/8\"]\n").find("10.0.0.1/8"), std::string::npos);
  EXPECT_NE(LoadError("[network]\nallow = \"a.test\"\n").find("network.allow"), std::string::npos);
  EXPECT_NE(LoadError("[network]\nalow = []\n").find("network.alow: unknown key"), std::string::npos);
  EXPECT_EQ(Load("[network]\nmax_connections = 100\n")->network_max_connections, 100u);
  EXPECT_EQ(Load("[network]\nmax_bytes = 1048576\n")->network_max_bytes, 1048576u);
  EXPECT_NE(LoadError("[network]\nmax_bytes = 0\n").find("max_bytes"), std::string::npos);
  EXPECT_NE(LoadError("[[keys]]\nid = \"k\"\nsha256 = \"" + std::string(64, 'a') +
                      "\"\nnetwork = { allow = [], max_bytes = 5 }\n")
                .find("unknown key"),
            std::string::npos);
  EXPECT_NE(LoadError("[network]\nmax_connections = 0\n").find("max_connections"), std::string::npos);
}

TEST(Config, TheHostsFileIsReadWithTheConfigAndItsBadLineNamed) {
  char path[] = "/var/tmp/execbox-hosts-test-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string good = "127.0.0.2 pypi.example.test\n";
  ASSERT_EQ(::write(fd, good.data(), good.size()), static_cast<ssize_t>(good.size()));
  ::close(fd);
  auto c = Load("[network]\nhosts_file = \"" + std::string(path) + "\"\n");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  ASSERT_NE(c->network_hosts, nullptr);
  EXPECT_NE(c->network_hosts->Find("pypi.example.test"), nullptr);
  EXPECT_EQ(Load("# nothing\n")->network_hosts, nullptr);
  {
    std::ofstream bad(path);
    bad << "# fine\npypi.example.test 127.0.0.2\n";
  }
  const std::string error = LoadError("[network]\nhosts_file = \"" + std::string(path) + "\"\n");
  EXPECT_NE(error.find("network.hosts_file"), std::string::npos) << error;
  EXPECT_NE(error.find("line 2: expected an IP address"), std::string::npos) << error;
  EXPECT_NE(LoadError("[network]\nhosts_file = \"hosts\"\n").find("must be an absolute path"),
            std::string::npos);
  EXPECT_NE(LoadError("[network]\nhosts_file = \"/nonexistent/hosts\"\n").find("network.hosts_file"),
            std::string::npos);
  EXPECT_NE(LoadError("[network]\nhosts_file = \"/dev/stdin\"\n").find("not a readable regular file"),
            std::string::npos);
  ::unlink(path);
}

TEST(Config, AKeysNetworkLiesWithinTheServers) {
  const std::string key = "[[keys]]\nid = \"k\"\nsha256 = \"" + std::string(64, 'a') + "\"\n";
  auto c = Load("[network]\nallow = [\"*.example.test\"]\n" + key +
                "network = { allow = [\"a.example.test:443\"] }\n");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  ASSERT_TRUE(c->keys.at(0).caps.network.has_value());
  EXPECT_EQ(c->keys[0].caps.network->allow.size(), 1u);
  // Unset: the server's (no bound of its own); empty: none.
  EXPECT_FALSE(Load("[network]\nallow = [\"a.test\"]\n" + key)->keys.at(0).caps.network.has_value());
  EXPECT_TRUE(Load(key + "network = { allow = [] }\n")->keys.at(0).caps.network->allow.empty());
  // The order of the sections does not matter; an entry beyond the server's is named.
  const std::string beyond =
      LoadError(key + "network = { allow = [\"evil.test\"] }\n[network]\nallow = [\"a.test\"]\n");
  EXPECT_NE(beyond.find("keys[0].network"), std::string::npos) << beyond;
  EXPECT_NE(beyond.find("'evil.test'"), std::string::npos) << beyond;
  EXPECT_NE(LoadError(key + "network = { allow = [\"bad name\"] }\n").find("bad name"), std::string::npos);
}

}  // namespace
}  // namespace execbox::cli
