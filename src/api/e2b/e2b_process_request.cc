#include "api/e2b/e2b_process_request.h"

#include <charconv>
#include <limits>

#include "base/base64.h"

namespace execbox::api::e2b {
namespace {

using nlohmann::json;

constexpr const char* kBash = "/bin/bash";  // the SDKs' commands.run(cmd): bash -l -c cmd

const json& Field(const json& object, const char* name) {
  static const json null;
  if (!object.is_object()) return null;
  auto it = object.find(name);
  return it == object.end() ? null : *it;
}

RpcError Invalid(std::string message) { return RpcError{"invalid_argument", std::move(message)}; }

// A protobuf integer in its JSON mapping: a number, or a decimal string.
std::optional<uint64_t> Unsigned(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  if (!v.is_string()) return std::nullopt;
  const auto& s = v.get_ref<const std::string&>();
  uint64_t n = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), n);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return n;
}

// A pty's rows or cols; anything past uint16_t as 0, which the table refuses as it does any
// size out of its range.
uint16_t Dimension(const json& size, const char* name, uint16_t otherwise) {
  const json& v = Field(size, name);
  if (v.is_null()) return otherwise;
  auto n = Unsigned(v);
  return n && *n <= std::numeric_limits<uint16_t>::max() ? static_cast<uint16_t>(*n) : 0;
}

// A ProcessInput's bytes: protobuf's JSON base64, standard or URL-safe, padded or not.
std::expected<std::string, RpcError> InputOf(const json& input) {
  const json& v = Field(input, "stdin").is_null() ? Field(input, "pty") : Field(input, "stdin");
  std::optional<std::string> bytes;
  if (v.is_string()) {
    std::string text = v.get<std::string>();
    for (char& c : text) {
      if (c == '-') c = '+';
      if (c == '_') c = '/';
    }
    while (text.size() % 4 != 0) text += '=';
    bytes = Base64Decode(text);
  }
  if (!bytes) return std::unexpected(Invalid("the input must carry stdin or pty bytes (base64)"));
  return std::move(*bytes);
}

}  // namespace

std::expected<ProcessSelector, RpcError> SelectorOf(const json& request) {
  const json& process = Field(request, "process");
  const json& pid = Field(process, "pid");
  const json& tag = Field(process, "tag");
  if (!pid.is_null()) {
    auto n = Unsigned(pid);
    if (!n || *n == 0 || *n > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
      return std::unexpected(Invalid("process.pid must be a process id"));
    return ProcessSelector{.pid = static_cast<int32_t>(*n), .tag = {}};
  }
  if (tag.is_string() && !tag.get_ref<const std::string&>().empty())
    return ProcessSelector{.pid = 0, .tag = tag.get<std::string>()};
  return std::unexpected(Invalid(R"(process must select a process: {"pid": N} or {"tag": "..."})"));
}

std::expected<StartSpec, RpcError> StartSpecOf(const json& start,
                                               const std::map<std::string, std::string>& env) {
  const json& process = Field(start, "process");
  if (!process.is_object())
    return std::unexpected(Invalid("the request must be a StartRequest with its process"));
  const json& cmd = Field(process, "cmd");
  if (!cmd.is_string() || cmd.get_ref<const std::string&>().empty())
    return std::unexpected(Invalid("process.cmd must be a program's name"));
  StartSpec out;
  std::vector<std::string> args;
  const json& sent_args = Field(process, "args");
  if (!sent_args.is_null() && !sent_args.is_array())
    return std::unexpected(Invalid("process.args must be strings"));
  if (sent_args.is_array()) {
    for (const auto& a : sent_args) {
      if (!a.is_string()) return std::unexpected(Invalid("process.args must be strings"));
      args.push_back(a.get<std::string>());
    }
  }
  out.spec.env = env;  // the sandbox's envVars, under the process's own
  json envs = json::object();
  const json& sent_envs = Field(process, "envs");
  if (!sent_envs.is_null() && !sent_envs.is_object())
    return std::unexpected(Invalid("process.envs must map names to strings"));
  if (sent_envs.is_object()) {
    for (const auto& [k, v] : sent_envs.items()) {
      if (!v.is_string()) return std::unexpected(Invalid("process.envs must map names to strings"));
      out.spec.env[k] = v.get<std::string>();
    }
    envs = sent_envs;
  }
  out.config = {{"cmd", cmd}, {"args", args}, {"envs", envs}};
  const json& cwd = Field(process, "cwd");
  if (cwd.is_string() && !cwd.get_ref<const std::string&>().empty()) {
    out.spec.cwd = AbsoluteInSandbox(cwd.get<std::string>());
    out.config["cwd"] = cwd;
  }
  // commands.run(cmd) as the table's shell command, which the audit then shows as itself (an
  // empty one stays bash's argv: the table takes no empty command).
  if (cmd == kBash && args.size() == 3 && args[0] == "-l" && args[1] == "-c" && !args[2].empty()) {
    out.spec.command = args[2];
  } else {
    out.spec.argv = {cmd.get<std::string>()};
    out.spec.argv.insert(out.spec.argv.end(), args.begin(), args.end());
  }
  const json& pty = Field(start, "pty");
  if (pty.is_object()) {
    out.spec.pty = true;
    out.spec.rows = Dimension(Field(pty, "size"), "rows", 24);
    out.spec.cols = Dimension(Field(pty, "size"), "cols", 80);
  }
  const json& tag = Field(start, "tag");
  if (tag.is_string()) out.spec.tag = tag.get<std::string>();
  // Unset, stdin is open: envd's default (before 0.3.0 it could not be closed at all).
  const json& stdin = Field(start, "stdin");
  out.spec.stdin = stdin.is_boolean() ? stdin.get<bool>() : true;
  return out;
}

json ConfigOf(const engine::ProcessInfo& info) {
  if (!info.command.empty())
    return {{"cmd", kBash}, {"args", {"-l", "-c", info.command}}, {"envs", json::object()}};
  if (info.argv.empty()) return {{"cmd", ""}, {"args", json::array()}, {"envs", json::object()}};
  std::vector<std::string> args(info.argv.begin() + 1, info.argv.end());
  return {{"cmd", info.argv[0]}, {"args", args}, {"envs", json::object()}};
}

std::expected<ProcessCall, RpcError> ProcessCallOf(const std::string& method, const json& body) {
  ProcessCall call;
  if (method == "List") return call;
  auto selector = SelectorOf(body);
  if (!selector) return std::unexpected(selector.error());
  call.selector = std::move(*selector);
  if (method == "SendInput") {
    auto input = InputOf(Field(body, "input"));
    if (!input) return std::unexpected(input.error());
    call.input = std::move(*input);
  }
  if (method == "SendSignal") {
    // envd's Signal enum, by name or number: the only two it has.
    const json& signal = Field(body, "signal");
    if (signal == "SIGNAL_SIGKILL" || signal == 9) call.signal = 9;
    if (signal == "SIGNAL_SIGTERM" || signal == 15) call.signal = 15;
    if (call.signal == 0) return std::unexpected(Invalid("signal must be SIGNAL_SIGKILL or SIGNAL_SIGTERM"));
  }
  const json& pty = Field(body, "pty");
  if (method == "Update" && pty.is_object())
    call.size = {Dimension(Field(pty, "size"), "rows", 0), Dimension(Field(pty, "size"), "cols", 0)};
  return call;
}

std::expected<InputStream, RpcError> StreamInputOf(const std::vector<std::string>& messages) {
  InputStream out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const json event = json::parse(messages[i], nullptr, false);
    if (i == 0) {
      if (!Field(event, "start").is_object())
        return std::unexpected(Invalid("a StreamInput begins with its start event, naming the process"));
      auto selector = SelectorOf(Field(event, "start"));
      if (!selector) return std::unexpected(selector.error());
      out.selector = std::move(*selector);
      continue;
    }
    if (Field(event, "keepalive").is_object()) continue;
    auto input = InputOf(Field(Field(event, "data"), "input"));
    if (!input) return std::unexpected(input.error());
    out.inputs.push_back(std::move(*input));
  }
  if (messages.empty())
    return std::unexpected(Invalid("a StreamInput begins with its start event, naming the process"));
  return out;
}

}  // namespace execbox::api::e2b
