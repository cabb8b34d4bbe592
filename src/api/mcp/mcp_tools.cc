#include "api/mcp/mcp_tools.h"

#include "api/common/problem_json.h"
#include "api/mcp/json_rpc.h"
#include "api/schema/lint_schema.h"
#include "api/schema/network_schema.h"
#include "api/schema/request_schema.h"
#include "engine/result_json.h"
#include "engine/result_text.h"

namespace execbox::api {
namespace {

using nlohmann::json;

json SessionIdSchema() {
  return {{"type", "object"},
          {"properties",
           {{"session_id", {{"type", "string"}, {"description", "A session id from create_session."}}}}},
          {"required", {"session_id"}},
          {"additionalProperties", false}};
}

// A tool's argument from the request schema, as the tools have always listed it: what to send,
// with neither null nor a string's bounds (the argument checks explain those to the model); an
// integer's bounds and a default where the table has them; a signal as a name or a number.
json ToolProperty(const RequestField& field, Request tool) {
  if (field.component == "NetworkPolicy") return NetworkPolicySchema(DescriptionOf(field, tool));
  if (field.component == "Lint") return LintSchema(DescriptionOf(field, tool));
  json property = field.component == "Signal" ? SignalSchema() : json{{"type", JsonTypeName(field.type)}};
  if (field.items != JsonType::kNone) property["items"] = {{"type", JsonTypeName(field.items)}};
  if (field.max_items > 0) property["maxItems"] = field.max_items;
  if (field.type == JsonType::kInteger && field.maximum > 0) {
    property["minimum"] = field.minimum;
    property["maximum"] = field.maximum;
  }
  if (!field.default_json.empty()) property["default"] = json::parse(field.default_json);
  property["description"] = DescriptionOf(field, tool);
  return property;
}

// execute_python's or create_session's inputSchema: the request schema's fields of the tool, the
// limits as flat arguments from the limit schema with this server's defaults and maxima.
json ToolInputSchema(Request tool, const engine::LimitsConfig& limits, bool wheelhouse) {
  json properties = json::object();
  json required = json::array();
  for (const RequestField* field : FieldsOf(tool)) {
    if (field->id == FieldId::kLimits) {
      properties.update(engine::LimitsJsonSchema(limits)["properties"]);
      continue;
    }
    // `packages` is offered only where there is a wheelhouse: without one it could only be refused.
    if (field->id == FieldId::kPackages && !wheelhouse) continue;
    properties[std::string(field->name)] = ToolProperty(*field, tool);
    if (IsRequired(*field, tool)) required.push_back(field->name);
  }
  json schema = {{"type", "object"}, {"properties", properties}, {"additionalProperties", false}};
  if (!required.empty()) schema["required"] = required;
  return schema;
}

// What the wheelhouse installed: [{name, version, modules}].
json InstalledSchema() {
  json str = {{"type", "string"}};
  return {
      {"type", "array"},
      {"items",
       {{"type", "object"},
        {"properties", {{"name", str}, {"version", str}, {"modules", {{"type", "array"}, {"items", str}}}}},
        {"required", {"name", "version", "modules"}}}}};
}

// The Result's JSON (engine/result_json.h), as structuredContent carries it.
json ExecuteOutputSchema() {
  json str = {{"type", "string"}};
  json boolean = {{"type", "boolean"}};
  json count = {{"type", "integer"}, {"minimum", 0}};
  json object = {{"type", "object"}};
  json bundle = {{"type", "object"},
                 {"properties",
                  {{"data", object},
                   {"metadata", object},
                   {"content_index",
                    {{"type", "integer"},
                     {"minimum", 1},
                     {"description", "The image of this output is content[content_index]."}}}}}};
  return {{"type", "object"},
          {"properties",
           {{"status",
             {{"type", "string"},
              {"enum",
               {"ok", "error", "syntax_error", "policy_violation", "timeout", "memory_limit", "output_limit",
                "killed", "internal_error"}}}},
            {"exit_code", {{"type", "integer"}}},
            {"signal", {{"type", {"integer", "null"}}}},
            {"stdout", str},
            {"stderr", str},
            {"stdout_truncated", boolean},
            {"stderr_truncated", boolean},
            {"result", {{"oneOf", {bundle, {{"type", "null"}}}}}},
            {"display", {{"type", "array"}, {"items", bundle}}},
            {"error",
             {{"oneOf",
               {{{"type", "object"},
                 {"properties",
                  {{"ename", str}, {"evalue", str}, {"traceback", {{"type", "array"}, {"items", str}}}}},
                 {"required", {"ename", "evalue", "traceback"}}},
                {{"type", "null"}}}}}},
            {"findings", {{"type", "array"}, {"items", object}}},
            {"files",
             {{"type", "array"},
              {"items",
               {{"type", "object"},
                {"properties", {{"name", str}, {"size", count}, {"mime_type", str}}},
                {"required", {"name", "size", "mime_type"}}}}}},
            {"usage",
             {{"type", "object"},
              {"properties", {{"wall_ms", count}, {"cpu_ms", count}, {"peak_memory_bytes", count}}},
              {"required", {"wall_ms", "cpu_ms", "peak_memory_bytes"}}}},
            {"limits", object},
            {"session",
             {{"type", "object"},
              {"properties",
               {{"id", str},
                {"generation", count},
                // As the Result's (openapi_schemas.cc SessionState): "restored" after a pause or a
                // restart of the server.
                {"state", {{"type", "string"}, {"enum", {"preserved", "lost", "restored"}}}},
                {"reason", str},
                {"files_kept", {{"type", "boolean"}}}}},
              {"required", {"id", "generation", "state"}}}},
            {"installed", InstalledSchema()},
            {"network", NetworkRecordSchema(NetworkConnectionSchema())}}},
          {"required", {"status", "stdout", "stderr", "result", "display", "error", "files", "usage"}}};
}

json Tool(const char* name, const char* title, const std::string& description, json input, json output) {
  return {{"name", name},
          {"title", title},
          {"description", description},
          {"inputSchema", std::move(input)},
          {"outputSchema", OrRefusal(std::move(output))}};
}

json ForkOutputSchema() {
  json str = {{"type", "string"}};
  json left_out = {{"type", "object"},
                   {"properties", {{"name", str}, {"type", str}, {"reason", str}}},
                   {"required", {"name", "type", "reason"}}};
  return {{"type", "object"},
          {"properties", {{"session_id", str}, {"not_copied", {{"type", "array"}, {"items", left_out}}}}},
          {"required", {"session_id", "not_copied"}}};
}

json CreateSessionOutputSchema() {
  return {{"type", "object"},
          {"properties", {{"session_id", {{"type", "string"}}}, {"installed", InstalledSchema()}}},
          {"required", {"session_id"}}};
}

json PauseOutputSchema() {
  return {{"type", "object"},
          {"properties",
           {{"session_id", {{"type", "string"}}},
            {"paused", {{"type", "boolean"}}},
            {"changed", {{"type", "boolean"}}}}},
          {"required", {"session_id", "paused", "changed"}}};
}

json ObjectSchema(std::initializer_list<const char*> string_fields) {
  json props = json::object();
  json required = json::array();
  for (const char* f : string_fields) {
    props[f] = {{"type", "string"}};
    required.push_back(f);
  }
  return {{"type", "object"}, {"properties", props}, {"required", required}};
}

// An image the MCP client shows as such: moved out of the bundle into its own content block.
void MoveImage(json& bundle, json& content) {
  if (!bundle.is_object() || !bundle.contains("data") || !bundle["data"].is_object()) return;
  json& data = bundle["data"];
  for (const char* mime : {"image/png", "image/jpeg"}) {
    if (!data.contains(mime) || !data[mime].is_string()) continue;
    bundle["content_index"] = content.size();
    content.push_back({{"type", "image"}, {"data", data[mime]}, {"mimeType", mime}});
    data.erase(mime);
    return;  // one image per output: the first the bundle offers
  }
}

engine::Refusal BadArgument(std::string detail) {
  return engine::MakeRefusal(engine::RefusalReason::kInvalidArguments, std::move(detail));
}

// What a bad argument is said to have to be: the schema's type, "a non-empty string" where a
// string has a minimum length.
std::string ArgumentType(const RequestField& field) {
  if (field.type == JsonType::kString && field.min_length > 0) return "a non-empty string";
  return ExpectedType(field);
}

// An argument of the request schema has its type (an array's items too) and a string its
// minimum length; null is the same as leaving a nullable one out.
engine::Refused<void> CheckArgumentShape(const RequestField& field, const json& value) {
  if (value.is_null() && field.nullable) return {};
  bool fits = HasType(field, value);
  if (fits && value.is_array()) {
    for (const auto& item : value) fits = fits && ItemHasType(field, item);
  }
  if (fits && value.is_string()) fits = value.get_ref<const std::string&>().size() >= field.min_length;
  if (!fits)
    return std::unexpected(BadArgument("'" + std::string(field.name) + "' must be " + ArgumentType(field)));
  return {};
}

// An argument whose shape is the schema's into the request, with the field's own checks.
engine::Refused<void> ReadArgument(const RequestField& field, const json& value,
                                   engine::ExecutionRequest& out) {
  if (value.is_null()) return {};
  switch (field.id) {
    case FieldId::kCode:
      out.program.code = value.get<std::string>();
      if (out.program.code.find('\0') != std::string::npos) {
        return std::unexpected(
            BadArgument("'code' contains a NUL character, which Python source cannot hold"));
      }
      return {};
    case FieldId::kSessionId:
      out.session_id = value.get<std::string>();
      return {};
    case FieldId::kPackages:
      // Their form is the gate's to check (runtime::CheckPackageNames).
      out.program.packages = value.get<std::vector<std::string>>();
      return {};
    case FieldId::kNetwork: {
      auto policy = ReadNetworkPolicy(value);
      if (!policy) return std::unexpected(BadArgument(policy.error().detail));
      out.network = std::move(*policy);
      return {};
    }
    case FieldId::kPolicy:  // the gate checks the profile's name
      out.program.lint_profile = value.get<std::string>();
      return {};
    case FieldId::kAnalyzers:  // their names and codes are the gate's to check
      out.program.analyzers = value.get<std::vector<std::string>>();
      return {};
    case FieldId::kLint: {
      auto codes = ReadLint(value);
      if (!codes) return std::unexpected(BadArgument(codes.error().detail));
      out.program.lint_block = std::move(*codes);
      return {};
    }
    case FieldId::kGuard: {
      auto guard = runtime::GuardNamed(value.get<std::string>());
      if (!guard) return std::unexpected(BadArgument("'guard' must be 'off' or 'audit'"));
      out.program.guard = *guard;
      return {};
    }
    case FieldId::kLimits:  // each limit is an argument of its own (engine::FindLimit)
    case FieldId::kStdin:
    case FieldId::kFiles:
    case FieldId::kCheckpoint:
    case FieldId::kFilename:
    case FieldId::kFileName:
    case FieldId::kFileContent:
    case FieldId::kArgv:
    case FieldId::kCommand:
    case FieldId::kEnv:
    case FieldId::kCwd:
    case FieldId::kPty:
    case FieldId::kRows:
    case FieldId::kCols:
    case FieldId::kProcessStdin:
    case FieldId::kTag:
    case FieldId::kData:
    case FieldId::kDataBase64:
    case FieldId::kSignal:
    case FieldId::kResizeRows:
    case FieldId::kResizeCols:
    case FieldId::kPid:
    case FieldId::kInput:
    case FieldId::kCloseStdin:
    case FieldId::kOffset:
    case FieldId::kMaxBytes:
    case FieldId::kWaitSeconds:
    case FieldId::kToolSignal:
      break;  // not an argument of these tools (the process tools': mcp_process_tools.cc)
  }
  return {};
}

}  // namespace

json ToolDefinitions(const engine::LimitsConfig& limits, const std::vector<std::string>& modules,
                     const std::optional<std::vector<std::string>>& wheelhouse) {
  std::string installed;
  for (const auto& m : modules) installed += (installed.empty() ? "" : ", ") + m;
  installed =
      installed.empty()
          ? ""
          : " Installed besides the standard library: " + installed +
                (wheelhouse ? ". Others only from this server's wheelhouse (packages argument); no network."
                            : ". Nothing else can be installed: no network.");
  if (wheelhouse && !wheelhouse->empty()) {
    std::string wheels;
    for (size_t i = 0; i < wheelhouse->size() && i < 100; ++i) wheels += (i ? ", " : "") + (*wheelhouse)[i];
    installed += " The wheelhouse has: " + wheels + (wheelhouse->size() > 100 ? ", ..." : "") + ".";
  }
  return json::array({
      Tool(
          "execute_python", "Run Python",
          "Runs Python 3 in an isolated sandbox (no network unless the network argument asks for it, limited "
          "CPU, memory and time; numpy, pandas, "
          "matplotlib and scipy available) and returns stdout, stderr, the last expression's value, errors "
          "with "
          "tracebacks, and matplotlib figures as PNG images. The code runs in its home, /home/user (also "
          "named /work), the working directory, whose files it writes are listed in the result. Pass "
          "session_id to keep variables and files between calls. "
          "Limits not given take this server's defaults (see each argument's default and maximum)." +
              installed,
          ToolInputSchema(kExecutePythonTool, limits, wheelhouse.has_value()), ExecuteOutputSchema()),
      Tool("check_python", "Check Python",
           "Checks Python 3 without running it: the syntax, the policy lint, and on request the linters "
           "pyflakes, flake8 and bandit (analyzers), run in the sandbox on the code's text. Each finding has "
           "its line, column and message (a linter's its tool and code, e.g. pyflakes F821 for an undefined "
           "name, bandit B602 for shell=True). lint.block makes findings with those codes refusals "
           "(status policy_violation). Nothing runs, nothing is written.",
           ToolInputSchema(kCheckPythonTool, limits, false), ExecuteOutputSchema()),
      Tool("create_session", "Create session",
           "Creates a persistent Python session; pass its session_id to execute_python to keep variables and "
           "imports between calls. Limits given here are the session's defaults; disk_mb is fixed for its "
           "life. The session closes with this MCP session, or with close_session.",
           ToolInputSchema(kCreateSessionTool, limits, wheelhouse.has_value()), CreateSessionOutputSchema()),
      Tool(
          "fork_session", "Fork session",
          "Creates a new session holding a copy of this session's variables, functions, classes, imports and "
          "files; the two are independent from then on (try something in the copy, keep the original). "
          "Open files, sockets, generators and threads cannot be copied: not_copied lists each by name with "
          "the reason. The copy closes with this MCP session, or with close_session.",
          SessionIdSchema(), ForkOutputSchema()),
      Tool(
          "pause_session", "Pause session",
          "Pauses a session: the server keeps its variables, imports and files and ends its process, freeing "
          "its memory (a process it started ends; what it wrote stays). Its lifetime stands still while "
          "paused. Its next use (execute_python, or resume_session) restores it. changed is false when it "
          "was paused already.",
          SessionIdSchema(), PauseOutputSchema()),
      Tool("resume_session", "Resume session",
           "Resumes a paused session now, with the variables, imports and files it had when paused. changed "
           "is false when it was running already.",
           SessionIdSchema(), PauseOutputSchema()),
      Tool("close_session", "Close session", "Closes a session and frees its resources.", SessionIdSchema(),
           ObjectSchema({"session_id"})),
  });
}

json ToolArgumentsSchema(Request tool) {
  json properties = json::object();
  json required = json::array();
  for (const RequestField* field : FieldsOf(tool)) {
    properties[std::string(field->name)] = ToolProperty(*field, tool);
    if (IsRequired(*field, tool)) required.push_back(field->name);
  }
  json schema = {{"type", "object"}, {"properties", properties}, {"additionalProperties", false}};
  if (!required.empty()) schema["required"] = required;
  return schema;
}

engine::Refused<engine::ExecutionRequest> ParseExecuteArguments(const json& arguments, Request tool) {
  if (!arguments.is_object()) return std::unexpected(BadArgument("arguments must be an object"));
  engine::ExecutionRequest request;
  const bool check = tool == kCheckPythonTool;
  request.program.mode = check ? runtime::Mode::kCheck : runtime::Mode::kRun;
  request.program.collect_files = !check;  // listed in the result (names, sizes, types)
  // Every argument's shape first, in the arguments' order; then what is missing; then each
  // field's own checks, so that a model is told of a wrong type before a subtler fault.
  for (const auto& [key, value] : arguments.items()) {
    if (const RequestField* field = FindField(tool, key)) {
      if (auto shape = CheckArgumentShape(*field, value); !shape)
        return std::unexpected(std::move(shape.error()));
    } else if (const engine::LimitSpec* spec = check ? nullptr : engine::FindLimit(key)) {
      auto limit = engine::ReadLimitOverride(*spec, value, "");
      if (!limit) return std::unexpected(std::move(limit.error()));
      if (*limit) request.limits.push_back(std::move(**limit));
    } else {
      return std::unexpected(BadArgument("unknown argument '" + key.substr(0, 100) + "'"));
    }
  }
  for (const RequestField* field : FieldsOf(tool)) {
    auto it = arguments.find(field->name);
    if (it == arguments.end()) {
      if (!IsRequired(*field, tool)) continue;
      return std::unexpected(
          BadArgument("'" + std::string(field->name) + "' is required and must be " + ArgumentType(*field)));
    }
    if (auto read = ReadArgument(*field, *it, request); !read)
      return std::unexpected(std::move(read.error()));
  }
  return request;
}

engine::Refused<CreateSessionArguments> ParseCreateSessionArguments(const json& arguments) {
  if (!arguments.is_object()) return std::unexpected(BadArgument("arguments must be an object"));
  // The request schema's arguments first; the rest are limits (engine::ReadLimitOverrides refuses
  // an unknown one with the limits' names).
  engine::ExecutionRequest request;
  json limits = arguments;
  for (const RequestField* field : FieldsOf(kCreateSessionTool)) {
    auto it = limits.find(field->name);
    if (field->id == FieldId::kLimits || it == limits.end()) continue;
    if (auto shape = CheckArgumentShape(*field, *it); !shape)
      return std::unexpected(std::move(shape.error()));
    if (auto read = ReadArgument(*field, *it, request); !read)
      return std::unexpected(std::move(read.error()));
    limits.erase(it);
  }
  auto overrides = engine::ReadLimitOverrides(limits, "");
  if (!overrides) return std::unexpected(std::move(overrides.error()));
  return CreateSessionArguments{.limits = std::move(*overrides),
                                .packages = std::move(request.program.packages),
                                .network = std::move(request.network)};
}

Expected<std::string> StringArgument(const json& arguments, const std::string& name) {
  if (!arguments.is_object()) return Fail("arguments must be an object");
  auto it = arguments.find(name);
  if (it == arguments.end() || !it->is_string())
    return Fail("'" + name + "' is required and must be a string");
  return it->get<std::string>();
}

json ExecutionToolResult(const engine::Result& r) {
  json content = json::array({nullptr});  // the text block first
  json s = engine::ToJson(r);
  for (auto& item : s["display"]) MoveImage(item, content);
  if (s["result"].is_object()) MoveImage(s["result"], content);
  for (auto& file : s["files"]) file.erase("content_base64");
  content[0] = {{"type", "text"}, {"text", engine::TextOf(r)}};
  return {{"content", content}, {"structuredContent", s}, {"isError", r.status != engine::Status::kOk}};
}

json RefusalToolResult(const engine::Refusal& refusal) {
  std::string text = "[execbox] refused (" + refusal.type + "): " + refusal.detail;
  if (refusal.retry_after_seconds > 0)
    text += " (retry after " + std::to_string(refusal.retry_after_seconds) + " s)";
  json result = ToolError(text);
  // HTTP's problem body, which every tool's outputSchema admits (OrRefusal).
  result["structuredContent"] = ProblemJson(refusal);
  return result;
}

json OrRefusal(json output) {
  json str = {{"type", "string"}};
  json problem = {
      {"type", "object"},
      {"properties", {{"type", str}, {"title", str}, {"status", {{"type", "integer"}}}, {"detail", str}}},
      {"required", {"type", "title", "status", "detail"}}};
  return {{"type", "object"}, {"anyOf", {std::move(output), std::move(problem)}}};
}

json StructuredToolResult(json value) {
  std::string text = Serialize(value);
  return {{"content", json::array({{{"type", "text"}, {"text", text}}})},
          {"structuredContent", std::move(value)},
          {"isError", false}};
}

json ToolError(const std::string& message) {
  return {{"content", json::array({{{"type", "text"}, {"text", message}}})}, {"isError", true}};
}

}  // namespace execbox::api
