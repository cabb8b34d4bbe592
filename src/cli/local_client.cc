#include "cli/local_client.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <nlohmann/json.hpp>

namespace execbox::cli {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using local = asio::local::stream_protocol;
using boost::system::error_code;

std::string DirectoryOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Splits `pending` into whole SSE events ("event: x\ndata: y\n\n") and hands each over.
void TakeEvents(std::string& pending, const LocalClient::EventHandler& on_event) {
  for (size_t end; (end = pending.find("\n\n")) != std::string::npos;) {
    std::string_view block(pending.data(), end);
    std::string_view name, data;
    std::string joined;
    while (!block.empty()) {
      size_t nl = block.find('\n');
      std::string_view line = block.substr(0, nl);
      block = nl == std::string_view::npos ? std::string_view{} : block.substr(nl + 1);
      if (line.starts_with("event: ")) name = line.substr(7);
      if (line.starts_with("data: ")) {
        if (!joined.empty()) joined += '\n';
        joined.append(line.substr(6));
      }
    }
    data = joined;
    // A block without data (": keep-alive") is a comment, not an event.
    if (!data.empty() || !name.empty()) on_event(name, data);
    pending.erase(0, end + 2);
  }
}

}  // namespace

struct LocalClient::Impl {
  asio::io_context io;
  local::socket socket{io};
  beast::flat_buffer buffer;
};

LocalClient::LocalClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LocalClient::~LocalClient() = default;

Expected<std::unique_ptr<LocalClient>> LocalClient::Connect(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  error_code ec;
  impl->socket.connect(local::endpoint(path), ec);
  if (ec) return Fail("no server on " + path + ": " + ec.message());
  struct ucred cred {};
  socklen_t len = sizeof cred;
  if (getsockopt(impl->socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
    return Fail("cannot tell who serves " + path);
  struct stat dir {};
  const bool owner_of_dir = stat(DirectoryOf(path).c_str(), &dir) == 0 && dir.st_uid == cred.uid;
  if (cred.uid != 0 && cred.uid != geteuid() && !owner_of_dir) {
    return Fail("not using " + path + ": it is served by uid " + std::to_string(cred.uid) +
                ", neither root, this user, nor the owner of its directory");
  }
  return std::unique_ptr<LocalClient>(new LocalClient(std::move(impl)));
}

std::string LocalClient::ProblemDetail(std::string_view body) {
  auto problem = nlohmann::json::parse(body, nullptr, false);
  if (problem.is_object() && problem.contains("detail") && problem["detail"].is_string())
    return problem["detail"].get<std::string>();
  return "an answer that is not a problem document";
}

Expected<LocalClient::Reply> LocalClient::Post(const std::string& target, const std::string& json_body,
                                               const EventHandler& on_event) {
  Request request{.target = target, .json_body = json_body, .headers = {}};
  if (on_event) request.headers.emplace_back("Accept", "text/event-stream");
  return Send(request, on_event);
}

Expected<LocalClient::Reply> LocalClient::Send(const Request& request, const EventHandler& on_event) {
  http::request<http::string_body> out{http::string_to_verb(request.method), request.target, 11};
  out.set(http::field::host, "localhost");
  for (const auto& [name, value] : request.headers) out.set(name, value);
  if (!request.json_body.empty()) {
    out.set(http::field::content_type, "application/json");
    out.body() = request.json_body;
  }
  out.prepare_payload();
  error_code ec;
  http::write(impl_->socket, out, ec);
  if (ec) return Fail("the local server: cannot send the request: " + ec.message());

  http::response_parser<http::buffer_body> parser;
  // The server caps what it sends (files travel base64). Not boost::none: Boost 1.74 compares a
  // Content-Length with an empty limit as "over it".
  parser.body_limit(std::uint64_t{1} << 34);
  http::read_header(impl_->socket, impl_->buffer, parser, ec);
  if (ec) return Fail("the local server closed the connection: " + ec.message());
  Reply reply{.status = static_cast<int>(parser.get().result_int()),
              .content_type = std::string(parser.get()[http::field::content_type]),
              .headers = {},
              .body = {}};
  for (const auto& field : parser.get()) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    reply.headers[name] = std::string(field.value());
  }
  const bool stream = on_event && reply.content_type.starts_with("text/event-stream");
  std::string pending;
  char chunk[1 << 16];
  while (!parser.is_done()) {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof chunk;
    // read_some: an event is handed over when it arrives, not when the buffer is full.
    http::read_some(impl_->socket, impl_->buffer, parser, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) return Fail("the local server's answer broke off: " + ec.message());
    const size_t got = sizeof chunk - parser.get().body().size;
    if (stream) {
      pending.append(chunk, got);
      TakeEvents(pending, on_event);
    } else {
      reply.body.append(chunk, got);
    }
  }
  return reply;
}

}  // namespace execbox::cli
