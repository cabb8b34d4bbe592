#include "engine/process_poller.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <cerrno>
#include <cstdio>
#include <vector>

namespace execbox::engine {
namespace {

constexpr uint64_t kWakeToken = 0;
constexpr size_t kReadBytes = 65536;

}  // namespace

ProcessPoller::ProcessPoller()
    : epoll_(::epoll_create1(EPOLL_CLOEXEC)), wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!epoll_.Valid() || !wake_.Valid()) {
    epoll_.Reset();
    return;
  }
  struct epoll_event ev {};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeToken;
  if (::epoll_ctl(epoll_.Get(), EPOLL_CTL_ADD, wake_.Get(), &ev) != 0) {
    epoll_.Reset();
    return;
  }
  thread_ = std::thread([this] { Loop(); });
}

ProcessPoller::~ProcessPoller() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  if (wake_.Valid()) {
    uint64_t one = 1;
    (void)!::write(wake_.Get(), &one, sizeof one);
  }
  if (thread_.joinable()) thread_.join();
  std::map<Token, std::shared_ptr<Entry>> left;
  {
    std::lock_guard lock(mu_);
    left.swap(entries_);
  }
  for (auto& [token, entry] : left) {
    if (entry->on_end) entry->on_end();
  }
}

Expected<ProcessPoller::Token> ProcessPoller::Add(int fd, std::shared_ptr<Entry> entry) {
  if (!ok()) return Fail("the process poller is not running");
  std::lock_guard lock(mu_);
  if (stopping_) return Fail("the process poller is stopping");
  const Token token = next_++;
  struct epoll_event ev {};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.u64 = token;
  entry->raw = fd;
  if (::epoll_ctl(epoll_.Get(), EPOLL_CTL_ADD, fd, &ev) != 0) return FailErrno("epoll_ctl");
  entries_.emplace(token, std::move(entry));
  return token;
}

Expected<ProcessPoller::Token> ProcessPoller::Watch(std::shared_ptr<UniqueFd> fd,
                                                    std::function<void(std::string_view)> on_data,
                                                    std::function<void()> on_end) {
  if (!fd || !fd->Valid()) return Fail("nothing to watch");
  int flags = ::fcntl(fd->Get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd->Get(), F_SETFL, flags | O_NONBLOCK) != 0) return FailErrno("O_NONBLOCK");
  auto entry = std::make_shared<Entry>();
  int raw = fd->Get();
  entry->fd = std::move(fd);
  entry->on_data = std::move(on_data);
  entry->on_end = std::move(on_end);
  return Add(raw, std::move(entry));
}

Expected<ProcessPoller::Token> ProcessPoller::WatchReadable(int fd, std::function<bool()> on_ready) {
  auto entry = std::make_shared<Entry>();
  entry->on_ready = std::move(on_ready);
  return Add(fd, std::move(entry));
}

std::shared_ptr<ProcessPoller::Entry> ProcessPoller::Remove(Token token) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(token);
  if (it == entries_.end()) return nullptr;
  std::shared_ptr<Entry> entry = std::move(it->second);
  entries_.erase(it);
  // Before the descriptor can be closed: a closed one leaves epoll only with its last copy.
  (void)::epoll_ctl(epoll_.Get(), EPOLL_CTL_DEL, entry->raw, nullptr);
  return entry;
}

void ProcessPoller::Hold(Token token, bool hold) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(token);
  if (it == entries_.end() || it->second->held == hold || it->second->on_ready) return;
  it->second->held = hold;
  if (hold) {
    (void)::epoll_ctl(epoll_.Get(), EPOLL_CTL_DEL, it->second->raw, nullptr);
    return;
  }
  struct epoll_event ev {};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.u64 = token;
  if (::epoll_ctl(epoll_.Get(), EPOLL_CTL_ADD, it->second->raw, &ev) != 0) it->second->held = true;
}

void ProcessPoller::Unwatch(Token token) {
  if (auto entry = Remove(token); entry && entry->on_end) entry->on_end();
}

void ProcessPoller::Loop() {
  std::vector<char> buf(kReadBytes);
  struct epoll_event events[64];
  for (;;) {
    int n = ::epoll_wait(epoll_.Get(), events, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::perror("execbox: the process poller's epoll_wait");
      return;
    }
    for (int i = 0; i < n; ++i) {
      const Token token = events[i].data.u64;
      if (token == kWakeToken) {
        std::lock_guard lock(mu_);
        if (stopping_) return;
        continue;
      }
      std::shared_ptr<Entry> entry;
      {
        std::lock_guard lock(mu_);
        auto it = entries_.find(token);
        if (it == entries_.end()) continue;  // unwatched meanwhile
        entry = it->second;
      }
      if (entry->on_ready) {
        if (!entry->on_ready()) Remove(token);
        continue;
      }
      // One read per event: level-triggered, so a busy writer cannot starve the others.
      ssize_t got = ::read(entry->raw, buf.data(), buf.size());
      if (got > 0) {
        entry->on_data(std::string_view(buf.data(), static_cast<size_t>(got)));
      } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        if (Remove(token) && entry->on_end) entry->on_end();
      }
    }
  }
}

}  // namespace execbox::engine
