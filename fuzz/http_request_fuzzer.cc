// The bytes of one client connection, read as execbox serve reads them: Boost.Beast's
// request_parser<string_body> with the server's header and body limits (HttpServerOptions's
// defaults), read_header then read over a flat_buffer, one fresh parser per request while the
// connection stays keep-alive; then what Connection does with each parsed request: the target
// split into path and query, and the path percent-decoded.
//
// The input is read twice, once offered whole and once trickled in small
// segments (the size comes from the input): TCP may cut it anywhere, and the requests parsed
// must not depend on where. Except at the header limit: Beast counts it from the first byte it
// has not consumed yet, and the fields it parsed in one read are consumed, so where the reads
// fall moves the limit by up to one read's worth; a reading that ends there is compared only
// up to that request.
#include <algorithm>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "api/http/http_server.h"
#include "api/http/http_target.h"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;

// Connection::ReadHeader's limits, from the server's defaults.
const execbox::api::HttpServerOptions& Config() {
  static const execbox::api::HttpServerOptions options;
  return options;
}

// A SyncReadStream that hands out the input `segment` bytes at a time, then end of stream.
class Trickle {
 public:
  using executor_type = asio::any_io_executor;

  Trickle(std::string_view data, size_t segment) : data_(data), segment_(segment) {}

  template <class MutableBufferSequence>
  size_t read_some(const MutableBufferSequence& buffers, error_code& ec) {
    if (data_.empty()) {
      ec = asio::error::eof;
      return 0;
    }
    ec = {};
    size_t n = asio::buffer_copy(buffers, asio::buffer(data_.data(), std::min(segment_, data_.size())));
    data_.remove_prefix(n);
    return n;
  }
  template <class MutableBufferSequence>
  size_t read_some(const MutableBufferSequence& buffers) {
    error_code ec;
    size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

 private:
  std::string_view data_;
  size_t segment_;
};

// What one request leaves behind, to compare the two readings.
struct Parsed {
  std::string method, target, path, query, body;
  bool bad_path = false, keep_alive = false;
  std::vector<std::pair<std::string, std::string>> fields;
  bool operator==(const Parsed&) const = default;
};

// Mirrors Connection::OnBody on a parsed message; checks what the split must guarantee.
Parsed Take(http::request<http::string_body>&& message, bool keep_alive) {
  Parsed p;
  p.method = std::string(message.method_string());
  p.target = std::string(message.target());
  execbox::api::RequestTarget target = execbox::api::SplitTarget(p.target);
  std::string rejoined = std::string(target.path);
  if (p.target.find('?') != std::string::npos) rejoined += "?" + std::string(target.query);
  if (rejoined != p.target || target.path.find('?') != std::string_view::npos) __builtin_trap();
  auto path = execbox::api::PercentDecode(target.path);
  p.bad_path = !path;
  if (path) {
    if (path->size() > target.path.size()) __builtin_trap();
    if (target.path.find('%') == std::string_view::npos && *path != target.path) __builtin_trap();
    p.path = std::move(*path);
  }
  p.query = std::string(target.query);
  for (const auto& field : message) p.fields.emplace_back(field.name_string(), field.value());
  p.body = std::move(message.body());
  p.keep_alive = keep_alive;
  return p;
}

struct Reading {
  std::vector<Parsed> requests;
  bool header_limit = false;  // it ended at the header limit (431)
};

// Every request of one connection, read as Connection reads them, until an error or close.
Reading ReadConnection(std::string_view data, size_t segment) {
  const auto& config = Config();
  Trickle stream(data, segment);
  beast::flat_buffer buffer;
  Reading connection;
  for (size_t n = 0; n < config.max_requests_per_connection; ++n) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(config.max_header_bytes));
    parser.body_limit(config.max_body_bytes);
    error_code ec;
    http::read_header(stream, buffer, parser, ec);
    if (ec) {  // Failed(): closed, or refused with 400, 413 or 431
      connection.header_limit = ec == http::error::header_limit;
      break;
    }
    if (auto length = parser.content_length(); length && *length > config.max_body_bytes) break;  // 413
    (void)beast::iequals(parser.get()[http::field::expect], "100-continue");
    http::read(stream, buffer, parser, ec);
    if (ec) break;
    bool keep_alive = parser.keep_alive();
    connection.requests.push_back(Take(parser.release(), keep_alive));
    if (!keep_alive) break;
  }
  return connection;
}

void CheckSame(const Reading& a, const Reading& b) {
  if (!a.header_limit && !b.header_limit) {
    if (a.requests != b.requests) __builtin_trap();
    return;
  }
  size_t common = std::min(a.requests.size(), b.requests.size());
  for (size_t i = 0; i < common; ++i) {
    if (a.requests[i] != b.requests[i]) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t segment = size == 0 ? 1 : 1 + data[size / 2] % 64;
  CheckSame(ReadConnection(input, input.size() + 1), ReadConnection(input, segment));
  return 0;
}
