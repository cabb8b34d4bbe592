// The engine's gate and its parts: admission control (the queue, a caller's rate and
// concurrency) and the audit log. The limit schema is tested in limit_schema_test.cc; the gate
// end to end, over every transport, in tests/http and tests/mcp.
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
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/sha256.h"
#include "engine/admission.h"
#include "engine/audit.h"
#include "lib/temp_dir.h"

namespace execbox::engine {
namespace {

using namespace std::chrono_literals;

using test::TempDir;

// ---- admission ----

Caller Key(std::string id, size_t max_concurrent = 100, double rate = 1000, double burst = 1000) {
  return Caller{
      .id = std::move(id), .max_concurrent = max_concurrent, .rate_per_second = rate, .burst = burst};
}

// Reserve, then wait for the slot: what the gate does for a caller with a thread of its own.
Refused<Ticket> Enter(Admission& admission, const Caller& caller, const std::atomic<bool>* cancel = nullptr) {
  auto ticket = admission.Reserve(caller);
  if (!ticket) return ticket;
  if (auto waited = admission.Wait(*ticket, cancel); !waited) return std::unexpected(waited.error());
  return ticket;
}

// The HTTP status a refusal becomes (api/http/problem.h): the tests below speak in those.
int StatusOf(const Refusal& r) {
  return r.kind == RefusalKind::kTooMany ? 429 : r.kind == RefusalKind::kUnavailable ? 503 : 500;
}
std::string RetryAfter(const Refusal& r) { return std::to_string(r.retry_after_seconds); }

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
  Holder(Admission& admission, Caller key) {
    thread_ = std::thread([this, &admission, key = std::move(key)] {
      auto ticket = Enter(admission, key);
      result_.set_value(ticket.has_value() ? 0 : StatusOf(ticket.error()));
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
    auto t = Enter(admission, Key("c"));
    return t.has_value() ? 0 : StatusOf(t.error());
  });
  ASSERT_TRUE(Eventually([&] { return admission.queued() == 1; }));
  EXPECT_EQ(waiter.wait_for(150ms), std::future_status::timeout);

  // The fourth finds the queue full.
  auto full = Enter(admission, Key("d"));
  ASSERT_FALSE(full.has_value());
  EXPECT_EQ(StatusOf(full.error()), 429);
  EXPECT_EQ(full.error().type, "queue-full");
  EXPECT_EQ(RetryAfter(full.error()), "1");

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
      auto t = Enter(admission, Key("w" + std::to_string(i)));
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
      auto t = Enter(admission, Key("w" + std::to_string(i)));
      return t.has_value() ? std::pair<int, std::string>{0, ""}
                           : std::pair{StatusOf(t.error()), t.error().type};
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
  auto late = Enter(admission, Key("late"));
  ASSERT_FALSE(late.has_value());
  EXPECT_EQ(StatusOf(late.error()), 503);
  EXPECT_EQ(late.error().type, "shutting-down");
  EXPECT_EQ(admission.running(), 1u);  // the running one keeps its slot until it ends
}

TEST(Admission, CancelledWaiterLeavesTheQueue) {
  Admission admission(1, 4);
  Holder holder(admission, Key("a"));
  ASSERT_EQ(holder.Status(), 0);
  std::atomic<bool> cancel = false;
  auto waiter = std::async(std::launch::async, [&] {
    auto t = Enter(admission, Key("b"), &cancel);
    return t.has_value() ? 0 : StatusOf(t.error());
  });
  ASSERT_TRUE(Eventually([&] { return admission.queued() == 1; }));
  cancel = true;
  ASSERT_EQ(waiter.wait_for(2s), std::future_status::ready);  // polled every 100 ms
  EXPECT_EQ(waiter.get(), 503);
  EXPECT_EQ(admission.queued(), 0u);
  // Its key is free again.
  holder.Release();
  ASSERT_TRUE(Eventually([&] { return admission.running() == 0; }));
  EXPECT_TRUE(Enter(admission, Key("b", 1)).has_value());
}

TEST(Admission, RateLimitIs429WithRetryAfter) {
  Admission admission(10, 10);
  const Caller key = Key("r", 100, /*rate=*/0.25, /*burst=*/2);
  EXPECT_TRUE(Enter(admission, key).has_value());
  EXPECT_TRUE(Enter(admission, key).has_value());
  auto limited = Enter(admission, key);
  ASSERT_FALSE(limited.has_value());
  EXPECT_EQ(StatusOf(limited.error()), 429);
  EXPECT_EQ(limited.error().type, "rate-limited");
  EXPECT_EQ(RetryAfter(limited.error()), "4");  // one token at 0.25/s
  // Another key has its own bucket.
  EXPECT_TRUE(Enter(admission, Key("other", 100, 0.25, 2)).has_value());
}

TEST(Admission, ARefusedRequestCostsTheKeyNoRateToken) {
  Admission admission(4, 4);
  Caller key = Key("k", /*max_concurrent=*/1, /*rate=*/0.001, /*burst=*/2);
  auto first = Enter(admission, key);
  ASSERT_TRUE(first.has_value());
  auto refused = Enter(admission, key);  // over its concurrency: refused before any token is taken
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().type, "key-concurrency");
  { Ticket done = std::move(*first); }
  auto second = Enter(admission, key);  // the burst's second token is still there
  ASSERT_TRUE(second.has_value()) << second.error().type;
}

TEST(Admission, ReserveDecidesAtOnceAndAQueuedTicketLeavesTheQueueWhenDropped) {
  Admission admission(1, 1);
  Caller key = Key("k");
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
  const Caller key = Key("r", 100, /*rate=*/20, /*burst=*/1);
  EXPECT_TRUE(Enter(admission, key).has_value());
  auto limited = Enter(admission, key);
  ASSERT_FALSE(limited.has_value());
  EXPECT_EQ(RetryAfter(limited.error()), "1");  // at least 1
  std::this_thread::sleep_for(80ms);            // 1.6 tokens' worth, capped at 1
  EXPECT_TRUE(Enter(admission, key).has_value());
  EXPECT_FALSE(Enter(admission, key).has_value());
}

TEST(Admission, KeyConcurrencyCountsRunningAndWaiting) {
  Admission admission(1, 10);
  const Caller key = Key("k", 2);
  auto running = Enter(admission, key);
  ASSERT_TRUE(running.has_value());
  auto waiter = std::async(std::launch::async, [&] { return Enter(admission, key).has_value(); });
  ASSERT_TRUE(Eventually([&] { return admission.queued() == 1; }));
  auto third = Enter(admission, key);
  ASSERT_FALSE(third.has_value());
  EXPECT_EQ(StatusOf(third.error()), 429);
  EXPECT_EQ(third.error().type, "key-concurrency");
  EXPECT_EQ(RetryAfter(third.error()), "1");
  // Released: the waiter runs and ends.
  *running = Ticket();
  EXPECT_TRUE(waiter.get());
  EXPECT_EQ(admission.running(), 0u);
  EXPECT_TRUE(Enter(admission, key).has_value());
}

TEST(Admission, TicketMovesReleaseExactlyOnce) {
  Admission admission(2, 0);
  {
    auto a = Enter(admission, Key("a"));
    ASSERT_TRUE(a.has_value());
    Ticket moved(std::move(*a));
    EXPECT_EQ(admission.running(), 1u);
    Ticket assigned;
    assigned = std::move(moved);
    EXPECT_EQ(admission.running(), 1u);
    auto b = Enter(admission, Key("b"));
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
  auto a = Enter(admission, Key("a"));
  ASSERT_TRUE(a.has_value());
  auto b = Enter(admission, Key("b"));
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
        auto t = Enter(admission, Key("k" + std::to_string(i)));
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

  (*log)->Write(AuditRecord{.caller_id = "alice",
                            .transport = "http",
                            .route = "execute",
                            .session_id = "",
                            .code = "print('secret')",
                            .status = "ok",
                            .usage = {{"wall_ms", 12}},
                            .peer = "127.0.0.1:5555"});
  (*log)->Write(AuditRecord{.caller_id = "bob",
                            .transport = "mcp_http",
                            .route = "session",
                            .session_id = "s-1",
                            .code = "x = '\xff\xfe'",  // not UTF-8: replaced, the line stays JSON
                            .status = "refused:queue-full",
                            .peer = "[::1]:1"});
  const auto lines = ReadLines(path);
  ASSERT_EQ(lines.size(), 2u);
  const auto& a = lines[0];
  EXPECT_EQ(a["key_id"], "alice");
  EXPECT_EQ(a["transport"], "http");
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
  EXPECT_EQ(lines[1]["transport"], "mcp_http");
  EXPECT_EQ(lines[1]["code_sha256"], Sha256Hex("x = '\xff\xfe'"));
  EXPECT_TRUE(lines[1]["usage"].is_null());

  // Reopened with code: appended, and the code is there.
  log->reset();
  auto with_code = AuditLog::Open(path, /*include_code=*/true);
  ASSERT_TRUE(with_code.has_value());
  (*with_code)->Write(AuditRecord{.caller_id = "alice", .route = "mcp", .code = "1+1", .status = "ok"});
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
        (*log)->Write(AuditRecord{.caller_id = "k" + std::to_string(t),
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

// ---- refusals ----

// Front ends match a refusal by its reason; the wire keeps its slug: one slug per reason, and a
// refusal made for a reason carries that reason's kind, slug and title.
TEST(Refusal, EachReasonHasItsOwnSlugAndTitle) {
  std::set<std::string> slugs;
  const auto last = static_cast<int>(RefusalReason::kInternalError);
  for (int i = 0; i <= last; ++i) {
    const auto reason = static_cast<RefusalReason>(i);
    const RefusalSpec spec = RefusalSpecOf(reason);
    EXPECT_TRUE(slugs.insert(spec.type).second) << spec.type;
    EXPECT_FALSE(std::string(spec.title).empty()) << spec.type;
    const Refusal made = MakeRefusal(reason, "why");
    EXPECT_EQ(made.reason, reason);
    EXPECT_EQ(made.kind, spec.kind);
    EXPECT_EQ(made.type, spec.type);
    EXPECT_EQ(made.title, spec.title);
    EXPECT_EQ(made.detail, "why");
  }
  EXPECT_EQ(MakeRefusal(RefusalReason::kSessionNotFound, "").type, "session-not-found");
  EXPECT_EQ(MakeRefusal(RefusalReason::kSessionNotFound, "").kind, RefusalKind::kNotFound);
  EXPECT_EQ(MakeRefusal(RefusalReason::kInternalError, "").type, "internal-error");
}

}  // namespace
}  // namespace execbox::engine
