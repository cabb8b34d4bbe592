#include "cli/local_server.h"

#include <unistd.h>

#include <cstdlib>

#include "base/base64.h"
#include "base/io.h"
#include "engine/limit_schema.h"
#include "engine/result_json.h"

namespace execbox::cli {
namespace {

using nlohmann::json;

constexpr const char* kSystemSocket = "/run/execbox/execbox.sock";

// The /v1/execute body for the request; nullopt when JSON cannot carry it unchanged (code or
// stdin that is not UTF-8).
std::optional<std::string> ExecuteBody(const engine::ExecutionRequest& request) {
  const runtime::PythonProgram& p = request.program;
  json body = {{"code", p.code}, {"policy", p.lint_profile}, {"filename", p.display_name}};
  if (!p.stdin_data.empty()) body["stdin"] = p.stdin_data;
  // Every limit, as this command resolved it: the run is the same whichever engine runs it.
  json limits = json::object();
  for (const auto& spec : engine::LimitTable()) limits[std::string(spec.name)] = spec.Value(p.limits);
  body["limits"] = limits;
  json files = json::array();
  for (const auto& f : p.inputs)
    files.push_back({{"name", f.name}, {"content_base64", Base64Encode(f.content)}});
  body["files"] = files;
  if (request.network) {
    json network = {{"allow", json::array()}, {"deny", json::array()}};
    for (const auto& r : request.network->allow) network["allow"].push_back(r.text);
    for (const auto& r : request.network->deny) network["deny"].push_back(r.text);
    body["network"] = std::move(network);
  }
  if (p.guard != runtime::Guard::kOff) body["guard"] = runtime::GuardName(p.guard);
  try {
    return body.dump();  // strict: invalid UTF-8 throws rather than being replaced
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

}  // namespace

std::vector<std::string> LocalServerSockets() {
  if (const char* socket = std::getenv("EXECBOX_SOCKET"); socket != nullptr && *socket != '\0')
    return {socket};
  std::vector<std::string> out;
  if (const char* runtime = std::getenv("XDG_RUNTIME_DIR"); runtime != nullptr && *runtime == '/')
    out.push_back(std::string(runtime) + "/execbox/execbox.sock");
  out.push_back(kSystemSocket);
  return out;
}

Expected<FoundServer> FindLocalServer() {
  std::string why_not;
  for (const auto& path : LocalServerSockets()) {
    auto connected = LocalClient::Connect(path);
    if (connected) return FoundServer{.path = path, .client = std::move(*connected)};
    why_not += (why_not.empty() ? "" : "; ") + connected.error().message;
  }
  return Fail(why_not);
}

ServerAttempt RunOnLocalServer(const engine::ExecutionRequest& request, bool stream_output) {
  ServerAttempt attempt;
  auto body = ExecuteBody(request);
  if (!body) {
    attempt.why_not = "the code or its stdin is not UTF-8, which the API cannot carry";
    return attempt;
  }
  auto found = FindLocalServer();
  if (!found) {
    attempt.why_not = found.error().message;
    return attempt;
  }
  std::unique_ptr<LocalClient> client = std::move(found->client);

  std::string result_text, failure;
  LocalClient::EventHandler on_event;
  if (stream_output) {
    on_event = [&](std::string_view event, std::string_view data) {
      if (event == "stdout" || event == "stderr") {
        json chunk = json::parse(data, nullptr, false);
        if (!chunk.is_object() || !chunk.contains("text") || !chunk["text"].is_string()) return;
        attempt.output_started = true;
        (void)WriteAll(event == "stdout" ? STDOUT_FILENO : STDERR_FILENO, chunk["text"].get<std::string>());
      } else if (event == "result") {
        result_text = data;
      } else if (event == "error") {
        failure = LocalClient::ProblemDetail(data);
      }
    };
  }
  auto reply = client->Post("/v1/execute", *body, on_event);
  if (!reply) {
    attempt.why_not = reply.error().message;
    return attempt;
  }
  if (reply->status != 200) {
    attempt.http_status = reply->status;
    attempt.why_not = "the local server refused: " + LocalClient::ProblemDetail(reply->body);
    return attempt;
  }
  if (!failure.empty()) {
    // The code had started: running it again cold would run it twice.
    attempt.output_started = true;
    attempt.http_status = 500;
    attempt.why_not = "the local server: " + failure;
    return attempt;
  }
  attempt.json =
      json::parse(stream_output && reply->body.empty() ? result_text : reply->body, nullptr, false);
  auto result = engine::ResultFromJson(attempt.json);
  if (!result) {
    attempt.http_status = 500;
    attempt.why_not = "the local server's answer: " + result.error().message;
    return attempt;
  }
  attempt.result = std::move(*result);
  return attempt;
}

}  // namespace execbox::cli
