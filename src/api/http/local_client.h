// A client of `execbox serve --unix` on this machine: one connection over the Unix socket,
// requests one at a time. `execbox run` reaches a local server's warm pool through it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/error.h"

namespace execbox::api {

class LocalClient {
 public:
  // Connects and checks who answers (SO_PEERCRED): root, this user, or the owner of the
  // directory the socket is in. A socket someone else planted where this user looks is not
  // used: its answers could be anything.
  static Expected<std::unique_ptr<LocalClient>> Connect(const std::string& path);
  ~LocalClient();
  LocalClient(const LocalClient&) = delete;
  LocalClient& operator=(const LocalClient&) = delete;

  struct Reply {
    int status = 0;
    std::string content_type;
    std::string body;  // empty for an event stream: its events went to on_event
  };
  using EventHandler = std::function<void(std::string_view event, std::string_view data)>;
  // POSTs a JSON body. With on_event, asks for an event stream (SSE) and hands over each event
  // as it arrives; a server that answers with a whole response instead has it in body.
  Expected<Reply> Post(const std::string& target, const std::string& json_body,
                       const EventHandler& on_event = {});

  struct Impl;

 private:
  explicit LocalClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace execbox::api
