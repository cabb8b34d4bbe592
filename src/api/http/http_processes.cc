// /v1/sessions/{id}/processes: a session's processes besides its Python kernel, each call
// through the gate (the session's owner only; a start and a signal audited). Output is read
// from any offset: as JSON (`?follow=false`: what is held), or as Server-Sent Events (what is
// held, then what comes, until the process has ended), from any request, several at once.
#include <charconv>
#include <optional>

#include "api/common/json_text.h"
#include "api/common/process_json.h"
#include "api/http/http_api.h"
#include "api/http/http_problems.h"
#include "api/http/http_wire.h"
#include "api/http/process_request.h"
#include "api/http/response_stream.h"
#include "base/base64.h"

namespace execbox::api {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr size_t kReadBytes = 256 << 10;  // one answer's (or event batch's) output, at most
constexpr std::chrono::seconds kHeartbeat{10};

bool ValidUtf8(const std::string& text) {
  try {
    (void)json(text).dump();  // the strict handler: invalid UTF-8 throws
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

// A chunk of output as JSON: `data` when it is valid UTF-8 (and not asked as base64), else
// `data_base64`. A character cut between two chunks makes both base64.
json ChunkJson(const engine::OutputChunk& c, bool base64) {
  json j = {{"stream", engine::OutputStreamName(c.stream)}, {"offset", c.offset}};
  if (!base64 && ValidUtf8(c.data)) {
    j["data"] = c.data;
  } else {
    j["data_base64"] = Base64Encode(c.data);
  }
  return j;
}

std::string Event(std::string_view name, const json& data) {
  return "event: " + std::string(name) + "\ndata: " + Serialize(data) + "\n\n";
}

// `name`'s value in a query string ("" when absent): the few this route takes need no decoding.
std::string QueryValue(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name)
      return std::string(eq == std::string_view::npos ? "" : pair.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return "";
}

HttpResponse JsonAnswer(int status, const json& body) {
  return HttpResponse{.status = status, .body = Serialize(body)};
}

Problem NoProcess(std::string_view pid) {
  return Problem{.status = 404,
                 .type = "process-not-found",
                 .title = "Process not found",
                 .detail = "no process " + std::string(pid.substr(0, 20)) + " in this session"};
}

Problem BadQuery(const std::string& detail) {
  return Problem{.status = 400, .type = "invalid-value", .title = "Invalid value", .detail = detail};
}

// The SSE answer of an output that is followed: heartbeats while it is quiet, its client gone
// away cancels it.
class OutputStreamAnswer final : public Call {
 public:
  explicit OutputStreamAnswer(std::shared_ptr<Exchange> exchange)
      : exchange_(exchange),
        stream_(std::move(exchange), "text/event-stream",
                {.bytes = ": heartbeat\n\n", .silence = kHeartbeat}) {}
  bool Tick(Clock::time_point now) override {
    if (exchange_->ClientGone()) return false;
    stream_.Tick(now);
    return true;
  }
  ResponseStream& stream() { return stream_; }
  Exchange& exchange() { return *exchange_; }

 private:
  const std::shared_ptr<Exchange> exchange_;
  ResponseStream stream_;
};

}  // namespace

void HttpApi::Processes(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const ApiKey& key,
                        const std::string& id, std::string_view rest) {
  const std::string& method = request.method;
  const engine::Caller caller = CallerOf(key);
  const engine::Origin origin{.transport = engine::Transport::kHttp, .peer = request.peer};
  auto not_allowed = [&](const std::string& allow) { Fail(*exchange, MethodNotAllowed(method, allow)); };
  auto answer = [this, exchange](const engine::Refusal& refusal) { Fail(*exchange, ProblemOf(refusal)); };

  if (rest.empty() || rest == "/") {
    if (method == "GET") {
      return calls_.Spawn([this, exchange, caller, id, answer] {
        auto list = gate_.ListProcesses(caller, id);
        if (!list) return answer(list.error());
        json out = json::array();
        for (const auto& p : *list) out.push_back(ProcessInfoJson(p));
        Respond(*exchange, JsonAnswer(200, {{"processes", out}}));
      });
    }
    if (method != "POST") return not_allowed("GET, POST");
    auto spec = ParseProcessStartBody(request.body);
    if (!spec) return Fail(*exchange, spec.error());
    return calls_.Spawn([this, exchange, caller, origin, id, answer, spec = std::move(*spec)] {
      auto started = gate_.StartProcess(caller, id, spec, origin);
      if (!started) return answer(started.error());
      Respond(*exchange, JsonAnswer(201, ProcessInfoJson(*started)));
    });
  }

  // "/{pid}" then an optional "/output", "/input", "/close-stdin", "/signal" or "/resize".
  rest.remove_prefix(1);
  const size_t slash = rest.find('/');
  const std::string_view pid_text = rest.substr(0, slash);
  const std::string_view action = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
  int32_t pid = 0;
  auto parsed = std::from_chars(pid_text.data(), pid_text.data() + pid_text.size(), pid);
  if (parsed.ec != std::errc() || parsed.ptr != pid_text.data() + pid_text.size() || pid < 1)
    return Fail(*exchange, NoProcess(pid_text));

  if (action.empty()) {
    if (method != "GET") return not_allowed("GET");
    return calls_.Spawn([this, exchange, caller, id, pid, answer] {
      auto info = gate_.GetProcess(caller, id, pid);
      if (!info) return answer(info.error());
      Respond(*exchange, JsonAnswer(200, ProcessInfoJson(*info)));
    });
  }
  if (action == "/output") {
    if (method != "GET") return not_allowed("GET");
    const std::string follow = QueryValue(request.query, "follow"),
                      encoding = QueryValue(request.query, "encoding");
    const std::string offset_text = QueryValue(request.query, "offset");
    uint64_t offset = 0;
    if (!offset_text.empty()) {
      auto r = std::from_chars(offset_text.data(), offset_text.data() + offset_text.size(), offset);
      if (r.ec != std::errc() || r.ptr != offset_text.data() + offset_text.size())
        return Fail(*exchange, BadQuery("'offset' must be a byte offset (a whole number)"));
    }
    if (!follow.empty() && follow != "true" && follow != "false")
      return Fail(*exchange, BadQuery("'follow' is true or false"));
    if (!encoding.empty() && encoding != "text" && encoding != "base64")
      return Fail(*exchange, BadQuery("'encoding' is text or base64"));
    const bool base64 = encoding == "base64";
    if (follow == "false") {
      return calls_.Spawn([this, exchange, caller, id, pid, offset, base64, answer] {
        auto got = gate_.ReadProcessOutput(caller, id, pid, offset, kReadBytes, std::nullopt, nullptr);
        if (!got) return answer(got.error());
        json chunks = json::array();
        for (const auto& c : got->read.chunks) chunks.push_back(ChunkJson(c, base64));
        Respond(*exchange, JsonAnswer(200, {{"chunks", chunks},
                                            {"next_offset", got->read.next_offset},
                                            {"dropped", got->read.dropped},
                                            {"process", ProcessInfoJson(got->info)}}));
      });
    }
    auto call = std::make_shared<OutputStreamAnswer>(exchange);
    return calls_.Spawn(
        call,
        [this, call, caller, id, pid, offset, base64] {
          // The session's table, held: the stream goes on to the process's end even when the
          // session closes meanwhile (its processes then end with it).
          auto table = gate_.ProcessesOf(caller, id);
          if (!table) return call->exchange().Respond(ProblemResponse(ProblemOf(table.error())));
          uint64_t from = offset;
          for (bool first = true;; first = false) {
            // The first look answers at once: an unknown process is a plain 404, not a stream.
            auto wait = first ? std::nullopt : std::optional(Clock::now() + std::chrono::seconds(1));
            auto got = (*table)->Read(pid, from, kReadBytes, wait, &call->cancel_flag());
            if (!got) {
              Problem problem = ProblemOf(gate_.FromProcess(got.error()));
              if (!call->stream().started()) return call->exchange().Respond(ProblemResponse(problem));
              return call->stream().Send(Event("error", json::parse(ProblemResponse(problem).body)));
            }
            call->stream().Start();
            if (got->read.dropped > 0)
              call->stream().Send(
                  Event("dropped", {{"bytes", got->read.dropped}, {"next_offset", got->read.next_offset}}));
            for (const auto& c : got->read.chunks)
              call->stream().Send(Event(engine::OutputStreamName(c.stream), ChunkJson(c, base64)));
            from = got->read.next_offset;
            if (!got->info.running && from >= got->info.output_bytes)
              return call->stream().Send(Event("exit", ProcessInfoJson(got->info)));
            // Cancelled, or the server is shutting down: a follower is no execution to wait for.
            if (call->cancelled() || gate_.closed()) return;
          }
        },
        [call] {
          // After the last tick: no heartbeat follows the stream's end.
          if (call->stream().started()) call->stream().End();
        });
  }
  if (method != "POST") return not_allowed("POST");
  if (action == "/input") {
    auto data = ParseProcessInputBody(request.body);
    if (!data) return Fail(*exchange, data.error());
    return calls_.Spawn([this, exchange, caller, id, pid, answer, data = std::move(*data)] {
      auto written = gate_.WriteProcessInput(caller, id, pid, data);
      if (!written) return answer(written.error());
      Respond(*exchange, HttpResponse{.status = 204, .content_type = ""});
    });
  }
  if (action == "/close-stdin") {
    return calls_.Spawn([this, exchange, caller, id, pid, answer] {
      auto closed = gate_.CloseProcessInput(caller, id, pid);
      if (!closed) return answer(closed.error());
      Respond(*exchange, HttpResponse{.status = 204, .content_type = ""});
    });
  }
  if (action == "/signal") {
    auto signal = ParseProcessSignalBody(request.body);
    if (!signal) return Fail(*exchange, signal.error());
    return calls_.Spawn([this, exchange, caller, origin, id, pid, answer, signal = *signal] {
      auto sent = gate_.SignalProcess(caller, id, pid, signal, origin);
      if (!sent) return answer(sent.error());
      Respond(*exchange, HttpResponse{.status = 204, .content_type = ""});
    });
  }
  if (action == "/resize") {
    auto size = ParseProcessResizeBody(request.body);
    if (!size) return Fail(*exchange, size.error());
    return calls_.Spawn([this, exchange, caller, id, pid, answer, size = *size] {
      auto resized = gate_.ResizeProcess(caller, id, pid, size.rows, size.cols);
      if (!resized) return answer(resized.error());
      Respond(*exchange, HttpResponse{.status = 204, .content_type = ""});
    });
  }
  Fail(*exchange, Problem{.status = 404,
                          .type = "not-found",
                          .title = "Not found",
                          .detail = "no route for " + request.path});
}

}  // namespace execbox::api
