// The one table of the fields of the requests that run code: the bodies of POST /v1/execute,
// /v1/sessions/{id}/execute, /v1/check and /v1/sessions, of a session's process routes, and the
// arguments of the MCP tools (execute_python, create_session and the process tools). Each row is one field
// written once: its JSON type, bounds, default, its descriptions (which are the documentation) and the
// requests that carry it. The HTTP parsers (api/http/execute_request.h) take their allowed names and type
// checks from it, the MCP tools (api/mcp/mcp_tools.h) their inputSchema and argument checks, and the OpenAPI
// document (api/http/openapi.h) its request schemas. What a limit is lives in the limit
// schema (engine/limit_schema.h); here `limits` is one field.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <expected>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/session_processes.h"

namespace execbox::api {

// A request that carries fields of the table, as one bit of a field's `in`.
enum Request : unsigned {
  kExecuteBody = 1u << 0,         // POST /v1/execute (OpenAPI ExecuteRequest)
  kSessionExecuteBody = 1u << 1,  // POST /v1/sessions/{id}/execute (SessionExecuteRequest)
  kCheckBody = 1u << 2,           // POST /v1/check (CheckRequest)
  kSessionBody = 1u << 3,         // POST /v1/sessions
  kExecutePythonTool = 1u << 4,   // MCP execute_python's arguments
  kCreateSessionTool = 1u << 5,   // MCP create_session's arguments
  kInputFile = 1u << 6,           // one item of `files` (OpenAPI InputFile)
  kProcessStartBody = 1u << 7,    // POST /v1/sessions/{id}/processes (ProcessStartRequest)
  kProcessInputBody = 1u << 8,    // POST .../processes/{pid}/input (ProcessInputRequest)
  kProcessSignalBody = 1u << 9,   // POST .../processes/{pid}/signal (ProcessSignalRequest)
  kProcessResizeBody = 1u << 10,  // POST .../processes/{pid}/resize (ProcessResizeRequest)
  kStartProcessTool = 1u << 11,   // MCP start_process's arguments
  kListProcessesTool = 1u << 12,  // MCP list_processes's
  kReadOutputTool = 1u << 13,     // MCP read_process_output's
  kSendInputTool = 1u << 14,      // MCP send_process_input's
  kSignalProcessTool = 1u << 15,  // MCP signal_process's
  kCheckPythonTool = 1u << 16,    // MCP check_python's arguments
};
// The MCP tools that reach a session's processes, and every tool.
inline constexpr unsigned kProcessTools =
    kStartProcessTool | kListProcessesTool | kReadOutputTool | kSendInputTool | kSignalProcessTool;
inline constexpr unsigned kTools = kExecutePythonTool | kCreateSessionTool | kCheckPythonTool | kProcessTools;

// Each field, in the table's order, so that a front end's switch over them is checked by the
// compiler (-Wswitch): a field added to the table is a field every front end must decide about.
enum class FieldId {
  kCode,
  kStdin,
  kFiles,
  kLimits,
  kCheckpoint,
  kPolicy,
  kFilename,
  kPackages,
  kSessionId,
  kFileName,     // files[].name
  kFileContent,  // files[].content_base64
  // a session's processes
  kArgv,
  kCommand,
  kEnv,
  kCwd,
  kPty,
  kRows,
  kCols,
  kProcessStdin,
  kTag,
  kData,
  kDataBase64,
  kSignal,
  kResizeRows,
  kResizeCols,
  // the MCP process tools' own arguments
  kPid,
  kInput,
  kCloseStdin,
  kOffset,
  kMaxBytes,
  kWaitSeconds,
  kToolSignal,  // signal_process's: optional, SIGTERM by default (the HTTP body's must be given)
  kNetwork,     // a one-shot execution's or a session's network policy
  kAnalyzers,   // the seed's linters to run (runtime::kAnalyzers)
  kLint,        // {"block": [codes]}: the linters' codes that refuse the run
  kGuard,       // "off" | "audit": the guard in the interpreter (runtime::Guard)
};

enum class JsonType { kNone, kString, kBoolean, kArray, kObject, kInteger };

// A field's description in some of the requests that carry it (where they differ on purpose:
// a tool's text addresses a model, a check's code is not run).
struct FieldText {
  unsigned in = 0;
  std::string_view text;
};

struct RequestField {
  FieldId id;
  std::string_view name;  // on the wire, in a body and in a tool's arguments
  unsigned in;            // the Request bits that carry it
  JsonType type;
  JsonType items = JsonType::kNone;  // an array's items
  // The OpenAPI component the value is (an array's items are): "Limits", "Policy", "InputFile".
  // The component holds the type, default and description; the field refers to it.
  std::string_view component = {};
  bool required = false;     // in every request that carries it
  unsigned required_in = 0;  // ... or only in these (session_id: the process tools, not execute_python)
  bool nullable = true;      // null is the same as leaving it out
  size_t min_length = 0;     // a string's, in bytes (0: none)
  size_t max_length = 0;
  size_t max_items = 0;  // an array's (0: none)
  int64_t minimum = 0;   // an integer's bounds (maximum 0: none)
  int64_t maximum = 0;
  std::string_view pattern = {};
  std::string_view content_encoding = {};
  std::string_view default_json = {};  // the default as JSON text ("false"), where one is said
  std::array<FieldText, 4> descriptions = {};
};

// Every row, in the order the parsers read them and the refusals list them.
std::span<const RequestField> RequestFields();
const RequestField& FieldWithId(FieldId id);
// The rows `request` carries, in that order.
std::vector<const RequestField*> FieldsOf(Request request);
// The row named `name` that `request` carries, or null. `limits` is not an argument of a tool:
// there, each limit of the limit schema is an argument of its own.
const RequestField* FindField(Request request, std::string_view name);
// "code, stdin, files, ..." for a refusal of an unknown field.
std::string AllowedNames(Request request);
// The field's description in `request` (empty where it has none).
std::string_view DescriptionOf(const RequestField& field, Request request);

// Whether `request` must carry the field.
bool IsRequired(const RequestField& field, Request request);

// Whether the value has the field's JSON type (an array's items are not looked at).
bool HasType(const RequestField& field, const nlohmann::json& value);
// Whether an item of an array field has the items' type.
bool ItemHasType(const RequestField& field, const nlohmann::json& item);
// What a refusal says the value must be: "a string", "a boolean", "an object", "an array of
// strings" (an array of anything else: "an array", its items being checked one by one).
std::string ExpectedType(const RequestField& field);
std::string ExpectedType(JsonType type);
// A JSON Schema type name: "string", "boolean", "array", "object".
std::string_view JsonTypeName(JsonType type);
// The JSON Schema of a signal (component "Signal"): a name or a number, for the OpenAPI document
// and the signal_process tool alike.
nlohmann::json SignalSchema();

// A request's fields checked against the table (request_check.cc): no unknown ones, the required
// ones present, each of its type (an array's items too), an integer within its bounds, a string
// within its lengths. Null is the same as absent where a field may be null. `fields` holds what
// was given (null ones left out), for the request's own reader.
struct FieldFault {
  std::string type;    // "unknown-field", "missing-field", "wrong-type" or "invalid-value"
  std::string field;   // its name
  std::string detail;  // for the client: "'pid' must be an integer, not a string"
};
std::expected<nlohmann::json, FieldFault> CheckFields(const nlohmann::json& object, Request request);
// A process to start, from the fields CheckFields gave of POST .../processes or start_process:
// either argv or command, no NUL anywhere, env names that can be names, pty sizes only with a pty.
std::expected<engine::ProcessSpec, FieldFault> ReadProcessSpec(const nlohmann::json& fields);
// A signal's number from a name ("SIGTERM", "term") or a number (1-64); nullopt for neither.
std::optional<int> ReadSignal(const nlohmann::json& value);

}  // namespace execbox::api
