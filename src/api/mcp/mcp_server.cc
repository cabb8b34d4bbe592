#include "api/mcp/mcp_server.h"

#include <chrono>
#include <utility>

#include "api/mcp/json_rpc.h"
#include "api/mcp/mcp_process_tools.h"
#include "api/mcp/mcp_tools.h"
#include "engine/result_json.h"

namespace execbox::api {
namespace {

using nlohmann::json;

const char* const kInstructions =
    "execbox runs Python 3 in an isolated sandbox with numpy, pandas, matplotlib and scipy; call "
    "execute_python with code and read stdout, errors and figures from the result. Use create_session "
    "and pass its session_id to keep variables between calls.";

bool ValidId(const json& id) { return id.is_string() || id.is_number_integer(); }

std::string Key(const json& id) { return id.dump(); }

}  // namespace

// One tools/call while it runs: an execution streamed to its reply, or a session tool's work.
// Each tick it sends a progress notification about once a second, when the client gave a
// progressToken (so a long execution is seen alive and its request timeout may be reset), and
// asks the transport whether its client is still there.
class McpServer::ToolCall final : public StreamedAnswer {
 public:
  ToolCall(McpServer& server, json id, json progress_token)
      : server_(server), id_(std::move(id)), progress_token_(std::move(progress_token)) {}

  bool Tick(std::chrono::steady_clock::time_point now) override {
    if (!progress_token_.is_null() && now >= start_ + std::chrono::seconds(progress_ + 1)) {
      ++progress_;
      server_.Send(MakeNotification("notifications/progress",
                                    {{"progressToken", progress_token_},
                                     {"progress", progress_},
                                     {"message", "running, " + std::to_string(progress_) + " s"}}),
                   id_, /*last=*/false);
    }
    return !server_.watch_ || server_.watch_(id_, now);
  }
  void Finish(engine::Refused<engine::Result> outcome) override {
    json result;
    try {
      result = outcome ? ExecutionToolResult(*outcome) : RefusalToolResult(outcome.error());
    } catch (const std::exception& e) {
      result = ToolError(std::string("internal error: ") + e.what());
    }
    server_.Finish(id_, *this, std::move(result));
  }

 private:
  McpServer& server_;
  const json id_;
  const json progress_token_;  // null: no progress notifications
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  int progress_ = 0;  // the ticker's only
};

McpServer::McpServer(engine::Gate& gate, Calls& calls, engine::Caller caller, engine::Origin origin,
                     std::string version, McpWrite write, McpWatch watch)
    : gate_(gate),
      calls_(calls),
      caller_(std::move(caller)),
      origin_(std::move(origin)),
      version_(std::move(version)),
      write_(std::move(write)),
      watch_(std::move(watch)) {}

McpServer::~McpServer() {
  Drain();
  std::set<std::string> open;
  {
    std::lock_guard lock(sessions_mu_);
    open.swap(sessions_);
  }
  for (const auto& id : open) (void)gate_.CloseSession(caller_, id, origin_);
}

void McpServer::Send(const json& message, const json& request_id, bool last) {
  std::string line = message.is_null() ? std::string() : Serialize(message);
  std::lock_guard lock(write_mu_);
  write_(request_id, line, last);
}

void McpServer::HandleOversized() {
  Send(MakeError(nullptr, kParseError, "message larger than 16 MiB"), nullptr);
}

void McpServer::HandleLine(std::string_view line) {
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;  // blank lines are not messages
  auto message = ParseMessage(line);
  if (!message) {
    Send(MakeError(nullptr, kParseError, "parse error: " + message.error().message), nullptr);
    return;
  }
  Dispatch(*message);
}

void McpServer::HandleMessage(const json& message) { Dispatch(message); }

void McpServer::Dispatch(const json& message) {
  if (!message.is_object()) {
    // Batches were removed from MCP in 2025-06-18; a bare value is no request at all.
    Send(MakeError(nullptr, kInvalidRequest,
                   message.is_array() ? "batches are not supported" : "a message must be an object"),
         nullptr);
    return;
  }
  auto id_it = message.find("id");
  const bool is_request = id_it != message.end();
  const json id = is_request && ValidId(*id_it) ? *id_it : json(nullptr);
  auto method_it = message.find("method");
  if (method_it == message.end()) {
    if (message.contains("result") || message.contains("error"))
      return;  // a reply to us: we send no requests
    Send(MakeError(id, kInvalidRequest, "missing 'method'"), id);
    return;
  }
  // Compared as JSON: value("jsonrpc", "") would throw on a number there.
  auto version_it = message.find("jsonrpc");
  if (version_it == message.end() || *version_it != "2.0" || !method_it->is_string() ||
      (is_request && !ValidId(*id_it))) {
    Send(MakeError(id, kInvalidRequest, "not a JSON-RPC 2.0 request"), id);
    return;
  }
  const std::string method = method_it->get<std::string>();
  const json params = message.contains("params") ? message["params"] : json::object();
  if (!params.is_object()) {
    if (is_request) Send(MakeError(id, kInvalidParams, "'params' must be an object"), id);
    return;
  }

  if (!is_request) {
    if (method == "notifications/cancelled") Cancel(params);
    return;  // notifications/initialized and anything else: nothing to answer
  }
  if (method == "initialize") {
    Send(MakeResult(id, Initialize(params)), id);
  } else if (method == "ping") {
    Send(MakeResult(id, json::object()), id);
  } else if (method == "tools/list") {
    // Listed when the server started (serve, mcp); never run here, on the caller's thread.
    auto packages = gate_.ListedPackages();
    const std::optional<std::vector<std::string>> wheels = gate_.WheelNames();
    json tools = ToolDefinitions(
        gate_.limits(), packages ? engine::ModuleNames(*packages) : std::vector<std::string>{}, wheels);
    // A session's processes only where there are sessions (not on cold jails): elsewhere every
    // call of them could only be refused.
    if (gate_.sessions_available()) {
      for (auto& tool : ProcessToolDefinitions()) tools.push_back(std::move(tool));
    }
    Send(MakeResult(id, {{"tools", std::move(tools)}}), id);
  } else if (method == "tools/call") {
    StartToolCall(id, params);
  } else {
    Send(MakeError(id, kMethodNotFound, "method not found: " + method), id);
  }
}

json McpServer::Initialize(const json& params) {
  std::string version = kProtocolVersions[0];
  if (auto v = params.find("protocolVersion"); v != params.end() && v->is_string()) {
    for (const char* known : kProtocolVersions) {
      if (*v == known) version = known;
    }
  }
  return {{"protocolVersion", version},
          {"capabilities", {{"tools", {{"listChanged", false}}}}},
          {"serverInfo", {{"name", "execbox"}, {"version", version_}}},
          {"instructions", kInstructions}};
}

void McpServer::Cancel(const json& params) {
  auto id = params.find("requestId");
  if (id == params.end() || !ValidId(*id)) return;
  CancelRequest(*id);
}

void McpServer::CancelRequest(const json& request_id) {
  std::lock_guard lock(calls_mu_);
  if (auto it = by_id_.find(Key(request_id)); it != by_id_.end()) it->second->Cancel();
}

void McpServer::CancelAll() {
  std::lock_guard lock(calls_mu_);
  cancel_all_ = true;
  for (auto& [key, call] : by_id_) call->Cancel();
}

void McpServer::StartToolCall(const json& id, const json& params) {
  auto name = params.find("name");
  if (name == params.end() || !name->is_string()) {
    Send(MakeError(id, kInvalidParams, "tools/call needs a string 'name'"), id);
    return;
  }
  const json arguments = params.contains("arguments") ? params["arguments"] : json::object();
  if (!arguments.is_object()) {
    Send(MakeError(id, kInvalidParams, "'arguments' must be an object"), id);
    return;
  }
  const std::string tool = name->get<std::string>();
  bool known = IsProcessTool(tool) && gate_.sessions_available();
  for (const auto& definition : ToolDefinitions(gate_.limits())) known = known || definition["name"] == tool;
  if (!known) {
    Send(MakeError(id, kInvalidParams, "unknown tool: " + tool), id);
    return;
  }
  json progress_token = nullptr;
  if (params.contains("_meta") && params["_meta"].is_object() && params["_meta"].contains("progressToken")) {
    progress_token = params["_meta"]["progressToken"];
  }
  // Progress is told of executions and of the process tools (which may wait for a process): the
  // session tools end within seconds.
  const bool runs = tool == "execute_python" || tool == "check_python";
  const bool long_running = runs || IsProcessTool(tool);
  auto call = std::make_shared<ToolCall>(*this, id, long_running ? progress_token : json(nullptr));
  bool in_use = false;
  {
    std::lock_guard lock(calls_mu_);
    in_use = !by_id_.emplace(Key(id), call).second;
    if (!in_use) {
      if (cancel_all_) call->Cancel();
      ++running_;
    }
  }
  if (in_use) {
    Send(MakeError(id, kInvalidRequest, "request id already in use by a running call"), id);
    return;
  }
  if (!runs) {
    auto result = std::make_shared<json>();
    calls_.Spawn(
        call,
        [this, tool, arguments, result, call] {
          try {
            *result = IsProcessTool(tool)
                          ? CallProcessTool(gate_, caller_, origin_, tool, arguments, call->cancel_flag())
                          : SessionTool(tool, arguments);
          } catch (const std::exception& e) {
            *result = ToolError(std::string("internal error: ") + e.what());
          }
        },
        [this, id, call, result] { Finish(id, *call, std::move(*result)); });
    return;
  }
  // Bad arguments and refusals are tool errors, not protocol errors (MCP 2025-11-25): the model
  // can act on them. Both are decided here, before a thread exists for the call.
  auto request =
      ParseExecuteArguments(arguments, tool == "check_python" ? kCheckPythonTool : kExecutePythonTool);
  if (!request) return Finish(id, *call, RefusalToolResult(request.error()));
  auto admitted = gate_.Admit(caller_, std::move(*request), origin_);
  if (!admitted) return Finish(id, *call, RefusalToolResult(admitted.error()));
  calls_.Run(gate_, std::move(*admitted), call);
}

void McpServer::Finish(const json& id, const Call& call, json result) {
  {
    // Out of the map first: from here a cancellation cannot arrive, and the id is free again
    // by the time the client has the reply.
    std::lock_guard lock(calls_mu_);
    by_id_.erase(Key(id));
  }
  // A cancelled request gets no reply (the client has stopped waiting for it), only the
  // transport's note that the request is over.
  Send(call.cancelled() ? json(nullptr) : MakeResult(id, std::move(result)), id);
  std::lock_guard lock(calls_mu_);
  --running_;
  calls_done_.notify_all();
}

void McpServer::Drain() {
  std::unique_lock lock(calls_mu_);
  calls_done_.wait(lock, [this] { return running_ == 0; });
}

json McpServer::SessionTool(const std::string& name, const json& arguments) {
  if (name == "create_session") {
    auto parsed = ParseCreateSessionArguments(arguments);
    if (!parsed) return RefusalToolResult(parsed.error());
    const bool asked_packages = !parsed->packages.empty();
    auto created = gate_.CreateSession(caller_, parsed->limits, origin_, false, std::move(parsed->packages),
                                       std::move(parsed->network));
    if (!created) return RefusalToolResult(created.error());
    {
      std::lock_guard lock(sessions_mu_);
      sessions_.insert(created->info.id);
    }
    json out = {{"session_id", created->info.id}};
    if (asked_packages) out["installed"] = engine::InstalledJson(created->installed);
    return StructuredToolResult(std::move(out));
  }
  auto id = StringArgument(arguments, "session_id");
  if (!id) {
    return RefusalToolResult(
        engine::MakeRefusal(engine::RefusalReason::kInvalidArguments, id.error().message));
  }
  if (name == "fork_session") {
    auto forked = gate_.ForkSession(caller_, *id, origin_);
    if (!forked) return RefusalToolResult(forked.error());
    {
      std::lock_guard lock(sessions_mu_);
      sessions_.insert(forked->info.id);
    }
    json not_copied = json::array();
    for (const auto& e : forked->left_out)
      not_copied.push_back({{"name", e.name}, {"type", e.type}, {"reason", e.reason}});
    return StructuredToolResult({{"session_id", forked->info.id}, {"not_copied", not_copied}});
  }
  if (name == "pause_session" || name == "resume_session") {
    const bool pause = name == "pause_session";
    auto done =
        pause ? gate_.PauseSession(caller_, *id, origin_) : gate_.ResumeSession(caller_, *id, origin_);
    if (!done) return RefusalToolResult(done.error());
    return StructuredToolResult({{"session_id", *id}, {"paused", pause}, {"changed", *done}});
  }
  auto closed = gate_.CloseSession(caller_, *id, origin_);
  {
    std::lock_guard lock(sessions_mu_);
    sessions_.erase(*id);
  }
  if (!closed) return RefusalToolResult(closed.error());
  return StructuredToolResult({{"session_id", *id}});
}

}  // namespace execbox::api
