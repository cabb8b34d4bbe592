// What a caller may attach to one execution, whichever path runs it (cold, warm, a session).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string_view>

#include "engine/net_hosts.h"
#include "engine/net_policy.h"
#include "engine/result.h"
#include "jail/sandbox.h"

namespace execbox::engine {

struct ExecuteOptions {
  // Live output as it arrives; may be empty.
  std::function<void(jail::Stream, std::string_view)> on_output;
  // Each display item (a figure, display()) as the code produces it, the first of the Result's
  // `display` in order (report.h, DisplayFollower); may be empty. Called on the output's thread.
  std::function<void(const MimeBundle&)> on_display;
  // Set from another thread to stop the execution (status killed, "cancelled"); may be null.
  const std::atomic<bool>* cancel = nullptr;
  // Called once the gate has given the execution its running slot, before it starts; may be empty.
  std::function<void()> on_started;
  // The execution's network policy (within the server's: the gate checks), or null for no
  // network at all. Runs in a cold jail (warm children and sessions have no egress yet).
  const NetPolicy* network = nullptr;
  // Connection attempts served under that policy (later ones are refused, "limit"); 0: the
  // proxy's default (EgressLimits).
  size_t max_connections = 0;
  // Bytes each way per execution, its connections together; 0: the proxy's default.
  uint64_t max_bytes = 0;
  // The operator's answers for names ([network] hosts_file); may be null.
  std::shared_ptr<const NetHosts> hosts;
  // The caller had nothing else running or queued (Ticket::light): it may take the prepared
  // child the pool keeps for such callers (Pool::Acquire). The gate sets it; a direct caller of
  // the engine (the CLI, benchmarks) is one caller, light.
  bool light = true;
  // The execution's CPU weight while CPUs are contended (jail::Cgroup::SetCpuWeight); 0: the
  // default. The gate gives each of a caller's n running executions 1/n of the default
  // (Admission::CpuWeight), so a caller that floods shares the CPUs with another, not per execution.
  uint32_t cpu_weight = 0;
};

// The RunHooks::on_report that gives `options`' on_display its items (report.cc); empty without one.
std::function<void(std::string_view)> DisplayFeed(const ExecuteOptions& options);

}  // namespace execbox::engine
