// POST /v1/execute, /v1/sessions/{id}/execute and /v1/check: the gate's admission on the I/O
// thread, the execution on its own, and the answer as one JSON Result or as an SSE stream
// (stdout, stderr, display, result; "error" for a refusal after the stream started).
#include <atomic>
#include <chrono>

#include "api/common/json_text.h"
#include "api/http/http_api.h"
#include "api/http/http_problems.h"
#include "api/http/http_wire.h"
#include "api/http/response_stream.h"
#include "engine/result_json.h"

namespace execbox::api {
namespace {

std::string Event(std::string_view name, const nlohmann::json& data) {
  return "event: " + std::string(name) + "\ndata: " + Serialize(data) + "\n\n";
}

bool WantsEventStream(const HttpRequest& request) {
  return request.Header("accept").find("text/event-stream") != std::string_view::npos;
}

// One execution behind the HTTP API: its Result as JSON, or its events as SSE (the stream starts
// once the execution has its slot, or with a heartbeat while it waits). Its client going away
// cancels it.
class HttpExecution final : public StreamedAnswer {
 public:
  HttpExecution(std::shared_ptr<Exchange> exchange, bool sse)
      : exchange_(exchange),
        sse_(sse),
        stream_(std::move(exchange), "text/event-stream",
                {.bytes = ": heartbeat\n\n", .silence = kHeartbeat, .before_start = true}) {}

  void Started() override {
    if (sse_) stream_.Start();
  }
  void Output(jail::Stream stream, std::string_view data) override {
    if (!sse_) return;
    int i = stream == jail::Stream::kStdout ? 0 : 1;
    std::string text = WholeUtf8(carry_[i], data);
    if (!text.empty()) stream_.Send(Event(i == 0 ? "stdout" : "stderr", {{"text", text}}));
  }
  // Each figure or display() as the code produces it, after what was printed before it.
  bool WantsDisplay() const override { return sse_; }
  void Display(const engine::MimeBundle& bundle) override {
    stream_.SendWhole(Event("display", bundle));
    ++displayed_;
  }
  bool Tick(std::chrono::steady_clock::time_point now) override {
    if (exchange_->ClientGone()) return false;
    if (sse_) stream_.Tick(now);
    return true;
  }
  void Finish(engine::Refused<engine::Result> outcome) override {
    if (!outcome) {
      Problem problem = ProblemOf(outcome.error());
      if (!stream_.started()) return exchange_->Respond(ProblemResponse(problem));
      stream_.SendWhole(Event("error", nlohmann::json::parse(ProblemResponse(problem).body)));
      return stream_.End();
    }
    nlohmann::json json = engine::ToJson(*outcome);
    if (!sse_) return exchange_->Respond(HttpResponse{.body = engine::Dump(json)});
    for (int i = 0; i < 2; ++i) {
      if (!carry_[i].empty()) stream_.Send(Event(i == 0 ? "stdout" : "stderr", {{"text", carry_[i]}}));
    }
    // What was not sent as it came (the Result's display items begin with those that were).
    const nlohmann::json display = json.value("display", nlohmann::json::array());
    for (size_t i = displayed_.load(); i < display.size(); ++i)
      stream_.SendWhole(Event("display", display[i]));
    stream_.SendWhole(Event("result", json));
    stream_.End();
  }

 private:
  static constexpr std::chrono::seconds kHeartbeat{10};
  const std::shared_ptr<Exchange> exchange_;
  const bool sse_;
  ResponseStream stream_;
  std::string carry_[2];              // the output thread's only
  std::atomic<size_t> displayed_{0};  // display items sent as they came
};

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
  calls_.Run(gate_, std::move(admitted), std::make_shared<HttpExecution>(std::move(exchange), sse));
}

}  // namespace execbox::api
