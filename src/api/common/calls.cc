#include "api/common/calls.h"

#include <cstdio>
#include <exception>
#include <optional>
#include <system_error>
#include <utility>

namespace execbox::api {
namespace {

using Clock = std::chrono::steady_clock;

// A front end's code that throws must not take the server with it: said on stderr, and the
// call goes on to its end.
void Guarded(const std::function<void()>& work, const char* what) {
  try {
    work();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "execbox: %s: %s\n", what, e.what());
  }
}

}  // namespace

Calls::Calls(std::chrono::milliseconds tick) : tick_(tick) {
  ticker_ = std::thread([this] { Ticker(); });
}

Calls::~Calls() {
  Close();
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  ticker_.join();
  JoinFinished();
}

void Calls::Run(engine::Gate& gate, engine::Admitted admitted, std::shared_ptr<StreamedAnswer> answer) {
  auto work = std::make_shared<engine::Admitted>(std::move(admitted));
  auto outcome = std::make_shared<std::optional<engine::Refused<engine::Result>>>();
  auto run = [&gate, work, answer, outcome] {
    engine::ExecuteOptions options{.cancel = &answer->cancel_flag()};
    options.on_started = [a = answer.get()] { a->Started(); };
    options.on_output = [a = answer.get()](jail::Stream stream, std::string_view data) {
      a->Output(stream, data);
    };
    if (answer->WantsDisplay())
      options.on_display = [a = answer.get()](const engine::MimeBundle& bundle) { a->Display(bundle); };
    try {
      outcome->emplace(gate.Run(std::move(*work), options));
    } catch (const std::exception& e) {
      outcome->emplace(std::unexpected(engine::MakeRefusal(engine::RefusalReason::kInternalError,
                                                           std::string("internal error: ") + e.what())));
    }
  };
  // The answer's end comes after its last tick: no keep-alive follows the end of a stream.
  auto finish = [answer, outcome] { answer->Finish(std::move(**outcome)); };
  Spawn(std::move(answer), std::move(run), std::move(finish));
}

void Calls::Spawn(std::shared_ptr<Call> call, std::function<void()> work, std::function<void()> answer) {
  JoinFinished();
  std::unique_lock lock(mu_);
  const uint64_t id = next_id_++;
  if (call) {
    if (cancel_all_) call->Cancel();
    {
      std::lock_guard ticking(call->tick_mu_);
      call->ticking_ = true;
    }
    watched_.emplace(id, call);
  }
  auto body = [this, id, call, work, answer]() mutable {
    Guarded(work, "a call failed");
    End(id, call);
    if (answer) Guarded(answer, "a call's answer failed");
    // What the call holds (its answer, its client's channel) goes before it counts as ended.
    work = nullptr;
    answer = nullptr;
    call.reset();
    std::lock_guard ended(mu_);
    auto self = threads_.extract(id);
    if (!self.empty()) finished_.push_back(std::move(self.mapped()));
    changed_.notify_all();
  };
  try {
    threads_.emplace(id, std::thread(body));
  } catch (const std::system_error& e) {
    // No thread to be had: the call runs here rather than go unanswered.
    std::fprintf(stderr, "execbox: no thread for a call (%s): running it on the caller's\n", e.what());
    lock.unlock();
    Guarded(work, "a call failed");
    End(id, call);
    if (answer) Guarded(answer, "a call's answer failed");
  }
}

void Calls::End(uint64_t id, const std::shared_ptr<Call>& call) {
  if (!call) return;
  {
    std::lock_guard ticking(call->tick_mu_);
    call->ticking_ = false;
  }
  std::lock_guard lock(mu_);
  watched_.erase(id);
}

void Calls::CancelAll() {
  std::lock_guard lock(mu_);
  cancel_all_ = true;
  for (auto& [id, call] : watched_) call->Cancel();
}

size_t Calls::running() const {
  std::lock_guard lock(mu_);
  return threads_.size();
}

bool Calls::WaitIdle(std::chrono::steady_clock::time_point deadline) {
  bool idle = false;
  {
    std::unique_lock lock(mu_);
    idle = changed_.wait_until(lock, deadline, [this] { return threads_.empty(); });
  }
  JoinFinished();
  return idle;
}

void Calls::Close() {
  CancelAll();
  {
    std::unique_lock lock(mu_);
    changed_.wait(lock, [this] { return threads_.empty(); });
  }
  JoinFinished();
}

void Calls::JoinFinished() {
  std::lock_guard joining(join_mu_);
  std::vector<std::thread> ended;
  {
    std::lock_guard lock(mu_);
    ended.swap(finished_);
  }
  for (auto& thread : ended) thread.join();
}

void Calls::Ticker() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, tick_);
    if (stopping_) break;
    std::vector<std::shared_ptr<Call>> calls;
    for (const auto& [id, call] : watched_) calls.push_back(call);
    lock.unlock();
    JoinFinished();
    const auto now = Clock::now();
    for (const auto& call : calls) {
      std::lock_guard ticking(call->tick_mu_);
      if (!call->ticking_) continue;
      bool wanted = true;
      try {
        wanted = call->Tick(now);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "execbox: a call's tick failed: %s\n", e.what());
      }
      if (!wanted) call->Cancel();
    }
    calls.clear();
    lock.lock();
  }
}

}  // namespace execbox::api
