#include "api/http/metrics.h"

#include <charconv>
#include <cmath>

namespace execbox::api {

namespace {

// A sample value or bound: shortest round-trip form; +Inf, -Inf and NaN as Prometheus spells them.
std::string Number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

// Label values escape backslash, double quote and line feed.
std::string Escape(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char ch : value) {
    switch (ch) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out.push_back(ch);
    }
  }
  return out;
}

// {a="1",b="2"}
std::string LabelSet(const std::vector<std::pair<std::string, std::string>>& labels) {
  std::string out = "{";
  for (const auto& [name, value] : labels) {
    if (out.size() > 1) out += ",";
    out.append(name).append("=\"").append(Escape(value)).append("\"");
  }
  return out + "}";
}

void Header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void Gauge(std::string& out, std::string_view name, std::string_view help, size_t value) {
  Header(out, name, "gauge", help);
  out.append(name).append(" ").append(std::to_string(value)).append("\n");
}

template <typename Map>
void Counter(std::string& out, std::string_view name, std::string_view help, std::string_view label,
             const Map& map) {
  Header(out, name, "counter", help);
  for (const auto& [key, value] : map) {
    std::string label_value;
    if constexpr (std::is_same_v<typename Map::key_type, int>) {
      label_value = std::to_string(key);
    } else {
      label_value = Escape(key);
    }
    out.append(name).append("{").append(label).append("=\"").append(label_value).append("\"} ");
    out.append(std::to_string(value)).append("\n");
  }
}

// Each key's use, one gauge per cap it counts against (keys holding nothing left out).
void KeyGauges(std::string& out, const std::map<std::string, engine::KeyUse>& keys) {
  using U = engine::KeyUse;
  struct Row {
    const char* name;
    const char* help;
    uint64_t (*get)(const U&);
  };
  static constexpr Row kRows[] = {
      {"execbox_key_running_executions", "Executions running now, by key.",
       [](const U& u) -> uint64_t { return u.running; }},
      {"execbox_key_queued_executions", "Executions waiting for a slot, by key (cap: max_queued).",
       [](const U& u) -> uint64_t { return u.queued; }},
      {"execbox_key_sessions", "Sessions open, by key (cap: max_sessions).",
       [](const U& u) -> uint64_t { return u.sessions; }},
      {"execbox_key_session_processes", "Processes running in sessions, by key (cap: max_processes).",
       [](const U& u) -> uint64_t { return u.processes; }},
      {"execbox_key_session_state_bytes", "Bytes of session state kept, by key (cap: max_session_state_mb).",
       [](const U& u) -> uint64_t { return u.session_state_bytes; }},
  };
  for (const Row& row : kRows) {
    Header(out, row.name, "gauge", row.help);
    for (const auto& [key, use] : keys) {
      out.append(row.name).append(LabelSet({{"key", key}})).append(" ");
      out.append(std::to_string(row.get(use))).append("\n");
    }
  }
}

}  // namespace

void Metrics::Finished(std::string_view transport, std::string_view route, std::string_view status,
                       double seconds) {
  if (!(seconds >= 0)) seconds = 0;  // negative or NaN
  std::lock_guard lock(mu_);
  ++executions_[{
      {"transport", std::string(transport)}, {"route", std::string(route)}, {"status", std::string(status)}}];
  Histogram& h = latency_[{{"transport", std::string(transport)}, {"route", std::string(route)}}];
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    if (seconds <= kBuckets[i]) {
      ++h.counts[i];
      break;
    }
  }
  ++h.count;
  h.sum += seconds;
}

void Metrics::Refused(std::string_view transport, std::string_view reason) {
  std::lock_guard lock(mu_);
  ++rejected_[{{"transport", std::string(transport)}, {"reason", std::string(reason)}}];
}

void Metrics::Connections(std::string_view caller, uint64_t allowed, uint64_t refused) {
  std::lock_guard lock(mu_);
  // Both series appear with a key's first execution under a policy, so a rate over either works.
  connections_[{{"key", std::string(caller)}, {"outcome", "allowed"}}] += allowed;
  connections_[{{"key", std::string(caller)}, {"outcome", "refused"}}] += refused;
}

void Metrics::Response(int status) {
  std::lock_guard lock(mu_);
  ++responses_[status];
}

void Metrics::ConnectionDropped(std::string_view reason) {
  std::lock_guard lock(mu_);
  ++dropped_[std::string(reason)];
}

std::string Metrics::Render(const Gauges& gauges) const {
  std::string out;
  std::lock_guard lock(mu_);

  Header(out, "execbox_executions_total", "counter",
         "Executions finished, by transport, route and result status.");
  for (const auto& [labels, value] : executions_) {
    out.append("execbox_executions_total").append(LabelSet(labels)).append(" ");
    out.append(std::to_string(value)).append("\n");
  }

  Header(out, "execbox_execution_duration_seconds", "histogram",
         "Wall time of finished executions, by transport and route.");
  for (const auto& [labels, h] : latency_) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i < kBuckets.size(); ++i) {
      cumulative += h.counts[i];
      Labels with_le = labels;
      with_le.emplace_back("le", Number(kBuckets[i]));
      out.append("execbox_execution_duration_seconds_bucket").append(LabelSet(with_le)).append(" ");
      out.append(std::to_string(cumulative)).append("\n");
    }
    Labels inf = labels;
    inf.emplace_back("le", "+Inf");
    out.append("execbox_execution_duration_seconds_bucket").append(LabelSet(inf)).append(" ");
    out.append(std::to_string(h.count)).append("\n");
    out.append("execbox_execution_duration_seconds_sum").append(LabelSet(labels)).append(" ");
    out.append(Number(h.sum)).append("\n");
    out.append("execbox_execution_duration_seconds_count").append(LabelSet(labels)).append(" ");
    out.append(std::to_string(h.count)).append("\n");
  }

  Header(out, "execbox_rejected_requests_total", "counter",
         "Requests refused before running (or while waiting), by transport and reason.");
  for (const auto& [labels, value] : rejected_) {
    out.append("execbox_rejected_requests_total").append(LabelSet(labels)).append(" ");
    out.append(std::to_string(value)).append("\n");
  }
  Header(out, "execbox_key_network_connections_total", "counter",
         "Connection attempts through the network proxy, by key and the policy's answer (allowed, refused).");
  for (const auto& [labels, value] : connections_) {
    out.append("execbox_key_network_connections_total").append(LabelSet(labels)).append(" ");
    out.append(std::to_string(value)).append("\n");
  }
  Counter(out, "execbox_http_responses_total", "HTTP responses sent, by status code.", "code", responses_);
  Counter(out, "execbox_connections_dropped_total", "Connections closed by the server, by reason.", "reason",
          dropped_);

  Gauge(out, "execbox_running_executions", "Executions running now.", gauges.running);
  Gauge(out, "execbox_queue_depth", "Executions waiting for a running slot.", gauges.queued);
  Gauge(out, "execbox_warm_workers", "Warm workers alive in the pool.", gauges.warm_workers);
  Gauge(out, "execbox_prepared_children", "Forked children ready to take an execution.",
        gauges.prepared_children);
  Gauge(out, "execbox_lean_workers", "Lean warm workers alive (standard-library code).", gauges.lean_workers);
  Gauge(out, "execbox_lean_prepared_children",
        "The lean workers' forked children ready to take an execution.", gauges.lean_prepared_children);
  Gauge(out, "execbox_prepared_session_children", "Forked session children ready to take a session.",
        gauges.prepared_session_children);
  Header(out, "execbox_prepared_children_target", "gauge",
         "How many prepared children the pool aims to hold now, by sort; it follows the traffic each sees.");
  for (auto [sort, n] :
       {std::pair{"full", gauges.prepared_target}, std::pair{"lean", gauges.lean_prepared_target},
        std::pair{"session", gauges.prepared_sessions_target}}) {
    out.append("execbox_prepared_children_target{sort=\"").append(sort).append("\"} ");
    out.append(std::to_string(n)).append("\n");
  }
  Header(out, "execbox_warm_children_served_total", "counter",
         "Warm children handed out (executions and sessions), by the zygote they came from.");
  for (auto [kind, n] : {std::pair{"full", gauges.served_full}, std::pair{"lean", gauges.served_lean}}) {
    out.append("execbox_warm_children_served_total{zygote=\"").append(kind).append("\"} ");
    out.append(std::to_string(n)).append("\n");
  }
  Header(out, "execbox_zygote_memory_peak_bytes", "gauge",
         "The most memory a zygote's own cgroup has held, the largest of each kind's live workers.");
  for (auto [kind, n] :
       {std::pair{"full", gauges.full_zygote_peak_bytes}, std::pair{"lean", gauges.lean_zygote_peak_bytes}}) {
    out.append("execbox_zygote_memory_peak_bytes{zygote=\"").append(kind).append("\"} ");
    out.append(std::to_string(n)).append("\n");
  }
  Gauge(out, "execbox_sessions", "Open sessions.", gauges.sessions);
  Header(
      out, "execbox_warm_children_ended_total", "counter",
      "Warm children ended after at least one execution (their CPU is in execbox_warm_cpu_seconds_total).");
  out.append("execbox_warm_children_ended_total ").append(std::to_string(gauges.children_ended)).append("\n");
  Header(out, "execbox_warm_workers_replaced_total", "counter",
         "Warm workers (zygotes) found dead or failing and started anew.");
  out.append("execbox_warm_workers_replaced_total ").append(std::to_string(gauges.workers_replaced)).append("\n");
  Header(out, "execbox_warm_cpu_seconds_total", "counter",
         "CPU of the warm pool outside the server process, by phase: the zygotes' forks, collections and "
         "reaping (zygote; restarts with a replaced worker), and each ended child's isolation and warm-up "
         "(setup), executions (execution) and exit (exit), from its own cgroup.");
  for (auto [phase, ns] :
       {std::pair{"zygote", gauges.zygote_cpu_ns}, std::pair{"setup", gauges.child_setup_cpu_ns},
        std::pair{"execution", gauges.child_execution_cpu_ns}, std::pair{"exit", gauges.child_exit_cpu_ns}}) {
    out.append("execbox_warm_cpu_seconds_total{phase=\"").append(phase).append("\"} ");
    out.append(Number(static_cast<double>(ns) / 1e9)).append("\n");
  }
  Gauge(out, "execbox_open_connections", "Open HTTP connections.", gauges.connections);
  KeyGauges(out, gauges.keys);
  return out;
}

}  // namespace execbox::api
