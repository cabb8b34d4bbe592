// POST /v1/execute, /v1/sessions/{id}/execute and /v1/check: the gate's admission on the I/O
// thread, the execution on its own, and the answer as one JSON Result or as an SSE stream
// (stdout, stderr, display, result; "error" for a refusal after the stream started).
#include <chrono>

#include "api/http/http_api.h"
#include "api/http/http_problems.h"
#include "api/http/http_running.h"
#include "api/http/http_wire.h"
#include "api/mcp/json_rpc.h"
#include "engine/result_json.h"

namespace execbox::api {
namespace {

std::string Event(std::string_view name, const nlohmann::json& data) {
  return "event: " + std::string(name) + "\ndata: " + Serialize(data) + "\n\n";
}

bool WantsEventStream(const HttpRequest& request) {
  return request.Header("accept").find("text/event-stream") != std::string_view::npos;
}

}  // namespace

void HttpApi::Execute(HttpRequest request, std::shared_ptr<Exchange> exchange, const ApiKey& key,
                      std::optional<std::string> session_in_path) {
  auto call = ParseExecuteBody(request.body, !session_in_path.has_value());
  if (!call) return Fail(*exchange, call.error());
  if (session_in_path) call->session_id = std::move(session_in_path);
  // Decided here, on the I/O thread, at once: a client hammering a full server costs no thread.
  auto admitted = gate_.Admit(CallerOf(key), std::move(*call),
                              {.transport = engine::Transport::kHttp, .peer = request.peer});
  if (!admitted) return exchange->Respond(ProblemResponse(ProblemOf(admitted.error())));
  Run(std::move(*admitted), std::move(exchange), WantsEventStream(request));
}

void HttpApi::Run(engine::Admitted admitted, std::shared_ptr<Exchange> exchange, bool sse) {
  auto work = std::make_shared<engine::Admitted>(std::move(admitted));
  Spawn([this, exchange, sse, work] {
    auto running = std::make_shared<Running>(exchange, sse);
    std::string carry[2];
    engine::ExecuteOptions options{.cancel = &running->cancel};
    if (sse) {
      options.on_started = [running] { running->Start(); };
      options.on_output = [running, &carry](jail::Stream stream, std::string_view data) {
        int i = stream == jail::Stream::kStdout ? 0 : 1;
        std::string text = WholeUtf8(carry[i], data);
        if (!text.empty()) running->Send(Event(i == 0 ? "stdout" : "stderr", {{"text", text}}));
      };
    }
    {
      std::lock_guard lock(mu_);
      running_.insert(running.get());
    }
    auto outcome = gate_.Run(std::move(*work), options);
    {
      std::lock_guard lock(mu_);
      running_.erase(running.get());
    }
    if (!outcome) {
      Problem problem = ProblemOf(outcome.error());
      if (!running->started()) return exchange->Respond(ProblemResponse(problem));
      running->Send(Event("error", nlohmann::json::parse(ProblemResponse(problem).body)));
      return exchange->EndStream();
    }
    nlohmann::json json = engine::ToJson(*outcome);
    if (!sse) return exchange->Respond(HttpResponse{.body = engine::Dump(json)});
    for (int i = 0; i < 2; ++i) {
      if (!carry[i].empty()) running->Send(Event(i == 0 ? "stdout" : "stderr", {{"text", carry[i]}}));
    }
    // Figures and display() outputs arrive with the agent's report, when the cell ends.
    for (const auto& item : json.value("display", nlohmann::json::array()))
      running->Send(Event("display", item));
    running->Send(Event("result", json));
    exchange->EndStream();
  });
}

}  // namespace execbox::api
