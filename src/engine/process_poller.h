// One thread that reads every session process's output and every session init's reports
// (epoll, level-triggered), so a hundred background processes cost one thread, not a hundred.
// A front end never waits on it: it hands the bytes to the session's process table, whose
// readers wake up.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>

#include "base/error.h"
#include "base/unique_fd.h"

namespace execbox::engine {

class ProcessPoller {
 public:
  ProcessPoller();
  ~ProcessPoller();  // stops the thread; every watch is dropped
  ProcessPoller(const ProcessPoller&) = delete;
  ProcessPoller& operator=(const ProcessPoller&) = delete;

  // False when epoll or the thread could not be had (every Watch then fails).
  bool ok() const { return epoll_.Valid(); }

  // Reads `fd` (made non-blocking) as bytes come: `on_data` for each read, then `on_end` once
  // at its end (EOF, EIO of a pty whose processes are all gone, an error) or when unwatched.
  // The poller holds `fd` (shared: a pty's master is written and resized by others) until then.
  using Token = uint64_t;
  Expected<Token> Watch(std::shared_ptr<UniqueFd> fd, std::function<void(std::string_view)> on_data,
                        std::function<void()> on_end);
  // Calls `on_ready` whenever `fd` is readable (or hung up), until it returns false. `fd` must
  // stay open until then: `on_ready` owns what holds it.
  Expected<Token> WatchReadable(int fd, std::function<bool()> on_ready);
  // Drops a watch now (its on_end is called, on the caller's thread); nothing if it ended.
  void Unwatch(Token token);
  // Stops reading a Watch's descriptor (`hold`), or reads it again: the writer then blocks on a
  // full pipe, as it would with a slow reader of its own. Any thread, on_data's too.
  void Hold(Token token, bool hold);

 private:
  struct Entry {
    std::shared_ptr<UniqueFd> fd;  // a Watch's
    int raw = -1;
    std::function<void(std::string_view)> on_data;
    std::function<void()> on_end;
    std::function<bool()> on_ready;  // a WatchReadable's
    bool held = false;               // out of epoll for now (Hold)
  };
  Expected<Token> Add(int fd, std::shared_ptr<Entry> entry);
  void Loop();
  // Removes `token` from epoll and the table: the entry, for its on_end.
  std::shared_ptr<Entry> Remove(Token token);

  UniqueFd epoll_;
  UniqueFd wake_;  // an eventfd: Stop
  std::mutex mu_;
  std::map<Token, std::shared_ptr<Entry>> entries_;
  Token next_ = 1;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace execbox::engine
