#include "api/mcp/mcp_tools.h"

#include "api/mcp/json_rpc.h"
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

// The limits as flat arguments, from the limit schema with this server's defaults and maxima.
json LimitProperties(const engine::LimitsConfig& limits) {
  return engine::LimitsJsonSchema(limits)["properties"];
}

// `packages`, offered only where there is a wheelhouse (without one it could only be refused).
json PackagesProperty(std::string description) {
  return {{"type", "array"},
          {"items", {{"type", "string"}}},
          {"maxItems", runtime::kMaxPackages},
          {"description",
           "Packages to install from this server's wheelhouse (never the network), e.g. [\"polars\"] or "
           "[\"name==1.2\"]; " +
               description + " Inside the sandbox, `pip install NAME` does the same."}};
}

json ExecuteInputSchema(const engine::LimitsConfig& limits, bool wheelhouse) {
  json properties = LimitProperties(limits);
  properties["code"] = {{"type", "string"}, {"description", "Python 3 source to run."}};
  if (wheelhouse)
    properties["packages"] =
        PackagesProperty("installed before the code runs; in a session they stay installed.");
  properties["session_id"] = {
      {"type", "string"},
      {"description",
       "Run in this session (from create_session) so variables persist; omit for a fresh sandbox."}};
  return {{"type", "object"},
          {"properties", properties},
          {"required", {"code"}},
          {"additionalProperties", false}};
}

json CreateSessionInputSchema(const engine::LimitsConfig& limits, bool wheelhouse) {
  json properties = LimitProperties(limits);
  if (wheelhouse)
    properties["packages"] =
        PackagesProperty("installed when the session is made (if one fails, no session is made).");
  return {{"type", "object"}, {"properties", properties}, {"additionalProperties", false}};
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
                {"state", {{"type", "string"}, {"enum", {"preserved", "lost"}}}},
                {"reason", str}}},
              {"required", {"id", "generation", "state"}}}},
            {"installed", InstalledSchema()}}},
          {"required", {"status", "stdout", "stderr", "result", "display", "error", "files", "usage"}}};
}

json Tool(const char* name, const char* title, const std::string& description, json input, json output) {
  return {{"name", name},
          {"title", title},
          {"description", description},
          {"inputSchema", std::move(input)},
          {"outputSchema", std::move(output)}};
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

// `packages`: null (none) or an array of strings (their form is the gate's to check).
engine::Refused<std::vector<std::string>> PackagesArgument(const json& value) {
  std::vector<std::string> names;
  if (value.is_null()) return names;
  if (!value.is_array()) return std::unexpected(BadArgument("'packages' must be an array of strings"));
  for (const auto& name : value) {
    if (!name.is_string()) return std::unexpected(BadArgument("'packages' must be an array of strings"));
    names.push_back(name.get<std::string>());
  }
  return names;
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
      Tool("execute_python", "Run Python",
           "Runs Python 3 in an isolated sandbox (no network, limited CPU, memory and time; numpy, pandas, "
           "matplotlib and scipy available) and returns stdout, stderr, the last expression's value, errors "
           "with "
           "tracebacks, and matplotlib figures as PNG images. Pass session_id to keep variables between "
           "calls. "
           "Limits not given take this server's defaults (see each argument's default and maximum)." +
               installed,
           ExecuteInputSchema(limits, wheelhouse.has_value()), ExecuteOutputSchema()),
      Tool("create_session", "Create session",
           "Creates a persistent Python session; pass its session_id to execute_python to keep variables and "
           "imports between calls. Limits given here are the session's defaults; disk_mb is fixed for its "
           "life. The session closes with this MCP session, or with close_session.",
           CreateSessionInputSchema(limits, wheelhouse.has_value()), CreateSessionOutputSchema()),
      Tool(
          "fork_session", "Fork session",
          "Creates a new session holding a copy of this session's variables, functions, classes, imports and "
          "files; the two are independent from then on (try something in the copy, keep the original). "
          "Open files, sockets, generators and threads cannot be copied: not_copied lists each by name with "
          "the reason. The copy closes with this MCP session, or with close_session.",
          SessionIdSchema(), ForkOutputSchema()),
      Tool("close_session", "Close session", "Closes a session and frees its resources.", SessionIdSchema(),
           ObjectSchema({"session_id"})),
  });
}

engine::Refused<engine::ExecutionRequest> ParseExecuteArguments(const json& arguments) {
  if (!arguments.is_object()) return std::unexpected(BadArgument("arguments must be an object"));
  engine::ExecutionRequest request;
  request.program.mode = runtime::Mode::kRun;
  request.program.collect_files = true;  // listed in the result (names, sizes, types)
  for (const auto& [key, value] : arguments.items()) {
    if (key == "code") {
      if (!value.is_string()) return std::unexpected(BadArgument("'code' must be a string"));
      request.program.code = value.get<std::string>();
    } else if (key == "session_id") {
      if (value.is_null()) continue;
      if (!value.is_string() || value.get_ref<const std::string&>().empty()) {
        return std::unexpected(BadArgument("'session_id' must be a non-empty string"));
      }
      request.session_id = value.get<std::string>();
    } else if (key == "packages") {
      auto packages = PackagesArgument(value);
      if (!packages) return std::unexpected(std::move(packages.error()));
      request.program.packages = std::move(*packages);
    } else if (const engine::LimitSpec* spec = engine::FindLimit(key)) {
      auto limit = engine::ReadLimitOverride(*spec, value, "");
      if (!limit) return std::unexpected(std::move(limit.error()));
      if (*limit) request.limits.push_back(std::move(**limit));
    } else {
      return std::unexpected(BadArgument("unknown argument '" + key.substr(0, 100) + "'"));
    }
  }
  if (!arguments.contains("code"))
    return std::unexpected(BadArgument("'code' is required and must be a string"));
  if (request.program.code.find('\0') != std::string::npos) {
    return std::unexpected(BadArgument("'code' contains a NUL character, which Python source cannot hold"));
  }
  return request;
}

engine::Refused<CreateSessionArguments> ParseCreateSessionArguments(const json& arguments) {
  if (!arguments.is_object()) return std::unexpected(BadArgument("arguments must be an object"));
  CreateSessionArguments out;
  json limits = arguments;
  if (auto it = limits.find("packages"); it != limits.end()) {
    auto packages = PackagesArgument(*it);
    if (!packages) return std::unexpected(std::move(packages.error()));
    out.packages = std::move(*packages);
    limits.erase(it);
  }
  auto overrides = engine::ReadLimitOverrides(limits, "");
  if (!overrides) return std::unexpected(std::move(overrides.error()));
  out.limits = std::move(*overrides);
  return out;
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
  // No structuredContent: it would have to match the tool's outputSchema, which is the Result's.
  return ToolError(text);
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
