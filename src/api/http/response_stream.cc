#include "api/http/response_stream.h"

#include <utility>

namespace execbox::api {

ResponseStream::ResponseStream(std::shared_ptr<Exchange> exchange, std::string content_type,
                               KeepAlive keep_alive)
    : exchange_(std::move(exchange)),
      content_type_(std::move(content_type)),
      keep_alive_(std::move(keep_alive)) {}

void ResponseStream::Start() {
  std::lock_guard lock(mu_);
  StartLocked();
}

void ResponseStream::Send(const std::string& data) {
  std::lock_guard lock(mu_);
  StartLocked();
  exchange_->Write(data, true);
  last_write_ = std::chrono::steady_clock::now();
}

void ResponseStream::SendWhole(const std::string& data) {
  std::lock_guard lock(mu_);
  StartLocked();
  exchange_->Write(data, false);
  last_write_ = std::chrono::steady_clock::now();
}

bool ResponseStream::started() {
  std::lock_guard lock(mu_);
  return started_;
}

void ResponseStream::Tick(std::chrono::steady_clock::time_point now) {
  std::lock_guard lock(mu_);
  if (!started_ && !keep_alive_.before_start) return;
  if (now - last_write_ <= keep_alive_.silence) return;
  StartLocked();
  exchange_->Write(keep_alive_.bytes, true);
  last_write_ = std::chrono::steady_clock::now();
}

void ResponseStream::StartLocked() {
  if (started_) return;
  exchange_->StartStream(200, content_type_, {});
  started_ = true;
  last_write_ = std::chrono::steady_clock::now();
}

}  // namespace execbox::api
