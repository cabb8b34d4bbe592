// One execution in flight behind the HTTP API: its cancel flag (set when the client goes away
// or at the end of a graceful shutdown) and, for SSE, the serialized writes and heartbeats. An
// SSE stream starts with the first thing sent, so that a refusal while the execution waits
// for its slot is still a plain problem response.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "api/http/http_api.h"

namespace execbox::api {

struct HttpApi::Running {
  Running(std::shared_ptr<Exchange> e, bool sse) : exchange(std::move(e)), streaming(sse) {}
  const std::shared_ptr<Exchange> exchange;
  std::atomic<bool> cancel{false};
  const bool streaming;
  std::atomic<std::chrono::steady_clock::time_point> last_write{std::chrono::steady_clock::now()};

  // Starts the SSE stream (once the execution has its slot); Send does it too if needed.
  void Start() {
    std::lock_guard lock(write_mu_);
    StartLocked();
  }
  // One SSE frame (or comment); frames from the output thread and the heartbeat never interleave.
  void Send(const std::string& frame) {
    std::lock_guard lock(write_mu_);
    StartLocked();
    exchange->Write(frame);
    last_write = std::chrono::steady_clock::now();
  }
  bool started() {
    std::lock_guard lock(write_mu_);
    return started_;
  }

 private:
  void StartLocked() {
    if (started_) return;
    exchange->StartStream(200, "text/event-stream", {});
    started_ = true;
    last_write = std::chrono::steady_clock::now();
  }
  std::mutex write_mu_;
  bool started_ = false;
};

}  // namespace execbox::api
