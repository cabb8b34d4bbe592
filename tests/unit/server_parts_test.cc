// The HTTP server's parts that stand alone: configuration, authentication, admission control,
// metrics and the audit log.
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

#include "api/http/admission.h"
#include "api/http/audit.h"
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
    EXPECT_EQ(Header(r.error(), "WWW-Authenticate"), "Bearer realm=\"execbox\"");
  }
}

TEST_F(AuthenticatorTest, UnknownTokenIs403) {
  for (const char* value : {"Bearer wrong", "Bearer alice-token-012345678", "Bearer not-hex-at-all"}) {
    auto r = auth.Authenticate(value);
    ASSERT_FALSE(r.has_value()) << value;
    EXPECT_EQ(r.error().status, 403);
    EXPECT_EQ(r.error().type, "forbidden");
  }
}

TEST_F(AuthenticatorTest, KnownTokenGivesItsKey) {
  auto a = auth.Authenticate("Bearer " + alice_token);
  ASSERT_TRUE(a.has_value()) << a.error().detail;
  EXPECT_EQ((*a)->id, "alice");
  auto b = auth.Authenticate("bEaReR  " + bob_token + " ");  // scheme case-insensitive, spaces tolerated
  ASSERT_TRUE(b.has_value()) << b.error().detail;
  EXPECT_EQ((*b)->id, "bob");
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
  EXPECT_EQ(r.error().status, 403);
}

// ---- admission ----

ApiKey Key(std::string id, size_t max_concurrent = 100, double rate = 1000, double burst = 1000) {
  return ApiKey{.id = std::move(id),
                .sha256_hex = "",
                .max_concurrent = max_concurrent,
                .rate_per_second = rate,
                .burst = burst};
}

template <typename Predicate>
bool Eventually(Predicate predicate, std::chrono::milliseconds within = 5s) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < deadline) {
    if (predicate()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return predicate();
}

// Holds a ticket on its own thread until released.
class Holder {
 public:
  Holder(Admission& admission, ApiKey key) {
    thread_ = std::thread([this, &admission, key = std::move(key)] {
      auto ticket = admission.Enter(key);
      result_.set_value(ticket.has_value() ? 0 : ticket.error().status);
      release_.get_future().wait();
    });
  }
  ~Holder() {
    Release();
    thread_.join();
  }
  int Status() { return result_future_.get(); }  // 0: admitted
  void Release() {
    if (!released_) {
      released_ = true;
      release_.set_value();
    }
  }

 private:
  std::promise<int> result_;
  std::future<int> result_future_ = result_.get_future();
  std::promise<void> release_;
  bool released_ = false;
  std::thread thread_;
};

TEST(Admission, QueueFullIs429AndAReleasedSlotAdmitsTheWaiter) {
  Admission admission(2, 1);
  auto first = std::make_unique<Holder>(admission, Key("a"));
  Holder second(admission, Key("b"));
  ASSERT_EQ(first->Status(), 0);
  ASSERT_EQ(second.Status(), 0);
  EXPECT_EQ(admission.running(), 2u);

  // The third waits in the queue (its Enter has not returned).
  auto waiter = std::async(std::launch::async, [&] {
    auto t = admission.Enter(Key("c"));
    return t.has_value() ? 0 : t.error().status;
  });
  ASSERT_TRUE(Eventually([&] { return admission.queued() == 1; }));
  EXPECT_EQ(waiter.wait_for(150ms), std::future_status::timeout);

  // The fourth finds the queue full.
  auto full = admission.Enter(Key("d"));
  ASSERT_FALSE(full.has_value());
  EXPECT_EQ(full.error().status, 429);
  EXPECT_EQ(full.error().type, "queue-full");
  EXPECT_EQ(Header(full.error(), "Retry-After"), "1");

  // Releasing a running ticket admits the waiter.
  first.reset();
  ASSERT_EQ(waiter.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(waiter.get(), 0);  // its ticket is gone again once the lambda returned
  EXPECT_EQ(admission.queued(), 0u);
  EXPECT_EQ(admission.running(), 1u);
}

TEST(Admission, WaitersAreServedInArrivalOrder) {
  Admission admission(1, 10);
  auto holder = std::make_unique<Holder>(admission, Key("h"));
  ASSERT_EQ(holder->Status(), 0);
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      auto t = admission.Enter(Key("w" + std::to_string(i)));
      ASSERT_TRUE(t.has_value());
      std::lock_guard lock(mu);
      order.push_back(i);
    });
    ASSERT_TRUE(Eventually([&] { return admission.queued() == static_cast<size_t>(i + 1); }));
  }
  holder.reset();
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(admission.running(), 0u);
}

TEST(Admission, CloseWakesWaitersWith503AndRefusesNewEntries) {
  Admission admission(1, 4);
  Holder holder(admission, Key("a"));
  ASSERT_EQ(holder.Status(), 0);
  std::vector<std::future<std::pair<int, std::string>>> waiters;
  for (int i = 0; i < 3; ++i) {
    waiters.push_back(std::async(std::launch::async, [&admission, i] {
      auto t = admission.Enter(Key("w" + std::to_string(i)));
      return t.has_value() ? std::pair<int, std::string>{0, ""} : std::pair{t.error().status, t.error().type};
    }));
  }
  ASSERT_TRUE(Eventually([&] { return admission.queued() == 3; }));
  const auto start = std::chrono::steady_clock::now();
  admission.Close();
  for (auto& w : waiters) {
    ASSERT_EQ(w.wait_for(5s), std::future_status::ready);
    EXPECT_EQ(w.get(), (std::pair<int, std::string>{503, "shutting-down"}));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  EXPECT_EQ(admission.queued(), 0u);
  auto late = admission.Enter(Key("late"));
  ASSERT_FALSE(late.has_value());
  EXPECT_EQ(late.error().status, 503);
  EXPECT_EQ(late.error().type, "shutting-down");
  EXPECT_EQ(admission.running(), 1u);  // the running one keeps its slot until it ends
}

TEST(Admission, CancelledWaiterLeavesTheQueue) {
  Admission admission(1, 4);
  Holder holder(admission, Key("a"));
  ASSERT_EQ(holder.Status(), 0);
  std::atomic<bool> cancel = false;
  auto waiter = std::async(std::launch::async, [&] {
    auto t = admission.Enter(Key("b"), &cancel);
    return t.has_value() ? 0 : t.error().status;
  });
  ASSERT_TRUE(Eventually([&] { return admission.queued() == 1; }));
  cancel = true;
  ASSERT_EQ(waiter.wait_for(2s), std::future_status::ready);  // polled every 100 ms
  EXPECT_EQ(waiter.get(), 503);
  EXPECT_EQ(admission.queued(), 0u);
  // Its key is free again.
  holder.Release();
  ASSERT_TRUE(Eventually([&] { return admission.running() == 0; }));
  EXPECT_TRUE(admission.Enter(Key("b", 1)).has_value());
}

TEST(Admission, RateLimitIs429WithRetryAfter) {
  Admission admission(10, 10);
  const ApiKey key = Key("r", 100, /*rate=*/0.25, /*burst=*/2);
  EXPECT_TRUE(admission.Enter(key).has_value());
  EXPECT_TRUE(admission.Enter(key).has_value());
  auto limited = admission.Enter(key);
  ASSERT_FALSE(limited.has_value());
  EXPECT_EQ(limited.error().status, 429);
  EXPECT_EQ(limited.error().type, "rate-limited");
  EXPECT_EQ(Header(limited.error(), "Retry-After"), "4");  // one token at 0.25/s
  // Another key has its own bucket.
  EXPECT_TRUE(admission.Enter(Key("other", 100, 0.25, 2)).has_value());
}

TEST(Admission, ARefusedRequestCostsTheKeyNoRateToken) {
  Admission admission(4, 4);
  ApiKey key = Key("k", /*max_concurrent=*/1, /*rate=*/0.001, /*burst=*/2);
  auto first = admission.Enter(key);
  ASSERT_TRUE(first.has_value());
  auto refused = admission.Enter(key);  // over its concurrency: refused before any token is taken
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().type, "key-concurrency");
  { Ticket done = std::move(*first); }
  auto second = admission.Enter(key);  // the burst's second token is still there
  ASSERT_TRUE(second.has_value()) << second.error().type;
}

TEST(Admission, ReserveDecidesAtOnceAndAQueuedTicketLeavesTheQueueWhenDropped) {
  Admission admission(1, 1);
  ApiKey key = Key("k");
  auto running = admission.Reserve(key);
  ASSERT_TRUE(running.has_value());
  auto queued = admission.Reserve(key);
  ASSERT_TRUE(queued.has_value());
  EXPECT_EQ(admission.queued(), 1u);
  auto full = admission.Reserve(key);
  ASSERT_FALSE(full.has_value());
  EXPECT_EQ(full.error().type, "queue-full");
  { Ticket gone = std::move(*queued); }  // its client went away before it ran
  EXPECT_EQ(admission.queued(), 0u);
  EXPECT_EQ(admission.running(), 1u);
  auto next = admission.Reserve(key);  // the queue has room again
  ASSERT_TRUE(next.has_value());
  { Ticket done = std::move(*running); }
  ASSERT_TRUE(admission.Wait(*next, nullptr).has_value());
  EXPECT_EQ(admission.running(), 1u);
  EXPECT_EQ(admission.queued(), 0u);
}

TEST(Admission, RateRefillsOverTime) {
  Admission admission(10, 10);
  const ApiKey key = Key("r", 100, /*rate=*/20, /*burst=*/1);
  EXPECT_TRUE(admission.Enter(key).has_value());
  auto limited = admission.Enter(key);
  ASSERT_FALSE(limited.has_value());
  EXPECT_EQ(Header(limited.error(), "Retry-After"), "1");  // at least 1
  std::this_thread::sleep_for(80ms);                       // 1.6 tokens' worth, capped at 1
  EXPECT_TRUE(admission.Enter(key).has_value());
  EXPECT_FALSE(admission.Enter(key).has_value());
}

TEST(Admission, KeyConcurrencyCountsRunningAndWaiting) {
  Admission admission(1, 10);
  const ApiKey key = Key("k", 2);
  auto running = admission.Enter(key);
  ASSERT_TRUE(running.has_value());
  auto waiter = std::async(std::launch::async, [&] { return admission.Enter(key).has_value(); });
  ASSERT_TRUE(Eventually([&] { return admission.queued() == 1; }));
  auto third = admission.Enter(key);
  ASSERT_FALSE(third.has_value());
  EXPECT_EQ(third.error().status, 429);
  EXPECT_EQ(third.error().type, "key-concurrency");
  EXPECT_EQ(Header(third.error(), "Retry-After"), "1");
  // Released: the waiter runs and ends.
  *running = Ticket();
  EXPECT_TRUE(waiter.get());
  EXPECT_EQ(admission.running(), 0u);
  EXPECT_TRUE(admission.Enter(key).has_value());
}

TEST(Admission, TicketMovesReleaseExactlyOnce) {
  Admission admission(2, 0);
  {
    auto a = admission.Enter(Key("a"));
    ASSERT_TRUE(a.has_value());
    Ticket moved(std::move(*a));
    EXPECT_EQ(admission.running(), 1u);
    Ticket assigned;
    assigned = std::move(moved);
    EXPECT_EQ(admission.running(), 1u);
    auto b = admission.Enter(Key("b"));
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(admission.running(), 2u);
    assigned = std::move(*b);  // releases a's slot
    EXPECT_EQ(admission.running(), 1u);
    assigned = std::move(assigned);  // self-move keeps it
    EXPECT_EQ(admission.running(), 1u);
  }
  EXPECT_EQ(admission.running(), 0u);
}

TEST(Admission, ZeroMaxRunningMeansOne) {
  Admission admission(0, 0);
  auto a = admission.Enter(Key("a"));
  ASSERT_TRUE(a.has_value());
  auto b = admission.Enter(Key("b"));
  ASSERT_FALSE(b.has_value());
  EXPECT_EQ(b.error().type, "queue-full");
}

TEST(Admission, ManyThreadsNeverExceedTheLimit) {
  Admission admission(3, 1000);
  std::atomic<int> inside = 0, peak = 0, admitted = 0;
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      for (int j = 0; j < 20; ++j) {
        auto t = admission.Enter(Key("k" + std::to_string(i)));
        if (!t) continue;
        ++admitted;
        const int now = ++inside;
        int seen = peak.load();
        while (now > seen && !peak.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(100us);
        --inside;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(admitted, 16 * 20);
  EXPECT_LE(peak, 3);
  EXPECT_EQ(admission.running(), 0u);
  EXPECT_EQ(admission.queued(), 0u);
}

// ---- metrics ----

TEST(Metrics, RendersFamiliesWithCumulativeBuckets) {
  Metrics m;
  m.ExecutionFinished("execute", "ok", 0.003);
  m.ExecutionFinished("execute", "ok", 0.2);
  m.ExecutionFinished("execute", "timeout", 45);
  m.ExecutionFinished("execute", "ok", 1000);  // past the last bucket
  m.ExecutionFinished("session", "ok", 1);
  m.Rejected("queue_full");
  m.Rejected("queue_full");
  m.Response(200);
  m.Response(429);
  const std::string text = m.Render(Gauges{
      .running = 3, .queued = 4, .warm_workers = 2, .prepared_children = 1, .sessions = 5, .connections = 7});

  for (const char* line : {
           "# TYPE execbox_executions_total counter",
           "execbox_executions_total{route=\"execute\",status=\"ok\"} 3",
           "execbox_executions_total{route=\"execute\",status=\"timeout\"} 1",
           "execbox_executions_total{route=\"session\",status=\"ok\"} 1",
           "# TYPE execbox_execution_duration_seconds histogram",
           "execbox_execution_duration_seconds_bucket{route=\"execute\",le=\"0.005\"} 1",
           "execbox_execution_duration_seconds_bucket{route=\"execute\",le=\"0.25\"} 2",
           "execbox_execution_duration_seconds_bucket{route=\"execute\",le=\"30\"} 2",
           "execbox_execution_duration_seconds_bucket{route=\"execute\",le=\"60\"} 3",
           "execbox_execution_duration_seconds_bucket{route=\"execute\",le=\"300\"} 3",
           "execbox_execution_duration_seconds_bucket{route=\"execute\",le=\"+Inf\"} 4",
           "execbox_execution_duration_seconds_sum{route=\"execute\"} 1045.203",
           "execbox_execution_duration_seconds_count{route=\"execute\"} 4",
           "execbox_execution_duration_seconds_bucket{route=\"session\",le=\"0.5\"} 0",
           "execbox_execution_duration_seconds_bucket{route=\"session\",le=\"1\"} 1",
           "execbox_rejected_requests_total{reason=\"queue_full\"} 2",
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
      R"re(^execbox_execution_duration_seconds_bucket\{route="([^"]*)",le="[^"]+"\} (\d+)$)re");
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
        "execbox_sessions gauge", "execbox_open_connections gauge"}) {
    EXPECT_NE(text.find(std::string("# TYPE ") + family + "\n"), std::string::npos) << family;
  }
}

TEST(Metrics, EscapesLabelValues) {
  Metrics m;
  m.Rejected("a\\b\"c\nd");
  const std::string text = m.Render({});
  EXPECT_NE(text.find("execbox_rejected_requests_total{reason=\"a\\\\b\\\"c\\nd\"} 1\n"), std::string::npos)
      << text;
}

// ---- audit ----

std::vector<nlohmann::json> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

TEST(Audit, WritesOneParseableLinePerRecordWithoutCode) {
  TempDir dir;
  const std::string path = dir.Path("audit.log");
  auto log = AuditLog::Open(path, /*include_code=*/false);
  ASSERT_TRUE(log.has_value()) << log.error().message;
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  (*log)->Write(AuditRecord{.key_id = "alice",
                            .session_id = "",
                            .route = "execute",
                            .code = "print('secret')",
                            .status = "ok",
                            .usage = {{"wall_ms", 12}},
                            .peer = "127.0.0.1:5555"});
  (*log)->Write(AuditRecord{.key_id = "bob",
                            .session_id = "s-1",
                            .route = "session",
                            .code = "x = '\xff\xfe'",  // not UTF-8: replaced, the line stays JSON
                            .status = "rejected:queue_full",
                            .peer = "[::1]:1"});
  const auto lines = ReadLines(path);
  ASSERT_EQ(lines.size(), 2u);
  const auto& a = lines[0];
  EXPECT_EQ(a["key_id"], "alice");
  EXPECT_TRUE(a["session_id"].is_null());
  EXPECT_EQ(a["route"], "execute");
  EXPECT_EQ(a["code_sha256"], Sha256Hex("print('secret')"));
  EXPECT_EQ(a["code_bytes"], 15);
  EXPECT_EQ(a["status"], "ok");
  EXPECT_EQ(a["usage"]["wall_ms"], 12);
  EXPECT_EQ(a["peer"], "127.0.0.1:5555");
  EXPECT_FALSE(a.contains("code"));
  EXPECT_TRUE(std::regex_match(a["time"].get<std::string>(),
                               std::regex(R"(^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$)")))
      << a["time"];
  EXPECT_EQ(lines[1]["session_id"], "s-1");
  EXPECT_EQ(lines[1]["code_sha256"], Sha256Hex("x = '\xff\xfe'"));
  EXPECT_TRUE(lines[1]["usage"].is_null());

  // Reopened with code: appended, and the code is there.
  log->reset();
  auto with_code = AuditLog::Open(path, /*include_code=*/true);
  ASSERT_TRUE(with_code.has_value());
  (*with_code)->Write(AuditRecord{.key_id = "alice", .route = "mcp", .code = "1+1", .status = "ok"});
  const auto all = ReadLines(path);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[2]["code"], "1+1");
  EXPECT_EQ(all[2]["route"], "mcp");
}

TEST(Audit, ConcurrentWritersNeverInterleave) {
  TempDir dir;
  const std::string path = dir.Path("audit.log");
  auto log = AuditLog::Open(path, true);
  ASSERT_TRUE(log.has_value());
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        (*log)->Write(AuditRecord{.key_id = "k" + std::to_string(t),
                                  .route = "execute",
                                  .code = std::string(5000 + i, static_cast<char>('a' + t)),
                                  .status = "ok"});
      }
    });
  }
  for (auto& th : threads) th.join();
  const auto lines = ReadLines(path);  // throws on a torn line
  ASSERT_EQ(lines.size(), 400u);
  for (const auto& l : lines) EXPECT_EQ(l["code_sha256"], Sha256Hex(l["code"].get<std::string>()));
}

TEST(Audit, OpenFailureSaysWhere) {
  auto log = AuditLog::Open("/nonexistent-dir/audit.log", false);
  ASSERT_FALSE(log.has_value());
  EXPECT_NE(log.error().message.find("/nonexistent-dir/audit.log"), std::string::npos);
  EXPECT_TRUE(AuditLog::Open("-", false).has_value());
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
  const jail::Limits m = DefaultMaxLimits();
  const jail::Limits d;
  EXPECT_EQ(m.wall_time, std::chrono::seconds(300));
  EXPECT_EQ(m.cpu_time, std::chrono::seconds(300));
  EXPECT_EQ(m.memory_bytes, 4ull << 30);
  EXPECT_EQ(m.max_processes, 1024u);
  EXPECT_EQ(m.output_bytes, 16ull << 20);
  EXPECT_EQ(m.work_dir_bytes, 1ull << 30);
  EXPECT_EQ(m.tmp_bytes, d.tmp_bytes);
  EXPECT_EQ(m.open_files, d.open_files);
  EXPECT_EQ(DefaultConfig().max_limits.memory_bytes, 4ull << 30);
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
  EXPECT_EQ(c->default_limits.wall_time, std::chrono::seconds(10));
  EXPECT_EQ(c->default_limits.cpu_time, std::chrono::milliseconds(2500));
  EXPECT_EQ(c->default_limits.memory_bytes, 512ull << 20);
  EXPECT_EQ(c->default_limits.max_processes, 32u);
  EXPECT_EQ(c->default_limits.output_bytes, 65536u);
  EXPECT_EQ(c->default_limits.work_dir_bytes, 32ull << 20);
  EXPECT_EQ(c->max_limits.wall_time, std::chrono::seconds(120));
  EXPECT_EQ(c->max_limits.memory_bytes, 2048ull << 20);
  EXPECT_EQ(c->max_limits.max_processes, 1024u);  // untouched: DefaultMaxLimits
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
  EXPECT_EQ((*key)->id, "alice");
}

TEST(Config, EmptyFileKeepsDefaults) {
  auto c = Load("# nothing\n");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->listen, "127.0.0.1:8080");
  EXPECT_EQ(c->max_limits.wall_time, std::chrono::seconds(300));
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
  EXPECT_EQ((*key)->id, "env-2");
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
