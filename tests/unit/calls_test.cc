// The calls a front end has in flight (api/common/calls.h): each on its own thread, ticked while
// it runs and never after, cancelled when its client is gone or at shutdown, and every thread
// joined by Close. Executions are the gate's, waiting in its queue here (no jail runs).
#include "api/common/calls.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "engine/engine.h"

namespace execbox::api {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

template <typename Predicate>
bool Eventually(Predicate predicate, std::chrono::milliseconds within = 10s) {
  const auto deadline = Clock::now() + within;
  while (Clock::now() < deadline) {
    if (predicate()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return predicate();
}

// Counts its ticks; says its client is gone once `gone` is set.
class CountingCall : public Call {
 public:
  bool Tick(Clock::time_point) override {
    EXPECT_FALSE(ended);
    ++ticks;
    return !gone;
  }
  std::atomic<int> ticks{0};
  std::atomic<bool> gone{false};
  std::atomic<bool> ended{false};
};

// Runs until cancelled, then marks its call ended.
std::function<void()> UntilCancelled(const std::shared_ptr<CountingCall>& call) {
  return [call] {
    while (!call->cancelled()) std::this_thread::sleep_for(5ms);
    call->ended = true;
  };
}

TEST(Calls, SpawnRunsOnItsOwnThreadAndWaitIdleSeesItEnd) {
  Calls calls(10ms);
  std::atomic<bool> done{false};
  const auto caller = std::this_thread::get_id();
  std::thread::id ran_on;
  calls.Spawn([&] {
    ran_on = std::this_thread::get_id();
    std::this_thread::sleep_for(50ms);
    done = true;
  });
  EXPECT_TRUE(calls.WaitIdle(Clock::now() + 10s));
  EXPECT_TRUE(done);
  EXPECT_NE(ran_on, caller);
  EXPECT_EQ(calls.running(), 0u);
}

TEST(Calls, AWatchedCallIsTickedWhileItRunsAndNeverAfter) {
  Calls calls(10ms);
  auto call = std::make_shared<CountingCall>();
  std::atomic<bool> release{false};
  calls.Spawn(call, [&] {
    while (!release) std::this_thread::sleep_for(5ms);
    call->ended = true;  // Tick expects no tick from here on
  });
  EXPECT_TRUE(Eventually([&] { return call->ticks >= 3; }));
  release = true;
  EXPECT_TRUE(calls.WaitIdle(Clock::now() + 10s));
  const int ticks = call->ticks;
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(call->ticks, ticks);
}

TEST(Calls, AClientGoneCancelsItsCall) {
  Calls calls(10ms);
  auto call = std::make_shared<CountingCall>();
  calls.Spawn(call, UntilCancelled(call));
  EXPECT_TRUE(Eventually([&] { return call->ticks >= 1; }));
  EXPECT_FALSE(call->cancelled());
  call->gone = true;
  EXPECT_TRUE(calls.WaitIdle(Clock::now() + 10s));
  EXPECT_TRUE(call->ended);
}

TEST(Calls, CancelAllCancelsRunningCallsAndLaterOnes) {
  Calls calls(10ms);
  auto first = std::make_shared<CountingCall>();
  auto second = std::make_shared<CountingCall>();
  calls.Spawn(first, UntilCancelled(first));
  calls.Spawn(second, UntilCancelled(second));
  EXPECT_EQ(calls.running(), 2u);
  calls.CancelAll();
  EXPECT_TRUE(calls.WaitIdle(Clock::now() + 10s));
  auto later = std::make_shared<CountingCall>();
  calls.Spawn(later, UntilCancelled(later));
  EXPECT_TRUE(calls.WaitIdle(Clock::now() + 10s));
  EXPECT_TRUE(first->ended && second->ended && later->ended);
}

TEST(Calls, CloseWaitsForEveryThreadAndWhatItHolds) {
  std::atomic<int> done{0};
  auto held = std::make_shared<int>(0);
  std::weak_ptr<int> watch = held;
  {
    Calls calls(10ms);
    for (int i = 0; i < 4; ++i) {
      calls.Spawn([&done, held] {
        std::this_thread::sleep_for(100ms);
        ++done;
      });
    }
    held.reset();
    calls.Close();
    EXPECT_EQ(done, 4);
    EXPECT_TRUE(watch.expired());  // each thread's captures went before Close returned
    EXPECT_EQ(calls.running(), 0u);
  }
}

// A queued execution's answer: ticked while it waits for its slot, then finished once.
class QueuedAnswer : public StreamedAnswer {
 public:
  bool Tick(Clock::time_point) override {
    EXPECT_EQ(finishes, 0);
    ++ticks;
    return !gone;
  }
  void Started() override { started = true; }
  void Finish(engine::Refused<engine::Result> outcome) override {
    ASSERT_FALSE(outcome.has_value());
    reason = outcome.error().reason;
    ++finishes;
  }
  std::atomic<int> ticks{0}, finishes{0};
  std::atomic<bool> gone{false}, started{false};
  std::atomic<engine::RefusalReason> reason{engine::RefusalReason::kInternalError};
};

class CallsRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto created = engine::Engine::Create({.warm = false});
    ASSERT_TRUE(created.has_value()) << created.error().message;
    engine_ = std::move(*created);
    gate_ = std::make_unique<engine::Gate>(*engine_, engine::GateOptions{.max_running = 1, .max_queue = 8});
    // The one running slot, held and never run: what comes next waits in the queue.
    auto holder = Admit();
    ASSERT_TRUE(holder.has_value());
    holder_.emplace(std::move(*holder));
  }
  engine::Refused<engine::Admitted> Admit() {
    engine::ExecutionRequest request;
    request.program.code = "print(1)";
    return gate_->Admit(engine::Caller{.id = "test"}, std::move(request), {});
  }
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<engine::Gate> gate_;
  std::optional<engine::Admitted> holder_;
};

TEST_F(CallsRunTest, AQueuedExecutionWhoseClientLeftIsCancelledAndFinishedOnce) {
  Calls calls(10ms);
  auto admitted = Admit();
  ASSERT_TRUE(admitted.has_value());
  auto answer = std::make_shared<QueuedAnswer>();
  calls.Run(*gate_, std::move(*admitted), answer);
  EXPECT_TRUE(Eventually([&] { return answer->ticks >= 2; }));
  answer->gone = true;
  EXPECT_TRUE(calls.WaitIdle(Clock::now() + 10s));
  EXPECT_EQ(answer->finishes, 1);
  EXPECT_FALSE(answer->started);
  EXPECT_EQ(answer->reason, engine::RefusalReason::kCancelled);
}

TEST_F(CallsRunTest, ShutdownAnswersAQueuedExecutionWithItsReason) {
  auto answer = std::make_shared<QueuedAnswer>();
  {
    Calls calls(10ms);
    auto admitted = Admit();
    ASSERT_TRUE(admitted.has_value());
    calls.Run(*gate_, std::move(*admitted), answer);
    gate_->Close();
    calls.Close();
    EXPECT_EQ(answer->finishes, 1);
  }
  EXPECT_EQ(answer->reason, engine::RefusalReason::kShuttingDown);
}

}  // namespace
}  // namespace execbox::api
