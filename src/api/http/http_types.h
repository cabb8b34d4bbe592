// The HTTP server's view of one exchange, independent of Boost.Beast: a request fully read
// (within the server's limits) and an Exchange through which a handler answers, once, either
// with a whole response or with a stream (SSE). Handlers may answer from any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace execbox::api {

// A client on the Unix socket as the kernel saw it when it connected.
struct LocalPeer {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups (SO_PEERGROUPS)
};

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: path and query
  std::string path;    // percent-decoded path, without the query
  std::string query;   // raw query string, without '?'
  // Header names lower-cased; a repeated header keeps its values joined with ", ".
  std::map<std::string, std::string> headers;
  std::string body;
  std::string peer;  // "address:port" of the client; "local uid U pid P" on the Unix socket
  std::optional<LocalPeer> local_peer;  // set for requests on the Unix socket only

  // The header's value, or "" when absent.
  std::string_view Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string_view{} : std::string_view{it->second};
  }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
  std::string body;
};

// One request's answer channel. Exactly one of Respond or StartStream...EndStream.
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual void Respond(HttpResponse response) = 0;
  // Starts a chunked response (status and headers sent now); Write sends one chunk. Write
  // returns false once the client is gone (the rest is dropped). A `droppable` chunk (live
  // output, a keep-alive) is dropped while a client reading slower than it is written has
  // more than a few MiB unsent; any other (a result, an end) is always sent.
  virtual void StartStream(int status, std::string content_type,
                           std::vector<std::pair<std::string, std::string>> headers) = 0;
  virtual bool Write(std::string chunk, bool droppable) = 0;
  virtual void EndStream() = 0;
  // Ends a started stream without its end: the connection closes after what was written, so
  // the client sees its answer cut off (E2B's SDK reads that as the sandbox's end).
  virtual void AbortStream() = 0;
  // Set when the client closed its side or the connection failed while the handler ran:
  // a handler running code passes it as the execution's cancel flag.
  virtual const std::atomic<bool>& ClientGone() const = 0;
};

using HttpHandler = std::function<void(HttpRequest, std::shared_ptr<Exchange>)>;

}  // namespace execbox::api
