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
      {"landlock_restricts", jail::LandlockRestricts(l.landlock_abi)},
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
    findings.push_back({{"rule", f.rule},
                        {"severity", f.severity},
                        {"line", f.line},
                        {"column", f.column},
                        {"message", f.message},
                        {"suggestion", f.suggestion}});
  }
  j["findings"] = findings;
  if (r.session) {
    j["session"] = {{"id", r.session->id},
                    {"generation", r.session->generation},
                    {"state", r.session->preserved ? "preserved" : "lost"}};
    if (!r.session->preserved) j["session"]["reason"] = r.session->lost_reason;
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

}  // namespace execbox::engine
