// An answer streamed over an Exchange (SSE, NDJSON, Connect envelopes). It starts, with status
// 200 and its content type, at the first thing sent, so that a refusal before that (while the
// execution waits for its slot) is still an ordinary response; writes from the execution's
// output thread and from the ticker never interleave; after a silence, a keep-alive.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "api/http/http_types.h"

namespace execbox::api {

struct KeepAlive {
  std::string bytes;             // what keeps the stream open: an SSE comment, an NDJSON line
  std::chrono::seconds silence;  // sent once the stream has been silent longer than this
  bool before_start = false;     // also while the answer waits: it starts the stream then
};

class ResponseStream {
 public:
  ResponseStream(std::shared_ptr<Exchange> exchange, std::string content_type, KeepAlive keep_alive);
  ResponseStream(const ResponseStream&) = delete;
  ResponseStream& operator=(const ResponseStream&) = delete;

  // Starts the stream if it has not started (once the execution has its slot).
  void Start();
  // One chunk of live output, starting the stream if need be: dropped while a slow client has
  // too much unsent (Exchange::Write).
  void Send(const std::string& data);
  // One chunk that is never dropped (a result, an end, an error).
  void SendWhole(const std::string& data);
  bool started();
  // The keep-alive, if it is due (the ticker calls this).
  void Tick(std::chrono::steady_clock::time_point now);
  // Ends the stream (after the last Send).
  void End() { exchange_->EndStream(); }
  // Cuts the stream off instead (Exchange::AbortStream).
  void Abort() { exchange_->AbortStream(); }
  Exchange& exchange() { return *exchange_; }
  bool client_gone() const { return exchange_->ClientGone(); }

 private:
  void StartLocked();

  const std::shared_ptr<Exchange> exchange_;
  const std::string content_type_;
  const KeepAlive keep_alive_;
  std::mutex mu_;
  bool started_ = false;
  std::chrono::steady_clock::time_point last_write_ = std::chrono::steady_clock::now();
};

}  // namespace execbox::api
