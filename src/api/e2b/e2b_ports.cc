// A sandbox's own servers through this one (E2B's getHost(port)): with [e2b] domain set, a
// request whose Host is "<port>-<sandbox id>.<domain>" is the sandbox's. Ports 49983 and 49999
// are envd and the code interpreter, as E2b-Sandbox-Port names them (an SDK without
// E2B_SANDBOX_URL reaches them so); any other port is relayed to whatever listens on it inside
// the sandbox. The call carries the sandbox's access token (the SDK's trafficAccessToken, in
// E2B-Traffic-Access-Token, or X-Access-Token), as every sandbox call does: nothing inside a
// sandbox is public.
//
// The relay is a short process of the sandbox's own (its interpreter, as its user, through the
// gate like any command; tagged kPortTag and left out of E2B's process list): it connects to
// 127.0.0.1:port in the sandbox's network namespace, writes the request (HTTP/1.0, so that the
// answer ends with the connection) and copies the answer out. One process per request: no
// WebSocket or other upgrade, and an answer of at most kMaxAnswerBytes.
#include <csignal>

#include "api/e2b/e2b_api.h"
#include "api/e2b/e2b_sandbox.h"
#include "api/http/auth.h"

namespace execbox::api::e2b {
namespace {

constexpr size_t kMaxAnswerBytes = 32u << 20;
constexpr std::chrono::seconds kRelayTimeout{60};
constexpr size_t kReadBytes = 1u << 20;

// argv[1] the port. Exit 3: nothing listens there.
constexpr const char* kRelayScript = R"py(
import socket, sys
try:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=55)
except OSError as e:
    sys.stderr.write("%s\n" % e.strerror)
    sys.exit(3)
s.sendall(sys.stdin.buffer.read())
out = sys.stdout.buffer
while True:
    b = s.recv(65536)
    if not b:
        break
    out.write(b)
out.flush()
)py";

// Headers that belong to one hop (RFC 9110 7.6.1), and the sandbox's token, which stays here.
bool HopHeader(std::string_view name) {
  for (std::string_view h : {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te",
                             "trailer", "upgrade", "proxy-authorization", "content-length", "x-access-token",
                             "e2b-traffic-access-token", "e2b-sandbox-id", "e2b-sandbox-port"}) {
    if (name == h) return true;
  }
  return false;
}

std::string RequestBytes(const HttpRequest& request) {
  std::string out = request.method + " " + request.target + " HTTP/1.0\r\n";
  for (const auto& [name, value] : request.headers) {
    if (!HopHeader(name)) out += name + ": " + value + "\r\n";
  }
  if (!request.body.empty() || request.method == "POST" || request.method == "PUT" ||
      request.method == "PATCH")
    out += "content-length: " + std::to_string(request.body.size()) + "\r\n";
  out += "connection: close\r\n\r\n";
  return out + request.body;
}

// The server's answer as this server sends it on, or nullopt when it is not HTTP.
std::optional<HttpResponse> ParseAnswer(const std::string& raw) {
  const size_t end = raw.find("\r\n\r\n");
  if (end == std::string::npos || !raw.starts_with("HTTP/1.")) return std::nullopt;
  const size_t line_end = raw.find("\r\n");
  const size_t space = raw.find(' ');
  if (space == std::string::npos || space > line_end) return std::nullopt;
  int status = 0;
  try {
    status = std::stoi(raw.substr(space + 1, 3));
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (status < 100 || status > 599) return std::nullopt;
  HttpResponse response{.status = status, .content_type = ""};
  bool chunked = false;
  for (size_t at = line_end + 2; at < end;) {
    const size_t next = raw.find("\r\n", at);
    std::string line = raw.substr(at, next - at);
    at = next + 2;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    if (name == "content-type") {
      response.content_type = value;
    } else if (name == "transfer-encoding") {
      chunked = value.find("chunked") != std::string::npos;
    } else if (!HopHeader(name) && name != "date" && name != "server") {
      response.headers.emplace_back(name, value);
    }
  }
  response.body = raw.substr(end + 4);
  if (chunked) {  // an HTTP/1.1 server's answer to our 1.0 request, undone
    std::string body;
    size_t at = 0;
    const std::string& in = response.body;
    for (;;) {
      const size_t eol = in.find("\r\n", at);
      if (eol == std::string::npos) return std::nullopt;
      size_t size = 0;
      try {
        size = std::stoul(in.substr(at, eol - at), nullptr, 16);
      } catch (const std::exception&) {
        return std::nullopt;
      }
      if (size == 0) break;
      if (eol + 2 + size > in.size()) return std::nullopt;
      body.append(in, eol + 2, size);
      at = eol + 2 + size + 2;
    }
    response.body = std::move(body);
  }
  return response;
}

}  // namespace

std::optional<E2bApi::HostTarget> E2bApi::HostTargetOf(const HttpRequest& request) const {
  if (options_.domain.empty()) return std::nullopt;
  std::string_view host = request.Header("host");
  if (const size_t colon = host.rfind(':'); colon != std::string_view::npos) host = host.substr(0, colon);
  const std::string suffix = "." + options_.domain;
  if (host.size() <= suffix.size() || !host.ends_with(suffix)) return std::nullopt;
  host.remove_suffix(suffix.size());
  const size_t dash = host.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash > 5) return std::nullopt;
  int port = 0;
  for (char c : host.substr(0, dash)) {
    if (c < '0' || c > '9') return std::nullopt;
    port = port * 10 + (c - '0');
  }
  if (port < 1 || port > 65535 || host.size() == dash + 1) return std::nullopt;
  return HostTarget{.port = port, .id = std::string(host.substr(dash + 1))};
}

void E2bApi::RelayToPort(HttpRequest& request, std::shared_ptr<Exchange>& exchange,
                         std::shared_ptr<Sandbox> sandbox, const ApiKey& key, int port) {
  const engine::Caller caller = CallerOf(key);
  const engine::Origin origin{.transport = engine::Transport::kE2b, .peer = request.peer};
  calls_.Spawn([this, exchange, sandbox, caller, origin, port, bytes = RequestBytes(request)] {
    engine::ProcessSpec spec;
    spec.argv = {"python3", "-I", "-S", "-c", kRelayScript, std::to_string(port)};
    spec.tag = kPortTag;
    spec.stdin = true;
    std::unique_ptr<engine::SessionProcesses::Follower> follower;
    auto started = gate_.StartProcess(caller, sandbox->id, spec, origin, &follower);
    if (!started) return SendRefusal(*exchange, started.error());
    auto table = gate_.ProcessesOf(caller, sandbox->id);
    if (!table) return SendRefusal(*exchange, table.error());
    const int32_t pid = started->pid;
    auto kill = [&] { (void)gate_.SignalProcess(caller, sandbox->id, pid, SIGKILL, origin); };
    if (!(*table)->Write(pid, bytes) || !(*table)->CloseStdin(pid)) {
      kill();
      return SendError(*exchange, 502, "the request could not be passed to port " + std::to_string(port));
    }
    std::string answer, errors;
    uint64_t from = 0;
    const auto until = std::chrono::steady_clock::now() + kRelayTimeout;
    for (;;) {
      auto got = (*table)->Read(pid, from, kReadBytes, until, nullptr, follower.get());
      if (!got) return SendRefusal(*exchange, gate_.FromProcess(got.error()));
      for (const auto& c : got->read.chunks)
        (c.stream == engine::OutputStream::kStdout ? answer : errors) += c.data;
      from = got->read.next_offset;
      if (answer.size() > kMaxAnswerBytes) {
        kill();
        return SendError(*exchange, 502,
                         "the answer from port " + std::to_string(port) + " is over " +
                             std::to_string(kMaxAnswerBytes >> 20) + " MiB, the most relayed");
      }
      if (!got->info.running && from >= got->info.output_bytes) {
        if (got->info.exit_code == 3) {
          return SendError(*exchange, 502,
                           "nothing listens on port " + std::to_string(port) + " in sandbox " + sandbox->id);
        }
        break;
      }
      if (std::chrono::steady_clock::now() >= until || gate_.closed()) {
        kill();
        return SendError(*exchange, 504, "port " + std::to_string(port) + " did not answer in time");
      }
    }
    auto response = ParseAnswer(answer);
    if (!response) {
      return SendError(*exchange, 502, "port " + std::to_string(port) + " did not answer with HTTP");
    }
    exchange->Respond(std::move(*response));
  });
}

}  // namespace execbox::api::e2b
