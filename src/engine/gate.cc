#include "engine/gate.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "base/random.h"
#include "engine/gate_refusals.h"
#include "engine/result_json.h"

namespace execbox::engine {
namespace {

using Clock = std::chrono::steady_clock;

// A check only parses and lints: it never needs more than this, whatever the defaults say.
constexpr std::chrono::milliseconds kCheckWallTime{10'000};
constexpr uint64_t kMiB = 1ull << 20;
// How long a failed package listing is answered with its failure before it runs again.
constexpr std::chrono::seconds kPackagesRetry{30};

// Client-chosen text (a session id) in a refusal: cut, so a megabyte of it does not come back.
std::string Clipped(const std::string& text) {
  return text.size() <= 100 ? text : text.substr(0, 100) + "...";
}

std::string Reason(std::string type) {
  std::replace(type.begin(), type.end(), '-', '_');
  return type;
}

}  // namespace

const char* TransportName(Transport transport) {
  switch (transport) {
    case Transport::kHttp:
      return "http";
    case Transport::kMcpHttp:
      return "mcp_http";
    case Transport::kMcpStdio:
      return "mcp_stdio";
    case Transport::kE2b:
      return "e2b";
    case Transport::kServer:
      return "server";
    case Transport::kCli:
      break;
  }
  return "cli";
}

// `here`: this server's instance name. An id that names another instance reached the wrong
// one (a client or router that does not route by the id): say where it lives.
Refusal SessionNotFound(const std::string& id, const std::string& here) {
  std::string detail = "no session " + Clipped(id) + " (closed, expired, or never created)";
  if (std::string there = InstanceOfId(id); !there.empty() && there != here) {
    detail = "no session " + Clipped(id) + " here: its id names instance '" + Clipped(there) +
             "', and this is " +
             (here.empty() ? std::string("a server without an instance name") : "instance '" + here + "'") +
             " (send session calls through the router, which sends each to its instance)";
  }
  return MakeRefusal(RefusalReason::kSessionNotFound, detail);
}

Refusal SessionsUnavailable() {
  return MakeRefusal(RefusalReason::kSessionsUnavailable,
                     "sessions need the warm pool, which this server runs without (see `execbox doctor`)");
}

Gate::Gate(Engine& engine, GateOptions options)
    : engine_(engine),
      options_(std::move(options)),
      max_running_(options_.max_running != 0
                       ? options_.max_running
                       : std::max<size_t>(2, 2 * (engine.pool() ? engine.pool()->options().workers : 1))),
      admission_(max_running_, options_.max_queue, options_.light_caller_slots) {
  if (engine_.sessions() == nullptr) return;
  engine_.sessions()->OnSwept([this](const std::string& owner, const std::string& id, Sessions::Swept what) {
    const bool paused = what == Sessions::Swept::kPausedAtExpiry;
    Audit(Caller{.id = owner}, Origin{.transport = Transport::kServer},
          paused ? "session_pause" : "session_close", id, "",
          paused                              ? "paused_at_expiry"
          : what == Sessions::Swept::kExpired ? "expired"
                                              : "idle",
          nullptr);
  });
}

Gate::~Gate() {
  if (engine_.sessions() != nullptr) engine_.sessions()->OnSwept(nullptr);
}

Refusal Gate::Internal(const std::string& what, const std::string& detail) const {
  auto id = RandomHex(6);
  const std::string incident = id ? *id : "unnumbered";
  std::fprintf(stderr, "execbox: incident %s (%s): %s\n", incident.c_str(), what.c_str(), detail.c_str());
  return MakeRefusal(RefusalReason::kInternalError,
                     "the sandbox failed (incident " + incident + "; the server's log has the details)",
                     {{"incident", incident}});
}

void Gate::Scrub(Result& r) const {
  if (r.status != Status::kInternalError || !r.error) return;
  Refusal logged = Internal("execution", r.error->ename + ": " + r.error->evalue);
  r.error->ename = "InternalError";
  r.error->evalue = logged.detail;
  r.error->traceback = {r.error->ename + ": " + r.error->evalue};
  r.error->line.reset();
  r.error->column.reset();
  r.error->text.reset();
}

void Gate::Audit(const Caller& caller, const Origin& origin, const char* route, const std::string& session_id,
                 const std::string& code, const std::string& status, const nlohmann::json& usage,
                 const nlohmann::json& network, const nlohmann::json& guard) {
  if (options_.audit == nullptr) return;
  options_.audit->Write(AuditRecord{.caller_id = caller.id,
                                    .transport = TransportName(origin.transport),
                                    .route = route,
                                    .session_id = session_id,
                                    .code = code,
                                    .status = status,
                                    .usage = usage,
                                    .peer = origin.peer,
                                    .network = network,
                                    .guard = guard});
}

Refusal Gate::Reject(const Caller& caller, const Origin& origin, const char* route,
                     const std::string& session_id, const std::string& code, Refusal refusal) {
  Audit(caller, origin, route, session_id, code, "refused:" + refusal.type, nullptr);
  if (options_.observer != nullptr)
    options_.observer->Refused(TransportName(origin.transport), Reason(refusal.type));
  return refusal;
}

Refused<jail::Limits> Gate::ResolveLimits(const LimitOverrides& overrides,
                                          const jail::Limits* session) const {
  if (session == nullptr) return ApplyLimitOverrides(options_.limits, options_.limits.defaults, overrides);
  for (const auto& o : overrides) {
    const LimitSpec& spec = *o.spec;
    if (spec.scope != LimitScope::kChildCreation || spec.Base(o.value) == spec.get(*session)) continue;
    const std::string name(spec.name);
    const double value = spec.Value(*session);
    return Refuse(RefusalReason::kLimitFixed,
                  "'" + (o.field.empty() ? "limits." + name : o.field) +
                      "' can only be set when a session is created; this session has " +
                      std::to_string(static_cast<uint64_t>(value)) + std::string(spec.suffix()),
                  {{"limit", name}, {"requested", o.sent}, {"session_value", value}});
  }
  return ApplyLimitOverrides(options_.limits, *session, overrides);
}

Refused<void> Gate::CheckInputs(const runtime::PythonProgram& program) const {
  if (auto named = runtime::CheckAnalyzerNames(program.analyzers); !named)
    return Refuse(RefusalReason::kInvalidValue, named.error().message, {{"field", "analyzers"}});
  if (auto codes = runtime::CheckLintBlock(program.lint_block); !codes)
    return Refuse(RefusalReason::kInvalidValue, codes.error().message, {{"field", "lint.block"}});
  if (program.lint_profile.size() > 64)
    return Refuse(RefusalReason::kInvalidValue, "unknown policy profile", {{"field", "policy"}});
  if (auto profile = runtime::LintProfile(program.lint_profile); !profile)
    return Refuse(RefusalReason::kInvalidValue, profile.error().message, {{"field", "policy"}});
  if (!program.packages.empty()) {
    if (auto names = runtime::CheckPackageNames(program.packages); !names)
      return Refuse(RefusalReason::kInvalidPackages, names.error().message, {{"field", "packages"}});
    if (engine_.wheelhouse().empty())
      return Refuse(
          RefusalReason::kNoWheelhouse,
          "this server has no wheelhouse ([packages] wheelhouse in its configuration) and the sandbox "
          "has no network: packages cannot be installed beyond those the sandbox has",
          {{"field", "packages"}});
    if (program.mode != runtime::Mode::kRun)
      return Refuse(RefusalReason::kInvalidPackages,
                    "packages are installed for code that runs, not for a check", {{"field", "packages"}});
  }
  uint64_t total = 0;
  for (const auto& f : program.inputs) total += f.content.size();
  const uint64_t room = program.limits.work_dir_bytes, most = options_.limits.maxima.work_dir_bytes;
  if (total <= room) return {};
  std::string hint = room < most ? " (raise limits.disk_mb, up to " + std::to_string(most / kMiB) + ")" : "";
  return Refuse(RefusalReason::kInputsTooLarge,
                "the input files hold " + std::to_string(total) + " bytes, more than the work dir's " +
                    std::to_string(room) + hint,
                {{"field", "files"}, {"total_bytes", total}, {"work_dir_bytes", room}});
}

// A shell command, a directory listing or a namespace dropped are a session's only; a shell
// command also goes around the lint profile (which reads Python), so it runs only where that
// profile refuses nothing.
Refused<void> Gate::CheckMode(const ExecutionRequest& request) const {
  const runtime::Mode mode = request.program.mode;
  if (mode == runtime::Mode::kRun || mode == runtime::Mode::kCheck) return {};
  if (!request.session_id) {
    return Refuse(RefusalReason::kSessionRequired,
                  "shell commands and directory listings run in a session only");
  }
  if (mode == runtime::Mode::kCommand && request.program.lint_profile != "permissive") {
    return Refuse(RefusalReason::kPolicyViolation,
                  "shell commands are refused under the '" + request.program.lint_profile +
                      "' policy (they would go around its checks of the Python code)");
  }
  return {};
}

Refused<Admitted> Gate::Admit(const Caller& caller, ExecutionRequest request, const Origin& origin) {
  const bool check = request.program.mode == runtime::Mode::kCheck;
  const char* route = check ? "check" : request.session_id ? "session" : "execute";
  const std::string session_id = request.session_id.value_or("");
  auto refuse = [&](Refusal r) {
    return std::unexpected(Reject(caller, origin, route, session_id, request.program.code, std::move(r)));
  };
  if (closed()) return refuse(ShuttingDown());
  std::optional<jail::Limits> session_limits;
  if (request.session_id) {
    if (engine_.sessions() == nullptr) return refuse(SessionsUnavailable());
    auto created = engine_.sessions()->CreatedWith(caller.id, session_id);
    if (!created) return refuse(SessionNotFound(session_id, engine_.instance()));
    session_limits = *created;
    // A checkpointing session keeps one more snapshot for this execution.
    if (engine_.sessions()->Checkpoints(caller.id, session_id)) {
      if (auto room = StateRoom(caller); !room) return refuse(std::move(room.error()));
    }
  }
  auto limits = ResolveLimits(request.limits, session_limits ? &*session_limits : nullptr);
  if (!limits) return refuse(std::move(limits.error()));
  request.program.limits = *limits;
  if (check) request.program.limits.wall_time = std::min(limits->wall_time, kCheckWallTime);
  // The server's block list holds for every run and check, beside the request's own.
  if (check || request.program.mode == runtime::Mode::kRun) {
    for (const auto& code : options_.lint_block) {
      auto& block = request.program.lint_block;
      if (std::find(block.begin(), block.end(), code) == block.end()) block.push_back(code);
    }
  }
  // The server's guard holds for every run; where it has none, a request may ask for it. What it
  // allows is the server's alone.
  if (options_.guard != runtime::Guard::kOff) request.program.guard = options_.guard;
  request.program.guard_programs = options_.guard_programs;
  if (auto fits = CheckInputs(request.program); !fits) return refuse(std::move(fits.error()));
  if (auto allowed = CheckMode(request); !allowed) return refuse(std::move(allowed.error()));
  if (auto net = CheckNetwork(caller, request); !net) return refuse(std::move(net.error()));
  auto ticket = admission_.Reserve(WithCaps(caller));
  if (!ticket) return refuse(std::move(ticket.error()));
  Admitted admitted;
  admitted.ticket = std::move(*ticket);
  admitted.caller = caller;
  admitted.origin = origin;
  admitted.request = std::move(request);
  admitted.route = route;
  return admitted;
}

Refused<Result> Gate::Run(Admitted a, const ExecuteOptions& options) {
  const runtime::PythonProgram& program = a.request.program;
  const std::string session_id = a.request.session_id.value_or("");
  if (auto waited = admission_.Wait(a.ticket, options.cancel); !waited) {
    return std::unexpected(
        Reject(a.caller, a.origin, a.route, session_id, program.code, std::move(waited.error())));
  }
  if (options.on_started) options.on_started();
  ExecuteOptions weighted = options;
  weighted.cpu_weight = admission_.CpuWeight(a.ticket);
  const auto started = Clock::now();
  Refused<Result> outcome;
  if (program.mode == runtime::Mode::kCheck) {
    // Parsing needs none of the warm stack: a cold jail, whose agent never runs the code.
    auto r = ExecuteCold(program, weighted);
    if (r)
      outcome = std::move(*r);
    else
      outcome = std::unexpected(Internal("check", r.error().message));
  } else if (a.request.session_id) {
    auto r = engine_.sessions()->Execute(a.caller.id, session_id, program, weighted);
    if (r)
      outcome = std::move(*r);
    else
      outcome = std::unexpected(FromSession(r.error(), session_id));
  } else {
    ExecuteOptions with_network = weighted;
    with_network.light = a.ticket.light();
    if (a.request.network) {
      with_network.network = &*a.request.network;
      with_network.max_connections = options_.network_max_connections;
      with_network.max_bytes = options_.network_max_bytes;
      with_network.hosts = options_.network_hosts;
    }
    auto r = engine_.Execute(program, with_network);
    if (r)
      outcome = std::move(*r);
    else
      outcome = std::unexpected(Internal("execution", r.error().message));
  }
  { Ticket done = std::move(a.ticket); }  // the slot is free before the answer goes out
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  if (!outcome) {
    Audit(a.caller, a.origin, a.route, session_id, program.code, "failed:" + outcome.error().type, nullptr);
    if (options_.observer != nullptr) {
      options_.observer->Refused(TransportName(a.origin.transport), Reason(outcome.error().type));
    }
    return outcome;
  }
  Result& r = *outcome;
  if (closed() && r.error && r.error->ename == "Cancelled") {
    r.error->evalue = "the server is shutting down; the execution was stopped";
    r.error->traceback = {r.error->ename + ": " + r.error->evalue};
  }
  Scrub(r);
  const char* status = StatusName(r.status);
  Audit(a.caller, a.origin, a.route, session_id, program.code, status, UsageJson(r),
        r.network ? NetworkJson(*r.network) : nlohmann::json(),
        r.guard ? GuardJson(*r.guard) : nlohmann::json());
  if (options_.observer != nullptr) {
    options_.observer->Finished(TransportName(a.origin.transport), a.route, status, seconds);
    if (r.network) options_.observer->Connections(a.caller.id, r.network->allowed, r.network->refused);
  }
  return outcome;
}

Refused<Result> Gate::Execute(const Caller& caller, ExecutionRequest request, const Origin& origin,
                              const ExecuteOptions& options) {
  auto admitted = Admit(caller, std::move(request), origin);
  if (!admitted) return std::unexpected(std::move(admitted.error()));
  return Run(std::move(*admitted), options);
}

Refused<std::vector<InstalledPackage>> Gate::InstallPackages(const Caller& caller, const std::string& id,
                                                             std::vector<std::string> packages,
                                                             const Origin& origin) {
  ExecutionRequest request{.program = {}, .limits = {}, .session_id = id};
  request.program.packages = std::move(packages);
  request.program.display_name = "<packages>";
  auto result = Execute(caller, std::move(request), origin);
  if (!result) return std::unexpected(std::move(result.error()));
  if (result->status == Status::kOk && !result->error) return std::move(result->installed);
  std::string why = result->error ? result->error->evalue
                                  : std::string("the install ended with ") + StatusName(result->status);
  return Refuse(RefusalReason::kPackageInstallFailed, why,
                {{"field", "packages"}, {"status", StatusName(result->status)}});
}

Refused<PackageCatalog> Gate::Packages() {
  auto catalog = ListPackagesOnce();
  if (catalog && !engine_.wheelhouse().empty()) catalog->wheelhouse = ListWheelhouse(engine_.wheelhouse());
  return catalog;
}

Refused<PackageCatalog> Gate::ListPackagesOnce() {
  std::lock_guard lock(packages_mu_);
  if (packages_) return *packages_;
  // The listing runs outside admission: after a failure, callers get that failure again for a
  // while rather than a sandbox each.
  if (packages_failure_ && Clock::now() < packages_retry_at_) return std::unexpected(*packages_failure_);
  auto result = engine_.Execute(PackageListingProgram(options_.limits.defaults));
  std::optional<Refusal> failure;
  if (!result) {
    failure = Internal("package listing", result.error().message);
  } else if (auto catalog = ParsePackageListing(*result); !catalog) {
    failure = Internal("package listing", catalog.error().message);
  } else {
    packages_ = std::move(*catalog);
    return *packages_;
  }
  packages_failure_ = failure;
  packages_retry_at_ = Clock::now() + kPackagesRetry;
  return std::unexpected(std::move(*failure));
}

std::optional<PackageCatalog> Gate::ListedPackages() {
  std::unique_lock lock(packages_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return std::nullopt;
  return packages_;
}

std::optional<std::vector<std::string>> Gate::WheelNames() const {
  if (engine_.wheelhouse().empty()) return std::nullopt;
  std::vector<std::string> names;
  for (const auto& wheel : ListWheelhouse(engine_.wheelhouse())) names.push_back(wheel.name);
  return names;
}

GateStats Gate::Stats() {
  GateStats stats{.warm = engine_.warm(), .closed = closed(), .running = running(), .queued = queued()};
  if (auto* pool = engine_.pool()) stats.pool = pool->Stats();
  stats.keys = admission_.Use();
  if (auto* sessions = engine_.sessions()) {
    stats.sessions = sessions->size();
    for (auto& [id, use] : sessions->Use()) {
      KeyUse& mine = stats.keys[id];
      mine.sessions = use.sessions;
      mine.processes = use.processes;
      mine.session_state_bytes = use.session_state_bytes;
    }
  }
  return stats;
}

void Gate::Close() { admission_.Close(); }

}  // namespace execbox::engine
