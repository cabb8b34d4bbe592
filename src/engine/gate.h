// The gate: the one door every front end passes (HTTP /v1, MCP over HTTP and over stdio,
// `execbox run`, `execbox check`, `execbox repl`). It takes a caller and a request, resolves
// the limits through the limit schema (this server's defaults, the request's overrides, a
// refusal above the maxima naming the limit), checks that a session belongs to its caller,
// admits (the queue, the caller's rate and concurrency, shutting down), audits, runs, and
// returns a Result or a typed Refusal. Front ends only translate their wire to and from it;
// none of these rules is written anywhere else.
//
// An error text that leaves the gate never carries a host path or an internal detail: a
// failure of the sandbox itself is reported with an incident id, and the details go to the
// server's log (stderr) under that id.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/admission.h"
#include "engine/audit.h"
#include "engine/engine.h"
#include "engine/limit_schema.h"
#include "engine/packages.h"
#include "engine/process_code.h"
#include "engine/refusal.h"

namespace execbox::engine {

// kServer: the server itself, no caller asking (a session closed or paused by its expiry).
enum class Transport { kHttp, kMcpHttp, kMcpStdio, kCli, kE2b, kServer };
// "http", "mcp_http", "mcp_stdio", "cli", "e2b", "server": the audit log's and the metrics' label.
const char* TransportName(Transport transport);

// Where a request came from.
struct Origin {
  Transport transport = Transport::kCli;
  std::string peer;  // the client's address, when there is one
};

struct ExecutionRequest {
  runtime::PythonProgram program;  // its limits are ignored: the gate resolves them
  LimitOverrides limits;
  std::optional<std::string> session_id;
  // The network the code may reach through the host's proxy (net_policy.h); none when unset.
  std::optional<NetPolicy> network;
};

// Metrics: told of every execution that ends and every refusal.
class GateObserver {
 public:
  virtual ~GateObserver() = default;
  // `route` is "execute", "session" or "check"; `status` the Result's.
  virtual void Finished(std::string_view transport, std::string_view route, std::string_view status,
                        double seconds) = 0;
  // A request refused before it ran (or while it waited): the refusal's type, '-' as '_'.
  virtual void Refused(std::string_view transport, std::string_view reason) = 0;
  // An execution under a network policy ended: its connection attempts, by the policy's answer.
  virtual void Connections(std::string_view caller, uint64_t allowed, uint64_t refused) {
    (void)caller, (void)allowed, (void)refused;
  }
};

struct GateOptions {
  LimitsConfig limits;
  size_t max_running = 0;  // executions running at once; 0: two per warm worker, at least 2
  size_t max_queue = 64;   // waiting beyond those; past it, a refusal
  // Extra slots for a caller with nothing else running or queued while all are taken
  // (Admission's light_slots): another key's single request starts beside a flood.
  size_t light_caller_slots = 1;
  // The widest network policy a request may ask for ([network] in the server's configuration):
  // a request's allow entries must each be covered by one of these, and these deny entries
  // are added to every request's. No allow entries: no request may have network.
  NetPolicy network;
  // Connection attempts served per execution under a policy ([network] max_connections); 0: the
  // proxy's default.
  size_t network_max_connections = 0;
  // Bytes each way per execution under a policy ([network] max_bytes); 0: the proxy's default.
  uint64_t network_max_bytes = 0;
  // The operator's answers for names ([network] hosts_file, net_hosts.h); may be null.
  std::shared_ptr<const NetHosts> network_hosts;
  AuditLog* audit = nullptr;
  GateObserver* observer = nullptr;
  // The caps of a caller whose own ([[keys]]) leave one unset (key_caps.h).
  KeyCaps key_defaults = DefaultKeyCaps();
  // [lint] block: codes of the seed's linters whose findings refuse every run and check, beside
  // a request's own (PythonProgram::lint_block).
  std::vector<std::string> lint_block;
  // [engine] guard: the guard on every run (runtime::Guard); off, a request may still ask for it.
  // [engine] guard_allow = ["programs"]: it lets the code run programs (PythonProgram::guard_programs).
  runtime::Guard guard = runtime::Guard::kOff;
  bool guard_programs = false;
};

// An execution admitted and not yet run: it holds a running or a queued slot, released when
// it is destroyed. Made by Gate::Admit, spent by Gate::Run.
class Admitted {
 public:
  Admitted(Admitted&&) = default;
  Admitted& operator=(Admitted&&) = default;
  // What will run: the program with its resolved limits.
  const ExecutionRequest& resolved() const { return request; }

 private:
  friend class Gate;
  Admitted() = default;
  Ticket ticket;
  Caller caller;
  Origin origin;
  ExecutionRequest request;  // limits resolved into request.program.limits
  const char* route = "execute";
};

// What the gate and its engine hold now, for a health check or metrics: read in one call, so a
// front end never reaches through the gate into the engine.
struct GateStats {
  bool warm = false;  // the warm pool runs (else cold jails, and no sessions)
  bool closed = false;
  size_t running = 0;
  size_t queued = 0;
  size_t sessions = 0;
  PoolStats pool;  // all zero when cold
  // Each caller's use now (callers holding nothing left out), for /metrics.
  std::map<std::string, KeyUse> keys;
};

class Gate {
 public:
  // The sessions' sweep (closes at idle or expiry, pauses at expiry) is audited as the server's
  // (transport "server", the session's owner as the key) from construction to destruction.
  Gate(Engine& engine, GateOptions options);
  ~Gate();
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  const LimitsConfig& limits() const { return options_.limits; }
  size_t max_running() const { return max_running_; }
  size_t max_queue() const { return options_.max_queue; }
  bool sessions_available() { return engine_.sessions() != nullptr; }
  // The widest network `caller` may ask for: its key's bound ([[keys]] network) within the
  // server's ([network]), the deny entries of both; no allow entries: none at all.
  NetPolicy NetworkBound(const Caller& caller) const;
  GateStats Stats();

  // Decides at once, never blocking (a front end may call it on its I/O thread, so a flood of
  // refused requests costs no thread): the limits, the session's owner, the caller's rate and
  // concurrency, the queue. A refusal is audited and counted here.
  Refused<Admitted> Admit(const Caller& caller, ExecutionRequest request, const Origin& origin);
  // Waits for a running slot if the admission was queued (`options.cancel` stops the wait),
  // runs, audits, counts. The slot is free again when this returns.
  Refused<Result> Run(Admitted admitted, const ExecuteOptions& options);
  // Admit and Run, for a caller that has a thread of its own anyway.
  Refused<Result> Execute(const Caller& caller, ExecutionRequest request, const Origin& origin,
                          const ExecuteOptions& options = {});

  // Sessions. Each belongs to the caller that created it; to any other it does not exist.
  // `limits` at creation become the defaults of the session's executions, and fix for good the
  // limits only a new child can take.
  // `checkpoint`: a snapshot before each execution, for UndoSession. `network`: the session's
  // network policy, checked as an execution's is (within the caller's bound, the entry beyond it
  // named; its deny entries added), for the session's whole life (SessionNetwork).
  Refused<SessionInfo> CreateSession(const Caller& caller, const LimitOverrides& limits, const Origin& origin,
                                     bool checkpoint = false, std::optional<NetPolicy> network = std::nullopt);
  // The same with `packages` installed from the wheelhouse (InstallPackages) before it is
  // handed out: a session asked for with packages exists only with them. The names are checked
  // before a child is made; a failed install closes the session and is the refusal.
  struct CreatedSession {
    SessionInfo info;  // after the install
    std::vector<InstalledPackage> installed;
  };
  Refused<CreatedSession> CreateSession(const Caller& caller, const LimitOverrides& limits,
                                        const Origin& origin, bool checkpoint,
                                        std::vector<std::string> packages,
                                        std::optional<NetPolicy> network = std::nullopt);
  Refused<SessionInfo> Session(const Caller& caller, const std::string& id);
  // The limits the caller's session was created with, at once (never waiting for a running
  // execution, as Session does): whether it still exists, for a front end that must not block.
  Refused<jail::Limits> SessionLimits(const Caller& caller, const std::string& id);
  std::vector<SessionInfo> ListSessions(const Caller& caller);
  Refused<void> CloseSession(const Caller& caller, const std::string& id, const Origin& origin);
  // A new session of the caller's holding a copy of this one's state (Sessions::Fork), and the
  // state from before the last execution put back (Sessions::Undo). Each makes a child and
  // runs the agent, so each is admitted (a slot, the caller's rate) and audited.
  Refused<StateCopied> ForkSession(const Caller& caller, const std::string& id, const Origin& origin);
  Refused<StateCopied> UndoSession(const Caller& caller, const std::string& id, const Origin& origin);
  // Sessions::Pause and Resume, each in a running slot (the snapshot and the restore run in the
  // sandbox); a pause needs room under the key's session-state cap, as the state it keeps counts.
  Refused<bool> PauseSession(const Caller& caller, const std::string& id, const Origin& origin);
  Refused<bool> SessionPaused(const Caller& caller, const std::string& id);
  // Sessions::SetPauseAtExpiry: paused, not closed, when its lifetime ends.
  Refused<void> PauseSessionAtExpiry(const Caller& caller, const std::string& id, bool pause);
  Refused<bool> ResumeSession(const Caller& caller, const std::string& id, const Origin& origin);
  // The session's state, sealed (Sessions::Export), and a new session of the caller's from such
  // an export (its limits within this server's maxima; another key's export is refused).
  Refused<Sessions::Exported> ExportSession(const Caller& caller, const std::string& id,
                                            const Origin& origin);
  Refused<StateCopied> ImportSession(const Caller& caller, std::string_view sealed, const Origin& origin);
  // Snapshots kept until deleted (Sessions::Shelve; E2B's snapshots). Taking one runs in the
  // sandbox (a slot, audited) and needs room under the key's session-state cap, which kept
  // snapshots count against; a session is made from one (by id or name) as an import is; a
  // delete is audited. Another key's snapshot does not exist for the caller.
  Refused<ShelvedSnapshot> KeepSnapshot(const Caller& caller, const std::string& id,
                                        const std::optional<std::string>& name, const Origin& origin);
  std::vector<ShelvedSnapshot> KeptSnapshots(const Caller& caller);
  Refused<void> DropSnapshot(const Caller& caller, const std::string& id_or_name, const Origin& origin);
  Refused<StateCopied> SessionFromSnapshot(const Caller& caller, const std::string& id_or_name,
                                           const Origin& origin);
  // The session ends `lifetime` from now, used or not (Sessions::SetExpiry; E2B's sandbox
  // timeout), within the server's maximum lifetime, else a "limit-exceeded" refusal naming it.
  Refused<void> SetSessionLifetime(const Caller& caller, const std::string& id, std::chrono::seconds lifetime,
                                   const Origin& origin);
  // Installs `packages` from the wheelhouse into the caller's session (an execution of it, with
  // its limits, through Execute): what was installed, or a "package-install-failed" refusal
  // saying why (the session lives on either way).
  Refused<std::vector<InstalledPackage>> InstallPackages(const Caller& caller, const std::string& id,
                                                         std::vector<std::string> packages,
                                                         const Origin& origin);
  Refused<void> WriteSessionFile(const Caller& caller, const std::string& id, const std::string& path,
                                 std::string content);
  Refused<std::string> ReadSessionFile(const Caller& caller, const std::string& id, const std::string& path,
                                       uint64_t max_bytes);

  // A session's processes besides its kernel (session_processes.h), for the session's owner
  // only (to anyone else the session does not exist). A start is audited (the command as the
  // audit's code) and refused while shutting down; it restarts a session whose sandbox had
  // ended (as an upload does). A signal is audited. None waits for a running execution.
  // `follower`: the caller follows it from its first byte (SessionProcesses::Start).
  Refused<ProcessInfo> StartProcess(const Caller& caller, const std::string& id, const ProcessSpec& spec,
                                    const Origin& origin,
                                    std::unique_ptr<SessionProcesses::Follower>* follower = nullptr);
  Refused<std::vector<ProcessInfo>> ListProcesses(const Caller& caller, const std::string& id);
  Refused<ProcessInfo> GetProcess(const Caller& caller, const std::string& id, int32_t pid);
  Refused<void> WriteProcessInput(const Caller& caller, const std::string& id, int32_t pid,
                                  std::string_view data);
  // Code for a process that runs what its stdin gives it (E2B's bash and javascript contexts),
  // run as an execution is (process_code.h): admitted (a running slot, the caller's rate and
  // concurrency, refused while shutting down), `code.input` written to its stdin, its output
  // given to `code.on_output` until that says the execution is complete; the process killed
  // past the session's wall time or output limit, or at shutdown; audited with the code and how
  // it ended (route "process_code") and counted.
  Refused<ProcessCodeRun> RunProcessCode(const Caller& caller, const std::string& id, const ProcessCode& code,
                                         const Origin& origin);
  Refused<void> CloseProcessInput(const Caller& caller, const std::string& id, int32_t pid);
  Refused<void> SignalProcess(const Caller& caller, const std::string& id, int32_t pid, int signal,
                              const Origin& origin);
  Refused<void> ResizeProcess(const Caller& caller, const std::string& id, int32_t pid, uint16_t rows,
                              uint16_t cols);
  // The process's output from `from` (SessionProcesses::Read): with `wait_until`, waits for
  // some first (a follower), until the process ended, `cancel`, or the time.
  Refused<SessionProcesses::Output> ReadProcessOutput(
      const Caller& caller, const std::string& id, int32_t pid, uint64_t from, size_t max_bytes,
      std::optional<std::chrono::steady_clock::time_point> wait_until, const std::atomic<bool>* cancel);
  Refused<ProcessInfo> WaitProcess(const Caller& caller, const std::string& id, int32_t pid,
                                   std::chrono::steady_clock::time_point until,
                                   const std::atomic<bool>* cancel);
  // The caller's session's process table itself (its owner checked now; `restart` as
  // Sessions::Processes), for a caller that stays with it: a follower of a process's output
  // reads on until the process ends, even when the session closes meanwhile. Its failures
  // become refusals through FromProcess.
  Refused<std::shared_ptr<SessionProcesses>> ProcessesOf(const Caller& caller, const std::string& id,
                                                         bool restart = false);
  Refusal FromProcess(const ProcessFailure& failure) const;

  // What the sandbox's interpreter has installed (packages.h): listed once, by running the
  // listing in a sandbox with this server's default limits, then kept. A failure is logged under
  // an incident id and tried again at the next call. With a wheelhouse, its wheels too, read
  // at each call.
  Refused<PackageCatalog> Packages();
  // The same when it has been listed already, at once; nullopt otherwise (never waits or runs).
  std::optional<PackageCatalog> ListedPackages();
  // The names of the wheelhouse's wheels, read now (never runs a sandbox); nullopt without a
  // wheelhouse.
  std::optional<std::vector<std::string>> WheelNames() const;

  // Graceful shutdown: queued executions are woken with "shutting-down" and new ones refused;
  // a running execution cancelled from now on says the server is shutting down.
  void Close();
  bool closed() const { return admission_.closed(); }
  size_t running() const { return admission_.running(); }
  size_t queued() const { return admission_.queued(); }

 private:
  // The limits an execution runs with, for a one-shot or for a session's execution.
  Refused<jail::Limits> ResolveLimits(const LimitOverrides& overrides, const jail::Limits* session) const;
  Refused<void> CheckInputs(const runtime::PythonProgram& program) const;
  Refused<PackageCatalog> ListPackagesOnce();
  Refused<void> CheckMode(const ExecutionRequest& request) const;
  // A request's network policy within the caller's bound, its deny entries added; refused
  // otherwise (gate_network.cc).
  Refused<void> CheckNetwork(const Caller& caller, ExecutionRequest& request) const;
  // `asked` within the caller's bound (NetworkBound), with the bound's deny entries added; else
  // the refusal naming the entry beyond it, or saying the caller may have none.
  Refused<NetPolicy> NetworkWithin(const Caller& caller, NetPolicy asked) const;
  // A session's network: `asked` bounded as above, with the server's proxy settings.
  Refused<SessionNetwork> SessionNetworkWithin(const Caller& caller, NetPolicy asked) const;
  Refusal FromSession(const SessionFailure& failure, const std::string& id) const;
  // A new session from a sealed state `open` gives (an export, a kept snapshot): ImportSession's
  // and SessionFromSnapshot's admission, network bound and audit, as `route`.
  Refused<StateCopied> ImportOpened(const Caller& caller, const Origin& origin, const char* route,
                                    const std::function<SessionExpected<Unsealed>(Sessions&)>& open);
  // A failure of the sandbox, logged with an incident id; the refusal says only that.
  Refusal Internal(const std::string& what, const std::string& detail) const;
  // A Result of status internal_error with its details moved to the log.
  void Scrub(Result& result) const;
  // Audits and counts a refusal; returns it, for `return std::unexpected(Reject(...))`.
  Refusal Reject(const Caller& caller, const Origin& origin, const char* route, const std::string& session_id,
                 const std::string& code, Refusal refusal);
  // Admission for a session call that makes a child or runs the agent; runs `call` in a slot.
  template <typename T, typename Call>
  Refused<T> InSlot(const Caller& caller, const Origin& origin, const char* route, const std::string& id,
                    Call call);
  void Audit(const Caller& caller, const Origin& origin, const char* route, const std::string& session_id,
             const std::string& code, const std::string& status, const nlohmann::json& usage,
             const nlohmann::json& network = nullptr, const nlohmann::json& guard = nullptr);
  // The caps per key (gate_caps.cc). The caller with its unset caps taken from the defaults.
  Caller WithCaps(const Caller& caller) const;
  // A place for one more session (max_sessions), held until the session exists or failed.
  Refused<Reservations::Held> SessionPlace(const Caller& caller);
  // A place for one more process in the caller's sessions (max_processes).
  Refused<Reservations::Held> ProcessPlace(const Caller& caller);
  // Room for more kept session state (max_session_state_mb): refused once the caller's kept
  // state reaches its cap (what a snapshot weighs is known only once it is taken).
  Refused<void> StateRoom(const Caller& caller);

  Engine& engine_;
  GateOptions options_;
  std::mutex packages_mu_;  // one listing at a time; the others wait for its answer
  std::optional<PackageCatalog> packages_;
  std::optional<Refusal> packages_failure_;
  std::chrono::steady_clock::time_point packages_retry_at_;
  size_t max_running_;
  Admission admission_;
  Reservations session_places_, process_places_;
};

// "session-not-found" for a session `id` that this caller does not have.
Refusal SessionNotFound(const std::string& id);
// "sessions-unavailable": the engine runs without the warm pool.
Refusal SessionsUnavailable();

}  // namespace execbox::engine
