// The OpenAPI document's paths (api/http/http_api.cc serves them) and the responses and
// parameters they share.
#include "api/http/openapi_parts.h"

namespace execbox::api::openapi {
namespace {

// The answer to a request that may run code, as one JSON Result or as an SSE stream.
constexpr std::string_view kStreaming =
    "With `Accept: text/event-stream` the reply is a Server-Sent Events stream instead of one JSON\nobject: "
    "`event: stdout` and `event: stderr` carry output as the code writes it\n(`data: {\"text\": \"...\"}`, "
    "see `StreamChunk`); `event: display` carries each figure or `display()` output (a\n`MimeBundle`) as the "
    "code shows it; comment lines (`: heartbeat`) keep idle\nconnections open; the stream ends with one "
    "`event: result` whose data is the `Result`, or with\none `event: error` whose data is a `Problem` when "
    "the execution could not be run. Errors found\nbefore the stream starts (bad body, authentication, "
    "admission) are ordinary\n`application/problem+json` responses.";

constexpr std::string_view kLimitExceeded =
    "A limit above the server's maximum (`limit-exceeded`, with `limit`, `requested` and `maximum`), more "
    "input files than allowed, or, in a session, a limit fixed when the session was created asked with "
    "another value (`limit-fixed`, with `limit`, `requested` and `session_value`).";

json Described(std::string_view description) { return {{"description", description}}; }

json JsonResponse(std::string_view description, json schema) {
  return {{"description", description}, {"content", {{"application/json", {{"schema", std::move(schema)}}}}}};
}

json ProblemResponse(std::string_view description) {
  return {{"description", description},
          {"content", {{"application/problem+json", {{"schema", Schema("Problem")}}}}}};
}

json RunResponse(std::string_view description) {
  json stream = String("Server-Sent Events: `stdout`, `stderr`, then `result` or `error`.");
  return {
      {"description", description},
      {"content",
       {{"application/json", {{"schema", Schema("Result")}}}, {"text/event-stream", {{"schema", stream}}}}}};
}

json NoWheelhouse() {
  return ProblemResponse("`no-wheelhouse`: the request names `packages` and this server has no wheelhouse.");
}

// These statuses' shared responses (components.responses), then `own`: what only this route says.
json Responses(std::initializer_list<int> shared, json own = json::object()) {
  for (int status : shared) {
    const char* name = status == 400   ? "BadRequest"
                       : status == 401 ? "Unauthorized"
                       : status == 404 ? "NotFound"
                       : status == 413 ? "ContentTooLarge"
                       : status == 422 ? "LimitExceeded"
                       : status == 429 ? "TooManyRequests"
                                       : "Unavailable";
    own[std::to_string(status)] = {{"$ref", "#/components/responses/" + std::string(name)}};
  }
  return own;
}

json Operation(const char* id, const char* tag, std::string_view summary, json responses,
               std::string_view description = {}) {
  json op = {{"operationId", id}, {"tags", {tag}}, {"summary", summary}, {"responses", std::move(responses)}};
  if (!description.empty()) op["description"] = description;
  return op;
}

json JsonBody(json schema, bool required = true) {
  return {{"required", required}, {"content", {{"application/json", {{"schema", std::move(schema)}}}}}};
}

json Binary() { return {{"type", "string"}, {"format", "binary"}}; }

json InPath(const char* name) { return {{"$ref", "#/components/parameters/" + std::string(name)}}; }

json Header(std::string_view description, json schema = String()) {
  json h = {{"schema", std::move(schema)}};
  if (!description.empty()) h["description"] = description;
  return h;
}

json RetryAfter() { return {{"Retry-After", Header("Seconds to wait before retrying.", Count())}}; }

json ExecutionPaths(json session_body) {
  json execute = Operation(
      "execute", "execution", "Run Python in a fresh sandbox",
      Responses({400, 401, 404, 413, 422, 429, 503},
                {{"200", RunResponse("The code ran (whatever its status).")}, {"409", NoWheelhouse()}}),
      "Runs the code in a fresh, isolated sandbox (or in a session, with `session_id`) and returns the whole "
      "result. " +
          std::string(kStreaming));
  execute["requestBody"] = JsonBody(Schema("ExecuteRequest"));
  json check =
      Operation("check", "execution", "Syntax check and policy lint, without running the code",
                Responses({400, 401, 413, 429, 503},
                          {{"200", JsonResponse("The outcome of the check.", Schema("CheckResult"))}}),
                "Compiles the code and applies the lint profile inside the sandbox, as `execbox check` does; "
                "nothing is executed.");
  check["requestBody"] = JsonBody(Schema("CheckRequest"));
  json packages = Operation(
      "listPackages", "execution", "What the sandbox's Python has installed",
      Responses(
          {401},
          {{"200", JsonResponse("The installed packages.", Schema("Packages"))},
           {"500", ProblemResponse("The listing failed in the sandbox (the detail gives an incident id).")}}),
      "Each installed distribution with its version and the modules it provides, as the sandbox's own "
      "interpreter reports them (importlib.metadata over its dist-packages), listed once per server. A "
      "module the sandbox lacks is said so in the traceback of its ModuleNotFoundError, with what is "
      "installed instead.");

  json created = {
      {"allOf", {Schema("SessionInfo")}},
      {"properties",
       {{"installed", ArrayOf(Schema("InstalledPackage"), "With `packages`: what was installed.")}}}};
  json create = Operation(
      "createSession", "sessions", "Create a session",
      Responses(
          {400, 401, 429, 503},
          {{"201", JsonResponse("The new session.", created)},
           {"409", NoWheelhouse()},
           {"422", ProblemResponse(std::string(kLimitExceeded) +
                                   " Or `package-install-failed`: the session's `packages` could not be "
                                   "installed (the detail says why); the session is closed again.")}}),
      "A session keeps Python globals, imports and its work dir between executions, like a notebook kernel. "
      "It belongs to the key that created it (to any other key it does not exist, on every transport, MCP "
      "included) and is closed after its idle time. `limits` become the defaults of its executions; "
      "`disk_mb` is fixed for its life. Creating one takes an admission slot and the key's rate like an "
      "execution.");
  create["requestBody"] = JsonBody(std::move(session_body), false);
  create["requestBody"]["description"] =
      R"(Empty, `{}`, or `{"limits": {...}, "checkpoint": true, "packages": ["tqdm"]}`.)";
  json list =
      Operation("listSessions", "sessions", "List sessions",
                Responses({401}, {{"200", JsonResponse("Every open session.", Schema("SessionList"))}}));

  json in_session =
      Operation("executeInSession", "sessions", "Run Python in a session",
                Responses({400, 401, 404, 413, 422, 429, 503},
                          {{"200", RunResponse("The code ran (whatever its status); `session` is set.")},
                           {"409", NoWheelhouse()}}),
                "Runs the code against the session's state; executions of one session run one at a time, in "
                "order. The result's `session` says whether the state survived. " +
                    std::string(kStreaming));
  in_session["requestBody"] = JsonBody(Schema("SessionExecuteRequest"));
  return {{"/v1/execute", {{"post", execute}}},
          {"/v1/check", {{"post", check}}},
          {"/v1/packages", {{"get", packages}}},
          {"/v1/sessions", {{"post", create}, {"get", list}}},
          {"/v1/sessions/{id}/execute", {{"parameters", {InPath("SessionId")}}, {"post", in_session}}}};
}

json SessionPaths() {
  json id = {InPath("SessionId")};
  json get = Operation("getSession", "sessions", "Describe a session",
                       Responses({401, 404}, {{"200", JsonResponse("The session.", Schema("SessionInfo"))}}));
  json close = Operation("deleteSession", "sessions", "Close a session and free its resources",
                         Responses({401, 404}, {{"204", Described("Closed.")}}));
  json fork = Operation(
      "forkSession", "sessions", "Copy a session into a new one",
      Responses(
          {401, 404, 429, 503},
          {{"201", JsonResponse("The copy.", Schema("ForkedSession"))},
           {"409", ProblemResponse(
                       "`state-not-copied`: the snapshot could not be made or restored (it does not fit in "
                       "the work dir, the session's process has ended, ...); the detail says why.")}}),
      "A new session of the same key, limits and checkpointing, holding a copy of this one's state: its "
      "globals (values, functions, classes and lambdas from earlier cells, imported modules), serialized "
      "with cloudpickle inside this session's sandbox, and its work dir's files, restored in a fresh child "
      "with its own namespaces, cgroup and work dir. The two are independent from then on. What cannot be "
      "copied (open files, sockets, generators, threads) is listed in `not_copied`. The server never "
      "unpickles: the snapshot is only read inside the new session's sandbox.");
  json import = Operation(
      "importSession", "sessions", "A new session from an exported snapshot",
      Responses(
          {400, 401, 429, 503},
          {{"201",
            JsonResponse("The new session, and what its snapshot could not hold.", Schema("UndoneSession"))},
           {"409", ProblemResponse(
                       "`state-not-copied`: the snapshot does not fit in the new session's work dir, ...")},
           {"422", ProblemResponse("`network-not-allowed`: the exported session's network policy is beyond "
                                   "what the key or the server allows now (the entry is named).")}}),
      "The body is a snapshot from `GET /v1/sessions/{id}/snapshot` of this server, or of one that shares "
      "its snapshot key (the state dir's `snapshot.key`), made from a session of the same key. It is checked "
      "(sealed with HMAC-SHA-256) before any of it is used, and only ever restored inside the new session's "
      "sandbox. The new session has the exported session's limits (within this server's maxima), "
      "checkpointing and network policy (bounded again as a new session's).");
  import["requestBody"] = {{"required", true},
                           { "content",
                             {
                               { "application/octet-stream",
                                 {
                                   { "schema",
                                     Binary() }
                                 } }
                             } }};
  json sealed = {{"description", "The sealed snapshot."},
                 {"headers", {{"Execbox-Not-Copied", Header({})}}},
                 {"content", {{"application/octet-stream", {{"schema", Binary()}}}}}};
  json snapshot =
      Operation("exportSession", "sessions", "The session's state, sealed, to import elsewhere",
                Responses({401, 404, 429, 503},
                          {{"200", sealed},
                           {"409", ProblemResponse("`state-not-copied`: the snapshot does not fit in the "
                                                   "work dir, or the session's process has ended.")}}),
                "A snapshot of the session's state now (globals and work dir, as for a fork), sealed by this "
                "server: opaque bytes for `POST /v1/sessions/import` on this server or one sharing its "
                "snapshot key, by the same key. The `Execbox-Not-Copied` header lists (as ASCII JSON, "
                "`[{name, type}]`) what it could not hold.");
  json undo = Operation(
      "undoSession", "sessions", "Put back the state from before the last execution",
      Responses({401, 404, 429, 503},
                {{"200", JsonResponse("The session, as it is now.", Schema("UndoneSession"))},
                 {"409", ProblemResponse("`nothing-to-undo` (the session was created without checkpoint, has "
                                         "had no execution since it was created or last undone, or its last "
                                         "checkpoint failed, said in the detail) or `state-not-copied`.")}}),
      "For a session created with `checkpoint: true`: its globals and work dir return to what they were "
      "before its last execution (in a fresh child), once per checkpoint. `not_restored` lists what the "
      "checkpoint could not hold.");
  json paused = {{"allOf",
                  {Schema("SessionInfo"),
                   Object({"changed"}, {{"changed", Boolean("Whether this call paused (or resumed) it: false "
                                                            "when it was paused (running) already.")}})}}};
  json pause = Operation(
      "pauseSession", "sessions", "Keep a session's state and end its process",
      Responses(
          {401, 404, 429, 503},
          {{"200", JsonResponse("The session, paused.", paused)},
           {"409", ProblemResponse("`state-not-copied`: the snapshot could not be made (it does not fit "
                                   "in the work dir, or the session's process has ended).")}}),
      "A snapshot of the session's state (globals and work dir, as for a fork; what it cannot hold is "
      "lost) is kept by the server, and written to the state dir when sessions are durable; the session's "
      "process and its processes end, freeing their memory. A paused session is not closed when idle or "
      "at its expiry; the clock of its expiry stops while it is paused. Its next use (an execution, a file, "
      "a process, `/resume`) restores it in a fresh sandbox, and that execution's `session` says so. The "
      "state it keeps counts against the key's `max_session_state_mb`.");
  json resume =
      Operation("resumeSession", "sessions", "Restore a paused session now",
                Responses({401, 404, 429, 503}, {{"200", JsonResponse("The session, running.", paused)}}),
                "What its next use would do anyway. A restore that fails leaves the session "
                "running with a fresh state, which its next execution says.");
  json bytes = {{"application/octet-stream", json::object()}};
  json put = Operation("putSessionFile", "sessions", "Write a file into the session's work dir",
                       Responses({400, 401, 404, 413, 429, 503}, {{"204", Described("Written.")}}),
                       "Creates or replaces the file (and its parent directories).");
  put["requestBody"] = {{"required", true}, {"content", bytes}};
  json read = Operation("getSessionFile", "sessions", "Read a file from the session's work dir",
                        Responses({400, 401, 404, 429, 503},
                                  {{"200", {{"description", "The file's bytes."}, {"content", bytes}}}}));
  return {{"/v1/sessions/{id}", {{"parameters", id}, {"get", get}, {"delete", close}}},
          {"/v1/sessions/{id}/fork", {{"parameters", id}, {"post", fork}}},
          {"/v1/sessions/import", {{"post", import}}},
          {"/v1/sessions/{id}/snapshot", {{"parameters", id}, {"get", snapshot}}},
          {"/v1/sessions/{id}/undo", {{"parameters", id}, {"post", undo}}},
          {"/v1/sessions/{id}/pause", {{"parameters", id}, {"post", pause}}},
          {"/v1/sessions/{id}/resume", {{"parameters", id}, {"post", resume}}},
          {"/v1/sessions/{id}/files/{path}",
           {{"parameters", {InPath("SessionId"), InPath("FilePath")}}, {"put", put}, {"get", read}}}};
}

// MCP's Streamable HTTP transport (api/mcp/mcp_http.h): some of its answers are JSON-RPC, some problems.
json McpPath() {
  json any_object = {{"schema", {{"type", "object"}}}};
  auto json_or_problem = [&](std::string_view description) {
    return json{
        {"description", description},
        {"content",
         {{"application/json", any_object}, {"application/problem+json", {{"schema", Schema("Problem")}}}}}};
  };
  json post = Operation(
      "mcpPost", "mcp", "MCP Streamable HTTP: send one JSON-RPC message",
      Responses(
          {401, 413, 429},
          {{"200",
            {{"description", "The JSON-RPC response, or an SSE stream ending with it."},
             {"content", {{"application/json", any_object}, {"text/event-stream", {{"schema", String()}}}}}}},
           {"202", Described("Accepted (a notification or a response).")},
           {"400", json_or_problem("Not a JSON-RPC message, or no `Mcp-Session-Id` after initialization.")},
           {"403", ProblemResponse("The `Origin` is not allowed (a browser page from elsewhere).")},
           {"404", json_or_problem("Unknown or closed MCP session: initialize again.")}}),
      "The Model Context Protocol (revisions 2025-11-25, 2025-06-18 and 2025-03-26) with the "
      "`execute_python`, `check_python`, `create_session`, `fork_session`, `pause_session`, `resume_session` "
      "and "
      "`close_session` tools and, for a session's "
      "processes, `start_process`, `list_processes`, `read_process_output`, `send_process_input` and "
      "`signal_process`, whose calls pass the same gate as `/v1` "
      "(the key's rate and concurrency, admission, this server's limits, session ownership, the audit log). "
      "A request is answered with `application/json` or with an SSE stream (its progress notifications, then "
      "its response), as the client's `Accept` allows; a notification or a response gets 202. Browsers' "
      "`Origin` must be allowed by the server.");
  post["requestBody"] = JsonBody({{"type", "object"}, {"description", "A JSON-RPC 2.0 message."}});
  json end = Operation("mcpDelete", "mcp", "MCP Streamable HTTP: end the MCP session",
                       Responses({401}, {{"204", Described("Ended.")},
                                         {"400", ProblemResponse("No `Mcp-Session-Id`.")},
                                         {"404", ProblemResponse("Unknown or closed MCP session.")}}));
  json stream = Operation("mcpGet", "mcp", "MCP Streamable HTTP: server-to-client stream (not offered)",
                          Responses({401}, {{"405",
                                             {{"description", "Method not allowed."},
                                              {"headers", {{"Allow", Header("`POST, DELETE`")}}}}}}),
                          "This server sends nothing unprompted, so it offers no standalone stream.");
  auto header = [](const char* name, std::string_view description) {
    return json{{"name", name},
                {"in", "header"},
                {"required", false},
                {"schema", String()},
                {"description", description}};
  };
  json parameters = {
      header("Mcp-Session-Id",
             "The MCP session id the server issued in its reply to `initialize`; required on every later "
             "request."),
      header("MCP-Protocol-Version", "The negotiated MCP protocol revision, e.g. `2025-11-25`.")};
  return {{"parameters", parameters}, {"post", post}, {"delete", end}, {"get", stream}};
}

json ServicePaths() {
  json document =
      Operation("getOpenApi", "operations", "This document",
                Responses({401}, {{"200", JsonResponse("The OpenAPI 3.1 document.", {{"type", "object"}})}}));
  json livez = Operation("livez", "operations", "Liveness: the process serves requests",
                         {{"200", JsonResponse("Alive.", Schema("Livez"))}});
  json readyz =
      Operation("readyz", "operations", "Readiness: the server can run code now",
                {{"200", JsonResponse("Ready.", Schema("Readyz"))},
                 {"503", ProblemResponse("Not ready (starting, shutting down, or no worker available).")}});
  // The probes answer without a key: orchestrators call them.
  livez["security"] = readyz["security"] = json::array();
  json metrics =
      Operation("metrics", "operations", "Prometheus metrics",
                Responses({401}, {{"200",
                                   {{"description", "Prometheus text exposition format 0.0.4."},
                                    {"content", {{"text/plain; version=0.0.4", {{"schema", String()}}}}}}}}));
  return {{"/v1/openapi.json", {{"get", document}}},
          {"/livez", {{"get", livez}}},
          {"/readyz", {{"get", readyz}}},
          {"/metrics", {{"get", metrics}}},
          {"/mcp", McpPath()}};
}

}  // namespace

json Paths(json session_body) {
  json paths = ExecutionPaths(std::move(session_body));
  paths.update(SessionPaths());
  paths.update(ProcessPaths());
  paths.update(ServicePaths());
  return paths;
}

json ResponseComponents() {
  json unauthorized = ProblemResponse(
      "No `Authorization: Bearer <token>` header, a malformed one, or a token that matches no API key (RFC "
      "6750 3.1).");
  unauthorized["headers"] = {
      {"WWW-Authenticate",
       Header(R"(`Bearer realm="execbox"` when no credentials were sent; with `error="invalid_token"` (and )"
              "`error_description`) when they were malformed or unknown.")}};
  json too_many = ProblemResponse(
      "Over this key's rate or concurrency, or the server's queue is full. Retry after `Retry-After` "
      "seconds.");
  too_many["headers"] = RetryAfter();
  json unavailable = ProblemResponse("The server is shutting down, or cannot run code now.");
  unavailable["headers"] = RetryAfter();
  return {{"BadRequest",
           ProblemResponse(
               "The request is malformed: bad JSON, invalid UTF-8, too deep, wrong types, unknown or missing "
               "fields, bad file names or base64, zero or negative limits, an unknown policy.")},
          {"Unauthorized", unauthorized},
          {"NotFound",
           ProblemResponse("No such session (never created, deleted or closed after its idle time).")},
          {"ContentTooLarge", ProblemResponse("The body is larger than the server accepts, holds too many "
                                              "JSON values, or its input files do not fit in the work dir.")},
          {"LimitExceeded", ProblemResponse(kLimitExceeded)},
          {"TooManyRequests", too_many},
          {"Unavailable", unavailable}};
}

json ParameterComponents() {
  json path = {{"type", "string"}, {"minLength", 1}};
  return {
      {"SessionId",
       {{"name", "id"},
        {"in", "path"},
        {"required", true},
        {"schema", String()},
        {"description", "A session id from `POST /v1/sessions`."}}},
      {"ProcessId",
       {{"name", "pid"},
        {"in", "path"},
        {"required", true},
        {"schema", {{"type", "integer"}, {"minimum", 1}}},
        {"description", "A process's pid in its session, from `POST /v1/sessions/{id}/processes`."}}},
      {"FilePath",
       {{"name", "path"},
        {"in", "path"},
        {"required", true},
        {"schema", path},
        {"description",
         "A path relative to the session's work dir. It may span several segments (`/files/data/in.csv`); "
         "percent-encoding is decoded. The same rules as `InputFile.name` (400 `invalid-path`)."}}}};
}

}  // namespace execbox::api::openapi
