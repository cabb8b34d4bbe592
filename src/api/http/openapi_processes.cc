// The OpenAPI document's routes and schemas of a session's processes (http_processes.cc).
#include "api/http/openapi_parts.h"

namespace execbox::api::openapi {
namespace {

json Ref(const char* kind, const char* name) {
  return {{"$ref", std::string("#/components/") + kind + "/" + name}};
}

json Problems(std::initializer_list<std::pair<int, std::string_view>> own) {
  json responses = {{"401", Ref("responses", "Unauthorized")}, {"404", Ref("responses", "NotFound")}};
  for (auto [status, description] : own) {
    responses[std::to_string(status)] = {
        {"description", description},
        {"content", {{"application/problem+json", {{"schema", Schema("Problem")}}}}}};
  }
  return responses;
}

json Op(const char* id, std::string_view summary, json responses, std::string_view description = {}) {
  json op = {{"operationId", id},
             {"tags", {"processes"}},
             {"summary", summary},
             {"responses", std::move(responses)}};
  if (!description.empty()) op["description"] = description;
  return op;
}

json Body(const char* schema, bool required = true) {
  return {{"required", required}, {"content", {{"application/json", {{"schema", Schema(schema)}}}}}};
}

json Ok(std::string_view description, json schema) {
  return {{"description", description}, {"content", {{"application/json", {{"schema", std::move(schema)}}}}}};
}

constexpr std::string_view kNotRunning = "`process-not-running`: it has ended.";

}  // namespace

json ProcessPaths() {
  json ids = {Ref("parameters", "SessionId")};
  json one = {Ref("parameters", "SessionId"), Ref("parameters", "ProcessId")};

  json start =
      Op("startProcess", "Start a process in the session",
         Problems({{400, "A malformed body (both or neither of `command` and `argv`, a bad `env`, ...)."},
                   {409, "`processes-full` (the session runs as many as it may: 32), or `session-ended`."},
                   {422,
                    "`start-failed`: the sandbox could not start it (no such program, a bad "
                    "`cwd`, ...); the detail says which step and why."}}),
         "Starts a program (`argv`) or a shell command (`command`, run as `/bin/bash -l -c`) in the "
         "session's sandbox, beside its Python kernel: same namespaces, cgroup and limits (processes, "
         "memory and CPU are the session's, for all of them together). It runs until it exits, is "
         "signalled, or the session ends (closed, expired, or its kernel ended: the whole sandbox goes "
         "with it); it outlives the request. Its output is kept on the host (1 MiB per stream, the "
         "oldest dropped first) for `/output`. A session whose sandbox had ended is restarted first, "
         "empty (its next execution's reply says the state was lost).");
  start["requestBody"] = Body("ProcessStartRequest");
  start["responses"]["201"] = Ok("Started.", Schema("ProcessInfo"));
  json list = Op("listProcesses", "The session's processes", Problems({}));
  list["responses"]["200"] = Ok("Running ones and those ended lately (the 64 newest), oldest first.",
                                Object({"processes"}, {{"processes", ArrayOf(Schema("ProcessInfo"))}}));
  json get = Op("getProcess", "One process, with its exit status once it ended", Problems({}));
  get["responses"]["200"] = Ok("The process.", Schema("ProcessInfo"));

  json sse = {
      {"type", "string"},
      {"description",
       "Server-Sent Events: `stdout`, `stderr` or `pty` (each an `OutputChunk`), `dropped` "
       "(`{bytes, next_offset}`: output no longer held was skipped), then `exit` (the `ProcessInfo`) once "
       "the process has ended and its output is all sent, or `error` (a `Problem`); `: heartbeat` "
       "comments keep a quiet stream open."}};
  json output =
      Op("processOutput", "Its output from an offset: what is held, then what comes",
         Problems({{400, "A bad query parameter."}}),
         "Every byte the process wrote has an offset in its output (its streams together, in the order "
         "the host read them). The answer starts at `offset` (default 0) with what is still held, and by "
         "default follows: an SSE stream of new output until the process has ended. Any number of "
         "requests may read at once, and a later one may start where an earlier one stopped "
         "(`next_offset`). `?follow=false` answers at once, as JSON, with what is held.");
  output["parameters"] = {
      {{"name", "offset"},
       {"in", "query"},
       {"schema", Count()},
       {"description", "Where to start (default 0)."}},
      {{"name", "follow"},
       {"in", "query"},
       {"schema", {{"type", "string"}, {"enum", {"true", "false"}}}},
       {"description", "`false`: what is held now, as JSON, at once."}},
      {{"name", "encoding"},
       {"in", "query"},
       {"schema", {{"type", "string"}, {"enum", {"text", "base64"}}}},
       {"description", "`base64`: every chunk as `data_base64` (default: text where it is valid UTF-8)."}}};
  output["responses"]["200"] = {{"description", "The output."},
                                {"content",
                                 {{"text/event-stream", {{"schema", sse}}},
                                  {"application/json", {{"schema", Schema("ProcessOutput")}}}}}};

  json input = Op("processInput", "Write to its stdin (or its pty)",
                  Problems({{400, "Neither or both of `data` and `data_base64`, or bad base64."},
                            {409,
                             "`no-stdin` (started without `stdin`, stdin closed, or the process does not "
                             "read it) or " +
                                 std::string(kNotRunning)}}));
  input["requestBody"] = Body("ProcessInputRequest");
  input["responses"]["204"] = {{"description", "Written."}};
  json close = Op("processCloseStdin", "Close its stdin (it reads end of file)",
                  Problems({{409, "`no-stdin` (none, already closed, or a pty: write `\\u0004` instead) or " +
                                      std::string(kNotRunning)}}));
  close["responses"]["204"] = {{"description", "Closed."}};
  json signal = Op("processSignal", "Send it a signal",
                   Problems({{400, "Not a signal."}, {409, std::string(kNotRunning)}}),
                   "Sent to its process group: the process and what it started in its group.");
  signal["requestBody"] = Body("ProcessSignalRequest");
  signal["responses"]["204"] = {{"description", "Sent."}};
  json resize =
      Op("processResize", "Resize its pty",
         Problems({{400, "A size out of range."}, {409, "`not-a-pty`, or " + std::string(kNotRunning)}}));
  resize["requestBody"] = Body("ProcessResizeRequest");
  resize["responses"]["204"] = {{"description", "Resized (its foreground process group gets SIGWINCH)."}};
  return {{"/v1/sessions/{id}/processes", {{"parameters", ids}, {"post", start}, {"get", list}}},
          {"/v1/sessions/{id}/processes/{pid}", {{"parameters", one}, {"get", get}}},
          {"/v1/sessions/{id}/processes/{pid}/output", {{"parameters", one}, {"get", output}}},
          {"/v1/sessions/{id}/processes/{pid}/input", {{"parameters", one}, {"post", input}}},
          {"/v1/sessions/{id}/processes/{pid}/close-stdin", {{"parameters", one}, {"post", close}}},
          {"/v1/sessions/{id}/processes/{pid}/signal", {{"parameters", one}, {"post", signal}}},
          {"/v1/sessions/{id}/processes/{pid}/resize", {{"parameters", one}, {"post", resize}}}};
}

json ProcessSchemas() {
  json time = {{"type", "string"}, {"format", "date-time"}};
  json nullable_int = {{"type", {"integer", "null"}}};
  json info =
      Object({"pid", "argv", "tag", "pty", "started", "running", "stdin_open", "output_bytes", "exit_code",
              "signal"},
             {{"pid", Count("As the sandbox sees it (`ps` there shows the same).")},
              {"argv", ArrayOf(String())},
              {"command", String("When started as a shell command.")},
              {"tag", String()},
              {"pty", Boolean()},
              {"size", Object({"rows", "cols"}, {{"rows", Count()}, {"cols", Count()}})},
              {"started", time},
              {"ended", time},
              {"running", Boolean()},
              {"stdin_open", Boolean("Input may be written now.")},
              {"output_bytes", Count("Written so far, its streams together: the offset of the next byte.")},
              {"exit_code", nullable_int},
              {"signal", nullable_int},
              {"ended_by",
               {{"type", "string"},
                {"enum", {"exit", "signal", "session_end"}},
                {"description", "`session_end`: it ended with its session; no status is known."}}}});
  json chunk =
      Object({"stream", "offset"}, {{"stream", {{"type", "string"}, {"enum", {"stdout", "stderr", "pty"}}}},
                                    {"offset", Count("Of its first byte.")},
                                    {"data", String("The bytes, when they are valid UTF-8.")},
                                    {"data_base64", String("The bytes, standard base64, otherwise.")}});
  json read =
      Object({"chunks", "next_offset", "dropped", "process"},
             {{"chunks", ArrayOf(Schema("OutputChunk"))},
              {"next_offset", Count("Where the next read goes on from.")},
              {"dropped", Count("Bytes after `offset` no longer held (the oldest are dropped first).")},
              {"process", Schema("ProcessInfo")}});
  return {{"ProcessInfo", info}, {"OutputChunk", chunk}, {"ProcessOutput", read}};
}

}  // namespace execbox::api::openapi
