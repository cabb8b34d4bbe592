#include "engine/report.h"

#include <memory>
#include <string_view>

#include "engine/execute_options.h"

namespace execbox::engine {
namespace {

using nlohmann::json;

constexpr int kMaxDepth = 32;
constexpr size_t kMaxTracebackLines = 2000;
// A parsed value costs ~20-60x its bytes in the text ("" is 3 bytes, 64 as a json string), so
// a line is parsed only if it holds few enough values: a hostile line of 8 MiB of "",
// would otherwise cost the supervisor over 200 MiB.
constexpr size_t kMaxValuesPerLine = 200'000;
constexpr size_t kMaxFindings = 1000;
// The agent caps its own events; these bound what forged lines can add to a result.
constexpr size_t kMaxStreamBytes = 16u << 20;
constexpr size_t kMaxDisplayItems = 1000;

// A SAX pass that only counts: linear time, no allocation beyond the current token. It stands
// in for parse()'s callback, which nlohmann 3.11 runs in quadratic time for arrays of objects
// (end_object scans the whole parent for discarded values), so a forged line of 300k {}
// would stall the supervisor for a minute.
class Budget : public nlohmann::json_sax<json> {
 public:
  bool null() override { return Value(); }
  bool boolean(bool) override { return Value(); }
  bool number_integer(number_integer_t) override { return Value(); }
  bool number_unsigned(number_unsigned_t) override { return Value(); }
  bool number_float(number_float_t, const string_t&) override { return Value(); }
  bool string(string_t&) override { return Value(); }
  bool binary(binary_t&) override { return Value(); }
  bool start_object(std::size_t) override { return Value() && ++depth_ <= kMaxDepth; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return --depth_, true; }
  bool start_array(std::size_t) override { return Value() && ++depth_ <= kMaxDepth; }
  bool end_array() override { return --depth_, true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  bool Value() { return ++values_ <= kMaxValuesPerLine; }
  size_t values_ = 0;
  int depth_ = 0;
};

bool WithinBudget(std::string_view line) {
  Budget budget;
  return json::sax_parse(line, &budget, json::input_format_t::json, /*strict=*/true);
}

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::optional<int64_t> Int(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

// A bundle's data must be an object of strings (JSON values only for */json types).
std::optional<MimeBundle> Bundle(const json& event) {
  auto data = event.find("data");
  if (data == event.end() || !data->is_object()) return std::nullopt;
  json clean = json::object();
  for (auto it = data->begin(); it != data->end(); ++it) {
    std::string_view mime = it.key();
    bool json_type = mime.size() >= 4 && mime.substr(mime.size() - 4) == "json";
    if (it->is_string() || json_type) clean[it.key()] = *it;
  }
  if (!clean.contains("text/plain")) clean["text/plain"] = "";
  json metadata = json::object();
  if (auto m = event.find("metadata"); m != event.end() && m->is_object()) metadata = *m;
  return json{{"data", clean}, {"metadata", metadata}};
}

ErrorInfo Error(const json& e) {
  ErrorInfo info{.ename = Str(e, "ename"), .evalue = Str(e, "evalue")};
  if (auto tb = e.find("traceback"); tb != e.end() && tb->is_array()) {
    for (const auto& line : *tb) {
      if (line.is_string() && info.traceback.size() < kMaxTracebackLines)
        info.traceback.push_back(line.get<std::string>());
    }
  }
  info.line = Int(e, "line");
  info.column = Int(e, "column");
  if (auto t = e.find("text"); t != e.end() && t->is_string()) info.text = t->get<std::string>();
  return info;
}

void Findings(const json& event, AgentReport& r) {
  auto list = event.find("findings");
  if (list == event.end() || !list->is_array()) return;
  for (const auto& f : *list) {
    if (!f.is_object() || r.findings.size() >= kMaxFindings) continue;
    r.findings.push_back({.rule = Str(f, "rule"),
                          .severity = Str(f, "severity"),
                          .tool = Str(f, "tool"),
                          .code = Str(f, "code"),
                          .line = Int(f, "line").value_or(0),
                          .column = Int(f, "column").value_or(0),
                          .message = Str(f, "message"),
                          .suggestion = Str(f, "suggestion")});
  }
}

void Installed(const json& event, AgentReport& r) {
  auto list = event.find("packages");
  if (list == event.end() || !list->is_array()) return;
  for (const auto& p : *list) {
    if (!p.is_object() || r.installed.size() >= 256) continue;
    InstalledPackage package{.name = Str(p, "name"), .version = Str(p, "version"), .modules = {}};
    if (auto m = p.find("modules"); m != p.end() && m->is_array()) {
      for (const auto& name : *m) {
        if (name.is_string() && package.modules.size() < 256)
          package.modules.push_back(name.get<std::string>());
      }
    }
    r.installed.push_back(std::move(package));
  }
}

// At most kMaxNetAttempts, each a host (at most kMaxNetRuleBytes) and a port; once per report.
void NetworkAttempts(const json& event, AgentReport& r) {
  constexpr size_t kMaxNetAttempts = 64;
  if (r.network_attempts) return;
  NetRecord record;
  auto list = event.find("attempts");
  if (list == event.end() || !list->is_array()) return;
  for (const json& a : *list) {
    if (!a.is_object()) continue;
    if (record.connections.size() >= kMaxNetAttempts) {
      ++record.omitted;
      continue;
    }
    std::string host = Str(a, "host");
    if (host.size() > kMaxNetRuleBytes) host.resize(kMaxNetRuleBytes);
    const int64_t port = Int(a, "port").value_or(0);
    record.connections.push_back(NetConnection{.host = std::move(host),
                                               .port = static_cast<uint16_t>(port >= 0 && port <= 65535 ? port : 0),
                                               .allowed = false,
                                               .reason = "no network"});
  }
  const int64_t omitted = Int(event, "omitted").value_or(0);
  if (omitted > 0 && omitted < (int64_t{1} << 32)) record.omitted += static_cast<uint64_t>(omitted);
  if (!record.connections.empty() || record.omitted != 0) r.network_attempts = std::move(record);
}

// `text` cut to at most `max` bytes at a character's start (the report's strings are valid UTF-8).
std::string Cut(std::string text, size_t max) {
  if (text.size() <= max) return text;
  size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  text.resize(end);
  return text;
}

// At most kMaxGuardEvents, each an event name and a detail, bounded; once per report.
void Guard(const json& event, AgentReport& r) {
  constexpr size_t kMaxGuardEvents = 64, kMaxGuardText = 400;
  if (r.guard) return;
  GuardRecord record;
  record.mode = Str(event, "mode");
  if (record.mode != "audit") return;
  if (auto list = event.find("refused"); list != event.end() && list->is_array()) {
    for (const json& e : *list) {
      if (!e.is_object()) continue;
      if (record.refused.size() >= kMaxGuardEvents) {
        ++record.omitted;
        continue;
      }
      record.refused.push_back(
          GuardEvent{.event = Cut(Str(e, "event"), 64), .detail = Cut(Str(e, "detail"), kMaxGuardText)});
    }
  }
  const int64_t omitted = Int(event, "omitted").value_or(0);
  if (omitted > 0 && omitted < (int64_t{1} << 32)) record.omitted += static_cast<uint64_t>(omitted);
  r.guard = std::move(record);
}

void Apply(const json& event, AgentReport& r) {
  std::string type = Str(event, "type");
  if (type == "stream") {
    std::string name = Str(event, "name");
    if (name != "stdout" && name != "stderr") return;
    if (r.stream_bytes >= kMaxStreamBytes) {
      r.streams_truncated = true;
      return;
    }
    r.stream_bytes += Str(event, "text").size();
    // Consecutive writes to one stream read better as one event.
    if (!r.streams.empty() && r.streams.back().name == name) {
      r.streams.back().text += Str(event, "text");
    } else {
      r.streams.push_back({name, Str(event, "text")});
    }
  } else if (type == "stream_truncated") {
    r.streams_truncated = true;
  } else if (type == "display") {
    if (r.display.size() >= kMaxDisplayItems) return;
    if (auto b = Bundle(event)) r.display.push_back(std::move(*b));
  } else if (type == "result") {
    r.result = Bundle(event);
  } else if (type == "error") {
    r.error = Error(event);
    r.error_phase = Str(event, "phase");
  } else if (type == "findings") {
    Findings(event, r);
  } else if (type == "installed") {
    Installed(event, r);
  } else if (type == "network_attempts") {
    NetworkAttempts(event, r);
  } else if (type == "guard") {
    Guard(event, r);
  } else if (type == "exit") {
    r.exit_code = Int(event, "code");
  }
}

}  // namespace

AgentReport ParseReport(const std::string& jsonl) {
  AgentReport r;
  size_t start = 0;
  while (start < jsonl.size()) {
    size_t end = jsonl.find('\n', start);
    if (end == std::string::npos) end = jsonl.size();
    std::string_view line(jsonl.data() + start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    json event = WithinBudget(line) ? json::parse(line, nullptr, /*allow_exceptions=*/false) : json();
    if (!event.is_object()) {
      ++r.malformed_lines;
      continue;
    }
    Apply(event, r);
  }
  return r;
}

void DisplayFollower::Feed(std::string_view bytes) {
  pending_.append(bytes);
  size_t start = 0;
  for (size_t end; (end = pending_.find('\n', start)) != std::string::npos; start = end + 1) {
    std::string_view line(pending_.data() + start, end - start);
    // Only display lines matter here: the agent writes the type as is, so any other line (a
    // stream's) is skipped before it is parsed. (A line the code forged with the word escaped
    // comes only at the end: its own display, out of order.)
    if (line.find("\"display\"") == std::string_view::npos || given_ >= kMaxDisplayItems) continue;
    json event = WithinBudget(line) ? json::parse(line, nullptr, /*allow_exceptions=*/false) : json();
    if (!event.is_object() || Str(event, "type") != "display") continue;
    if (auto b = Bundle(event)) {
      ++given_;  // counted as ParseReport counts them
      on_display_(*b);
    }
  }
  pending_.erase(0, start);
}

std::function<void(std::string_view)> DisplayFeed(const ExecuteOptions& options) {
  if (!options.on_display) return {};
  auto follower = std::make_shared<DisplayFollower>(options.on_display);
  return [follower](std::string_view bytes) { follower->Feed(bytes); };
}

}  // namespace execbox::engine
