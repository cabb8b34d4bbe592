// One execution in flight behind the HTTP API: its cancel flag (set when the client goes away
// or at the end of a graceful shutdown) and, for SSE, the serialized writes and heartbeats.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "api/http/http_api.h"

namespace execbox::api {

struct HttpApi::Running {
  explicit Running(std::shared_ptr<Exchange> e) : exchange(std::move(e)) {}
  std::shared_ptr<Exchange> exchange;
  std::atomic<bool> cancel{false};
  std::atomic<bool> shutdown{false};  // cancelled because the server is stopping
  bool streaming = false;             // set before the Running is registered
  std::atomic<std::chrono::steady_clock::time_point> last_write{std::chrono::steady_clock::now()};
  std::mutex write_mu;

  // One SSE frame (or comment); frames from the output thread and the heartbeat never interleave.
  void Send(const std::string& frame) {
    std::lock_guard lock(write_mu);
    exchange->Write(frame);
    last_write = std::chrono::steady_clock::now();
  }
};

}  // namespace execbox::api
