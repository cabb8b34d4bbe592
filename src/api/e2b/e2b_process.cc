// envd's process.Process (Connect-RPC, JSON codec) over the session's own processes
// (engine/session_processes.h), each call through the gate as the sandbox's key: a process
// belongs to the session, not to the request that started it, so a client that stops reading
// (`background: true`, a disconnect, its timeout) leaves it running, and Connect follows it
// again from the output still held. Start and Connect stream ProcessEvents (start with the
// sandbox's pid, data, end); List, SendInput, SendSignal, CloseStdin and Update are unary;
// StreamInput (a client stream) is read whole, as HTTP/1.1 delivers it. Which process a call
// may reach and how many may run are the gate's and the table's rules, not this file's.
#include <charconv>
#include <limits>

#include "api/common/json_text.h"
#include "api/e2b/e2b_api.h"
#include "api/e2b/e2b_sandbox.h"
#include "api/e2b/e2b_wire.h"
#include "api/http/auth.h"
#include "api/http/response_stream.h"
#include "base/base64.h"

namespace execbox::api::e2b {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr size_t kReadBytes = 64 << 10;                 // one read of a followed process's output
constexpr std::chrono::seconds kFollowWait{1};          // a quiet follower looks again this often
constexpr size_t kRemembered = 256;                     // start configs kept per sandbox, for List
constexpr std::string_view kBashCommand = "/bin/bash";  // the SDKs' commands.run: bash -l -c CMD

const json& Field(const json& object, const char* name) {
  static const json null;
  if (!object.is_object()) return null;
  auto it = object.find(name);
  return it == object.end() ? null : *it;
}

// A protobuf integer in its JSON mapping: a number, or a decimal string.
std::optional<uint64_t> Unsigned(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  if (!v.is_string()) return std::nullopt;
  const auto& s = v.get_ref<const std::string&>();
  uint64_t n = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), n);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return n;
}

// Protobuf bytes in their JSON mapping: base64, standard or URL-safe, padded or not.
std::optional<std::string> Bytes(const json& v) {
  if (!v.is_string()) return std::nullopt;
  std::string text = v.get<std::string>();
  for (char& c : text) {
    if (c == '-') c = '+';
    if (c == '_') c = '/';
  }
  while (text.size() % 4 != 0) text += '=';
  return Base64Decode(text);
}

RpcError Invalid(std::string message) { return RpcError{"invalid_argument", std::move(message)}; }

// A process call's refusal as envd answers it: a process that has ended is one envd no longer
// knows (it forgets a process at its end; the SDKs' kill() reads not_found as "already gone"),
// a full table is resource_exhausted, a start the sandbox could not make is the request's fault.
RpcError ProcessRpcError(const engine::Refusal& refusal) {
  switch (refusal.reason) {
    case engine::RefusalReason::kProcessNotRunning:
      return {"not_found", refusal.detail};
    case engine::RefusalReason::kProcessesFull:
      return {"resource_exhausted", refusal.detail};
    case engine::RefusalReason::kStartFailed:
      return {"invalid_argument", refusal.detail};
    default:
      return {RpcCodeOf(refusal), refusal.detail};
  }
}

// process.ProcessSelector: {pid} or {tag}.
struct Selector {
  int32_t pid = 0;  // 0: by tag
  std::string tag;
};

std::expected<Selector, RpcError> SelectorOf(const json& request) {
  const json& process = Field(request, "process");
  const json& pid = Field(process, "pid");
  const json& tag = Field(process, "tag");
  if (!pid.is_null()) {
    auto n = Unsigned(pid);
    if (!n || *n == 0 || *n > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
      return std::unexpected(Invalid("process.pid must be a process id"));
    return Selector{.pid = static_cast<int32_t>(*n), .tag = {}};
  }
  if (tag.is_string() && !tag.get_ref<const std::string&>().empty())
    return Selector{.pid = 0, .tag = tag.get<std::string>()};
  return std::unexpected(Invalid("process must select a process: {\"pid\": N} or {\"tag\": \"...\"}"));
}

// The pid a selector names: a tag names the running process with it, else the latest that had it.
std::expected<int32_t, RpcError> Resolve(engine::Gate& gate, const engine::Caller& caller,
                                         const std::string& id, const Selector& selector) {
  if (selector.pid != 0) return selector.pid;
  auto list = gate.ListProcesses(caller, id);
  if (!list) return std::unexpected(ProcessRpcError(list.error()));
  const engine::ProcessInfo* found = nullptr;
  for (const auto& p : *list) {  // oldest first
    if (p.tag == selector.tag && (found == nullptr || p.running || !found->running)) found = &p;
  }
  if (found == nullptr) return std::unexpected(RpcError{"not_found", "no process tagged " + selector.tag});
  return found->pid;
}

// A StartRequest as the session's table takes it, and its process.ProcessConfig as List gives
// it back.
struct StartSpec {
  engine::ProcessSpec spec;
  json config;
};

std::expected<StartSpec, RpcError> StartSpecOf(const json& start,
                                               const std::map<std::string, std::string>& env) {
  const json& process = Field(start, "process");
  if (!process.is_object())
    return std::unexpected(Invalid("the request must be a StartRequest with its process"));
  const json& cmd = Field(process, "cmd");
  if (!cmd.is_string() || cmd.get_ref<const std::string&>().empty())
    return std::unexpected(Invalid("process.cmd must be a program's name"));
  StartSpec out;
  std::vector<std::string> args;
  const json& sent_args = Field(process, "args");
  if (!sent_args.is_null() && !sent_args.is_array())
    return std::unexpected(Invalid("process.args must be strings"));
  for (const auto& a : sent_args.is_array() ? sent_args : json::array()) {
    if (!a.is_string()) return std::unexpected(Invalid("process.args must be strings"));
    args.push_back(a.get<std::string>());
  }
  out.spec.env = env;  // the sandbox's envVars, under the process's own
  json envs = json::object();
  const json& sent_envs = Field(process, "envs");
  if (!sent_envs.is_null() && !sent_envs.is_object())
    return std::unexpected(Invalid("process.envs must map names to strings"));
  if (sent_envs.is_object()) {
    for (const auto& [k, v] : sent_envs.items()) {
      if (!v.is_string()) return std::unexpected(Invalid("process.envs must map names to strings"));
      out.spec.env[k] = v.get<std::string>();
    }
    envs = sent_envs;
  }
  out.config = {{"cmd", cmd}, {"args", args}, {"envs", envs}};
  const json& cwd = Field(process, "cwd");
  if (cwd.is_string() && !cwd.get_ref<const std::string&>().empty()) {
    out.spec.cwd = AbsoluteInSandbox(cwd.get<std::string>());
    out.config["cwd"] = cwd;
  }
  // The SDKs' commands.run(cmd) is `/bin/bash -l -c cmd`: the table's shell command, which the
  // audit then shows as the command itself.
  if (cmd == kBashCommand && args.size() == 3 && args[0] == "-l" && args[1] == "-c") {
    out.spec.command = args[2];
  } else {
    out.spec.argv = {cmd.get<std::string>()};
    out.spec.argv.insert(out.spec.argv.end(), args.begin(), args.end());
  }
  const json& pty = Field(start, "pty");
  if (pty.is_object()) {
    const json& size = Field(pty, "size");
    // Out of the table's range (1 to 1000) is its refusal to say; 0 is as far out as any.
    auto dimension = [&](const char* name, uint16_t otherwise) -> uint16_t {
      const json& v = Field(size, name);
      if (v.is_null()) return otherwise;
      auto n = Unsigned(v);
      return n && *n <= std::numeric_limits<uint16_t>::max() ? static_cast<uint16_t>(*n) : 0;
    };
    out.spec.pty = true;
    out.spec.rows = dimension("rows", 24);
    out.spec.cols = dimension("cols", 80);
  }
  const json& tag = Field(start, "tag");
  if (tag.is_string()) out.spec.tag = tag.get<std::string>();
  // Unset, stdin is open: envd's own default (before 0.3.0 it was always open).
  const json& stdin = Field(start, "stdin");
  out.spec.stdin = stdin.is_boolean() ? stdin.get<bool>() : true;
  return out;
}

// A server stream of ProcessEvents (Start, Connect): Connect envelopes, a keep-alive while the
// process is quiet, and at the end the end-stream envelope with the error that ended it, if any.
// Its client gone cancels the following, never the process.
class ProcessEvents final : public Call {
 public:
  explicit ProcessEvents(std::shared_ptr<Exchange> exchange)
      : stream_(std::move(exchange), "application/connect+json",
                {.bytes = Envelope(0, R"({"event":{"keepalive":{}}})"), .silence = kKeepAliveSilence}) {}

  bool Tick(Clock::time_point now) override {
    if (stream_.client_gone()) return false;
    stream_.Tick(now);
    return true;
  }
  void Send(json event) { stream_.Send(Envelope(0, Serialize({{"event", std::move(event)}}))); }
  void Fail(RpcError error) { error_ = std::move(error); }
  // After the last tick (Calls::Spawn's answer), once.
  void End() {
    stream_.Send(Envelope(kEndStream, error_ ? Serialize({{"error", RpcErrorJson(*error_)}}) : "{}"));
    stream_.End();
  }

 private:
  ResponseStream stream_;
  std::optional<RpcError> error_;
};

// The process's output from the first byte still held, then its end. Returns early when the
// client has gone (the process runs on) or the server is shutting down.
void Follow(engine::Gate& gate, ProcessEvents& call, engine::SessionProcesses& table, int32_t pid) {
  uint64_t from = 0;
  for (;;) {
    auto got = table.Read(pid, from, kReadBytes, Clock::now() + kFollowWait, &call.cancel_flag());
    if (!got) return call.Fail(ProcessRpcError(gate.FromProcess(got.error())));
    // Bytes dropped before they were read (the table keeps a bounded tail) are skipped: envd's
    // events carry no offsets to say so.
    for (const auto& c : got->read.chunks)
      call.Send({{"data", {{engine::OutputStreamName(c.stream), Base64Encode(c.data)}}}});
    from = got->read.next_offset;
    if (!got->info.running && from >= got->info.output_bytes)
      return call.Send({{"end", ProcessEndEvent(got->info.exit_code, got->info.signal)}});
    if (call.cancelled()) return;
    if (gate.closed()) return call.Fail({"unavailable", "the server is shutting down"});
  }
}

json ConfigOf(E2bApi::Sandbox& sandbox, const engine::ProcessInfo& p) {
  {
    std::lock_guard lock(sandbox.mu);
    auto it = sandbox.processes.find(p.pid);
    if (it != sandbox.processes.end() && it->second.at == p.started) return it->second.config;
  }
  // Started otherwise (through /v1): what the table knows of it.
  if (!p.command.empty())
    return {{"cmd", kBashCommand}, {"args", {"-l", "-c", p.command}}, {"envs", json::object()}};
  std::vector<std::string> args(p.argv.empty() ? p.argv.begin() : p.argv.begin() + 1, p.argv.end());
  return {{"cmd", p.argv.empty() ? "" : p.argv[0]}, {"args", args}, {"envs", json::object()}};
}

void Remember(E2bApi::Sandbox& sandbox, const engine::ProcessInfo& p, json config) {
  std::lock_guard lock(sandbox.mu);
  sandbox.processes[p.pid] = {p.started, std::move(config)};
  if (sandbox.processes.size() <= kRemembered) return;
  auto oldest = sandbox.processes.begin();
  for (auto it = oldest; it != sandbox.processes.end(); ++it) {
    if (it->second.at < oldest->second.at) oldest = it;
  }
  sandbox.processes.erase(oldest);
}

// SIGNAL_SIGKILL, SIGNAL_SIGTERM (by name or by number): the two envd's Signal has.
std::optional<int> SignalOf(const json& v) {
  if (v == "SIGNAL_SIGKILL" || v == 9) return 9;
  if (v == "SIGNAL_SIGTERM" || v == 15) return 15;
  return std::nullopt;
}

}  // namespace

void E2bApi::ProcessRpc(const std::string& method, HttpRequest& request, std::shared_ptr<Exchange>& exchange,
                        std::shared_ptr<Sandbox> sandbox, const ApiKey& key) {
  if (method == "Start") return StartProcess(request, exchange, std::move(sandbox), key);
  if (method == "Connect") return ConnectProcess(request, exchange, std::move(sandbox), key);
  if (method == "StreamInput") return StreamInput(request, exchange, std::move(sandbox), key);
  const bool unary = method == "List" || method == "SendInput" || method == "SendSignal" ||
                     method == "CloseStdin" || method == "Update";
  if (!unary) {
    return SendRpcError(
        *exchange, {"unimplemented", "process.Process/" + method.substr(0, 40) + " is not an RPC of envd's"});
  }
  const json body = json::parse(request.body.empty() ? "{}" : request.body, nullptr, false);
  if (!body.is_object()) return SendRpcError(*exchange, Invalid("the request must be a JSON object"));
  Selector selector;
  if (method != "List") {
    auto selected = SelectorOf(body);
    if (!selected) return SendRpcError(*exchange, selected.error());
    selector = *selected;
  }
  // What each call carries, checked before any thread is spent on it.
  std::string input;
  int signal = 0;
  std::optional<std::pair<uint16_t, uint16_t>> size;  // rows, cols
  if (method == "SendInput") {
    const json& in = Field(body, "input");
    const json& data = Field(in, "stdin").is_null() ? Field(in, "pty") : Field(in, "stdin");
    auto bytes = Bytes(data);
    if (!bytes) return SendRpcError(*exchange, Invalid("input must carry stdin or pty bytes (base64)"));
    input = std::move(*bytes);
  }
  if (method == "SendSignal") {
    auto s = SignalOf(Field(body, "signal"));
    if (!s) return SendRpcError(*exchange, Invalid("signal must be SIGNAL_SIGKILL or SIGNAL_SIGTERM"));
    signal = *s;
  }
  if (method == "Update" && Field(body, "pty").is_object()) {
    const json& sent = Field(Field(body, "pty"), "size");
    auto rows = Unsigned(Field(sent, "rows")), cols = Unsigned(Field(sent, "cols"));
    if (!rows || !cols || *rows > 1000 || *cols > 1000)
      return SendRpcError(*exchange, Invalid("pty.size must have rows and cols, 1 to 1000"));
    size = {static_cast<uint16_t>(*rows), static_cast<uint16_t>(*cols)};
  }
  const engine::Caller caller = CallerOf(key);
  const engine::Origin origin{.transport = engine::Transport::kE2b, .peer = request.peer};
  calls_.Spawn(
      [this, exchange, sandbox, caller, origin, method, selector, input = std::move(input), signal, size] {
        const std::string& id = sandbox->id;
        if (method == "List") {
          auto list = gate_.ListProcesses(caller, id);
          if (!list) return SendRpcError(*exchange, ProcessRpcError(list.error()));
          json processes = json::array();
          for (const auto& p : *list) {
            if (!p.running) continue;  // envd lists what runs
            json info = {{"config", ConfigOf(*sandbox, p)}, {"pid", p.pid}};
            if (!p.tag.empty()) info["tag"] = p.tag;
            processes.push_back(std::move(info));
          }
          return SendJson(*exchange, 200, {{"processes", processes}});
        }
        auto pid = Resolve(gate_, caller, id, selector);
        if (!pid) return SendRpcError(*exchange, pid.error());
        engine::Refused<void> done;
        if (method == "SendInput") done = gate_.WriteProcessInput(caller, id, *pid, input);
        if (method == "SendSignal") done = gate_.SignalProcess(caller, id, *pid, signal, origin);
        if (method == "CloseStdin") done = gate_.CloseProcessInput(caller, id, *pid);
        if (method == "Update") {
          // Without a pty size there is nothing to update, but the process must still exist.
          if (size) {
            done = gate_.ResizeProcess(caller, id, *pid, size->first, size->second);
          } else if (auto info = gate_.GetProcess(caller, id, *pid); !info) {
            done = std::unexpected(std::move(info.error()));
          }
        }
        if (!done) return SendRpcError(*exchange, ProcessRpcError(done.error()));
        SendJson(*exchange, 200, json::object());
      });
}

void E2bApi::StartProcess(HttpRequest& request, std::shared_ptr<Exchange>& exchange,
                          std::shared_ptr<Sandbox> sandbox, const ApiKey& key) {
  auto call = std::make_shared<ProcessEvents>(exchange);
  auto message = FirstEnvelope(request.body);
  const json start = message ? json::parse(*message, nullptr, false) : json();
  if (!message || !start.is_object()) {
    call->Fail(Invalid(message ? "the request must be a StartRequest" : message.error()));
    return call->End();
  }
  auto spec = StartSpecOf(start, sandbox->env);
  if (!spec) {
    call->Fail(spec.error());
    return call->End();
  }
  const engine::Caller caller = CallerOf(key);
  const engine::Origin origin{.transport = engine::Transport::kE2b, .peer = request.peer};
  calls_.Spawn(
      call,
      [this, call, sandbox, caller, origin, spec = std::move(*spec)] {
        auto started = gate_.StartProcess(caller, sandbox->id, spec.spec, origin);
        if (!started) return call->Fail(ProcessRpcError(started.error()));
        Remember(*sandbox, *started, spec.config);
        call->Send({{"start", {{"pid", started->pid}}}});
        auto table = gate_.ProcessesOf(caller, sandbox->id);
        if (!table) return call->Fail(ProcessRpcError(table.error()));
        Follow(gate_, *call, **table, started->pid);
      },
      [call] { call->End(); });
}

void E2bApi::ConnectProcess(HttpRequest& request, std::shared_ptr<Exchange>& exchange,
                            std::shared_ptr<Sandbox> sandbox, const ApiKey& key) {
  auto call = std::make_shared<ProcessEvents>(exchange);
  auto message = FirstEnvelope(request.body);
  auto selector = SelectorOf(message ? json::parse(*message, nullptr, false) : json());
  if (!message || !selector) {
    call->Fail(message ? selector.error() : Invalid(message.error()));
    return call->End();
  }
  const engine::Caller caller = CallerOf(key);
  calls_.Spawn(
      call,
      [this, call, sandbox, caller, selector = *selector] {
        auto pid = Resolve(gate_, caller, sandbox->id, selector);
        if (!pid) return call->Fail(pid.error());
        // The table itself, held: the stream goes on to the process's end even when the session
        // closes meanwhile (its processes then end with it).
        auto table = gate_.ProcessesOf(caller, sandbox->id);
        if (!table) return call->Fail(ProcessRpcError(table.error()));
        if (auto info = (*table)->Get(*pid); !info)
          return call->Fail(ProcessRpcError(gate_.FromProcess(info.error())));
        call->Send({{"start", {{"pid", *pid}}}});
        Follow(gate_, *call, **table, *pid);
      },
      [call] { call->End(); });
}

void E2bApi::StreamInput(HttpRequest& request, std::shared_ptr<Exchange>& exchange,
                         std::shared_ptr<Sandbox> sandbox, const ApiKey& key) {
  // A client stream's answer: one (empty) StreamInputResponse and the end, or the end alone
  // with the error.
  auto answer = [exchange](const std::optional<RpcError>& error) {
    std::string body = error ? Envelope(kEndStream, Serialize({{"error", RpcErrorJson(*error)}}))
                             : Envelope(0, "{}") + Envelope(kEndStream, "{}");
    exchange->Respond(
        HttpResponse{.status = 200, .content_type = "application/connect+json", .body = std::move(body)});
  };
  auto messages = Envelopes(request.body);
  if (!messages) return answer(Invalid(messages.error()));
  std::vector<json> events;
  for (const auto& m : *messages) events.push_back(json::parse(m, nullptr, false));
  if (events.empty() || !Field(events[0], "start").is_object())
    return answer(Invalid("a StreamInput begins with its start event, naming the process"));
  auto selector = SelectorOf(Field(events[0], "start"));
  if (!selector) return answer(selector.error());
  std::vector<std::string> inputs;
  for (size_t i = 1; i < events.size(); ++i) {
    if (!Field(events[i], "keepalive").is_null()) continue;
    const json& in = Field(Field(events[i], "data"), "input");
    auto bytes = Bytes(Field(in, "stdin").is_null() ? Field(in, "pty") : Field(in, "stdin"));
    if (!bytes) return answer(Invalid("each data event's input must carry stdin or pty bytes (base64)"));
    inputs.push_back(std::move(*bytes));
  }
  const engine::Caller caller = CallerOf(key);
  calls_.Spawn([this, answer, sandbox, caller, selector = *selector, inputs = std::move(inputs)] {
    auto pid = Resolve(gate_, caller, sandbox->id, selector);
    if (!pid) return answer(pid.error());
    for (const auto& data : inputs) {
      if (auto written = gate_.WriteProcessInput(caller, sandbox->id, *pid, data); !written)
        return answer(ProcessRpcError(written.error()));
    }
    answer(std::nullopt);
  });
}

}  // namespace execbox::api::e2b
