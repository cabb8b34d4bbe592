// Fair admission (engine/fair_queue.h, engine/admission.h): the queue is served by caller in
// turn, so a caller that floods waits behind itself; a caller's queued executions are capped
// (max_queued), and the refusal names the cap.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/admission.h"
#include "engine/fair_queue.h"

namespace execbox::engine {
namespace {

std::vector<std::string> Drain(FairQueue& queue) {
  std::vector<std::string> order;
  while (auto next = queue.Pop()) order.push_back(next->first + std::to_string(next->second));
  return order;
}

TEST(FairQueue, CallersTakeTurnsEachInItsOwnOrder) {
  FairQueue queue;
  for (uint64_t i = 1; i <= 4; ++i) queue.Push("a", i);
  queue.Push("b", 10);
  queue.Push("c", 20);
  queue.Push("b", 11);
  EXPECT_EQ(queue.size(), 7u);
  EXPECT_EQ(queue.size("a"), 4u);
  EXPECT_EQ(Drain(queue), (std::vector<std::string>{"a1", "b10", "c20", "a2", "b11", "a3", "a4"}));
  EXPECT_TRUE(queue.empty());
}

TEST(FairQueue, ACallerArrivingLateWaitsOneRoundAtMost) {
  FairQueue queue;
  for (uint64_t i = 1; i <= 100; ++i) queue.Push("flood", i);
  ASSERT_EQ(queue.Pop()->second, 1u);
  queue.Push("quiet", 500);
  ASSERT_EQ(queue.Pop()->second, 2u);  // flood's turn had come before quiet arrived
  auto next = queue.Pop();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->first, "quiet");
}

TEST(FairQueue, RemovedWaitersLeaveTheirTurnToo) {
  FairQueue queue;
  queue.Push("a", 1);
  queue.Push("b", 2);
  queue.Push("a", 3);
  EXPECT_TRUE(queue.Remove("b", 2));
  EXPECT_FALSE(queue.Remove("b", 2));
  EXPECT_FALSE(queue.Remove("a", 99));
  EXPECT_EQ(queue.size("b"), 0u);
  EXPECT_TRUE(queue.Remove("a", 1));
  EXPECT_EQ(Drain(queue), (std::vector<std::string>{"a3"}));
}

Caller Key(const std::string& id, std::optional<size_t> max_queued = std::nullopt) {
  Caller caller{.id = id, .max_concurrent = 1000, .rate_per_second = 0, .burst = 40};
  caller.caps.max_queued = max_queued;
  return caller;
}

// Which ticket runs next, in order, when the running one is released each time.
TEST(Admission, AFreedSlotGoesToTheCallersInTurn) {
  Admission admission(1, 100);
  auto running = admission.Reserve(Key("flood"));
  ASSERT_TRUE(running.has_value());
  std::vector<std::pair<std::string, Ticket>> queued;
  for (int i = 0; i < 5; ++i) {
    auto t = admission.Reserve(Key("flood"));
    ASSERT_TRUE(t.has_value() && t->queued());
    queued.emplace_back("flood", std::move(*t));
  }
  auto quiet = admission.Reserve(Key("quiet"));
  ASSERT_TRUE(quiet.has_value() && quiet->queued());
  queued.emplace_back("quiet", std::move(*quiet));

  // The first slot freed goes to flood's oldest (its turn came first), the next to quiet,
  // though five of flood's arrived before it.
  std::vector<std::string> ran;
  Ticket current = std::move(*running);
  for (size_t round = 0; round < queued.size(); ++round) {
    current = Ticket();  // released
    size_t found = queued.size();
    for (size_t i = 0; i < queued.size(); ++i) {
      std::atomic<bool> cancel{true};  // granted already, or refused at once
      if (queued[i].second.queued() && admission.Wait(queued[i].second, &cancel).has_value()) found = i;
    }
    ASSERT_LT(found, queued.size()) << "round " << round;
    ran.push_back(queued[found].first);
    current = std::move(queued[found].second);
    EXPECT_EQ(admission.running(), 1u);
  }
  ASSERT_GE(ran.size(), 2u);
  EXPECT_EQ(ran[0], "flood");
  EXPECT_EQ(ran[1], "quiet");
}

TEST(Admission, MaxQueuedCapsOneCallersWaitersOnly) {
  Admission admission(1, 100);
  auto running = admission.Reserve(Key("a", 2));
  ASSERT_TRUE(running.has_value());
  auto q1 = admission.Reserve(Key("a", 2));
  auto q2 = admission.Reserve(Key("a", 2));
  ASSERT_TRUE(q1.has_value() && q2.has_value());
  auto over = admission.Reserve(Key("a", 2));
  ASSERT_FALSE(over.has_value());
  EXPECT_EQ(over.error().type, "key-queue");
  EXPECT_EQ(over.error().kind, RefusalKind::kTooMany);
  EXPECT_EQ(over.error().extra["cap"], "max_queued");
  EXPECT_EQ(over.error().extra["limit"], 2);
  EXPECT_EQ(over.error().extra["in_use"], 2);
  // Another caller still queues.
  auto other = admission.Reserve(Key("b", 2));
  ASSERT_TRUE(other.has_value());
  EXPECT_TRUE(other->queued());
  // Use per caller: a runs one and queues two; b queues one.
  auto use = admission.Use();
  EXPECT_EQ(use["a"].running, 1u);
  EXPECT_EQ(use["a"].queued, 2u);
  EXPECT_EQ(use["b"].queued, 1u);
  // One of a's leaves the queue: a has room again.
  *q1 = Ticket();
  EXPECT_TRUE(admission.Reserve(Key("a", 2)).has_value());
}

TEST(Admission, MaxQueuedZeroRunsOnlyWhenASlotIsFree) {
  Admission admission(1, 100);
  auto running = admission.Reserve(Key("a", 0));
  ASSERT_TRUE(running.has_value());
  EXPECT_FALSE(running->queued());
  auto refused = admission.Reserve(Key("a", 0));
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().type, "key-queue");
}

TEST(Admission, AGrantedTicketDroppedBeforeItsWaitFreesItsSlot) {
  Admission admission(1, 10);
  auto running = admission.Reserve(Key("a"));
  auto queued = admission.Reserve(Key("b"));
  ASSERT_TRUE(running.has_value() && queued.has_value());
  *running = Ticket();  // b is given the slot ...
  EXPECT_EQ(admission.running(), 1u);
  EXPECT_EQ(admission.queued(), 0u);
  *queued = Ticket();  // ... and goes away without running
  EXPECT_EQ(admission.running(), 0u);
  auto next = admission.Reserve(Key("c"));
  ASSERT_TRUE(next.has_value());
  EXPECT_FALSE(next->queued());
}

// A key that floods fills the slots and the queue; another key's single request starts at once
// in the light callers' slot, and a second one of its own waits its turn like the rest.
TEST(Admission, ACallerWithNothingRunningStartsAtOnceBesideAFlood) {
  Admission admission(2, 100, 1);
  std::vector<Ticket> flood;
  for (int i = 0; i < 6; ++i) {
    auto t = admission.Reserve(Key("flood"));
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->queued(), i >= 2) << i;
    EXPECT_EQ(t->light(), i == 0) << i;
    flood.push_back(std::move(*t));
  }
  auto quiet = admission.Reserve(Key("quiet"));
  ASSERT_TRUE(quiet.has_value());
  EXPECT_FALSE(quiet->queued());
  EXPECT_TRUE(quiet->light());
  EXPECT_EQ(admission.running(), 3u);
  auto second = admission.Reserve(Key("quiet"));  // quiet has one running: not light
  ASSERT_TRUE(second.has_value());
  EXPECT_TRUE(second->queued());
  EXPECT_FALSE(second->light());
  auto other = admission.Reserve(Key("other"));  // light, but the light slot is taken
  ASSERT_TRUE(other.has_value());
  EXPECT_TRUE(other->queued());
  *quiet = Ticket();  // the light slot is free again; the queue is not served from it
  EXPECT_EQ(admission.running(), 2u);
  EXPECT_EQ(admission.queued(), 6u);
  auto again = admission.Reserve(Key("late"));
  ASSERT_TRUE(again.has_value());
  EXPECT_FALSE(again->queued());
  flood.clear();
  *second = Ticket();
  *other = Ticket();
  *again = Ticket();
  EXPECT_EQ(admission.running(), 0u);
  EXPECT_EQ(admission.queued(), 0u);
}

// A caller's running executions share the default CPU weight (100) between them, each of n
// getting 1/n of it, so a flood of one key weighs on contended CPUs as much as one execution of
// another; queued ones do not count.
TEST(Admission, ACallersRunningExecutionsShareOneCpuWeight) {
  Admission admission(8, 100);
  auto quiet = admission.Reserve(Key("quiet"));
  ASSERT_TRUE(quiet.has_value());
  EXPECT_EQ(admission.CpuWeight(*quiet), 100u);
  std::vector<Ticket> flood;
  for (int i = 0; i < 7; ++i) {
    auto t = admission.Reserve(Key("flood"));
    ASSERT_TRUE(t.has_value());
    flood.push_back(std::move(*t));
    EXPECT_EQ(admission.CpuWeight(flood.back()), 100u / (i + 1)) << i;
  }
  for (int i = 0; i < 5; ++i) {  // past the running slots: queued, not running
    auto t = admission.Reserve(Key("flood"));
    ASSERT_TRUE(t.has_value());
    EXPECT_TRUE(t->queued());
    flood.push_back(std::move(*t));
  }
  EXPECT_EQ(admission.CpuWeight(flood.front()), 100u / 7);
  EXPECT_EQ(admission.CpuWeight(*quiet), 100u);
  flood.resize(1);  // one running left, and the queued ones gone
  EXPECT_EQ(admission.CpuWeight(flood.front()), 100u);
  Admission crowded(400, 10);
  std::vector<Ticket> many;
  for (int i = 0; i < 300; ++i) many.push_back(std::move(*crowded.Reserve(Key("many"))));
  EXPECT_EQ(crowded.CpuWeight(many.front()), 1u);  // never below the minimum
}

TEST(KeyCaps, AKeysOwnCapWinsAndTheRestComeFromTheDefaults) {
  KeyCaps own{.max_sessions = 2};
  const KeyCaps resolved = own.Or(DefaultKeyCaps());
  EXPECT_EQ(resolved.max_sessions, 2u);
  EXPECT_EQ(resolved.max_queued, DefaultKeyCaps().max_queued);
  EXPECT_EQ(resolved.max_session_state_bytes, DefaultKeyCaps().max_session_state_bytes);
}

TEST(KeyCaps, APendingPlaceCountsUntilItIsReleased) {
  Reservations places;
  uint64_t total = 0;
  size_t held_elsewhere = 1;  // what the caller holds already (a session open)
  auto count = [&] { return held_elsewhere; };
  auto first = places.Take("k", 2, count, &total);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(total, 1u);
  EXPECT_FALSE(places.Take("k", 2, count, &total).has_value());  // 1 held + 1 pending
  EXPECT_EQ(total, 2u);
  EXPECT_TRUE(places.Take("other", 2, count, &total).has_value());  // per caller
  { Reservations::Held done = std::move(*first); }
  EXPECT_TRUE(places.Take("k", 2, count, &total).has_value());
}

}  // namespace
}  // namespace execbox::engine
