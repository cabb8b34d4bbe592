// Gate::RunProcessCode (gate.h, process_code.h): code given to a session's process that runs
// what its stdin gives it is an execution like any other here. It holds a running slot under
// the caller's rate and concurrency, the session's wall time and output limit hold, a shutdown
// stops it, and it is audited and counted once, as it ended.
#include <csignal>

#include "engine/gate.h"

namespace execbox::engine {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kReadBytes = 1u << 20;
// How often a quiet process's limits and the shutdown are looked at.
constexpr std::chrono::milliseconds kPoll{250};

const char* AuditStatus(ProcessCodeEnd end) {
  switch (end) {
    case ProcessCodeEnd::kComplete:
      return "done";
    case ProcessCodeEnd::kExited:
      return "exited";
    case ProcessCodeEnd::kTimedOut:
      return "timeout";
    case ProcessCodeEnd::kOutputLimit:
      return "output_limit";
    case ProcessCodeEnd::kShutdown:
      break;
  }
  return "cancelled";
}

std::string HowItEnded(const ProcessInfo& info) {
  if (info.exit_code) return "the process exited with status " + std::to_string(*info.exit_code);
  if (info.signal) return "the process was killed (" + SignalName(*info.signal) + ")";
  return "the process ended with its sandbox";
}

}  // namespace

Refused<ProcessCodeRun> Gate::RunProcessCode(const Caller& caller, const std::string& id,
                                             const ProcessCode& code, const Origin& origin) {
  const char* route = "process_code";
  auto refuse = [&](Refusal r) {
    return std::unexpected(Reject(caller, origin, route, id, code.code, std::move(r)));
  };
  if (closed()) return refuse(ShuttingDown());
  auto limits = SessionLimits(caller, id);
  if (!limits) return refuse(std::move(limits.error()));
  auto ticket = admission_.Reserve(WithCaps(caller));
  if (!ticket) return refuse(std::move(ticket.error()));
  if (auto waited = admission_.Wait(*ticket, nullptr); !waited) return refuse(std::move(waited.error()));
  auto table = ProcessesOf(caller, id);
  if (!table) return refuse(std::move(table.error()));
  if (code.on_started) code.on_started();
  const auto started = Clock::now();
  if (auto written = (*table)->Write(code.pid, code.input); !written)
    return refuse(FromProcess(written.error()));

  ProcessCodeRun run;
  const auto until = started + limits->wall_time;
  // As a Python execution's output is stopped: past the factor times what a Result keeps,
  // counting what the session wrote but could not hold.
  const uint64_t most_output = limits->output_bytes * limits->output_kill_factor;
  uint64_t written = 0;
  uint64_t from = code.from;
  auto kill = [&](ProcessCodeEnd end, std::string why) {
    (void)(*table)->Signal(code.pid, SIGKILL);
    run.end = end;
    run.why = std::move(why);
  };
  for (bool complete = false; !complete;) {
    auto got = (*table)->Read(code.pid, from, kReadBytes, Clock::now() + kPoll, nullptr, code.follower);
    if (!got) return refuse(FromProcess(got.error()));
    run.info = got->info;
    for (const auto& chunk : got->read.chunks) {
      written += chunk.data.size();
      if (chunk.stream != OutputStream::kPty && !complete)
        complete = code.on_output(chunk.stream, chunk.data, chunk.offset);
    }
    from = got->read.next_offset;
    written += got->read.dropped;
    if (complete) break;
    if (written > most_output) {
      kill(ProcessCodeEnd::kOutputLimit,
           "the execution wrote more than " + std::to_string(most_output >> 20) + " MiB");
      break;
    }
    if (!got->info.running && from >= got->info.output_bytes) {
      run.end = ProcessCodeEnd::kExited;
      run.why = HowItEnded(got->info);
      break;
    }
    if (closed()) {
      kill(ProcessCodeEnd::kShutdown, "the server is shutting down; the execution was stopped");
      break;
    }
    if (Clock::now() >= until) {
      const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(limits->wall_time).count();
      kill(ProcessCodeEnd::kTimedOut,
           "the execution ran past the session's wall-time limit (" + std::to_string(seconds) + " s)");
      break;
    }
  }
  { Ticket done = std::move(*ticket); }  // the slot is free before the answer goes out
  const char* status = AuditStatus(run.end);
  Audit(caller, origin, route, id, code.code, status, nullptr);
  if (options_.observer != nullptr) {
    options_.observer->Finished(TransportName(origin.transport), route, status,
                                std::chrono::duration<double>(Clock::now() - started).count());
  }
  return run;
}

}  // namespace execbox::engine
