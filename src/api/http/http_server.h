// The HTTP/1.1 server under the API: Boost.Beast over Asio, asynchronous, with a deadline on
// every read (a client trickling its header or body is cut off), caps on header and body size,
// on connections and on requests per connection. It reads one request at a time per
// connection and hands it to a handler, which answers through an Exchange from any thread;
// while a handler runs the connection watches for the client going away.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/http/http_types.h"
#include "base/error.h"

namespace execbox::api {

struct HttpServerOptions {
  std::string host = "127.0.0.1";  // "": no TCP listener (unix_path only)
  uint16_t port = 8080;            // 0: any free port (see HttpServer::port)
  // Also (or only) a Unix stream socket here, "" for none, made with this mode. A socket file
  // a live server answers on is never replaced; a stale one is. Its requests carry the client's
  // kernel credentials (HttpRequest::local_peer).
  std::string unix_path;
  mode_t unix_mode = 0660;
  size_t max_connections = 512;
  size_t max_header_bytes = 16 << 10;
  size_t max_body_bytes = 48 << 20;
  std::chrono::seconds header_timeout{10};
  std::chrono::seconds body_timeout{60};
  std::chrono::seconds idle_timeout{60};
  size_t max_requests_per_connection = 1000;
  size_t io_threads = 2;
  // Answers for what the server refuses itself, before a handler sees the request.
  std::function<void(std::string_view reason)> on_drop;  // "header_timeout", "connection_limit", ...
  std::function<void(int status)> on_response;           // every response's status
  // Added to every response (Execbox-Instance, where the server has an instance name).
  std::vector<std::pair<std::string, std::string>> response_headers;
};

class HttpServer {
 public:
  static Expected<std::unique_ptr<HttpServer>> Start(HttpServerOptions options, HttpHandler handler);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const;  // 0 without a TCP listener
  size_t connections() const;
  // Closes the listening socket and every connection that is not inside a handler; those
  // finish their answer and then close (no keep-alive from now on).
  void StopAccepting();
  // Closes everything and joins the I/O threads.
  void Stop();

  struct State;

 private:
  explicit HttpServer(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

}  // namespace execbox::api
