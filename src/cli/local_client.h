// A client of `execbox serve --unix` on this machine: one connection over the Unix socket,
// requests one at a time. `execbox run` reaches a local server's warm pool through it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"

namespace execbox::cli {

class LocalClient {
 public:
  // Connects and checks who answers (SO_PEERCRED): root, this user, or the owner of the
  // directory the socket is in. A socket someone else planted where this user looks is not
  // used: its answers could be anything.
  static Expected<std::unique_ptr<LocalClient>> Connect(const std::string& path);
  ~LocalClient();
  LocalClient(const LocalClient&) = delete;
  LocalClient& operator=(const LocalClient&) = delete;

  struct Request {
    std::string method = "POST";
    std::string target;
    std::string json_body;  // sent as application/json when not empty
    std::vector<std::pair<std::string, std::string>> headers;
  };
  struct Reply {
    int status = 0;
    std::string content_type;
    std::map<std::string, std::string> headers;  // names lower-cased
    std::string body;                            // empty for an event stream: its events went to on_event
  };
  // The "detail" of a problem document (an error answer's body, or an SSE "error" event's
  // data); a phrase that says it is not one otherwise.
  static std::string ProblemDetail(std::string_view body);
  using EventHandler = std::function<void(std::string_view event, std::string_view data)>;
  // One request. An answer that is an event stream (SSE) is handed to on_event event by event
  // as it arrives (without on_event, it is read as a body).
  Expected<Reply> Send(const Request& request, const EventHandler& on_event = {});
  // POSTs a JSON body; with on_event, asking for an event stream (Accept: text/event-stream).
  Expected<Reply> Post(const std::string& target, const std::string& json_body,
                       const EventHandler& on_event = {});

  struct Impl;

 private:
  explicit LocalClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace execbox::cli
