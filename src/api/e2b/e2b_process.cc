// envd's process.Process (Connect-RPC, JSON codec) over the session's own processes
// (engine/session_processes.h), each call through the gate as the sandbox's key: a process
// belongs to the session, not to the request that started it, so a client that stops reading
// (`background: true`, a disconnect, its timeout) leaves it running, and Connect follows it
// again from the output still held. Start and Connect stream ProcessEvents (start with the
// sandbox's pid, data, end); List, SendInput, SendSignal, CloseStdin and Update are unary;
// StreamInput (a client stream) is read whole, as HTTP/1.1 delivers it. Which process a call
// may reach and how many may run are the gate's and the table's rules, not this file's.
#include "api/common/json_text.h"
#include "api/e2b/e2b_api.h"
#include "api/e2b/e2b_process_request.h"
#include "api/e2b/e2b_sandbox.h"
#include "api/e2b/e2b_wire.h"
#include "api/http/auth.h"
#include "api/http/response_stream.h"
#include "base/base64.h"

namespace execbox::api::e2b {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr size_t kReadBytes = 256 << 10;        // one read of a followed process's output
constexpr std::chrono::seconds kFollowWait{1};  // a quiet follower looks again this often
constexpr size_t kRemembered = 256;             // start configs kept per sandbox, for List

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

// The pid a selector names: a tag names the running process with it, else the latest that had it.
std::expected<int32_t, RpcError> Resolve(engine::Gate& gate, const engine::Caller& caller,
                                         const std::string& id, const ProcessSelector& selector) {
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
  // Output may be dropped for a client far behind (Exchange::Write); a start or an end never is.
  void Send(json event) {
    const bool output = event.contains("data");
    std::string envelope = Envelope(0, Serialize({{"event", std::move(event)}}));
    output ? stream_.Send(envelope) : stream_.SendWhole(envelope);
  }
  void Fail(RpcError error) { error_ = std::move(error); }
  // After the last tick (Calls::Spawn's answer), once.
  void End() {
    stream_.SendWhole(Envelope(kEndStream, error_ ? Serialize({{"error", RpcErrorJson(*error_)}}) : "{}"));
    stream_.End();
  }

 private:
  ResponseStream stream_;
  std::optional<RpcError> error_;
};

// The process's output from the first byte still held, then its end. Returns early when the
// client has gone (the process runs on) or the server is shutting down.
// `follower` (the process's from its start), or one from what is held now: the process waits
// for this client rather than drop what it has not read.
void Follow(engine::Gate& gate, ProcessEvents& call, engine::SessionProcesses& table, int32_t pid,
            std::unique_ptr<engine::SessionProcesses::Follower> follower = nullptr) {
  if (!follower) {
    auto attached = table.Follow(pid, 0);
    if (!attached) return call.Fail(ProcessRpcError(gate.FromProcess(attached.error())));
    follower = std::move(*attached);
  }
  uint64_t from = 0;
  for (;;) {
    auto got =
        table.Read(pid, from, kReadBytes, Clock::now() + kFollowWait, &call.cancel_flag(), follower.get());
    if (!got) return call.Fail(ProcessRpcError(gate.FromProcess(got.error())));
    // Output is dropped only where the follower came too late for it (a connect after the
    // first 1 MiB of a stream) or the session's 32 MiB were full. envd's events carry no
    // offsets to say so, so it is said where a person reads it.
    if (got->read.dropped > 0) {
      const std::string note = "\nexecbox: " + std::to_string(got->read.dropped) +
                               " bytes of output were dropped here (written faster than they were read)\n";
      call.Send({{"data", {{got->info.pty ? "pty" : "stderr", Base64Encode(note)}}}});
    }
    for (const auto& c : got->read.chunks)
      call.Send({{"data", {{engine::OutputStreamName(c.stream), Base64Encode(c.data)}}}});
    from = got->read.next_offset;
    if (!got->info.running && from >= got->info.output_bytes)
      return call.Send({{"end", ProcessEndEvent(got->info.exit_code, got->info.signal)}});
    if (call.cancelled()) return;
    if (gate.closed()) return call.Fail({"unavailable", "the server is shutting down"});
  }
}

// The process's config as started through envd, else as the table knows it.
json RememberedConfig(E2bApi::Sandbox& sandbox, const engine::ProcessInfo& p) {
  {
    std::lock_guard lock(sandbox.mu);
    auto it = sandbox.processes.find(p.pid);
    if (it != sandbox.processes.end() && it->second.at == p.started) return it->second.config;
  }
  return ConfigOf(p);
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
  auto call = ProcessCallOf(method, body);
  if (!call) return SendRpcError(*exchange, call.error());
  const engine::Caller caller = CallerOf(key);
  const engine::Origin origin{.transport = engine::Transport::kE2b, .peer = request.peer};
  calls_.Spawn([this, exchange, sandbox, caller, origin, method, call = std::move(*call)] {
    const std::string& id = sandbox->id;
    if (method == "List") {
      auto list = gate_.ListProcesses(caller, id);
      if (!list) return SendRpcError(*exchange, ProcessRpcError(list.error()));
      json processes = json::array();
      for (const auto& p : *list) {
        if (!p.running) continue;                                  // envd lists what runs
        if (InternalTag(p.tag)) continue;                          // envd's own doing there
        json info = {{"config", RememberedConfig(*sandbox, p)}, {"pid", p.pid}};
        if (!p.tag.empty()) info["tag"] = p.tag;
        processes.push_back(std::move(info));
      }
      return SendJson(*exchange, 200, {{"processes", processes}});
    }
    auto pid = Resolve(gate_, caller, id, call.selector);
    if (!pid) return SendRpcError(*exchange, pid.error());
    engine::Refused<void> done;
    if (method == "SendInput") done = gate_.WriteProcessInput(caller, id, *pid, call.input);
    if (method == "SendSignal") done = gate_.SignalProcess(caller, id, *pid, call.signal, origin);
    if (method == "CloseStdin") done = gate_.CloseProcessInput(caller, id, *pid);
    if (method == "Update") {
      // Without a pty size there is nothing to update, but the process must still exist.
      if (call.size) {
        done = gate_.ResizeProcess(caller, id, *pid, call.size->first, call.size->second);
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
        std::unique_ptr<engine::SessionProcesses::Follower> follower;
        auto started = gate_.StartProcess(caller, sandbox->id, spec.spec, origin, &follower);
        if (!started) return call->Fail(ProcessRpcError(started.error()));
        Remember(*sandbox, *started, spec.config);
        call->Send({{"start", {{"pid", started->pid}}}});
        auto table = gate_.ProcessesOf(caller, sandbox->id);
        if (!table) return call->Fail(ProcessRpcError(table.error()));
        Follow(gate_, *call, **table, started->pid, std::move(follower));
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
  auto stream = StreamInputOf(*messages);
  if (!stream) return answer(stream.error());
  const engine::Caller caller = CallerOf(key);
  calls_.Spawn([this, answer, sandbox, caller, stream = std::move(*stream)] {
    auto pid = Resolve(gate_, caller, sandbox->id, stream.selector);
    if (!pid) return answer(pid.error());
    for (const auto& data : stream.inputs) {
      if (auto written = gate_.WriteProcessInput(caller, sandbox->id, *pid, data); !written)
        return answer(ProcessRpcError(written.error()));
    }
    answer(std::nullopt);
  });
}

}  // namespace execbox::api::e2b
