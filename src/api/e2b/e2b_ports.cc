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

std::string RequestBytes(const HttpRequest& request) {
  std::string out = request.method + " " + request.target + " HTTP/1.0\r\n";
  for (const auto& [name, value] : request.headers) {
    if (!IsHopHeader(name)) out += name + ": " + value + "\r\n";
  }
  if (!request.body.empty() || request.method == "POST" || request.method == "PUT" ||
      request.method == "PATCH")
    out += "content-length: " + std::to_string(request.body.size()) + "\r\n";
  out += "connection: close\r\n\r\n";
  return out + request.body;
}

}  // namespace

std::optional<HostTarget> E2bApi::SandboxHostOf(const HttpRequest& request) const {
  if (options_.domain.empty()) return std::nullopt;
  return HostTargetOf(request.Header("host"), options_.domain);
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
    auto response = ParseRelayedAnswer(answer);
    if (!response) {
      return SendError(*exchange, 502, "port " + std::to_string(port) + " did not answer with HTTP");
    }
    exchange->Respond(std::move(*response));
  });
}

}  // namespace execbox::api::e2b
