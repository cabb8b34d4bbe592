// The HTTP server's parts that stand alone: authentication and metrics.
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
#include "api/http/metrics.h"
#include "lib/temp_dir.h"

namespace execbox::api {
namespace {

using namespace std::chrono_literals;

using test::TempDir;

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
                                           .lean_workers = 1,
                                           .lean_prepared_children = 2,
                                           .prepared_session_children = 3,
                                           .prepared_target = 2,
                                           .lean_prepared_target = 1,
                                           .prepared_sessions_target = 8,
                                           .served_full = 6,
                                           .served_lean = 11,
                                           .full_zygote_peak_bytes = 125'000'000,
                                           .lean_zygote_peak_bytes = 36'000'000,
                                           .sessions = 5,
                                           .connections = 7,
                                           .children_ended = 9,
                                           .workers_replaced = 1,
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
           "execbox_lean_workers 1",
           "execbox_lean_prepared_children 2",
           "execbox_prepared_session_children 3",
           "execbox_prepared_children_target{sort=\"full\"} 2",
           "execbox_prepared_children_target{sort=\"lean\"} 1",
           "execbox_prepared_children_target{sort=\"session\"} 8",
           "# TYPE execbox_warm_children_served_total counter",
           "execbox_warm_children_served_total{zygote=\"full\"} 6",
           "execbox_warm_children_served_total{zygote=\"lean\"} 11",
           "# TYPE execbox_zygote_memory_peak_bytes gauge",
           "execbox_zygote_memory_peak_bytes{zygote=\"full\"} 125000000",
           "execbox_zygote_memory_peak_bytes{zygote=\"lean\"} 36000000",
           "execbox_sessions 5",
           "execbox_open_connections 7",
           "# TYPE execbox_warm_children_ended_total counter",
           "execbox_warm_children_ended_total 9",
           "execbox_warm_workers_replaced_total 1",
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
        "execbox_warm_children_ended_total counter", "execbox_warm_cpu_seconds_total counter",
        "execbox_warm_workers_replaced_total counter",
        "execbox_lean_workers gauge", "execbox_lean_prepared_children gauge",
        "execbox_prepared_session_children gauge", "execbox_prepared_children_target gauge",
        "execbox_warm_children_served_total counter", "execbox_zygote_memory_peak_bytes gauge"}) {
    EXPECT_NE(text.find(std::string("# TYPE ") + family + "\n"), std::string::npos) << family;
  }
}

TEST(Metrics, CountsNetworkConnectionsPerKey) {
  Metrics m;
  m.Connections("alice", 3, 1);
  m.Connections("alice", 0, 9997);
  const std::string text = m.Render({});
  EXPECT_NE(text.find("# TYPE execbox_key_network_connections_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("execbox_key_network_connections_total{key=\"alice\",outcome=\"allowed\"} 3\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("execbox_key_network_connections_total{key=\"alice\",outcome=\"refused\"} 9998\n"),
            std::string::npos)
      << text;
}

TEST(Metrics, EscapesLabelValues) {
  Metrics m;
  m.Rejected("a\\b\"c\nd");
  const std::string text = m.Render({});
  EXPECT_NE(text.find("execbox_rejected_requests_total{transport=\"http\",reason=\"a\\\\b\\\"c\\nd\"} 1\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace execbox::api
