#include "engine/result_json.h"

#include "base/base64.h"
#include "engine/limit_schema.h"
#include "jail/landlock.h"

namespace execbox::engine {
namespace {

using nlohmann::json;

json LayersJson(const jail::Layers& l) {
  return {
      {"namespaces",
       {{"user", l.user_ns},
        {"pid", l.pid_ns},
        {"mount", l.mount_ns},
        {"net", l.net_ns},
        {"ipc", l.ipc_ns},
        {"uts", l.uts_ns},
        {"cgroup", l.cgroup_ns}}},
      {"seccomp", l.seccomp},
      {"no_new_privs", l.no_new_privs},
      {"capabilities_dropped", l.capabilities_dropped},
      {"landlock_abi", l.landlock_abi},
      {"landlock_restricts", jail::LandlockRestricts(l.landlock_abi, l.landlock_tcp)},
      {"cgroup", l.cgroup},
      {"hostname", l.hostname},
      {"proc", l.proc},
  };
}

}  // namespace

json ToJson(const Result& r) {
  json j;
  j["status"] = StatusName(r.status);
  j["exit_code"] = r.exit_code;
  j["signal"] = r.signal != 0 ? json(r.signal) : json(nullptr);
  if (r.signal != 0) j["signal_name"] = SignalName(r.signal);
  j["stdout"] = r.stdout_text.text;
  j["stderr"] = r.stderr_text.text;
  j["stdout_truncated"] = r.stdout_text.truncated;
  j["stderr_truncated"] = r.stderr_text.truncated;
  j["stdout_bytes"] = r.stdout_text.total_bytes;
  j["stderr_bytes"] = r.stderr_text.total_bytes;
  json streams = json::array();
  for (const auto& s : r.streams) streams.push_back({{"name", s.name}, {"text", s.text}});
  j["streams"] = streams;
  j["streams_truncated"] = r.streams_truncated;
  j["result"] = r.result ? *r.result : json(nullptr);
  j["display"] = r.display;
  if (r.error) {
    json e = {{"ename", r.error->ename}, {"evalue", r.error->evalue}, {"traceback", r.error->traceback}};
    if (r.error->line) e["line"] = *r.error->line;
    if (r.error->column) e["column"] = *r.error->column;
    if (r.error->text) e["text"] = *r.error->text;
    j["error"] = e;
  } else {
    j["error"] = nullptr;
  }
  json findings = json::array();
  for (const auto& f : r.findings) {
    json one = {{"rule", f.rule},     {"severity", f.severity}, {"line", f.line},
                {"column", f.column}, {"message", f.message},   {"suggestion", f.suggestion}};
    if (!f.tool.empty()) {
      one["tool"] = f.tool;
      one["code"] = f.code;
    }
    findings.push_back(std::move(one));
  }
  j["findings"] = findings;
  if (!r.installed.empty()) j["installed"] = InstalledJson(r.installed);
  if (r.network) j["network"] = NetworkJson(*r.network);
  if (r.guard) j["guard"] = GuardJson(*r.guard);
  if (r.session) {
    const SessionState& s = *r.session;
    j["session"] = {{"id", s.id},
                    {"generation", s.generation},
                    {"state", !s.preserved ? "lost"
                              : s.restored ? "restored"
                                           : "preserved"}};
    if (!s.preserved) j["session"]["reason"] = s.lost_reason;
    if (!s.preserved && s.files_kept) j["session"]["files_kept"] = true;
    if (s.preserved && s.restored) {
      j["session"]["reason"] = s.restored_note;
      json left = json::array();
      for (const auto& e : s.not_restored)
        left.push_back({{"name", e.name}, {"type", e.type}, {"reason", e.reason}});
      j["session"]["not_restored"] = std::move(left);
    }
  }
  j["usage"] = UsageJson(r);
  json files = json::array();
  for (const auto& f : r.files) {
    files.push_back({{"name", f.name},
                     {"size", f.content.size()},
                     {"mime_type", f.mime_type},
                     {"content_base64", Base64Encode(f.content)}});
  }
  j["files"] = files;
  j["skipped_files"] = r.skipped_files;
  j["limits"] = LimitsResultJson(r.limits, r.enforcement);
  j["isolation"] = LayersJson(r.layers);
  return j;
}

json InstalledJson(const std::vector<InstalledPackage>& installed) {
  json list = json::array();
  for (const auto& p : installed)
    list.push_back({{"name", p.name}, {"version", p.version}, {"modules", p.modules}});
  return list;
}

json GuardJson(const GuardRecord& record) {
  json refused = json::array();
  for (const GuardEvent& e : record.refused) refused.push_back({{"event", e.event}, {"detail", e.detail}});
  return {{"mode", record.mode}, {"refused", std::move(refused)}, {"omitted", record.omitted}};
}

json NetPolicyJson(const NetPolicy& policy) {
  auto texts = [](const std::vector<NetRule>& rules) {
    json out = json::array();
    for (const NetRule& r : rules) out.push_back(r.text);
    return out;
  };
  return {{"allow", texts(policy.allow)}, {"deny", texts(policy.deny)}};
}

json NetworkJson(const NetRecord& record) {
  json list = json::array();
  for (const NetConnection& c : record.connections) {
    json one = {{"protocol", c.protocol},
                {"host", c.host},
                {"port", c.port},
                {"address", c.address.empty() ? json(nullptr) : json(c.address)},
                {"allowed", c.allowed},
                {"bytes_sent", c.bytes_sent},
                {"bytes_received", c.bytes_received},
                {"duration_ms", c.duration_ms}};
    if (!c.reason.empty()) one["reason"] = c.reason;
    if (!c.rule.empty()) one["rule"] = c.rule;
    list.push_back(std::move(one));
  }
  return {{"connections", std::move(list)}, {"omitted", record.omitted}};
}

json UsageJson(const Result& r) {
  return {{"engine", r.engine},
          {"setup_ms", r.usage.setup_ms},
          {"wall_ms", r.usage.wall_ms},
          {"cpu_ms", r.usage.cpu_ms},
          {"peak_memory_bytes", r.usage.peak_memory_bytes}};
}

std::string Dump(const json& j, int indent) {
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

namespace {

// "stdout" or "stderr" with its _truncated and _bytes (at() and get() throw, naming the field).
StreamText StreamOf(const json& j, const std::string& name) {
  StreamText out{.text = j.at(name).get<std::string>(),
                 .truncated = j.at(name + "_truncated").get<bool>(),
                 .total_bytes = j.at(name + "_bytes").get<uint64_t>()};
  out.dropped_bytes = out.total_bytes > out.text.size() ? out.total_bytes - out.text.size() : 0;
  return out;
}

}  // namespace

Expected<Result> ResultFromJson(const json& j) {
  if (!j.is_object()) return Fail("the result is not a JSON object");
  Result r;
  try {
    const std::string status = j.at("status").get<std::string>();
    bool known = false;
    for (int s = 0; s <= static_cast<int>(Status::kInternalError) && !known; ++s) {
      if (status == StatusName(static_cast<Status>(s))) {
        r.status = static_cast<Status>(s);
        known = true;
      }
    }
    if (!known) return Fail("the result's status '" + status + "' is not one this client knows");
    r.exit_code = j.at("exit_code").get<int>();
    r.signal = j.at("signal").is_null() ? 0 : j.at("signal").get<int>();
    r.stdout_text = StreamOf(j, "stdout");
    r.stderr_text = StreamOf(j, "stderr");
    for (const auto& s : j.at("streams"))
      r.streams.push_back({s.at("name").get<std::string>(), s.at("text").get<std::string>()});
    r.streams_truncated = j.at("streams_truncated").get<bool>();
    if (!j.at("result").is_null()) r.result = j.at("result");
    for (const auto& d : j.at("display")) r.display.push_back(d);
    if (const json& e = j.at("error"); !e.is_null()) {
      ErrorInfo info{.ename = e.at("ename").get<std::string>(),
                     .evalue = e.at("evalue").get<std::string>(),
                     .traceback = e.at("traceback").get<std::vector<std::string>>()};
      if (e.contains("line")) info.line = e.at("line").get<int64_t>();
      if (e.contains("column")) info.column = e.at("column").get<int64_t>();
      if (e.contains("text")) info.text = e.at("text").get<std::string>();
      r.error = std::move(info);
    }
    for (const auto& f : j.at("findings")) {
      r.findings.push_back({.rule = f.at("rule").get<std::string>(),
                            .severity = f.at("severity").get<std::string>(),
                            .tool = f.value("tool", ""),
                            .code = f.value("code", ""),
                            .line = f.at("line").get<int64_t>(),
                            .column = f.at("column").get<int64_t>(),
                            .message = f.at("message").get<std::string>(),
                            .suggestion = f.at("suggestion").get<std::string>()});
    }
    if (auto it = j.find("session"); it != j.end()) {
      r.session = SessionState{.id = it->at("id").get<std::string>(),
                               .generation = it->at("generation").get<uint64_t>(),
                               .preserved = it->at("state").get<std::string>() != "lost",
                               .lost_reason = it->value("reason", ""),
                               .files_kept = it->value("files_kept", false)};
      if (it->at("state").get<std::string>() == "restored") {
        r.session->restored = true;
        r.session->restored_note = r.session->lost_reason;
        r.session->lost_reason.clear();
        for (const auto& e : it->value("not_restored", json::array())) {
          r.session->not_restored.push_back({.name = e.at("name").get<std::string>(),
                                             .type = e.at("type").get<std::string>(),
                                             .reason = e.at("reason").get<std::string>()});
        }
      }
    }
    const json& usage = j.at("usage");
    r.engine = usage.at("engine").get<std::string>();
    r.usage.setup_ms = usage.at("setup_ms").get<uint64_t>();
    r.usage.wall_ms = usage.at("wall_ms").get<uint64_t>();
    r.usage.cpu_ms = usage.at("cpu_ms").get<uint64_t>();
    r.usage.peak_memory_bytes = usage.at("peak_memory_bytes").get<uint64_t>();
    for (const auto& f : j.at("files")) {
      auto content = Base64Decode(f.at("content_base64").get<std::string>());
      if (!content) return Fail("the result's file '" + f.at("name").get<std::string>() + "' is not base64");
      r.files.push_back({.name = f.at("name").get<std::string>(),
                         .mime_type = f.at("mime_type").get<std::string>(),
                         .content = std::move(*content)});
    }
    r.skipped_files = j.at("skipped_files").get<std::vector<std::string>>();
    if (auto it = j.find("network"); it != j.end()) {
      NetRecord record;
      for (const auto& c : it->at("connections")) {
        const json& address = c.at("address");
        record.connections.push_back({.protocol = c.at("protocol").get<std::string>(),
                                      .host = c.at("host").get<std::string>(),
                                      .port = c.at("port").get<uint16_t>(),
                                      .address = address.is_null() ? "" : address.get<std::string>(),
                                      .allowed = c.at("allowed").get<bool>(),
                                      .reason = c.value("reason", ""),
                                      .rule = c.value("rule", ""),
                                      .bytes_sent = c.at("bytes_sent").get<uint64_t>(),
                                      .bytes_received = c.at("bytes_received").get<uint64_t>(),
                                      .duration_ms = c.at("duration_ms").get<uint64_t>()});
      }
      record.omitted = it->at("omitted").get<uint64_t>();
      r.network = std::move(record);
    }
    if (auto it = j.find("guard"); it != j.end()) {
      GuardRecord record{.mode = it->at("mode").get<std::string>(),
                         .omitted = it->at("omitted").get<uint64_t>()};
      for (const auto& e : it->at("refused"))
        record.refused.push_back(
            {.event = e.at("event").get<std::string>(), .detail = e.at("detail").get<std::string>()});
      r.guard = std::move(record);
    }
  } catch (const json::exception& e) {
    // at() names the key it missed; get() the type it wanted.
    return Fail(std::string("the result does not have the documented shape: ") + e.what());
  }
  return r;
}

}  // namespace execbox::engine
