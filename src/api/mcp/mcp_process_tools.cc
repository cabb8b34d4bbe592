#include "api/mcp/mcp_process_tools.h"

#include <cstring>
#include <optional>

#include "api/common/json_text.h"
#include "api/common/process_json.h"
#include "api/mcp/mcp_tools.h"
#include "api/schema/request_schema.h"
#include "engine/mime.h"

namespace execbox::api {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct ProcessTool {
  const char* name;
  const char* title;
  Request arguments;
  const char* description;
};

// Short and exact about the limits (engine::ProcessLimits): a model plans by them.
constexpr ProcessTool kProcessToolList[] = {
    {"start_process", "Start process", kStartProcessTool,
     "Starts a command in a session's sandbox (a session from create_session; same files, home "
     "/home/user, no network), beside its Python: a shell command (bash -l -c) or argv. It runs in the "
     "background until it ends, is signalled, or the session closes; at most 32 run at once per session. "
     "Returns its pid; with wait_seconds, waits for it to end and returns its output so far too. Read its "
     "output with read_process_output (the last 1 MiB of each of stdout and stderr is kept)."},
    {"list_processes", "List processes", kListProcessesTool,
     "Lists a session's processes, running and recently ended (the last 64): pid, command or argv, tag, "
     "started, running, and how it ended (exit_code, or signal)."},
    {"read_process_output", "Read process output", kReadOutputTool,
     "Reads a process's stdout and stderr as text (invalid UTF-8 replaced) from offset. Pass the answer's "
     "next_offset as the next call's offset to get only what came since. Only the last 1 MiB of each "
     "stream is kept: dropped counts the bytes lost before next_offset. running false and more false: "
     "nothing more will come. wait_seconds waits for the process to end first."},
    {"send_process_input", "Send process input", kSendInputTool,
     "Writes text to the stdin of a process started with stdin: true, or types it into one started with "
     "pty: true (at most 1 MiB a call); close_stdin then closes a stdin pipe, so that the process reads end "
     "of file."},
    {"signal_process", "Signal process", kSignalProcessTool,
     "Sends a signal (SIGTERM unless another is named) to a process and its process group, then waits up "
     "to a second for it to end; returns the process as it then is."},
};

constexpr auto kSignalWait = std::chrono::seconds(1);
// start_process's output when it waits (read_process_output reads the rest).
constexpr size_t kStartOutputBytes = 32 << 10;

// An argument the checks let through, or its default from the request schema's table.
template <typename T>
T Argument(const json& fields, FieldId id) {
  const RequestField& field = FieldWithId(id);
  auto it = fields.find(field.name);
  return it != fields.end() ? it->get<T>() : json::parse(field.default_json).get<T>();
}

engine::Refusal BadArgument(std::string detail) {
  return engine::MakeRefusal(engine::RefusalReason::kInvalidArguments, std::move(detail));
}

json ProcessInfoSchema() {
  json str = {{"type", "string"}}, boolean = {{"type", "boolean"}};
  json count = {{"type", "integer"}, {"minimum", 0}};
  json maybe_int = {{"type", {"integer", "null"}}};
  return {{"type", "object"},
          {"properties",
           {{"pid", {{"type", "integer"}}},
            {"argv", {{"type", "array"}, {"items", str}}},
            {"command", str},
            {"tag", str},
            {"pty", boolean},
            {"started", str},
            {"running", boolean},
            {"stdin_open", boolean},
            {"output_bytes", count},
            {"exit_code", maybe_int},
            {"signal", maybe_int},
            {"ended", str},
            {"ended_by", {{"type", "string"}, {"enum", {"exit", "signal", "session_end"}}}},
            {"size", {{"type", "object"}}}}},
          {"required", {"pid", "argv", "tag", "started", "running"}}};
}

// What read_process_output answers, and start_process with wait_seconds besides the process.
json OutputProperties() {
  json str = {{"type", "string"}};
  json count = {{"type", "integer"}, {"minimum", 0}};
  return {{"stdout", str},
          {"stderr", str},
          {"next_offset", count},
          {"more", {{"type", "boolean"}, {"description", "More output is held past next_offset."}}},
          {"dropped", count}};
}

json OutputSchema(const std::string& tool) {
  if (tool == "list_processes") {
    return {{"type", "object"},
            {"properties", {{"processes", {{"type", "array"}, {"items", ProcessInfoSchema()}}}}},
            {"required", {"processes"}}};
  }
  if (tool == "read_process_output") {
    json properties = OutputProperties();
    properties.update(json{{"pid", {{"type", "integer"}}},
                           {"running", {{"type", "boolean"}}},
                           {"exit_code", {{"type", "integer"}}},
                           {"signal", {{"type", "integer"}}},
                           {"ended_by", {{"type", "string"}}}});
    return {{"type", "object"},
            {"properties", properties},
            {"required", {"pid", "stdout", "stderr", "next_offset", "more", "running"}}};
  }
  json schema = ProcessInfoSchema();
  if (tool == "start_process") schema["properties"].update(OutputProperties());
  if (tool == "send_process_input") schema["properties"]["written"] = {{"type", "integer"}, {"minimum", 0}};
  if (tool == "signal_process") schema["properties"]["sent_signal"] = {{"type", "integer"}};
  return schema;
}

// Bytes of the code's output as text: invalid UTF-8 becomes U+FFFD here, not only when the
// answer is serialized, so that the text block and structuredContent say the same.
std::string Text(std::string bytes) {
  if (engine::IsValidUtf8(bytes)) return bytes;
  return json::parse(Serialize(json(std::move(bytes)))).get<std::string>();
}

// The length of a UTF-8 sequence cut off at the end of `s` (0 when it ends whole).
size_t IncompleteTail(std::string_view s) {
  for (size_t k = 1; k <= 3 && k <= s.size(); ++k) {
    const auto c = static_cast<unsigned char>(s[s.size() - k]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: its lead is further back
    const size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return need > k ? k : 0;
  }
  return 0;
}

// A process's output from `from`, split by stream, and the process as it was when last read.
struct Collected {
  std::string out, err;
  uint64_t next_offset = 0;
  uint64_t dropped = 0;
  bool more = false;
  engine::ProcessInfo info;
};

// What the HTTP output route's follower reads, bounded for one answer: from `from` until the
// process has ended and all of its output is read, `max_bytes` are collected, the wait is over,
// or the call is cancelled. Without a wait, what is held now.
engine::Refused<Collected> Collect(engine::Gate& gate, const engine::Caller& caller, const std::string& id,
                                   int32_t pid, uint64_t from, size_t max_bytes, int wait_seconds,
                                   const std::atomic<bool>& cancel) {
  // The table held: a wait goes on even if the session closes meanwhile (its processes end).
  auto table = gate.ProcessesOf(caller, id);
  if (!table) return std::unexpected(std::move(table.error()));
  const auto deadline = Clock::now() + std::chrono::seconds(wait_seconds);
  const auto wait = wait_seconds > 0 ? std::optional(deadline) : std::nullopt;
  Collected c{.next_offset = from};
  size_t collected = 0, last_chunk = 0;
  std::string* last_stream = nullptr;
  for (;;) {
    auto got = (*table)->Read(pid, c.next_offset, max_bytes - collected, wait, &cancel);
    if (!got) return std::unexpected(gate.FromProcess(got.error()));
    c.dropped += got->read.dropped;
    for (const auto& chunk : got->read.chunks) {
      // A pty's one stream is what its terminal showed: stdout and stderr together.
      last_stream = chunk.stream == engine::OutputStream::kStderr ? &c.err : &c.out;
      last_stream->append(chunk.data);
      last_chunk = chunk.data.size();
      collected += chunk.data.size();
    }
    c.next_offset = got->read.next_offset;
    c.info = std::move(got->info);
    const bool ended = !c.info.running && c.next_offset >= c.info.output_bytes;
    if (!wait || ended || collected >= max_bytes || Clock::now() >= deadline || cancel) break;
  }
  c.more = c.next_offset < c.info.output_bytes;
  // A character cut at the end is left for the next read, which gets it whole, unless none follows.
  if (last_stream != nullptr && (c.more || c.info.running)) {
    const size_t cut = IncompleteTail(*last_stream);
    if (cut > 0 && cut <= last_chunk) {
      last_stream->resize(last_stream->size() - cut);
      c.next_offset -= cut;
      c.more = true;
    }
  }
  c.out = Text(std::move(c.out));
  c.err = Text(std::move(c.err));
  return c;
}

std::string Describe(const engine::ProcessInfo& p) {
  std::string what = p.command;
  for (const auto& arg : p.argv) {
    if (!p.command.empty()) break;
    what += (what.empty() ? "" : " ") + arg;
  }
  if (what.size() > 80) what = what.substr(0, 77) + "...";
  std::string state;
  if (p.running) {
    state = "is running";
  } else if (p.exit_code) {
    state = "exited with code " + std::to_string(*p.exit_code);
  } else if (p.signal) {
    const char* name = ::sigabbrev_np(*p.signal);
    state =
        "was ended by signal " + std::to_string(*p.signal) + (name ? " (SIG" + std::string(name) + ")" : "");
  } else {
    state = "ended with its session";
  }
  return "process " + std::to_string(p.pid) + " (" + what + ") " + state;
}

// The output as a model reads it best: stdout as it is, stderr after a marker, then one line
// of what the process is doing and where to read on.
std::string OutputText(const Collected& c) {
  std::string text = c.out;
  if (!text.empty() && text.back() != '\n') text += "\n";
  if (!c.err.empty()) text += "--- stderr ---\n" + c.err + (c.err.back() == '\n' ? "" : "\n");
  if (c.out.empty() && c.err.empty())
    text += c.info.running || c.more ? "(no new output)\n" : "(no output)\n";
  if (c.dropped > 0) {
    text += "[execbox] " + std::to_string(c.dropped) +
            " bytes before this were dropped (only the last 1 MiB of each stream is kept)\n";
  }
  text += "[execbox] " + Describe(c.info) + "; next_offset " + std::to_string(c.next_offset) +
          (c.more ? " (more output is held: read again from there)" : "");
  return text;
}

void AddOutput(json& out, const Collected& c) {
  out["stdout"] = c.out;
  out["stderr"] = c.err;
  out["next_offset"] = c.next_offset;
  out["more"] = c.more;
  if (c.dropped > 0) out["dropped"] = c.dropped;
}

json WithText(json value, std::string text) {
  json result = StructuredToolResult(std::move(value));
  result["content"] = json::array({{{"type", "text"}, {"text", std::move(text)}}});
  return result;
}

}  // namespace

json ProcessToolDefinitions() {
  json tools = json::array();
  for (const auto& tool : kProcessToolList) {
    tools.push_back({{"name", tool.name},
                     {"title", tool.title},
                     {"description", tool.description},
                     {"inputSchema", ToolArgumentsSchema(tool.arguments)},
                     {"outputSchema", OrRefusal(OutputSchema(tool.name))}});
  }
  return tools;
}

bool IsProcessTool(std::string_view name) {
  for (const auto& tool : kProcessToolList) {
    if (name == tool.name) return true;
  }
  return false;
}

json CallProcessTool(engine::Gate& gate, const engine::Caller& caller, const engine::Origin& origin,
                     const std::string& name, const json& arguments, const std::atomic<bool>& cancel) {
  const ProcessTool* tool = nullptr;
  for (const auto& t : kProcessToolList) {
    if (name == t.name) tool = &t;
  }
  if (tool == nullptr) return ToolError("unknown tool: " + name.substr(0, 100));
  auto checked = CheckFields(arguments, tool->arguments);
  if (!checked) return RefusalToolResult(BadArgument(checked.error().detail));
  const json& f = *checked;
  const std::string id = f["session_id"].get<std::string>();
  const int32_t pid = f.contains("pid") ? f["pid"].get<int32_t>() : 0;
  const int wait_seconds =
      tool->arguments & (kStartProcessTool | kReadOutputTool) ? Argument<int>(f, FieldId::kWaitSeconds) : 0;

  if (name == "start_process") {
    auto spec = ReadProcessSpec(f);
    if (!spec) return RefusalToolResult(BadArgument(spec.error().detail));
    auto started = gate.StartProcess(caller, id, *spec, origin);
    if (!started) return RefusalToolResult(started.error());
    if (wait_seconds == 0) {
      return StructuredToolResult(ProcessInfoJson(*started));
    }
    auto output = Collect(gate, caller, id, started->pid, 0, kStartOutputBytes, wait_seconds, cancel);
    if (!output) return RefusalToolResult(output.error());
    json out = ProcessInfoJson(output->info);
    AddOutput(out, *output);
    return WithText(std::move(out), OutputText(*output));
  }
  if (name == "list_processes") {
    auto list = gate.ListProcesses(caller, id);
    if (!list) return RefusalToolResult(list.error());
    json processes = json::array();
    for (const auto& p : *list) processes.push_back(ProcessInfoJson(p));
    return StructuredToolResult({{"processes", processes}});
  }
  if (name == "read_process_output") {
    const auto offset = Argument<uint64_t>(f, FieldId::kOffset);
    const auto max_bytes = Argument<size_t>(f, FieldId::kMaxBytes);
    auto output = Collect(gate, caller, id, pid, offset, max_bytes, wait_seconds, cancel);
    if (!output) return RefusalToolResult(output.error());
    json out = {{"pid", pid}, {"running", output->info.running}};
    AddOutput(out, *output);
    if (output->info.exit_code) out["exit_code"] = *output->info.exit_code;
    if (output->info.signal) out["signal"] = *output->info.signal;
    if (!output->info.running) out["ended_by"] = output->info.ended_by;
    return WithText(std::move(out), OutputText(*output));
  }
  if (name == "send_process_input") {
    const std::string input = f["input"].get<std::string>();
    if (!input.empty()) {
      if (auto written = gate.WriteProcessInput(caller, id, pid, input); !written)
        return RefusalToolResult(written.error());
    }
    if (Argument<bool>(f, FieldId::kCloseStdin)) {
      if (auto closed = gate.CloseProcessInput(caller, id, pid); !closed)
        return RefusalToolResult(closed.error());
    }
    auto info = gate.GetProcess(caller, id, pid);
    if (!info) return RefusalToolResult(info.error());
    json out = ProcessInfoJson(*info);
    out["written"] = input.size();
    return StructuredToolResult(std::move(out));
  }
  // signal_process
  const std::optional<int> signal = ReadSignal(Argument<json>(f, FieldId::kToolSignal));
  if (!signal) {
    return RefusalToolResult(
        BadArgument("'signal' must name a signal (\"SIGTERM\", \"KILL\", ...) or be its number (1-64)"));
  }
  if (auto sent = gate.SignalProcess(caller, id, pid, *signal, origin); !sent)
    return RefusalToolResult(sent.error());
  // A moment for it to end, so that the answer says whether the signal ended it.
  auto info = gate.WaitProcess(caller, id, pid, Clock::now() + kSignalWait, &cancel);
  if (!info) return RefusalToolResult(info.error());
  json out = ProcessInfoJson(*info);
  out["sent_signal"] = *signal;
  return StructuredToolResult(std::move(out));
}

}  // namespace execbox::api
