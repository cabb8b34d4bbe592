// The OpenAPI schemas of what an execution returns: the Result (engine/result_json.h) and the
// pieces it is made of, and a check's outcome.
#include "api/http/openapi.h"
#include "api/http/openapi_parts.h"
#include "engine/result.h"

namespace execbox::api::openapi {
namespace {

// Every status the engine reports, by its name on the wire.
json Statuses() {
  json names = json::array();
  for (int s = 0; s <= static_cast<int>(engine::Status::kInternalError); ++s) {
    names.push_back(engine::StatusName(static_cast<engine::Status>(s)));
  }
  return names;
}

json Isolation() {
  json namespaces = json::object();
  for (const char* ns : {"user", "pid", "mount", "net", "ipc", "uts", "cgroup"}) namespaces[ns] = Boolean();
  json restricts = {{"type", "string"}, {"enum", {"filesystem", "tcp", "signals", "abstract_unix_sockets"}}};
  json isolation = Object(
      {"namespaces", "seccomp", "no_new_privs", "capabilities_dropped", "landlock_abi", "landlock_restricts",
       "cgroup", "hostname", "proc"},
      {{"namespaces", Object({"user", "pid", "mount", "net", "ipc", "uts", "cgroup"}, namespaces, true)},
       {"seccomp", Boolean()},
       {"no_new_privs", Boolean()},
       {"capabilities_dropped", Boolean()},
       {"landlock_abi", Count("0 when Landlock was not applied.")},
       {"landlock_restricts",
        ArrayOf(restricts,
                "What Landlock restricts at that ABI: `filesystem` (1+), `tcp` bind and connect (4+), "
                "`signals` and `abstract_unix_sockets` scoped to the sandbox (6+). What it does not "
                "restrict, the namespaces and seccomp still do (no route out of the net namespace and only "
                "AF_UNIX sockets; no outside process visible to kill()).")},
       {"cgroup", String("`cgroup-v2`, `cgroup-v1` or `none`.")},
       {"hostname",
        Boolean("The sandbox's hostname is `sandbox`. false where a container's seccomp profile refuses "
                "sethostname: the UTS namespace is still private, only the name stays the container's.")},
       {"proc", Boolean("/proc is a fresh procfs showing only the sandbox's own processes. false where a "
                        "container masks parts of its /proc (the kernel then refuses a fresh procfs in a "
                        "user namespace): /proc is empty, so the code sees less, never more.")}},
      true);
  isolation["description"] = "The isolation layers really in force for this execution.";
  return isolation;
}

json Result() {
  json status = {{"type", "string"}, {"enum", Statuses()}};
  status["description"] =
      "`ok`: ran to the end; `error`: an uncaught exception or a non-zero exit; `syntax_error`; "
      "`policy_violation`: refused by the lint profile, nothing ran; `timeout`: wall or CPU time; "
      "`memory_limit`: killed by the memory limit (read from the cgroup's counters); `output_limit`; "
      "`killed`: by another signal; `internal_error`: the sandbox itself failed.";
  json result = Object(
      {"status",
       "exit_code",
       "signal",
       "stdout",
       "stderr",
       "stdout_truncated",
       "stderr_truncated",
       "stdout_bytes",
       "stderr_bytes",
       "streams",
       "streams_truncated",
       "result",
       "display",
       "error",
       "findings",
       "usage",
       "files",
       "skipped_files",
       "limits",
       "isolation"},
      {{"status", status},
       {"exit_code",
        {{"type", "integer"},
         {"description", "The process's exit status (meaningful when `signal` is null)."}}},
       {"signal",
        {{"type", {"integer", "null"}},
         {"minimum", 1},
         {"description", "The signal that ended the code, if any."}}},
       {"signal_name", String("E.g. `SIGKILL`; present exactly when `signal` is not null.")},
       {"stdout", String("Head and tail of standard output, joined by a marker when bytes were dropped; "
                         "invalid UTF-8 replaced.")},
       {"stderr", String("As `stdout`, for standard error.")},
       {"stdout_truncated", Boolean()},
       {"stderr_truncated", Boolean()},
       {"stdout_bytes", Count("Bytes the code wrote to stdout in all.")},
       {"stderr_bytes", Count("Bytes the code wrote to stderr in all.")},
       {"streams", ArrayOf(Schema("StreamEvent"), "Python-level writes in order, both streams interleaved.")},
       {"streams_truncated", Boolean()},
       {"result", OrNull(Schema("MimeBundle"))},
       {"display", ArrayOf(Schema("MimeBundle"), "display() calls and matplotlib figures, in order.")},
       {"error", OrNull(Schema("ErrorInfo"))},
       {"findings", ArrayOf(Schema("Finding"), "Policy-lint findings.")},
       {"session", Schema("SessionState")},
       {"usage", Schema("Usage")},
       {"files", ArrayOf(Schema("OutputFile"), "Files the code left in its work dir.")},
       {"skipped_files", ArrayOf(String(), "Files not returned, each with the reason.")},
       {"limits", OpenApiResultLimitsSchema()},
       {"isolation", Isolation()},
       {"network", Schema("Network")},
       {"guard", Schema("Guard")},
       {"installed",
        ArrayOf(Schema("InstalledPackage"),
                "Present when the request's `packages` installed something: each distribution installed from "
                "the wheelhouse (dependencies included), all of them imported before the code ran. Absent "
                "when nothing was asked for or everything was there already.")}},
      true);
  result["properties"]["result"]["description"] = "The value of the last expression, or null.";
  result["properties"]["error"]["description"] =
      "The uncaught exception (also set for syntax errors and limits), or null.";
  result["description"] =
      "What happened, in one shape for every front end (names follow Jupyter's messaging where one exists).";
  // signal_name is there exactly when signal is.
  result["if"] = {{"properties", {{"signal", {{"type", "integer"}}}}}};
  result["then"] = {{"required", {"signal_name"}}};
  result["else"] = {{"not", {{"required", {"signal_name"}}}}};
  return result;
}

json CheckResult() {
  json check =
      Object({"status", "error", "findings"}, {{"status", {{"type", "string"}, {"enum", Statuses()}}},
                                               {"error", OrNull(Schema("ErrorInfo"))},
                                               {"findings", ArrayOf(Schema("Finding"))}});
  check["description"] =
      "The outcome of a check: `ok`, `syntax_error` (with `error`: where and why) or `policy_violation` "
      "(with the refusing `findings`); another status only when the check itself could not finish (e.g. "
      "`timeout`, `internal_error`). Other members of `Result` may be present.";
  return check;
}

json MimeBundle() {
  json data = Object({"text/plain"}, {{"text/plain", String()}});
  data["patternProperties"] = {{"json$", true}};
  data["additionalProperties"] = String();
  json bundle = Object({"data", "metadata"}, {{"data", data}, {"metadata", {{"type", "object"}}}}, true);
  bundle["description"] =
      "A Jupyter MIME bundle. `data` maps a MIME type to its representation: a string (base64 for binary "
      "types such as `image/png`), or any JSON value for a type ending in `json`; `text/plain` is always "
      "present. `metadata` holds e.g. an image's `width` and `height`.";
  return bundle;
}

// The data of an SSE event of output (api/http/http_execute.cc).
json StreamChunk() {
  json chunk = Object({"text"}, {{"text", String()}});
  chunk["description"] = "The data of an SSE `stdout` or `stderr` event.";
  return chunk;
}

}  // namespace

json ResultSchemas() {
  return {
      {"Result", Result()},
      {"CheckResult", CheckResult()},
      {"MimeBundle", MimeBundle()},
      {"StreamEvent",
       Object({"name", "text"},
              {{"name", {{"type", "string"}, {"enum", {"stdout", "stderr"}}}}, {"text", String()}}, true)},
      {"ErrorInfo",
       Object({"ename", "evalue", "traceback"},
              {{"ename", String("The exception's class, e.g. `ZeroDivisionError`, or `TimeoutError` / "
                                "`MemoryError` for a limit.")},
               {"evalue", String()},
               {"traceback", ArrayOf(String(), "Lines pointing at the user's code.")},
               {"line", {{"type", "integer"}, {"description", "For syntax errors: the 1-based line."}}},
               {"column", {{"type", "integer"}, {"description", "For syntax errors: the 1-based column."}}},
               {"text", String("For syntax errors: the offending source line.")}},
              true)},
      {"Finding",
       Object({"rule", "severity", "line", "column", "message", "suggestion"},
              {{"rule", String()},
               {"severity", String("`error` (refused) or `warning`.")},
               {"line", {{"type", "integer"}}},
               {"column", {{"type", "integer"}}},
               {"message", String()},
               {"suggestion", String("Empty when there is none.")},
               {"tool", String("A finding of the seed's linters (`analyzers`, `lint.block`): `pyflakes`, "
                               "`flake8` or `bandit`. Absent for the policy lint's own findings.")},
               {"code", String("With `tool`: the linter's code (`F821`, `E501`, `B602`), as `rule`; "
                               "`unavailable` when the linter could not run (the message says why).")}},
              true)},
      {"Usage", Object({"engine", "setup_ms", "wall_ms", "cpu_ms", "peak_memory_bytes"},
                       {{"engine",
                         {{"type", "string"},
                          {"enum", {"cold", "warm", "session"}},
                          {"description",
                           "`cold`: a fresh jail; `warm`: a pre-forked child of a warm worker; `session`: a "
                           "session's process."}}},
                        {"setup_ms", Count("Building the sandbox, before the code started.")},
                        {"wall_ms", Count()},
                        {"cpu_ms", Count()},
                        {"peak_memory_bytes", Count()}},
                       true)},
      {"StreamChunk", StreamChunk()},
      {"OutputFile", Object({"name", "size", "mime_type", "content_base64"},
                            {{"name", String("Relative to the work dir.")},
                             {"size", Count()},
                             {"mime_type", String("Sniffed from the content, not only the name.")},
                             {"content_base64", {{"type", "string"}, {"contentEncoding", "base64"}}}},
                            true)},
  };
}

}  // namespace execbox::api::openapi
