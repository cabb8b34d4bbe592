#include "engine/state_copy.h"

#include "engine/result_assembly.h"
#include "runtime/python_program.h"

namespace execbox::engine {
namespace {

using Failure = StateCopyFailure;

std::unexpected<Failure> Fails(Failure::Kind kind, std::string message, std::string lost = "") {
  return std::unexpected(Failure{kind, std::move(message), std::move(lost)});
}

std::vector<LeftOut> LeftOutOf(const nlohmann::json& list) {
  std::vector<LeftOut> out;
  if (!list.is_array()) return out;
  for (const auto& e : list) {
    if (!e.is_object()) continue;
    auto text = [&](const char* key) {
      auto it = e.find(key);
      return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    out.push_back({text("name"), text("type"), text("reason")});
  }
  return out;
}

std::vector<std::string> NamesOf(const nlohmann::json& list) {
  std::vector<std::string> out;
  if (!list.is_array()) return out;
  for (const auto& n : list)
    if (n.is_string()) out.push_back(n.get<std::string>());
  return out;
}

// Runs the agent's snapshot or restore request; its summary, or why not.
StateCopyExpected<nlohmann::json> RunStateCopy(jail::WarmChild& child, const jail::Limits& limits,
                                               runtime::StateCopy what, const std::atomic<bool>* cancel) {
  const std::string request = runtime::MakeStateCopyRequest(what, limits.output_bytes);
  jail::RunHooks hooks{.cancel = cancel};
  auto outcome = child.Execute(request, "", limits, hooks, jail::WarmChild::FilesAfter::kNote);
  if (!outcome) return Fails(Failure::Kind::kInternal, outcome.error().message);
  runtime::PythonProgram program;
  program.limits = limits;
  Result r = AssembleResult(program, limits, *outcome);
  const char* what_name = what == runtime::StateCopy::kSnapshot ? "snapshot" : "restore";
  if (!child.alive()) {
    std::string why = r.error ? r.error->ename + ": " + r.error->evalue : std::string(StatusName(r.status));
    return Fails(Failure::Kind::kLost,
                 std::string("the session's process ended during its ") + what_name + " (" + why + ")",
                 r.status == Status::kOk || r.status == Status::kError ? "exited" : StatusName(r.status));
  }
  if (r.status == Status::kError && r.error && r.error->ename == "SnapshotError") {
    return Fails(Failure::Kind::kRefused, r.error->evalue);
  }
  if (r.status != Status::kOk || !r.result) {
    std::string why = r.error ? r.error->ename + ": " + r.error->evalue : std::string(StatusName(r.status));
    return Fails(Failure::Kind::kInternal, std::string("the agent's ") + what_name + " failed: " + why);
  }
  const nlohmann::json& data = (*r.result)["data"];
  auto it = data.find("application/json");
  if (it == data.end() || !it->is_object()) {
    return Fails(Failure::Kind::kInternal, std::string("the agent's ") + what_name + " sent no summary");
  }
  return *it;
}

}  // namespace

StateCopyExpected<Snapshot> TakeSnapshot(jail::WarmChild& child, const jail::Limits& limits,
                                         const std::atomic<bool>* cancel) {
  auto summary = RunStateCopy(child, limits, runtime::StateCopy::kSnapshot, cancel);
  if (!summary) return std::unexpected(summary.error());
  auto blob = child.GetFile(runtime::kSnapshotFile, limits.work_dir_bytes);
  if (!blob) {
    using K = jail::FileFailure::Kind;
    if (blob.error().kind == K::kEnded || blob.error().kind == K::kBroken) {
      return Fails(Failure::Kind::kLost, "the session's process ended during its snapshot", "exited");
    }
    return Fails(Failure::Kind::kInternal, "reading the snapshot: " + blob.error().message);
  }
  Snapshot s{.blob = std::move(*blob),
             .names = NamesOf((*summary)["names"]),
             .left_out = LeftOutOf((*summary)["not_copied"])};
  if (auto f = summary->find("files"); f != summary->end() && f->is_number_unsigned())
    s.files = f->get<uint64_t>();
  return s;
}

StateCopyExpected<Restored> RestoreSnapshot(jail::WarmChild& child, const jail::Limits& limits,
                                            std::string_view blob, const std::atomic<bool>* cancel) {
  if (blob.size() > limits.work_dir_bytes) {
    return Fails(Failure::Kind::kRefused, "the snapshot (" + std::to_string(blob.size()) +
                                              " bytes) is larger than this session's work dir (" +
                                              std::to_string(limits.work_dir_bytes) + " bytes; see disk_mb)");
  }
  if (auto put = child.PutFile(runtime::kRestoreFile, blob); !put) {
    using K = jail::FileFailure::Kind;
    if (put.error().kind == K::kTooLarge) {
      return Fails(Failure::Kind::kRefused,
                   "the snapshot (" + std::to_string(blob.size()) +
                       " bytes) does not fit in this session's work dir (see disk_mb)");
    }
    return Fails(Failure::Kind::kInternal, "handing over the snapshot: " + put.error().message);
  }
  auto summary = RunStateCopy(child, limits, runtime::StateCopy::kRestore, cancel);
  if (!summary) return std::unexpected(summary.error());
  Restored r{.names = NamesOf((*summary)["names"]), .left_out = LeftOutOf((*summary)["not_restored"])};
  if (auto f = summary->find("files"); f != summary->end() && f->is_number_unsigned())
    r.files = f->get<uint64_t>();
  return r;
}

}  // namespace execbox::engine
