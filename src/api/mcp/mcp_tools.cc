#include "api/mcp/mcp_tools.h"

#include <cmath>

#include "api/mcp/json_rpc.h"

namespace execbox::api {
namespace {

using nlohmann::json;

constexpr double kMinTimeout = 1, kMaxTimeout = 300;

json SessionIdSchema() {
  return {{"type", "object"},
          {"properties",
           {{"session_id", {{"type", "string"}, {"description", "A session id from create_session."}}}}},
          {"required", {"session_id"}},
          {"additionalProperties", false}};
}

json ExecuteInputSchema() {
  return {{"type", "object"},
          {"properties",
           {{"code", {{"type", "string"}, {"description", "Python 3 source to run."}}},
            {"session_id",
             {{"type", "string"},
              {"description",
               "Run in this session (from create_session) so variables persist; omit for a fresh sandbox."}}},
            {"timeout_seconds",
             {{"type", "number"},
              {"minimum", kMinTimeout},
              {"maximum", kMaxTimeout},
              {"default", 30},
              {"description", "Wall-clock limit for this execution."}}}}},
          {"required", {"code"}},
          {"additionalProperties", false}};
}

json ExecuteOutputSchema() {
  json str = {{"type", "string"}};
  json count = {{"type", "integer"}, {"minimum", 0}};
  return {{"type", "object"},
          {"properties",
           {{"status",
             {{"type", "string"},
              {"enum",
               {"ok", "error", "syntax_error", "policy_violation", "timeout", "memory_limit", "output_limit",
                "killed", "internal_error"}}}},
            {"stdout", str},
            {"stderr", str},
            {"result_text", str},
            {"error",
             {{"type", "object"},
              {"properties",
               {{"ename", str}, {"evalue", str}, {"traceback", {{"type", "array"}, {"items", str}}}}},
              {"required", {"ename", "evalue", "traceback"}}}},
            {"images",
             {{"type", "array"},
              {"items",
               {{"type", "object"},
                {"properties", {{"index", count}, {"mime_type", str}, {"width", count}, {"height", count}}},
                {"required", {"index", "mime_type"}}}}}},
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
            {"session",
             {{"type", "object"},
              {"properties",
               {{"id", str},
                {"generation", count},
                {"state", {{"type", "string"}, {"enum", {"preserved", "lost"}}}},
                {"reason", str}}},
              {"required", {"id", "generation", "state"}}}}}},
          {"required", {"status", "stdout", "stderr", "images", "files", "usage"}}};
}

json EmptySchema() {
  return {{"type", "object"}, {"properties", json::object()}, {"additionalProperties", false}};
}

json Tool(const char* name, const char* title, const char* description, json input, json output) {
  return {{"name", name},
          {"title", title},
          {"description", description},
          {"inputSchema", std::move(input)},
          {"outputSchema", std::move(output)}};
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

// The text/plain of a MIME bundle, if it has one.
std::optional<std::string> PlainText(const engine::MimeBundle& bundle) {
  if (!bundle.is_object() || !bundle.contains("data")) return std::nullopt;
  const json& data = bundle["data"];
  if (!data.is_object() || !data.contains("text/plain") || !data["text/plain"].is_string())
    return std::nullopt;
  return data["text/plain"].get<std::string>();
}

void AppendSection(std::string& text, const std::string& section) {
  if (section.empty()) return;
  if (!text.empty() && !text.ends_with('\n')) text += '\n';
  text += section;
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) AppendSection(out, l);
  return out;
}

// What the model reads: output first (that is what it asked for), then what went wrong.
std::string ReadableText(const engine::Result& r, size_t figures) {
  std::string text;
  AppendSection(text, r.stdout_text.text);
  if (r.stdout_text.truncated)
    AppendSection(text,
                  "[stdout truncated: " + std::to_string(r.stdout_text.dropped_bytes) + " bytes dropped]");
  // The agent writes the traceback to stderr too; show it once, under the error.
  std::string stderr_text = r.stderr_text.text;
  if (r.error && !r.error->traceback.empty()) {
    if (auto at = stderr_text.find(r.error->traceback.front()); at != std::string::npos)
      stderr_text.erase(at);
  }
  AppendSection(text, stderr_text);
  if (r.stderr_text.truncated)
    AppendSection(text,
                  "[stderr truncated: " + std::to_string(r.stderr_text.dropped_bytes) + " bytes dropped]");
  for (const auto& item : r.display) {
    auto plain = PlainText(item);
    if (plain && !(item.contains("data") && item["data"].contains("image/png"))) AppendSection(text, *plain);
  }
  if (r.result) {
    if (auto plain = PlainText(*r.result)) AppendSection(text, *plain);
  }
  if (figures > 0)
    AppendSection(text, "[" + std::to_string(figures) + (figures == 1 ? " figure" : " figures") +
                            " attached as image]");
  for (const auto& f : r.files) {
    AppendSection(
        text, "[file " + f.name + ", " + std::to_string(f.content.size()) + " bytes, " + f.mime_type + "]");
  }
  if (r.error) {
    AppendSection(text, Joined(r.error->traceback));
    std::string last = r.error->ename + ": " + r.error->evalue;
    if (r.error->traceback.empty() || r.error->traceback.back() != last) AppendSection(text, last);
  }
  if (r.status != engine::Status::kOk && r.status != engine::Status::kError) {
    AppendSection(text, std::string("[status: ") + engine::StatusName(r.status) + "]");
  }
  if (r.session && !r.session->preserved) {
    AppendSection(text,
                  "[session state lost (" + r.session->lost_reason +
                      "): variables and imports from earlier calls are gone; the session restarted empty]");
  }
  if (text.empty()) text = "[no output]";
  return text;
}

}  // namespace

json ToolDefinitions() {
  return json::array({
      Tool("execute_python", "Run Python",
           "Runs Python 3 in an isolated sandbox (no network, limited CPU, memory and time; numpy, pandas, "
           "matplotlib and scipy available) and returns stdout, stderr, the last expression's value, errors "
           "with "
           "tracebacks, and matplotlib figures as PNG images. Pass session_id to keep variables between "
           "calls.",
           ExecuteInputSchema(), ExecuteOutputSchema()),
      Tool("create_session", "Create session",
           "Creates a persistent Python session; pass its session_id to execute_python to keep variables and "
           "imports "
           "between calls.",
           EmptySchema(), ObjectSchema({"session_id"})),
      Tool("fork_session", "Fork session", "Copies a session's state into a new session.", SessionIdSchema(),
           ObjectSchema({"session_id"})),
      Tool("close_session", "Close session", "Closes a session and frees its resources.", SessionIdSchema(),
           ObjectSchema({"session_id"})),
  });
}

Expected<ExecuteArguments> ParseExecuteArguments(const json& arguments) {
  if (!arguments.is_object()) return Fail("arguments must be an object");
  ExecuteArguments a;
  auto code = arguments.find("code");
  if (code == arguments.end() || !code->is_string()) return Fail("'code' is required and must be a string");
  a.code = code->get<std::string>();
  if (auto id = arguments.find("session_id"); id != arguments.end() && !id->is_null()) {
    if (!id->is_string()) return Fail("'session_id' must be a string");
    a.session_id = id->get<std::string>();
  }
  if (auto t = arguments.find("timeout_seconds"); t != arguments.end() && !t->is_null()) {
    if (!t->is_number()) return Fail("'timeout_seconds' must be a number");
    a.timeout_seconds = t->get<double>();
    if (!std::isfinite(a.timeout_seconds) || a.timeout_seconds < kMinTimeout ||
        a.timeout_seconds > kMaxTimeout) {
      return Fail("'timeout_seconds' must be between 1 and 300");
    }
  }
  for (const auto& [key, value] : arguments.items()) {
    if (key != "code" && key != "session_id" && key != "timeout_seconds")
      return Fail("unknown argument '" + key + "'");
  }
  return a;
}

Expected<std::string> StringArgument(const json& arguments, const std::string& name) {
  if (!arguments.is_object()) return Fail("arguments must be an object");
  auto it = arguments.find(name);
  if (it == arguments.end() || !it->is_string())
    return Fail("'" + name + "' is required and must be a string");
  return it->get<std::string>();
}

json ExecutionToolResult(const engine::Result& r) {
  json content = json::array();
  json images = json::array();
  content.push_back(nullptr);  // the text block, filled in once the figures are counted
  for (const auto& item : r.display) {
    if (!item.is_object() || !item.contains("data") || !item["data"].is_object()) continue;
    const json& data = item["data"];
    if (!data.contains("image/png") || !data["image/png"].is_string()) continue;
    json image = {{"index", content.size()}, {"mime_type", "image/png"}};
    if (item.contains("metadata") && item["metadata"].is_object()) {
      const json& meta = item["metadata"];
      for (const char* key : {"width", "height"}) {
        if (meta.contains(key) && meta[key].is_number_unsigned()) image[key] = meta[key];
      }
    }
    images.push_back(image);
    content.push_back({{"type", "image"}, {"data", data["image/png"]}, {"mimeType", "image/png"}});
  }
  content[0] = {{"type", "text"}, {"text", ReadableText(r, images.size())}};

  json s = {{"status", engine::StatusName(r.status)},
            {"stdout", r.stdout_text.text},
            {"stderr", r.stderr_text.text},
            {"images", images},
            {"usage",
             {{"wall_ms", r.usage.wall_ms},
              {"cpu_ms", r.usage.cpu_ms},
              {"peak_memory_bytes", r.usage.peak_memory_bytes}}}};
  if (r.result) {
    if (auto plain = PlainText(*r.result)) s["result_text"] = *plain;
  }
  if (r.error)
    s["error"] = {{"ename", r.error->ename}, {"evalue", r.error->evalue}, {"traceback", r.error->traceback}};
  json files = json::array();
  for (const auto& f : r.files)
    files.push_back({{"name", f.name}, {"size", f.content.size()}, {"mime_type", f.mime_type}});
  s["files"] = files;
  if (r.session) {
    s["session"] = {{"id", r.session->id},
                    {"generation", r.session->generation},
                    {"state", r.session->preserved ? "preserved" : "lost"}};
    if (!r.session->preserved) s["session"]["reason"] = r.session->lost_reason;
  }
  return {{"content", content}, {"structuredContent", s}, {"isError", r.status != engine::Status::kOk}};
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
