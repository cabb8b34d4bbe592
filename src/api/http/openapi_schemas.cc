// The OpenAPI schemas of the sessions' answers and of the service's own (problems, probes,
// packages).
#include "api/http/openapi_parts.h"
#include "api/schema/network_schema.h"

namespace execbox::api::openapi {
namespace {

// A session id as the server makes it (engine/sessions.h), with the instance's name if it has one.
json SessionId() {
  json id = String(
      "`s_` and 32 hex digits; on a server with an instance name (`instance`, `--instance`, "
      "`EXECBOX_INSTANCE`), `.` and that name, so a router can send the session's calls to the instance that "
      "holds it.");
  id["pattern"] = R"(^s_[0-9a-f]{32}(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)?$)";
  return id;
}

json SessionState() {
  json state = Object(
      {"id", "generation", "state"},
      {{"id", SessionId()},
       {"generation", Count()},
       {"state", {{"type", "string"}, {"enum", {"preserved", "lost", "restored"}}}},
       {"reason",
        String(
            "Why the state was lost: `timeout`, `memory_limit`, `output_limit`, `crash`, `internal_error`, "
            "`server_restarted`, `restore_failed`, ...; or, when `restored`, what was restored.")},
       {"files_kept",
        Boolean("When `lost`: only the Python kernel restarted; the session's files (its home and writable "
                "root) and its background processes are as they were.")},
       {"not_restored", ArrayOf(Schema("LeftOut"), "When `restored`: what the snapshot could not hold.")}},
      true);
  state["description"] =
      "In a session's reply: whether the session's Python state survived. `lost` (with the reason) means "
      "variables and imports are gone and the session restarted at `generation` + 1: empty, or, with "
      "`files_kept`, with a new Python kernel in the same sandbox (files and processes kept); the next reply "
      "says `lost` once more. `restored` (the first reply after the server restarted, with a state dir): the "
      "state was restored from the session's saved snapshot; `reason` says which state (after the last "
      "execution, or an earlier checkpoint: then what the later executions changed is lost) and "
      "`not_restored` what did not come back.";
  // reason is there exactly when the state is not preserved.
  state["if"] = {{"properties", {{"state", {{"enum", {"lost", "restored"}}}}}}};
  state["then"] = {{"required", {"reason"}}};
  state["else"] = {{"not", {{"required", {"reason"}}}}};
  return state;
}

json SessionInfo() {
  json time = {{"type", "string"}, {"format", "date-time"}};
  json memory = Object({"private_bytes", "pss_bytes"}, {{"private_bytes", Count()}, {"pss_bytes", Count()}});
  memory["description"] = "Of the session's Python process; 0 when the server cannot read it.";
  return Object(
      {"id", "generation", "executions", "state", "created", "last_used", "memory"},
      {{"id", SessionId()},
       {"generation", Count("+1 every time the session restarted from a fresh state.")},
       {"executions", Count()},
       {"state", {{"type", "string"}, {"enum", {"preserved", "lost"}}}},
       {"reason", String("Why the state was lost (when `state` is `lost`).")},
       {"created", time},
       {"last_used", time},
       {"checkpoint", Boolean("Created with `checkpoint`: a snapshot is kept from before each execution.")},
       {"can_undo", Boolean("With `checkpoint`: whether a snapshot is held now for `/undo`.")},
       {"paused",
        Boolean("Paused (`/pause`): its state is held by the server and no process runs; its next use "
                "restores it.")},
       {"network",
        {{"allOf", {Schema("NetworkPolicy")}},
         {"description",
          "The session's network policy as granted (its deny entries include the server's and the "
          "key's); absent: the session has no network."}}},
       {"memory", memory}});
}

// SessionInfo with a list of what a copy of its state left out, under `name`.
json SessionInfoWith(const char* name) {
  return {{"allOf", {Schema("SessionInfo"), Object({name}, {{name, ArrayOf(Schema("LeftOut"))}})}}};
}

json Problem() {
  json problem = Object({"type", "title", "status", "detail"},
                        {{"type", String("`urn:execbox:problem:<slug>`; the slug names the kind of error.")},
                         {"title", String("The same for every problem of one type.")},
                         {"status", {{"type", "integer"}, {"minimum", 400}, {"maximum", 599}}},
                         {"detail", String("This occurrence, naming the field, value or limit.")},
                         {"instance", String()}});
  problem["properties"]["type"]["pattern"] = "^urn:execbox:problem:";
  problem["additionalProperties"] = true;
  problem["description"] =
      "RFC 9457 problem details. Problem types (`type` is `urn:execbox:problem:<slug>`) returned while "
      "reading a request body:\n`malformed-json`, `invalid-utf8`, `too-deep` (nesting deeper than 64), "
      "`duplicate-key`,\n`invalid-body` (not a JSON object), `too-many-values` (413), `unknown-field`, "
      "`missing-field`,\n`wrong-type`, `invalid-value`, `unknown-policy`, `invalid-path`, "
      "`duplicate-file`,\n`invalid-base64`, `inputs-too-large` (413) and `limit-exceeded` (422). Extension "
      "members: `field`\n(the offending field, e.g. `limits.memory_mb` or `files[2].name`), `expected` "
      "(for\n`wrong-type`), `known` (for `unknown-policy`), and `limit`, `requested`, `maximum` "
      "(for\n`limit-exceeded`). Over one of its key's caps a request gets 429 `key-concurrency`, "
      "`key-queue`,\n`key-sessions`, `key-processes` or `key-session-state`, with `cap` (its name in "
      "`[[keys]]`, e.g.\n`max_sessions`), `key`, `limit` and `in_use`.";
  return problem;
}

json Packages() {
  json wheel =
      Object({"name", "version"},
             {{"name", String("As its wheel's file name says, normalized: lower case, `-` between words.")},
              {"version", String()}});
  return Object(
      {"python", "packages"},
      {{"python", String("The sandbox interpreter's version, e.g. 3.11.2.")},
       {"packages", ArrayOf(Schema("InstalledPackage"))},
       {"wheelhouse", ArrayOf(wheel,
                              "Only on a server with a wheelhouse: the wheels in it (read at each call), "
                              "what a request's `packages` or `pip install` in the sandbox can install.")}});
}

// The Result's `guard` (engine::GuardRecord).
json Guard() {
  json event =
      Object({"event", "detail"},
             {{"event", String("The audit event: `open`, `subprocess.Popen`, `socket.__new__`, ...")},
              {"detail", String("What it was and what the guard's policy forbids.")}},
             true);
  json guard =
      Object({"mode", "refused", "omitted"},
             {{"mode", {{"const", "audit"}}},
              {"refused", ArrayOf(event, "Each event the guard refused, once, in order; at most 64.")},
              {"omitted", Count("Refusals past the list's bound.")}},
             true);
  guard["description"] =
      "Present when the guard (audit hooks in the interpreter, docs/security.md \"The guard\") was in the "
      "interpreter that ran the code: what it refused, as the sandbox's agent listed it.";
  return guard;
}

}  // namespace

json SessionSchemas() {
  json left_out = Object({"name", "type", "reason"},
                         {{"name", String()},
                          {"type", String("The value's type, e.g. `generator`, `_io.TextIOWrapper`.")},
                          {"reason", String()}});
  left_out["description"] =
      "A global (or a work-dir entry) that a snapshot could not hold or a restore could not bring back.";
  return {{"SessionState", SessionState()},
          {"SessionInfo", SessionInfo()},
          {"LeftOut", left_out},
          {"ForkedSession", SessionInfoWith("not_copied")},
          {"UndoneSession", SessionInfoWith("not_restored")},
          {"SessionList", Object({"sessions"}, {{"sessions", ArrayOf(Schema("SessionInfo"))}})}};
}

json ServiceSchemas() {
  return {
      {"Problem", Problem()},
      {"Livez", Object({"status"}, {{"status", {{"const", "ok"}}}})},
      {"Readyz",
       Object({"status", "warm_workers"}, {{"status", {{"const", "ready"}}}, {"warm_workers", Count()}})},
      {"Packages", Packages()},
      {"Network", NetworkRecordSchema(Schema("NetworkConnection"))},
      {"NetworkConnection", NetworkConnectionSchema()},
      {"Guard", Guard()},
      {"InstalledPackage", Object({"name", "version", "modules"},
                                  {{"name", String("The distribution's name, e.g. scikit-learn.")},
                                   {"version", String()},
                                   {"modules", ArrayOf(String(), "What `import` takes, e.g. sklearn.")}})}};
}

}  // namespace execbox::api::openapi
