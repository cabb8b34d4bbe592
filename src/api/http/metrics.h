// Prometheus metrics (text format 0.0.4): counters and histograms the server updates, and
// gauges read at scrape time.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/gate.h"

namespace execbox::api {

struct Gauges {
  size_t running = 0, queued = 0;
  size_t warm_workers = 0, prepared_children = 0;
  // The lean zygote's (engine/pool.h): workers alive and their prepared children.
  size_t lean_workers = 0, lean_prepared_children = 0;
  // Session children ready, and how many children of each sort the pool aims to hold now (it
  // follows the traffic each sees: engine::Pool::PreparedTarget, SessionTarget).
  size_t prepared_session_children = 0;
  size_t prepared_target = 0, lean_prepared_target = 0, prepared_sessions_target = 0;
  // Children handed out by zygote kind (counters), and each kind's zygote memory peak in bytes.
  uint64_t served_full = 0, served_lean = 0;
  uint64_t full_zygote_peak_bytes = 0, lean_zygote_peak_bytes = 0;
  size_t sessions = 0, connections = 0;
  // Counters the warm pool keeps (engine::PoolStats), read with the gauges: the children ended
  // after an execution, and CPU outside this process by phase, in ns.
  uint64_t children_ended = 0;
  uint64_t workers_replaced = 0;  // warm workers (zygotes) found dead or failing and started anew
  uint64_t zygote_cpu_ns = 0, child_setup_cpu_ns = 0, child_execution_cpu_ns = 0, child_exit_cpu_ns = 0;
  // Each key's use now (engine::GateStats::keys), against its caps.
  std::map<std::string, engine::KeyUse> keys;
};

// Also the engine gate's observer: every execution and refusal, whatever the transport (HTTP,
// MCP over HTTP), is counted here, labelled with its transport.
class Metrics : public engine::GateObserver {
 public:
  // One execution ended: `status` is the Result's status, `route` "execute" | "session" | "check".
  void Finished(std::string_view transport, std::string_view route, std::string_view status,
                double seconds) override;
  // A request refused by the gate: reason "queue_full" | "rate_limited" | "key_concurrency" |
  // "limit_exceeded" | "session_not_found" | "shutting_down" ...
  void Refused(std::string_view transport, std::string_view reason) override;
  // An execution's connection attempts through the network proxy, counted per key.
  void Connections(std::string_view caller, uint64_t allowed, uint64_t refused) override;
  // A request refused by the HTTP layer before it reached the gate: "unauthorized" |
  // "bad_request" | "too_large" ...
  void Rejected(std::string_view reason) { Refused("http", reason); }
  // Every HTTP response, by status code.
  void Response(int status);
  void ConnectionDropped(std::string_view reason);  // "header_timeout", "body_timeout", "limit"

  std::string Render(const Gauges& gauges) const;

 private:
  // Histogram bucket upper bounds in seconds, up to 300 s.
  static constexpr std::array<double, 16> kBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                                      2.5,   5,    10,    30,   60,  120,  180, 300};
  struct Histogram {
    std::array<uint64_t, kBuckets.size()> counts{};  // per bucket, not cumulative
    uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mu_;
  using Labels = std::vector<std::pair<std::string, std::string>>;  // name, value
  std::map<Labels, uint64_t> executions_;                           // transport, route, status
  std::map<Labels, Histogram> latency_;                             // transport, route
  std::map<Labels, uint64_t> rejected_;                             // transport, reason
  std::map<int, uint64_t> responses_;
  std::map<std::string, uint64_t> dropped_;
  std::map<Labels, uint64_t> connections_;  // key, outcome
};

}  // namespace execbox::api
