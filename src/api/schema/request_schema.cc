#include "api/schema/request_schema.h"

#include <iterator>

#include "runtime/python_program.h"

namespace execbox::api {
namespace {

constexpr unsigned kExecutions = kExecuteBody | kSessionExecuteBody;

// A JSON type's name in a schema and in a refusal ("'code' must be a string").
struct TypeNames {
  std::string_view json;
  std::string_view expected;
};
constexpr TypeNames kTypeNames[] = {{"", "any value"},        {"string", "a string"},
                                    {"boolean", "a boolean"}, {"array", "an array"},
                                    {"object", "an object"},  {"integer", "an integer"}};
static_assert(std::size(kTypeNames) == static_cast<size_t>(JsonType::kInteger) + 1,
              "one per JsonType, in order");

constexpr unsigned kPtySize = kProcessStartBody;

TypeNames NamesOf(JsonType type) { return kTypeNames[static_cast<size_t>(type)]; }

constexpr RequestField kTable[] = {
    {.id = FieldId::kCode,
     .name = "code",
     .in = kExecutions | kCheckBody | kExecutePythonTool | kCheckPythonTool,
     .type = JsonType::kString,
     .required = true,
     .nullable = false,
     .descriptions = {{{kExecutions, "Python 3 source. May be empty; must not contain NUL."},
                       {kCheckBody | kCheckPythonTool, "Python 3 source to check; must not contain NUL."},
                       {kExecutePythonTool, "Python 3 source to run."}}}},
    {.id = FieldId::kStdin,
     .name = "stdin",
     .in = kExecutions,
     .type = JsonType::kString,
     .descriptions = {{{kExecutions, "Given to the code as standard input."}}}},
    {.id = FieldId::kFiles,
     .name = "files",
     .in = kExecutions,
     .type = JsonType::kArray,
     .items = JsonType::kObject,
     .component = "InputFile",
     .descriptions = {{{kExecutions,
                        "Files placed in the work dir (the sandbox's home and working directory, "
                        "`/home/user`, also named `/work`) before the code starts: at most 32 by default (a "
                        "server setting; more is 422), names unique, and all of them together no larger than "
                        "the work dir (`limits.disk_mb`; more is 413)."}}}},
    // In a tool's arguments each limit is an argument of its own (a flat list of numbers is
    // what a model fills in most reliably); in a body they are one object.
    {.id = FieldId::kLimits,
     .name = "limits",
     .in = kExecutions | kSessionBody | kExecutePythonTool | kCreateSessionTool,
     .type = JsonType::kObject,
     .component = "Limits",
     .descriptions =
         {{{kExecutions | kSessionBody,
            "Each limit not named takes the server's default (`default` here is this server's); a value "
            "above `maximum` is refused with 422 `limit-exceeded` (never silently lowered); zero, negative "
            "or below `minimum` is 400 `invalid-value`; null is the same as absent. Whole numbers may be "
            "written as `512.0`. When `timeout_seconds` is raised above the CPU time and `cpu_seconds` is "
            "not named, the CPU time follows it. In a session, `disk_mb` is fixed when the session is "
            "created: another value in an execution is 422 `limit-fixed`."}}}},
    {.id = FieldId::kCheckpoint,
     .name = "checkpoint",
     .in = kSessionBody,
     .type = JsonType::kBoolean,
     .nullable = false,
     .default_json = "false",
     .descriptions =
         {{{kSessionBody,
            "Keep a snapshot of the session's state from before each execution, so that `POST "
            "/v1/sessions/{id}/undo` can put it back. Each execution then costs a snapshot (its globals "
            "through cloudpickle and its work dir), made inside the session's sandbox."}}}},
    {.id = FieldId::kPolicy,
     .name = "policy",
     .in = kExecutions | kCheckBody | kCheckPythonTool,
     .type = JsonType::kString,
     .component = "Policy",
     .default_json = R"("permissive")",
     .descriptions =
         {{{kExecutions | kCheckBody | kCheckPythonTool,
            "The lint profile checked before the code runs: `permissive` refuses nothing; `strict` refuses "
            "e.g. subprocesses and dynamic code (status `policy_violation`)."}}}},
    // What jail::ValidateRelativeName takes of a path in all: a file name is never longer.
    {.id = FieldId::kFilename,
     .name = "filename",
     .in = kExecutions,
     .type = JsonType::kString,
     .min_length = 1,
     .max_length = 1020,
     .pattern = R"(^[^\n\r]*$)",
     .descriptions = {{{kExecutions,
                        "The name tracebacks give the code (default `<cell>`): one line. `execbox run "
                        "script.py` sends `script.py`."}}}},
    {.id = FieldId::kPackages,
     .name = "packages",
     .in = kExecutions | kSessionBody | kExecutePythonTool | kCreateSessionTool,
     .type = JsonType::kArray,
     .items = JsonType::kString,
     .max_items = runtime::kMaxPackages,
     .descriptions =
         {{{kExecutions,
            "Distributions to install from the server's wheelhouse (`[packages] wheelhouse`; never the "
            "network) before the code runs, each a name with an optional version (`tqdm`, `name==1.2`, "
            "`x>=1,<2`) and nothing else (400 `invalid-packages`). pip resolves them against the wheelhouse "
            "alone; each wheel must fit in the work dir (they install into it, under `.execbox-packages`, "
            "which never comes back in `files`) and match its pin when the wheelhouse's requirements.txt "
            "pins `--hash` values; every module they provide must import. A failed install is the result's "
            "`error` (`PackageInstallError`, saying why) and the code does not run. In a session the "
            "packages stay for its later executions (and its forks and snapshots). A one-shot execution's "
            "packages are installed once per list of names and wheelhouse content, as a read-only package "
            "set that later executions with the same `packages` import from at `/opt/execbox/package-sets/` "
            "(docs/packages.md, \"Packages\"). Without a wheelhouse: 409 `no-wheelhouse`."},
           {kSessionBody,
            "Installed from the wheelhouse into the new session before it is answered for, as an execution's "
            "`packages` (under the session's limits). The names are checked before a session is made (400 "
            "`invalid-packages`, 409 `no-wheelhouse`); if the install fails the session is closed again and "
            "the answer is 422 `package-install-failed`, saying why."},
           {kExecutePythonTool,
            "Packages to install from this server's wheelhouse (never the network), e.g. [\"polars\"] or "
            "[\"name==1.2\"]; installed before the code runs; in a session they stay installed. Inside the "
            "sandbox, `pip install NAME` does the same."},
           {kCreateSessionTool,
            "Packages to install from this server's wheelhouse (never the network), e.g. [\"polars\"] or "
            "[\"name==1.2\"]; installed when the session is made (if one fails, no session is made). Inside "
            "the sandbox, `pip install NAME` does the same."}}}},
    {.id = FieldId::kSessionId,
     .name = "session_id",
     .in = kExecuteBody | kExecutePythonTool | kProcessTools,
     .type = JsonType::kString,
     .required_in = kProcessTools,
     .min_length = 1,
     .descriptions =
         {{{kExecuteBody,
            "Run in this session (as `POST /v1/sessions/{id}/execute` does). Not accepted on the session "
            "route, where the id is in the path."},
           {kExecutePythonTool,
            "Run in this session (from create_session) so variables persist; omit for a fresh sandbox."},
           {kProcessTools, "The session (from create_session) whose processes these are."}}}},
    {.id = FieldId::kFileName,
     .name = "name",
     .in = kInputFile,
     .type = JsonType::kString,
     .required = true,
     .nullable = false,
     .min_length = 1,
     .descriptions = {{{kInputFile,
                        "A path relative to the work dir (`data/in.csv`): no leading `/`, no `.` or `..` or "
                        "empty component, no control characters, at most 255 bytes a component and 1020 in "
                        "all. Parent directories are created."}}}},
    {.id = FieldId::kFileContent,
     .name = "content_base64",
     .in = kInputFile,
     .type = JsonType::kString,
     .required = true,
     .nullable = false,
     .content_encoding = "base64",
     .descriptions = {{{kInputFile, "The content, standard base64 with padding, no whitespace."}}}},
    {.id = FieldId::kArgv,
     .name = "argv",
     .in = kProcessStartBody | kStartProcessTool,
     .type = JsonType::kArray,
     .items = JsonType::kString,
     .max_items = 1024,
     .descriptions = {{{kProcessStartBody | kStartProcessTool,
                        "The program and its arguments, run as they are (no shell); the program is looked up "
                        "in `PATH` unless it has a `/`. Give this or `command`."}}}},
    {.id = FieldId::kCommand,
     .name = "command",
     .in = kProcessStartBody | kStartProcessTool,
     .type = JsonType::kString,
     .min_length = 1,
     .descriptions = {{{kProcessStartBody | kStartProcessTool,
                        "A shell command, run as `/bin/bash -l -c COMMAND`. Give this or `argv`."}}}},
    {.id = FieldId::kEnv,
     .name = "env",
     .in = kProcessStartBody | kStartProcessTool,
     .type = JsonType::kObject,
     .descriptions = {{{kProcessStartBody | kStartProcessTool,
                        "Environment variables, `{\"NAME\": \"value\"}`, set over the sandbox's own "
                        "environment (`PATH`, `HOME`, `LANG`, ...)."}}}},
    {.id = FieldId::kCwd,
     .name = "cwd",
     .in = kProcessStartBody | kStartProcessTool,
     .type = JsonType::kString,
     .max_length = 4096,
     .descriptions = {{{kProcessStartBody | kStartProcessTool,
                        "The working directory: absolute, or relative to the work dir (the default)."}}}},
    {.id = FieldId::kPty,
     .name = "pty",
     .in = kProcessStartBody | kStartProcessTool,
     .type = JsonType::kBoolean,
     .nullable = false,
     .default_json = "false",
     .descriptions =
         {{{kProcessStartBody,
            "Run it on a pseudo-terminal of `rows` x `cols` (its controlling terminal, stdin, "
            "stdout and stderr): a shell, an editor, a REPL. Its output is one stream, `pty`."},
           {kStartProcessTool,
            "Run it on a pseudo-terminal of rows x cols (bash, a REPL, anything that wants a terminal): "
            "send_process_input types into it, and what the terminal shows is read as stdout."}}}},
    {.id = FieldId::kRows,
     .name = "rows",
     .in = kPtySize | kStartProcessTool,
     .type = JsonType::kInteger,
     .nullable = false,
     .minimum = 1,
     .maximum = 1000,
     .default_json = "24",
     .descriptions = {{{kProcessStartBody, "With `pty`: the terminal's height."},
                       {kStartProcessTool, "With pty: the terminal's height."}}}},
    {.id = FieldId::kCols,
     .name = "cols",
     .in = kPtySize | kStartProcessTool,
     .type = JsonType::kInteger,
     .nullable = false,
     .minimum = 1,
     .maximum = 1000,
     .default_json = "80",
     .descriptions = {{{kProcessStartBody, "With `pty`: the terminal's width."},
                       {kStartProcessTool, "With pty: the terminal's width."}}}},
    {.id = FieldId::kProcessStdin,
     .name = "stdin",
     .in = kProcessStartBody | kStartProcessTool,
     .type = JsonType::kBoolean,
     .nullable = false,
     .default_json = "false",
     .descriptions =
         {{{kProcessStartBody,
            "Without `pty`: give the process a stdin pipe to write to (`/input`, `/close-stdin`); "
            "otherwise its stdin is `/dev/null`."},
           {kStartProcessTool,
            "Give it a stdin to write to with send_process_input; otherwise it reads /dev/null."}}}},
    {.id = FieldId::kTag,
     .name = "tag",
     .in = kProcessStartBody | kStartProcessTool,
     .type = JsonType::kString,
     .max_length = 256,
     .descriptions = {{{kProcessStartBody | kStartProcessTool,
                        "A name of the client's for the process, listed with it."}}}},
    {.id = FieldId::kData,
     .name = "data",
     .in = kProcessInputBody,
     .type = JsonType::kString,
     .descriptions = {{{kProcessInputBody,
                        "Text to write to the process's stdin (or its pty), as UTF-8. "
                        "Give this or `data_base64`."}}}},
    {.id = FieldId::kDataBase64,
     .name = "data_base64",
     .in = kProcessInputBody,
     .type = JsonType::kString,
     .content_encoding = "base64",
     .descriptions = {{{kProcessInputBody, "Bytes to write, standard base64. Give this or `data`."}}}},
    {.id = FieldId::kSignal,
     .name = "signal",
     .in = kProcessSignalBody,
     .type = JsonType::kNone,
     .component = "Signal",
     .required = true,
     .nullable = false,
     .descriptions = {{{kProcessSignalBody, "The signal, by name or number."}}}},
    {.id = FieldId::kResizeRows,
     .name = "rows",
     .in = kProcessResizeBody,
     .type = JsonType::kInteger,
     .required = true,
     .nullable = false,
     .minimum = 1,
     .maximum = 1000,
     .descriptions = {{{kProcessResizeBody, "The terminal's new height."}}}},
    {.id = FieldId::kResizeCols,
     .name = "cols",
     .in = kProcessResizeBody,
     .type = JsonType::kInteger,
     .required = true,
     .nullable = false,
     .minimum = 1,
     .maximum = 1000,
     .descriptions = {{{kProcessResizeBody, "The terminal's new width."}}}},
    // The MCP process tools' arguments: what a route has in its path or query string, a tool
    // has as an argument. A model often sends null for an optional one: it is left out.
    {.id = FieldId::kPid,
     .name = "pid",
     .in = kReadOutputTool | kSendInputTool | kSignalProcessTool,
     .type = JsonType::kInteger,
     .required = true,
     .nullable = false,
     .minimum = 1,
     .maximum = 2147483647,
     .descriptions = {{{kReadOutputTool | kSendInputTool | kSignalProcessTool,
                        "The process's pid, from start_process or list_processes."}}}},
    {.id = FieldId::kInput,
     .name = "input",
     .in = kSendInputTool,
     .type = JsonType::kString,
     .required = true,
     .nullable = false,
     .max_length = 1 << 20,  // engine::ProcessLimits::max_write_bytes
     .descriptions = {{{kSendInputTool,
                        "Text to write to its stdin, as UTF-8 (end a line with \\n); at most 1 MiB."}}}},
    {.id = FieldId::kCloseStdin,
     .name = "close_stdin",
     .in = kSendInputTool,
     .type = JsonType::kBoolean,
     .default_json = "false",
     .descriptions = {{{kSendInputTool, "Close its stdin after the input: it then reads end of file."}}}},
    {.id = FieldId::kOffset,
     .name = "offset",
     .in = kReadOutputTool,
     .type = JsonType::kInteger,
     .minimum = 0,
     .maximum = (int64_t{1} << 53) - 1,
     .default_json = "0",
     .descriptions = {{{kReadOutputTool,
                        "Where to read from: 0 for the start, or the next_offset of the previous read."}}}},
    {.id = FieldId::kMaxBytes,
     .name = "max_bytes",
     .in = kReadOutputTool,
     .type = JsonType::kInteger,
     .minimum = 1,
     .maximum = 256 << 10,
     .default_json = "32768",
     .descriptions = {{{kReadOutputTool, "At most about this many bytes of output in the answer."}}}},
    {.id = FieldId::kWaitSeconds,
     .name = "wait_seconds",
     .in = kStartProcessTool | kReadOutputTool,
     .type = JsonType::kInteger,
     .minimum = 0,
     .maximum = 30,
     .default_json = "0",
     .descriptions =
         {{{kStartProcessTool,
            "Wait up to this many seconds for it to end, and answer with its output so far too (0: answer "
            "at once)."},
           {kReadOutputTool,
            "Wait up to this many seconds for the process to end (or max_bytes of output) before "
            "answering; 0 answers at once with what is there."}}}},
    {.id = FieldId::kToolSignal,
     .name = "signal",
     .in = kSignalProcessTool,
     .type = JsonType::kNone,
     .component = "Signal",
     .default_json = R"("SIGTERM")",
     .descriptions = {{{kSignalProcessTool,
                        "The signal, by name (\"SIGTERM\", \"KILL\", \"INT\", ...) or number (1-64)."}}}},
    {.id = FieldId::kNetwork,
     .name = "network",
     .in = kExecuteBody | kExecutePythonTool | kSessionBody | kCreateSessionTool,
     .type = JsonType::kObject,
     .component = "NetworkPolicy",
     .descriptions =
         {{{kExecuteBody,
            "Network for this execution, through the server's proxy (docs/security.md, \"Network\"); absent: "
            "no network at all. `allow` lists destinations, each a host name, `*.suffix`, an IP or a CIDR, "
            "optionally with `:port` (IPv6 in brackets); `deny` entries win. Each allow entry must be within "
            "the server's `[network] allow` (else 422 `network-not-allowed` naming it); a malformed entry is "
            "400 `invalid-value`. The code reaches them through `HTTP_PROXY`/`HTTPS_PROXY` (HTTP and "
            "CONNECT) "
            "or `ALL_PROXY` (SOCKS5), set in its environment; names are resolved by the server, and "
            "loopback, private and link-local addresses are refused unless an IP/CIDR entry names them. "
            "Every attempt is listed in the result's `network`. For one-shot executions; a session's "
            "network is the one it was created with (`POST /v1/sessions`)."},
           {kSessionBody,
            "The session's network, for its whole life, through a proxy of its own on the server: the same "
            "policy as `/v1/execute`'s `network`, bounded the same way (422 `network-not-allowed` naming an "
            "entry beyond the server's or the key's bound). Its code, commands and processes reach it "
            "through "
            "`HTTP_PROXY`/`HTTPS_PROXY`/`ALL_PROXY`; each execution's result lists the connection attempts "
            "since the last one (its processes' too). A fork has the same policy; an export, an import and "
            "a server restart do not carry it. Absent: no network at all."},
           {kExecutePythonTool,
            "Network for this run, if the server allows it (absent: no network at all). {\"allow\": "
            "[\"pypi.example.com\", \"*.example.com:443\", \"10.1.2.0/24\"], \"deny\": [...]}: host names, "
            "*.suffixes, IPs or CIDRs, optionally :port; deny wins. Each allow entry must be within what the "
            "server allows, else the call is refused naming the entry. The code reaches them through the "
            "proxies in HTTP_PROXY/HTTPS_PROXY/ALL_PROXY (urllib, requests, pip, curl use them); every "
            "attempt is listed in the result's network.connections. Not with session_id (a session's "
            "network is the one create_session gave it)."},
           {kCreateSessionTool,
            "Network for the session's whole life, if the server allows it (absent: none). The same form "
            "as execute_python's network: {\"allow\": [...], \"deny\": [...]}; each allow entry within what "
            "the server allows, else the call is refused naming it. Code, commands and processes in the "
            "session reach it through HTTP_PROXY/HTTPS_PROXY/ALL_PROXY; every execution's result lists "
            "the attempts since the last one."}}}},
    {.id = FieldId::kAnalyzers,
     .name = "analyzers",
     .in = kExecutions | kCheckBody | kCheckPythonTool,
     .type = JsonType::kArray,
     .items = JsonType::kString,
     .max_items = 3,
     .descriptions =
         {{{kExecutions | kCheckBody | kCheckPythonTool,
            "The seed's linters to run on the code's text, inside the sandbox and before any code runs: "
            "`pyflakes`, `flake8`, `bandit` (Debian's; each bounded to 8 s). Their findings join `findings`, "
            "each with `tool` and `code` (`F821` undefined name, `F401` unused import, `E501`, `B602` "
            "`shell=True`, ...); `pyflakes` is flake8's F checks, and flake8 beside it leaves those out. A "
            "linter that could not run is one finding with code `unavailable` saying why. Another name is "
            "400 `invalid-value`."}}}},
    {.id = FieldId::kLint,
     .name = "lint",
     .in = kExecutions | kCheckBody | kCheckPythonTool,
     .type = JsonType::kObject,
     .component = "Lint",
     .descriptions =
         {{{kExecutions | kCheckBody | kCheckPythonTool,
            "`{\"block\": [codes]}`: a finding of the seed's linters whose code starts with one of these "
            "(`F821`, `B602`, `E9`) refuses the run before the code runs, as a policy refusal (status "
            "`policy_violation`, the error naming `lint.block`, the findings listed); the linters the codes "
            "need run whether `analyzers` names them or not (F: pyflakes, B: bandit, others: flake8). The "
            "server's `[lint] block` is added to every request's. At most 200 codes of 1 to 16 letters "
            "and digits (400 `invalid-value` otherwise)."}}}},
    {.id = FieldId::kGuard,
     .name = "guard",
     .in = kExecuteBody | kExecutePythonTool,
     .type = JsonType::kString,
     .pattern = "^(off|audit)$",
     .default_json = "\"off\"",
     .descriptions =
         {{{kExecuteBody | kExecutePythonTool,
            "`audit`: the guard, audit hooks in the interpreter installed just before the code runs, on top "
            "of the jail: what the sandbox forbids (writing outside the work dir, /tmp and /dev/shm; the "
            "network without a policy; running programs unless the server allows it; native libraries from "
            "outside the interpreter's; another audit hook) raises PermissionError naming the event, and the "
            "result's `guard.refused` lists it. A server whose `[engine] guard` is `audit` guards every "
            "run, whatever this says; a session's executions have the server's. Another value is 400 "
            "`invalid-value`."}}}},
};

// A row's id is its index, and every id has its row: a field is found by id without a search.
constexpr bool IdsAreIndices() {
  for (size_t i = 0; i < std::size(kTable); ++i) {
    if (static_cast<size_t>(kTable[i].id) != i) return false;
  }
  return std::size(kTable) == static_cast<size_t>(FieldId::kGuard) + 1;
}
static_assert(IdsAreIndices(), "the table's rows are in FieldId's order, one for each");

bool IsTool(Request request) { return (request & kTools) != 0; }

bool Is(JsonType type, const nlohmann::json& value) {
  switch (type) {
    case JsonType::kString:
      return value.is_string();
    case JsonType::kBoolean:
      return value.is_boolean();
    case JsonType::kArray:
      return value.is_array();
    case JsonType::kObject:
      return value.is_object();
    case JsonType::kInteger:
      return value.is_number_integer();
    case JsonType::kNone:
      break;
  }
  return true;
}

}  // namespace

std::span<const RequestField> RequestFields() { return kTable; }

const RequestField& FieldWithId(FieldId id) { return kTable[static_cast<size_t>(id)]; }

std::vector<const RequestField*> FieldsOf(Request request) {
  std::vector<const RequestField*> out;
  for (const auto& field : kTable) {
    if (field.in & request) out.push_back(&field);
  }
  return out;
}

const RequestField* FindField(Request request, std::string_view name) {
  for (const auto& field : kTable) {
    if ((field.in & request) && field.name == name) {
      return field.id == FieldId::kLimits && IsTool(request) ? nullptr : &field;
    }
  }
  return nullptr;
}

std::string AllowedNames(Request request) {
  std::string out;
  for (const RequestField* field : FieldsOf(request))
    out += (out.empty() ? "" : ", ") + std::string(field->name);
  return out;
}

std::string_view DescriptionOf(const RequestField& field, Request request) {
  for (const auto& text : field.descriptions) {
    if (text.in & request) return text.text;
  }
  return {};
}

bool IsRequired(const RequestField& field, Request request) {
  return field.required || (field.required_in & request) != 0;
}

bool HasType(const RequestField& field, const nlohmann::json& value) { return Is(field.type, value); }

bool ItemHasType(const RequestField& field, const nlohmann::json& item) { return Is(field.items, item); }

std::string ExpectedType(JsonType type) { return std::string(NamesOf(type).expected); }

std::string ExpectedType(const RequestField& field) {
  if (field.type == JsonType::kArray && field.items == JsonType::kString) return "an array of strings";
  return ExpectedType(field.type);
}

std::string_view JsonTypeName(JsonType type) { return NamesOf(type).json; }

}  // namespace execbox::api
