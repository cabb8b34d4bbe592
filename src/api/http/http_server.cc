#include "api/http/http_server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "api/http/http_target.h"
#include "api/http/http_wire.h"
#include "api/http/problem.h"

namespace execbox::api {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using local = asio::local::stream_protocol;
using boost::system::error_code;

// Past this much unsent stream data (a client reading slower than the code prints), further
// droppable stream chunks (live output) are dropped: the final event carries the whole capped
// output anyway, and is never dropped.
constexpr size_t kMaxQueuedStreamBytes = 4 << 20;
// How long, and how much, a closing connection reads and drops (see Connection::Linger).
constexpr std::chrono::seconds kLinger{2};
constexpr size_t kMaxLingerBytes = 8 << 20;

}  // namespace

// What the state and a handler's Exchange need of a connection, whatever its socket.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  virtual ~Connection() = default;
  virtual void Shutdown() = 0;
  virtual void Close() = 0;
  virtual void Respond(HttpResponse response) = 0;
  virtual void StartStream(int status, std::string content_type,
                           std::vector<std::pair<std::string, std::string>> headers) = 0;
  virtual void WriteChunk(std::string data, bool droppable) = 0;
  virtual void EndStream() = 0;
  virtual void AbortStream() = 0;
  virtual std::shared_ptr<std::atomic<bool>> gone() const = 0;
  virtual asio::any_io_executor executor() = 0;
  virtual void Dispatch(HttpRequest request) = 0;
};

struct HttpServer::State : std::enable_shared_from_this<HttpServer::State> {
  HttpServerOptions options;
  HttpHandler handler;
  asio::io_context io;
  std::optional<tcp::acceptor> acceptor;
  std::optional<local::acceptor> local_acceptor;
  // The socket file this server made, removed at Stop if it is still that file.
  std::string unix_path;
  dev_t unix_dev = 0;
  ino_t unix_ino = 0;
  std::vector<std::thread> threads;
  std::atomic<bool> stopping{false};
  std::atomic<size_t> open{0};
  uint16_t port = 0;
  std::mutex mu;
  std::set<std::weak_ptr<Connection>, std::owner_less<std::weak_ptr<Connection>>> connections;
  std::atomic<bool> stopped{false};

  template <class Protocol>
  void Accept(typename Protocol::acceptor& listener);
  void Drop(std::string_view reason) {
    if (options.on_drop) options.on_drop(reason);
  }
  void Responded(int status) {
    if (options.on_response) options.on_response(status);
  }
};

namespace {

// "address:port" of a TCP client.
std::string PeerName(tcp::socket& socket, std::optional<LocalPeer>&) {
  error_code ec;
  auto remote = socket.remote_endpoint(ec);
  return ec ? std::string() : remote.address().to_string() + ":" + std::to_string(remote.port());
}

// A Unix socket's client: who it is, from the kernel (SO_PEERCRED, SO_PEERGROUPS: the
// credentials it had when it connected), never from anything it sends.
std::string PeerName(local::socket& socket, std::optional<LocalPeer>& local_peer) {
  const int fd = socket.native_handle();
  struct ucred cred {};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return "local";
  LocalPeer peer{.pid = cred.pid, .uid = cred.uid, .gid = cred.gid, .groups = {}};
  std::vector<gid_t> groups(64);
  for (int attempt = 0; attempt < 2; ++attempt) {
    socklen_t bytes = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &bytes) == 0) {
      groups.resize(bytes / sizeof(gid_t));
      peer.groups = std::move(groups);
      break;
    }
    if (errno != ERANGE) break;  // no groups known: only uid and gid count
    groups.resize(bytes / sizeof(gid_t) + 1);
  }
  local_peer = std::move(peer);
  return "local uid " + std::to_string(cred.uid) + " pid " + std::to_string(cred.pid);
}

}  // namespace

template <class Protocol>
class StreamConnection final : public Connection {
 public:
  StreamConnection(std::shared_ptr<HttpServer::State> server, typename Protocol::socket socket)
      : server_(std::move(server)), stream_(std::move(socket)) {
    ++server_->open;
    peer_ = PeerName(stream_.socket(), local_peer_);
  }

  ~StreamConnection() override { --server_->open; }
  StreamConnection(const StreamConnection&) = delete;
  StreamConnection& operator=(const StreamConnection&) = delete;

  void Start() {
    asio::dispatch(stream_.get_executor(), [self = Self()] { self->ReadHeader(true); });
  }

  // From any thread (shutdown): a connection waiting for a request is closed now; one inside
  // a handler closes after its answer.
  void Shutdown() override {
    asio::post(stream_.get_executor(), [self = Self()] {
      if (!self->in_handler_) self->Close();
    });
  }

  void Close() override {
    if (closed_) return;
    closed_ = true;
    error_code ec;
    stream_.socket().shutdown(asio::socket_base::shutdown_both, ec);
    stream_.close();
    gone_->store(true);
  }

  // Exchange side, always on the strand.
  void Respond(HttpResponse response) override {
    if (answered_ || closed_) return;
    answered_ = true;
    bool keep = KeepAlive();
    auto headers = response.headers;
    for (const auto& h : server_->options.response_headers) headers.push_back(h);
    bool bodiless = response.status == 204 || response.status == 304;  // RFC 9110: no length, no body
    if (!bodiless) headers.emplace_back("Content-Length", std::to_string(response.body.size()));
    std::string out = SerializeHead(response.status, response.content_type, headers, keep) + "\r\n";
    server_->Responded(response.status);
    if (method_ != "HEAD" && !bodiless) out += response.body;
    keep_after_ = keep;
    Queue(std::move(out), true);
  }

  void StartStream(int status, std::string content_type,
                   std::vector<std::pair<std::string, std::string>> headers) override {
    if (answered_ || closed_) return;
    answered_ = streaming_ = true;
    bool keep = KeepAlive();
    for (const auto& h : server_->options.response_headers) headers.push_back(h);
    headers.emplace_back("Transfer-Encoding", "chunked");
    headers.emplace_back("Cache-Control", "no-store");
    headers.emplace_back("X-Accel-Buffering", "no");
    server_->Responded(status);
    keep_after_ = keep;
    Queue(SerializeHead(status, content_type, headers, keep) + "\r\n", false);
  }

  void WriteChunk(std::string data, bool droppable) override {
    if (!streaming_ || stream_ended_ || closed_ || data.empty()) return;
    if (droppable && queued_bytes_ > kMaxQueuedStreamBytes) return;
    Queue(Chunk(data), false);
  }

  void EndStream() override {
    if (!streaming_ || stream_ended_ || closed_) return;
    stream_ended_ = true;
    Queue("0\r\n\r\n", true);
  }

  // No last chunk: once what is queued is out, Finished() half-closes and closes.
  void AbortStream() override {
    if (!streaming_ || stream_ended_ || closed_) return;
    stream_ended_ = true;
    keep_after_ = false;
    Queue("", true);
  }

  std::shared_ptr<std::atomic<bool>> gone() const override { return gone_; }
  asio::any_io_executor executor() override { return stream_.get_executor(); }
  void Dispatch(HttpRequest request) override;

 private:
  std::shared_ptr<StreamConnection> Self() {
    return std::static_pointer_cast<StreamConnection>(shared_from_this());
  }

  bool KeepAlive() const {
    return keep_alive_ && !server_->stopping && requests_ < server_->options.max_requests_per_connection;
  }

  void ReadHeader(bool first) {
    if (closed_) return;
    if (server_->stopping) return Close();
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_->options.max_header_bytes));
    parser_->body_limit(server_->options.max_body_bytes);
    stream_.expires_after(first ? server_->options.header_timeout
                                : std::max(server_->options.header_timeout, server_->options.idle_timeout));
    first_read_ = first;
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = Self()](error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(error_code ec) {
    if (ec) return Failed(ec, "header");
    auto& req = parser_->get();
    if (auto length = parser_->content_length(); length && *length > server_->options.max_body_bytes) {
      return Refuse(Problem{.status = 413,
                            .type = "body-too-large",
                            .title = "Request body too large",
                            .detail = "the body is " + std::to_string(*length) +
                                      " bytes; this server accepts at most " +
                                      std::to_string(server_->options.max_body_bytes)});
    }
    if (beast::iequals(req[http::field::expect], "100-continue") && !parser_->is_done()) {
      // curl waits for this before sending a large body.
      auto cont = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
      asio::async_write(stream_, asio::buffer(*cont), [self = Self(), cont](error_code wec, size_t) {
        if (wec) return self->Failed(wec, "write");
        self->ReadBody();
      });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    stream_.expires_after(server_->options.body_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = Self()](error_code ec, size_t) { self->OnBody(ec); });
  }

  void OnBody(error_code ec) {
    if (ec) return Failed(ec, "body");
    stream_.expires_never();
    ++requests_;
    keep_alive_ = parser_->keep_alive();
    auto message = parser_->release();
    parser_.reset();

    HttpRequest request;
    request.method = std::string(message.method_string());
    request.target = std::string(message.target());
    RequestTarget target = SplitTarget(request.target);
    auto path = PercentDecode(target.path);
    request.query = std::string(target.query);
    for (const auto& field : message) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      auto [it, inserted] = request.headers.emplace(name, std::string(field.value()));
      if (!inserted) it->second += ", " + std::string(field.value());
    }
    request.body = std::move(message.body());
    request.peer = peer_;
    request.local_peer = local_peer_;
    method_ = request.method;
    answered_ = streaming_ = stream_ended_ = false;
    in_handler_ = true;
    gone_ = std::make_shared<std::atomic<bool>>(false);
    Watch();
    if (!path) {
      return Respond(ProblemResponse(Problem{.status = 400,
                                             .type = "malformed-path",
                                             .title = "Malformed request path",
                                             .detail = "the path has an invalid percent-escape"}));
    }
    request.path = std::move(*path);
    Dispatch(std::move(request));
  }

  // While a handler runs, a read that ends in an error means the client is gone. Data that
  // arrives (a pipelined request) is kept for the next parse.
  void Watch() {
    if (watching_ || closed_) return;
    watching_ = true;
    stream_.socket().async_read_some(asio::buffer(watch_buf_), [self = Self()](error_code ec, size_t n) {
      self->watching_ = false;
      if (!ec && n > 0) {
        auto dst = self->buffer_.prepare(n);
        asio::buffer_copy(dst, asio::buffer(self->watch_buf_.data(), n));
        self->buffer_.commit(n);
        if (self->buffer_.size() <= self->server_->options.max_header_bytes && !self->next_read_ &&
            !self->lingering_) {
          return self->Watch();
        }
      } else if (ec && ec != asio::error::operation_aborted) {
        self->gone_->store(true);
        if (self->in_handler_) return;  // the handler answers into the void; then we close
        return self->Close();
      }
      if (self->lingering_) return self->Linger();
      if (self->next_read_) {
        self->next_read_ = false;
        self->ReadHeader(false);
      }
    });
  }

  void Queue(std::string data, bool last) {
    queued_bytes_ += data.size();
    out_.push_back(std::move(data));
    if (last) finishing_ = true;
    if (!writing_) WriteNext();
  }

  void WriteNext() {
    if (closed_) return;
    if (out_.empty()) {
      writing_ = false;
      if (finishing_) Finished();
      return;
    }
    writing_ = true;
    auto data = std::make_shared<std::string>(std::move(out_.front()));
    out_.pop_front();
    // A stalled reader cannot hold a write forever.
    stream_.expires_after(server_->options.body_timeout);
    asio::async_write(stream_, asio::buffer(*data), [self = Self(), data](error_code ec, size_t) {
      self->queued_bytes_ -= data->size();
      self->stream_.expires_never();
      if (ec) {
        self->gone_->store(true);
        self->writing_ = false;
        self->out_.clear();
        self->server_->Drop("write_failed");
        return self->Close();
      }
      self->WriteNext();
    });
  }

  // The answer is out: next request, or close.
  void Finished() {
    finishing_ = false;
    in_handler_ = false;
    if (!keep_after_ || gone_->load() || server_->stopping) {
      // Half-close so the client reads everything before it sees the end.
      error_code ec;
      stream_.socket().shutdown(asio::socket_base::shutdown_send, ec);
      if (gone_->load()) return Close();
      lingering_ = true;
      if (watching_) {
        stream_.socket().cancel(ec);  // the watch ends with operation_aborted and lingers
        return;
      }
      return Linger();
    }
    if (watching_) {
      next_read_ = true;
      error_code ec;
      stream_.socket().cancel(ec);  // the watch ends with operation_aborted and reads on
      return;
    }
    ReadHeader(false);
  }

  // Reads and drops what the client still sends (the rest of a refused body) for a moment
  // before closing: closing with unread data would reset the connection, and the client could
  // lose the answer it has not read yet.
  void Linger() {
    if (closed_) return;
    stream_.expires_after(kLinger);
    stream_.async_read_some(asio::buffer(watch_buf_), [self = Self()](error_code ec, size_t n) {
      self->lingered_ += n;
      if (ec || self->lingered_ > kMaxLingerBytes) return self->Close();
      self->Linger();
    });
  }

  void Refuse(const Problem& problem) {
    keep_alive_ = false;
    in_handler_ = true;
    answered_ = false;
    server_->Drop(problem.status == 413 ? "body_too_large" : "header_too_large");
    Respond(ProblemResponse(problem));
  }

  void Failed(error_code ec, std::string_view phase) {
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
        ec == asio::error::operation_aborted) {
      return Close();
    }
    if (ec == beast::error::timeout) {
      // Nothing sent yet on an idle keep-alive connection is not a slow client.
      if (!(phase == "header" && !first_read_ && buffer_.size() == 0)) {
        server_->Drop(phase == "header" ? "header_timeout"
                      : phase == "body" ? "body_timeout"
                                        : "write_timeout");
      }
      return Close();
    }
    if (ec == http::error::header_limit) {
      return Refuse(Problem{.status = 431,
                            .type = "header-too-large",
                            .title = "Request header fields too large",
                            .detail = "the header is larger than " +
                                      std::to_string(server_->options.max_header_bytes) + " bytes"});
    }
    if (ec == http::error::body_limit) {
      return Refuse(Problem{
          .status = 413,
          .type = "body-too-large",
          .title = "Request body too large",
          .detail = "the body is larger than " + std::to_string(server_->options.max_body_bytes) + " bytes"});
    }
    if (phase == "header" || phase == "body") {
      return Refuse(Problem{.status = 400,
                            .type = "malformed-http",
                            .title = "Malformed HTTP request",
                            .detail = ec.message()});
    }
    Close();
  }

  std::shared_ptr<HttpServer::State> server_;
  beast::basic_stream<Protocol> stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::array<char, 4096> watch_buf_{};
  std::string peer_, method_;
  std::optional<LocalPeer> local_peer_;
  std::deque<std::string> out_;
  size_t queued_bytes_ = 0;
  size_t requests_ = 0;
  bool keep_alive_ = true, keep_after_ = true;
  bool first_read_ = true, in_handler_ = false, answered_ = false, streaming_ = false, stream_ended_ = false;
  bool writing_ = false, finishing_ = false, watching_ = false, next_read_ = false, closed_ = false;
  bool lingering_ = false;
  size_t lingered_ = 0;
  std::shared_ptr<std::atomic<bool>> gone_ = std::make_shared<std::atomic<bool>>(false);
};

namespace {

// A handler's answer channel: every call hops onto the connection's executor.
class ConnectionExchange : public Exchange {
 public:
  explicit ConnectionExchange(std::shared_ptr<Connection> connection)
      : connection_(std::move(connection)), gone_(connection_->gone()) {}
  ~ConnectionExchange() override {
    // A handler that forgot to answer must not leave the client hanging.
    if (!answered_.exchange(true)) {
      Post([](Connection& c) {
        c.Respond(ProblemResponse(Problem{.status = 500,
                                          .type = "internal",
                                          .title = "Internal server error",
                                          .detail = "the request was dropped without an answer"}));
      });
    } else if (streaming_ && !ended_) {
      Post([](Connection& c) { c.EndStream(); });
    }
  }

  void Respond(HttpResponse response) override {
    if (answered_.exchange(true)) return;
    Post([response = std::move(response)](Connection& c) mutable { c.Respond(std::move(response)); });
  }
  void StartStream(int status, std::string content_type,
                   std::vector<std::pair<std::string, std::string>> headers) override {
    if (answered_.exchange(true)) return;
    streaming_ = true;
    Post([status, content_type = std::move(content_type), headers = std::move(headers)](
             Connection& c) mutable { c.StartStream(status, std::move(content_type), std::move(headers)); });
  }
  bool Write(std::string chunk, bool droppable) override {
    if (gone_->load()) return false;
    Post([chunk = std::move(chunk), droppable](Connection& c) mutable {
      c.WriteChunk(std::move(chunk), droppable);
    });
    return true;
  }
  void EndStream() override {
    if (ended_) return;
    ended_ = true;
    Post([](Connection& c) { c.EndStream(); });
  }
  void AbortStream() override {
    if (ended_) return;
    ended_ = true;
    Post([](Connection& c) { c.AbortStream(); });
  }
  const std::atomic<bool>& ClientGone() const override { return *gone_; }

 private:
  template <typename F>
  void Post(F f) {
    asio::post(connection_->executor(), [c = connection_, f = std::move(f)]() mutable { f(*c); });
  }
  std::shared_ptr<Connection> connection_;
  std::shared_ptr<std::atomic<bool>> gone_;
  std::atomic<bool> answered_{false};
  bool streaming_ = false, ended_ = false;
};

}  // namespace

template <class Protocol>
void StreamConnection<Protocol>::Dispatch(HttpRequest request) {
  auto exchange = std::make_shared<ConnectionExchange>(shared_from_this());
  try {
    server_->handler(std::move(request), exchange);
  } catch (const std::exception& e) {
    exchange->Respond(ProblemResponse(
        Problem{.status = 500, .type = "internal", .title = "Internal server error", .detail = e.what()}));
  }
}

template <class Protocol>
void HttpServer::State::Accept(typename Protocol::acceptor& listener) {
  listener.async_accept(asio::make_strand(io), [self = shared_from_this(), &listener](
                                                   error_code ec, typename Protocol::socket socket) {
    if (ec == asio::error::operation_aborted || self->stopping) return;
    if (!ec) {
      if (self->open.load() >= self->options.max_connections) {
        // Answer, then close: a client learns why rather than seeing a reset.
        self->Drop("connection_limit");
        auto refusal = std::make_shared<std::string>(
            SerializeHead(503, "application/problem+json", {{"Retry-After", "1"}}, false));
        std::string body =
            ProblemResponse(Problem{.status = 503,
                                    .type = "too-many-connections",
                                    .title = "Too many connections",
                                    .detail = "the server's connection limit is reached; retry"})
                .body;
        *refusal += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
        auto sock = std::make_shared<typename Protocol::socket>(std::move(socket));
        asio::async_write(*sock, asio::buffer(*refusal), [sock, refusal](error_code, size_t) {
          error_code ignored;
          sock->shutdown(asio::socket_base::shutdown_both, ignored);
          sock->close(ignored);
        });
      } else {
        if constexpr (std::is_same_v<Protocol, tcp>) {
          // A streamed answer is many small writes (SSE events, E2B's lines and envelopes):
          // without this, Nagle's algorithm holds each behind the client's delayed ACK (~40 ms).
          error_code ignored;
          socket.set_option(tcp::no_delay(true), ignored);
        }
        auto connection = std::make_shared<StreamConnection<Protocol>>(self, std::move(socket));
        {
          std::lock_guard lock(self->mu);
          self->connections.insert(connection);
        }
        connection->Start();
      }
    }
    self->template Accept<Protocol>(listener);
  });
}

namespace {

Expected<void> ListenTcp(HttpServer::State& state) {
  error_code ec;
  auto address = asio::ip::make_address(state.options.host, ec);
  if (ec) return std::unexpected(Error{"listen address '" + state.options.host + "': " + ec.message()});
  tcp::endpoint endpoint(address, state.options.port);
  state.acceptor.emplace(state.io);
  state.acceptor->open(endpoint.protocol(), ec);
  if (!ec) state.acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) state.acceptor->bind(endpoint, ec);
  if (!ec) state.acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return std::unexpected(Error{"cannot listen on " + state.options.host + ":" +
                                 std::to_string(state.options.port) + ": " + ec.message()});
  }
  state.port = state.acceptor->local_endpoint().port();
  return {};
}

// A socket file left by a server that died is replaced; one a live server answers on is not,
// and neither is anything that is not a socket.
Expected<void> ClearStaleSocket(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return {};
  if (!S_ISSOCK(st.st_mode)) return Fail(path + " exists and is not a socket; not replacing it");
  asio::io_context io;
  local::socket probe(io);
  error_code ec;
  probe.connect(local::endpoint(path), ec);
  if (!ec) return Fail("another server is already listening on " + path);
  if (unlink(path.c_str()) != 0 && errno != ENOENT) return Fail(path + ": cannot remove the stale socket");
  return {};
}

Expected<void> ListenUnix(HttpServer::State& state) {
  const std::string& path = state.options.unix_path;
  if (path.size() >= sizeof(sockaddr_un::sun_path)) return Fail("unix socket path too long: " + path);
  if (auto cleared = ClearStaleSocket(path); !cleared) return cleared;
  error_code ec;
  state.local_acceptor.emplace(state.io);
  state.local_acceptor->open(local(), ec);
  if (!ec) state.local_acceptor->bind(local::endpoint(path), ec);
  if (ec) return Fail("cannot listen on " + path + ": " + ec.message());
  // Who may connect is the file's mode; who the client is, the server reads from the kernel at
  // accept time, so a moment with the umask's mode before this chmod lets no one in.
  struct stat st {};
  if (chmod(path.c_str(), state.options.unix_mode) != 0 || lstat(path.c_str(), &st) != 0) {
    unlink(path.c_str());
    return Fail("cannot set the mode of " + path);
  }
  state.unix_path = path;
  state.unix_dev = st.st_dev;
  state.unix_ino = st.st_ino;
  state.local_acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    unlink(path.c_str());
    return Fail("cannot listen on " + path + ": " + ec.message());
  }
  return {};
}

}  // namespace

Expected<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options, HttpHandler handler) {
  auto state = std::make_shared<State>();
  state->options = std::move(options);
  state->handler = std::move(handler);
  if (state->options.host.empty() && state->options.unix_path.empty()) {
    return Fail("nothing to listen on: neither a TCP address nor a unix socket");
  }
  if (!state->options.host.empty()) {
    if (auto listening = ListenTcp(*state); !listening) return std::unexpected(listening.error());
    state->Accept<tcp>(*state->acceptor);
  }
  if (!state->options.unix_path.empty()) {
    if (auto listening = ListenUnix(*state); !listening) return std::unexpected(listening.error());
    state->Accept<local>(*state->local_acceptor);
  }
  size_t threads = std::max<size_t>(1, state->options.io_threads);
  for (size_t i = 0; i < threads; ++i) {
    state->threads.emplace_back([s = state.get()] { s->io.run(); });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(state)));
}

HttpServer::~HttpServer() { Stop(); }

uint16_t HttpServer::port() const { return state_->port; }

size_t HttpServer::connections() const {
  std::lock_guard lock(state_->mu);
  size_t n = 0;
  for (auto it = state_->connections.begin(); it != state_->connections.end();) {
    if (it->expired()) {
      it = state_->connections.erase(it);
    } else {
      ++n;
      ++it;
    }
  }
  return n;
}

void HttpServer::StopAccepting() {
  if (state_->stopping.exchange(true)) return;
  asio::post(state_->io, [s = state_] {
    error_code ec;
    if (s->acceptor) s->acceptor->close(ec);
    if (s->local_acceptor) s->local_acceptor->close(ec);
  });
  // The socket file goes with the listener, unless another server has replaced it since.
  struct stat st {};
  if (!state_->unix_path.empty() && lstat(state_->unix_path.c_str(), &st) == 0 &&
      st.st_dev == state_->unix_dev && st.st_ino == state_->unix_ino) {
    unlink(state_->unix_path.c_str());
  }
  std::lock_guard lock(state_->mu);
  for (const auto& weak : state_->connections) {
    if (auto c = weak.lock()) c->Shutdown();
  }
}

void HttpServer::Stop() {
  if (state_->stopped.exchange(true)) return;
  StopAccepting();
  {
    std::lock_guard lock(state_->mu);
    for (const auto& weak : state_->connections) {
      if (auto c = weak.lock()) asio::post(c->executor(), [c] { c->Close(); });
    }
  }
  // Let the closes run before the loop stops: a connection's handler still pending in a stopped
  // loop keeps the connection, and through it this server's state, alive for good (a leak at
  // exit that the sanitizer build reports). A busy machine may need longer than a moment, so
  // wait until the connections are gone, for two seconds at most.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } while (connections() > 0 && std::chrono::steady_clock::now() < deadline);
  state_->io.stop();
  for (auto& t : state_->threads) {
    if (t.joinable()) t.join();
  }
  // Handlers that became ready as the loop stopped (an accept or a read ended by the closes)
  // still hold what they captured, the server's state among it: run them now, on this thread,
  // where they see their operations aborted and end, so nothing outlives the server.
  state_->io.restart();
  state_->io.poll();
}

}  // namespace execbox::api
