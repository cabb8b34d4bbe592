// The calls a front end has in flight, each on a thread of its own: an execution the gate runs,
// its events streamed to the front end's answer (Run), or other work that must not hold an I/O
// thread (Spawn: a session call, a file transfer). One ticker looks at every running call about
// ten times a second: the front end sends its keep-alives and progress there and says whether
// its client is still there (if not, the call is cancelled). Close cancels what runs and joins
// every thread, so nothing outlives the Calls; each call still ends through its own code, so its
// client gets its Result or the refusal that says why not.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "engine/gate.h"

namespace execbox::api {

// One call in flight as the ticker sees it; a front end derives its own.
class Call {
 public:
  Call() = default;
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;
  virtual ~Call() = default;

  // Each tick while the call runs (never before it starts, never after it ends, never two at
  // once), on the ticker's thread: keep-alives, progress, output that waited too long. False
  // when whoever asked has gone away: the call is cancelled.
  virtual bool Tick(std::chrono::steady_clock::time_point now) {
    (void)now;
    return true;
  }

  void Cancel() { cancel_ = true; }
  bool cancelled() const { return cancel_; }
  const std::atomic<bool>& cancel_flag() const { return cancel_; }

 private:
  friend class Calls;
  std::atomic<bool> cancel_{false};
  std::mutex tick_mu_;    // a tick and the call's end never overlap
  bool ticking_ = false;  // guarded by tick_mu_
};

// An execution's answer as a front end gives it: its events as they come, then its end.
class StreamedAnswer : public Call {
 public:
  // The execution has its running slot and starts now.
  virtual void Started() {}
  // Live output, from the execution's output thread.
  virtual void Output(jail::Stream stream, std::string_view data) {
    (void)stream;
    (void)data;
  }
  // Each display item as the code produces it (ExecuteOptions::on_display), from the same thread
  // as Output, for an answer that WantsDisplay; the Result's `display` begins with them.
  virtual bool WantsDisplay() const { return false; }
  virtual void Display(const engine::MimeBundle& bundle) { (void)bundle; }
  // The end, exactly once, after the last Tick: the Result, or why there is none (cancelled,
  // shutting down, ...).
  virtual void Finish(engine::Refused<engine::Result> outcome) = 0;
};

class Calls {
 public:
  explicit Calls(std::chrono::milliseconds tick = std::chrono::milliseconds(100));
  ~Calls();  // Close()
  Calls(const Calls&) = delete;
  Calls& operator=(const Calls&) = delete;

  // Runs `admitted` through `gate` on a thread of its own, its events to `answer`.
  void Run(engine::Gate& gate, engine::Admitted admitted, std::shared_ptr<StreamedAnswer> answer);
  // Runs `work` on a thread of its own, ticking `call` (may be null) until `work` returns; then
  // `answer`, if any: a front end answers there, after the last tick, so that no keep-alive
  // follows its answer and no tick reaches a call whose owner is gone once answered.
  void Spawn(std::shared_ptr<Call> call, std::function<void()> work, std::function<void()> answer = nullptr);
  void Spawn(std::function<void()> work) { Spawn(nullptr, std::move(work)); }

  // Cancels every call running, and every call started from now on.
  void CancelAll();
  // Threads running now.
  size_t running() const;
  // Waits until no thread runs or until `deadline`; whether none does.
  bool WaitIdle(std::chrono::steady_clock::time_point deadline);
  // CancelAll, then waits for every thread to end and joins it.
  void Close();

 private:
  void End(uint64_t id, const std::shared_ptr<Call>& call);
  void JoinFinished();
  void Ticker();

  const std::chrono::milliseconds tick_;
  std::mutex join_mu_;  // held while joining: whoever joins next waits for those joins
  mutable std::mutex mu_;
  std::condition_variable changed_;  // a thread ended
  std::condition_variable wake_;     // the ticker is to stop
  uint64_t next_id_ = 0;
  std::map<uint64_t, std::thread> threads_;  // running
  std::vector<std::thread> finished_;        // ended, not yet joined
  std::map<uint64_t, std::shared_ptr<Call>> watched_;
  bool cancel_all_ = false;
  bool stopping_ = false;
  std::thread ticker_;  // last: started when the rest exists
};

}  // namespace execbox::api
