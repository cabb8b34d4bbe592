// POST /v1/execute and /v1/sessions/{id}/execute: admission, the execution on its own thread,
// and the answer as one JSON Result or as an SSE stream (stdout, stderr, display, result).
#include <chrono>

#include "api/http/http_api.h"
#include "api/http/http_problems.h"
#include "api/http/http_running.h"
#include "api/mcp/json_rpc.h"
#include "engine/result_json.h"

namespace execbox::api {
namespace {

// The longest prefix of carry + data that ends on a whole UTF-8 sequence; the cut-off tail
// (at most 3 bytes) stays in `carry` for the next chunk, so a character split across two
// reads is not turned into two replacement characters.
std::string WholeUtf8(std::string& carry, std::string_view data) {
  carry.append(data);
  size_t end = carry.size();
  for (size_t back = 1; back <= 3 && back <= carry.size(); ++back) {
    unsigned char c = static_cast<unsigned char>(carry[carry.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (need > back) end = carry.size() - back;
    break;
  }
  std::string out = carry.substr(0, end);
  carry.erase(0, end);
  return out;
}

std::string Event(std::string_view name, const nlohmann::json& data) {
  return "event: " + std::string(name) + "\ndata: " + Serialize(data) + "\n\n";
}

bool WantsEventStream(const HttpRequest& request) {
  return request.Header("accept").find("text/event-stream") != std::string_view::npos;
}

}  // namespace

void HttpApi::Execute(HttpRequest request, std::shared_ptr<Exchange> exchange, const ApiKey& key,
                      std::optional<std::string> session_in_path) {
  auto call = ParseExecuteBody(request.body, request_limits_, !session_in_path.has_value());
  if (!call) return Fail(*exchange, call.error());
  std::optional<std::string> session = session_in_path ? session_in_path : call->session_id;
  if (session) {
    if (!engine_.sessions()) {
      return Fail(*exchange, SessionsUnavailable());
    }
    if (!OwnsSession(*session, key)) {
      return Fail(*exchange, SessionProblem({engine::SessionError::kNotFound, ""}, *session));
    }
  }
  bool sse = WantsEventStream(request);
  const ApiKey* key_ptr = &key;
  // Refused here, on the I/O thread, at once: a client hammering a full server costs no thread.
  auto reserved = admission_.Reserve(key);
  if (!reserved) {
    metrics_.Rejected(RejectionReason(reserved.error()));
    return exchange->Respond(ProblemResponse(reserved.error()));
  }
  auto ticket = std::make_shared<Ticket>(std::move(*reserved));
  Spawn([this, exchange, key_ptr, session, sse, ticket, peer = request.peer,
         program = std::move(call->program)] {
    if (auto waited = admission_.Wait(*ticket, &exchange->ClientGone()); !waited) {
      metrics_.Rejected(RejectionReason(waited.error()));
      return exchange->Respond(ProblemResponse(waited.error()));
    }
    auto running = std::make_shared<Running>(exchange);
    running->streaming = sse;
    std::string carry[2];
    engine::ExecuteOptions options{.cancel = &running->cancel};
    if (sse) {
      exchange->StartStream(200, "text/event-stream", {});
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
    auto started = std::chrono::steady_clock::now();
    std::expected<engine::Result, Problem> outcome;
    if (session) {
      auto r = engine_.sessions()->Execute(*session, program, options);
      if (r) {
        outcome = std::move(*r);
      } else {
        outcome = std::unexpected(SessionProblem(r.error(), *session));
      }
    } else {
      auto r = engine_.Execute(program, options);
      if (r) {
        outcome = std::move(*r);
      } else {
        outcome = std::unexpected(Problem{.status = 400,
                                          .type = "invalid-request",
                                          .title = "Invalid request",
                                          .detail = r.error().message});
      }
    }
    {
      std::lock_guard lock(mu_);
      running_.erase(running.get());
    }
    { Ticket done = std::move(*ticket); }  // the slot is free before the answer goes out
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const char* route = session ? "session" : "execute";

    if (!outcome) {
      if (audit_) {
        audit_->Write(AuditRecord{.key_id = key_ptr->id,
                                  .session_id = session.value_or(""),
                                  .route = route,
                                  .code = program.code,
                                  .status = "failed:" + outcome.error().type,
                                  .usage = nullptr,
                                  .peer = peer});
      }
      if (!sse) return exchange->Respond(ProblemResponse(outcome.error()));
      nlohmann::json problem = nlohmann::json::parse(ProblemResponse(outcome.error()).body);
      running->Send(Event("error", problem));
      return exchange->EndStream();
    }
    engine::Result& result = *outcome;
    if (running->shutdown && result.error && result.error->ename == "Cancelled") {
      result.error->evalue = "the server is shutting down; the execution was stopped";
    }
    nlohmann::json json = engine::ToJson(result);
    std::string status = json.value("status", "");
    metrics_.ExecutionFinished(route, status, seconds);
    if (audit_) {
      audit_->Write(AuditRecord{.key_id = key_ptr->id,
                                .session_id = session.value_or(""),
                                .route = route,
                                .code = program.code,
                                .status = status,
                                .usage = json.value("usage", nlohmann::json()),
                                .peer = peer});
    }
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
