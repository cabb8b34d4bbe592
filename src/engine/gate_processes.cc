// The gate's calls for a session's processes (gate.h): the owner's session found, the table's
// answer, its failures as refusals, starts and signals audited.
#include <cstring>

#include "engine/gate.h"

namespace execbox::engine {
namespace {

// What a start is audited as: its command, or its argv joined.
std::string AuditedCommand(const ProcessSpec& spec) {
  if (!spec.command.empty()) return spec.command;
  std::string joined;
  for (const auto& arg : spec.argv) joined += (joined.empty() ? "" : " ") + arg;
  return joined;
}

}  // namespace

Refusal Gate::FromProcess(const ProcessFailure& failure) const {
  auto make = [&](RefusalReason reason) { return MakeRefusal(reason, failure.message); };
  switch (failure.kind) {
    case ProcessError::kNotFound:
      return make(RefusalReason::kProcessNotFound);
    case ProcessError::kFull: {
      Refusal r = make(RefusalReason::kProcessesFull);
      return r;
    }
    case ProcessError::kNotRunning:
      return make(RefusalReason::kProcessNotRunning);
    case ProcessError::kNoStdin:
      return make(RefusalReason::kNoStdin);
    case ProcessError::kNotPty:
      return make(RefusalReason::kNotAPty);
    case ProcessError::kInvalid:
      return make(RefusalReason::kInvalidValue);
    case ProcessError::kStartFailed:
      return make(RefusalReason::kStartFailed);
    case ProcessError::kSessionEnded:
      return make(RefusalReason::kSessionEnded);
    case ProcessError::kInternal:
      break;
  }
  return Internal("process", failure.message);
}

Refused<std::shared_ptr<SessionProcesses>> Gate::ProcessesOf(const Caller& caller, const std::string& id,
                                                             bool restart) {
  if (engine_.sessions() == nullptr) return std::unexpected(SessionsUnavailable());
  auto table = engine_.sessions()->Processes(caller.id, id, restart);
  if (!table) return std::unexpected(FromSession(table.error(), id));
  return std::move(*table);
}

Refused<ProcessInfo> Gate::StartProcess(const Caller& caller, const std::string& id, const ProcessSpec& spec,
                                        const Origin& origin,
                                        std::unique_ptr<SessionProcesses::Follower>* follower) {
  const char* route = "process_start";
  const std::string command = AuditedCommand(spec);
  auto refuse = [&](Refusal r) {
    return std::unexpected(Reject(caller, origin, route, id, command, std::move(r)));
  };
  if (closed()) return refuse(ShuttingDown());
  auto table = ProcessesOf(caller, id, true);
  if (!table) return refuse(std::move(table.error()));
  auto place = ProcessPlace(caller);  // held until the process runs (then counted as running)
  if (!place) return refuse(std::move(place.error()));
  auto started = (*table)->Start(spec, follower);
  if (!started) return refuse(FromProcess(started.error()));
  Audit(caller, origin, route, id, command, "started:" + std::to_string(started->pid), nullptr);
  return std::move(*started);
}

Refused<std::vector<ProcessInfo>> Gate::ListProcesses(const Caller& caller, const std::string& id) {
  auto table = ProcessesOf(caller, id);
  if (!table) return std::unexpected(std::move(table.error()));
  return (*table)->List();
}

Refused<ProcessInfo> Gate::GetProcess(const Caller& caller, const std::string& id, int32_t pid) {
  auto table = ProcessesOf(caller, id);
  if (!table) return std::unexpected(std::move(table.error()));
  auto info = (*table)->Get(pid);
  if (!info) return std::unexpected(FromProcess(info.error()));
  return std::move(*info);
}

Refused<void> Gate::WriteProcessInput(const Caller& caller, const std::string& id, int32_t pid,
                                      std::string_view data) {
  auto table = ProcessesOf(caller, id);
  if (!table) return std::unexpected(std::move(table.error()));
  if (auto written = (*table)->Write(pid, data); !written)
    return std::unexpected(FromProcess(written.error()));
  return {};
}

Refused<void> Gate::CloseProcessInput(const Caller& caller, const std::string& id, int32_t pid) {
  auto table = ProcessesOf(caller, id);
  if (!table) return std::unexpected(std::move(table.error()));
  if (auto closed = (*table)->CloseStdin(pid); !closed) return std::unexpected(FromProcess(closed.error()));
  return {};
}

Refused<void> Gate::SignalProcess(const Caller& caller, const std::string& id, int32_t pid, int signal,
                                  const Origin& origin) {
  const char* route = "process_signal";
  const std::string what = std::to_string(pid);
  auto table = ProcessesOf(caller, id);
  if (!table) return std::unexpected(Reject(caller, origin, route, id, what, std::move(table.error())));
  if (auto sent = (*table)->Signal(pid, signal); !sent)
    return std::unexpected(Reject(caller, origin, route, id, what, FromProcess(sent.error())));
  Audit(caller, origin, route, id, what, "signal:" + std::to_string(signal), nullptr);
  return {};
}

Refused<void> Gate::ResizeProcess(const Caller& caller, const std::string& id, int32_t pid, uint16_t rows,
                                  uint16_t cols) {
  auto table = ProcessesOf(caller, id);
  if (!table) return std::unexpected(std::move(table.error()));
  if (auto resized = (*table)->Resize(pid, rows, cols); !resized)
    return std::unexpected(FromProcess(resized.error()));
  return {};
}

Refused<SessionProcesses::Output> Gate::ReadProcessOutput(
    const Caller& caller, const std::string& id, int32_t pid, uint64_t from, size_t max_bytes,
    std::optional<std::chrono::steady_clock::time_point> wait_until, const std::atomic<bool>* cancel) {
  auto table = ProcessesOf(caller, id);
  if (!table) return std::unexpected(std::move(table.error()));
  auto read = (*table)->Read(pid, from, max_bytes, wait_until, cancel);
  if (!read) return std::unexpected(FromProcess(read.error()));
  return std::move(*read);
}

Refused<ProcessInfo> Gate::WaitProcess(const Caller& caller, const std::string& id, int32_t pid,
                                       std::chrono::steady_clock::time_point until,
                                       const std::atomic<bool>* cancel) {
  auto table = ProcessesOf(caller, id);
  if (!table) return std::unexpected(std::move(table.error()));
  auto info = (*table)->Wait(pid, until, cancel);
  if (!info) return std::unexpected(FromProcess(info.error()));
  return std::move(*info);
}

}  // namespace execbox::engine
