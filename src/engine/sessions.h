// Stateful sessions, like notebook kernels: a long-lived warm child whose Python globals,
// imports and work dir persist across executions. Executions in one session run one at a time,
// in order. A session idle for longer than its TTL is closed; at most max_sessions exist (a
// create beyond that is refused with kFull: nothing is evicted behind a client's back).
// When an execution kills the session's process (a timeout, the memory limit, a crash), the
// reply says the state was lost and why, and the session restarts empty at generation + 1;
// its next reply says "lost" too, once, so a model never assumes its variables survived.
// A session's state is copied as data (state_copy.h): Fork makes an independent session from
// a snapshot of another, and a session created with `checkpoint` keeps a snapshot from before
// each execution, which Undo restores. With a state dir, sessions outlive the server: each
// session's file holds its owner, limits and the latest state the server has for it (none at
// creation; the checkpoint before each execution for a checkpointing session; the state after
// the last execution at a graceful shutdown). A restarted server takes them back, restores each
// on its first use, and that reply says what came back and what did not. Export and Import move
// a session's state, sealed, between servers that share the state dir's key.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <expected>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "engine/execute_options.h"
#include "engine/key_caps.h"
#include "engine/net_policy.h"
#include "engine/pool.h"
#include "engine/process_poller.h"
#include "engine/result.h"
#include "engine/session_processes.h"
#include "engine/session_store.h"
#include "engine/snapshot_shelf.h"
#include "engine/state_copy.h"
#include "runtime/python_program.h"

namespace execbox::engine {

struct SessionOptions {
  size_t max_sessions = 32;
  std::chrono::seconds idle_ttl{30 * 60};
  // The longest a session may be given to live (SetExpiry: E2B's sandbox timeout).
  std::chrono::seconds max_lifetime{24 * 3600};
  // This server's name among several behind one router ("" when alone): every session id
  // ends in "." and this name, so a router sends each session's calls to the instance that
  // holds it (docs/deploy.md, "Several instances behind nginx").
  std::string instance;
  // Where sessions are kept across restarts ("": they end with the server). Made 0700.
  std::string state_dir;
};

// A session's network (egress_proxy.h): its policy, already bounded by the gate, and how many
// connections each of its executions may make. Every execution's Result lists the connections
// that ended since the one before (a background process's too). A fork has the same policy
// (a proxy of its own); an export carries it, which the gate bounds again on import
// (Gate::ImportSession); a server restart does not: such a session comes back without network.
struct SessionNetwork {
  std::shared_ptr<const NetPolicy> policy;  // null: no network, as every session before
  size_t max_connections = 0;               // 0: the proxy's default (EgressLimits)
  uint64_t max_bytes = 0;                   // each way per execution; 0: the proxy's default
  std::shared_ptr<const NetHosts> hosts;    // the operator's answers for names; may be null
};

// Instance names are DNS labels (a StatefulSet's pod names are): 1-63 of a-z, 0-9 and '-',
// neither first nor last a '-'.
execbox::Status ValidateInstanceName(const std::string& name);
// The instance a session id names ("" for an id without one).
std::string InstanceOfId(const std::string& id);

struct SessionInfo {
  std::string id;
  std::string owner;    // the caller that created it: to every other caller it does not exist
  jail::Limits limits;  // what it was created with: its executions' defaults, and fixed
                        // for the limits that only a new child can take (disk_mb)
  uint64_t generation = 0;
  uint64_t executions = 0;
  bool preserved = true;
  std::string lost_reason;
  std::chrono::system_clock::time_point created, last_used;
  uint64_t private_bytes = 0, pss_bytes = 0;  // of the session's Python process, when known
  bool checkpoint = false;                    // a snapshot is taken before each execution (for Undo)
  bool can_undo = false;                      // one is held now
  // When the session ends whatever its use (SetExpiry); none: it ends after idle_ttl unused.
  std::optional<std::chrono::system_clock::time_point> expires;
  std::shared_ptr<const NetPolicy> network;  // its network policy; null: none
  bool paused = false;                       // Sessions::Pause: kept as state, no process runs
};

// A session made or changed from a snapshot (Fork, Undo), and what did not come along.
struct StateCopied {
  SessionInfo info;
  std::vector<LeftOut> left_out;
};

enum class SessionError {
  kNotFound,        // no such session for this owner
  kFull,            // max_sessions reached
  kInvalid,         // a file path that cannot be one (absolute, "..", a control character)
  kRefused,         // the zygote refused a file (a symlink or a file where a directory must be)
  kStateNotCopied,  // a snapshot or restore the agent refused, or the state is gone; says why
  kNothingToUndo,   // Undo: no checkpoint (not asked for at creation, none yet, or it failed)
  kBadSnapshot,     // Import: not a snapshot of this server's (damaged, or sealed under another key)
  kNotYours,        // Import: a snapshot of another owner's session
  kNoSnapshot,      // OpenShelved: the owner keeps no snapshot of that id or name
  kInternal,        // the sandbox failed; the message is for the server's log, not the client
  kFileNotFound,    // ReadFile: missing, not a regular file, or a symbolic link on the path
  kTooLarge,        // ReadFile: past max_bytes; WriteFile: past the work dir's size (or it is full)
};

struct SessionFailure {
  SessionError kind;
  std::string message;
};

template <typename T>
using SessionExpected = std::expected<T, SessionFailure>;

class Sessions {
 public:
  Sessions(Pool& pool, SessionOptions options);
  ~Sessions();  // ends every session's process; a durable one's file stays
  // Opens the state dir (if any) and takes back the sessions kept there; before any other call.
  execbox::Status Open();
  // A graceful shutdown: each session's state after its last execution, into its file.
  // Returns how many were saved.
  size_t SaveAll();
  Sessions(const Sessions&) = delete;
  Sessions& operator=(const Sessions&) = delete;

  // Every call names the owner: a session exists only for the caller that created it.
  // `checkpoint`: keep a snapshot from before each execution, for Undo (it costs a snapshot,
  // of the globals and the work dir, per execution).
  // `network`: the session reaches what its policy allows, through a proxy of its own
  // (SessionNetwork); without one it has no network.
  SessionExpected<SessionInfo> Create(const std::string& owner, const jail::Limits& limits,
                                      bool checkpoint = false, const SessionNetwork& network = {});
  SessionExpected<Result> Execute(const std::string& owner, const std::string& id,
                                  const runtime::PythonProgram& program, const ExecuteOptions& options = {});
  SessionExpected<SessionInfo> Info(const std::string& owner, const std::string& id);
  // The limits the session was created with, without waiting for a running execution (they
  // never change): for a caller deciding at once whether a request may go ahead.
  SessionExpected<jail::Limits> CreatedWith(const std::string& owner, const std::string& id);
  // Whether it is paused now (Pause), without waiting for a running execution.
  SessionExpected<bool> Paused(const std::string& owner, const std::string& id);
  std::vector<SessionInfo> List(const std::string& owner);
  // A new session of the same owner, limits and checkpointing, holding a copy of this one's
  // state: a snapshot made inside this session's sandbox, restored in a fresh child (its own
  // namespaces, cgroup, work dir). The two are independent from then on. Not a copy of the
  // process: a forked locked-down process keeps its seccomp filter and cannot be given
  // namespaces of its own. `left_out` lists what the snapshot could not hold.
  SessionExpected<StateCopied> Fork(const std::string& owner, const std::string& id);
  // Puts back the state from before the last execution (a session created with checkpoint),
  // in a fresh child; once per checkpoint. `left_out` lists what the checkpoint could not hold.
  SessionExpected<StateCopied> Undo(const std::string& owner, const std::string& id);
  // The session's state now, sealed (sealed_snapshot.h), for Import on this server or another
  // one sharing its key; `left_out` lists what it could not hold.
  struct Exported {
    std::string sealed;
    std::vector<LeftOut> left_out;
  };
  SessionExpected<Exported> Export(const std::string& owner, const std::string& id);
  // An export of this server's (or of one sharing its key), checked and opened once: its header
  // (owner, limits, network policy) for the caller to judge, and its state. kBadSnapshot else.
  SessionExpected<Unsealed> OpenExport(std::string_view sealed) const;
  // A new session of `owner` from an opened export of `owner`'s. Its limits must be within
  // `maxima`; `network` is the export's policy as the caller bounded it again, given exactly
  // when the export has one.
  SessionExpected<StateCopied> Import(const std::string& owner, Unsealed exported, const jail::Limits& maxima,
                                      const SessionNetwork& network = {});
  SessionExpected<void> Delete(const std::string& owner, const std::string& id);
  // Snapshots kept until deleted (snapshot_shelf.h; E2B's snapshots), each the session's state
  // as Export takes it, now: a new one, or the new content of the owner's snapshot named `name`
  // already. kInvalid for a name that cannot be one; kFull past kMaxShelvedPerOwner. A new
  // session is made from one with Import (OpenShelved), also after its session ended.
  static constexpr size_t kMaxShelvedPerOwner = 100;
  SessionExpected<ShelvedSnapshot> Shelve(const std::string& owner, const std::string& id,
                                          const std::optional<std::string>& name);
  std::vector<ShelvedSnapshot> Shelved(const std::string& owner);
  // The owner's kept snapshot of that id or name, opened (its seal checked) for Import;
  // kNoSnapshot when there is none.
  SessionExpected<Unsealed> OpenShelved(const std::string& owner, const std::string& id_or_name) const;
  // False when the owner keeps no snapshot of that id or name.
  bool Unshelve(const std::string& owner, const std::string& id_or_name);
  // Pausing keeps the session's state and ends its process: a snapshot (the globals and the work
  // dir, as Export takes; what it cannot hold is lost) held by the server (and written to the
  // state dir when durable, so a restart takes it back), its child and its processes ended, its
  // memory and pool slot freed. A paused session is neither swept when idle nor ended by its
  // expiry. Its first use afterwards (an execution, a file call, a process, Resume) restores it,
  // in a fresh child, and that reply says so. True when paused now, false when it was already;
  // kStateNotCopied when the state cannot be taken (its process had ended).
  SessionExpected<bool> Pause(const std::string& owner, const std::string& id);
  // Restores a paused session now; true when it was paused (a restore that fails leaves it
  // running, empty, and its next reply says the state was lost), false when it ran.
  SessionExpected<bool> Resume(const std::string& owner, const std::string& id);
  // From now on the session ends at `expires` (closed by the sweep, between executions), used
  // or not, instead of after idle_ttl unused; nullopt goes back to the idle TTL. Never waits
  // for a running execution. The caller keeps `expires` within max_lifetime (the gate does).
  SessionExpected<void> SetExpiry(const std::string& owner, const std::string& id,
                                  std::optional<std::chrono::system_clock::time_point> expires);
  // At its expiry the session is paused (Pause) instead of closed (E2B's autoPause); one that
  // cannot be paused then is closed. Coming back, it is given its last lifetime again.
  SessionExpected<void> SetPauseAtExpiry(const std::string& owner, const std::string& id, bool pause);
  std::chrono::seconds max_lifetime() const { return options_.max_lifetime; }
  // A session's files, between its executions (each waits for a running execution and counts
  // as use for the idle TTL; neither touches the session's globals or its execution count).
  // The zygote does the work, beneath the work dir it holds by descriptor: nothing the
  // code planted is followed or opened (a symbolic link at any component, a FIFO, a device),
  // and nothing outside the work dir is reached. `path` is relative to the work dir ("./" and
  // repeated slashes are tolerated; "..", an absolute path or a control character is kInvalid).
  //
  // Writes `content` to `path`, creating parent dirs. Whatever non-directory is at `path` (a
  // file, a symbolic link, a FIFO) is replaced by the new file, never written through; a parent
  // that is a symbolic link or a file is kRefused (saying so); so is a directory at `path`.
  // kTooLarge past the work dir's size or when it is full; kNotFound for an unknown session.
  // The file is not reported among the next execution's files unless that execution changes
  // it. A session whose process had ended is restarted first (empty, and the next execution's
  // reply says the state was lost), so the file is there for the next execution.
  SessionExpected<void> WriteFile(const std::string& owner, const std::string& id, const std::string& path,
                                  std::string content);
  // The file's bytes. kNotFound for an unknown session; kFileNotFound when the path does not
  // exist, is not a regular file, or reaches through a symlink; kTooLarge past max_bytes.
  SessionExpected<std::string> ReadFile(const std::string& owner, const std::string& id,
                                        const std::string& path, uint64_t max_bytes);
  // The session's processes besides its kernel (session_processes.h), for its owner. Process
  // calls never wait for a running execution; each counts as use for the idle TTL when no
  // execution runs. `restart`: a session whose sandbox has ended (its kernel ended between
  // executions) is restarted first, empty, as a file upload does (the next execution's reply
  // says the state was lost): for a start.
  SessionExpected<std::shared_ptr<SessionProcesses>> Processes(const std::string& owner,
                                                               const std::string& id, bool restart = false);
  size_t size();
  // What `owner` holds now: sessions open, processes running in them, bytes of state kept
  // (sessions, processes and session_state_bytes of KeyUse; session_use.cc). Never waits for a
  // running execution: its session's state is counted as it was before it.
  KeyUse UseOf(const std::string& owner);
  // Whether the owner's session keeps a checkpoint before each execution (false when none).
  bool Checkpoints(const std::string& owner, const std::string& id);
  // The same for every owner with a session, for /metrics.
  std::map<std::string, KeyUse> Use();
  // Closes sessions idle past the TTL now (the background sweep calls it too).
  size_t SweepIdle();
  // What the sweep did to a session on its own (no caller asked): the gate audits it.
  enum class Swept { kIdle, kExpired, kPausedAtExpiry };
  using SweepListener = std::function<void(const std::string& owner, const std::string& id, Swept what)>;
  // Told of each sweep's closes and pauses from now on (null: no one). Once this returns, the
  // listener before it is not called again.
  void OnSwept(SweepListener listener);

 private:
  struct Session;
  void Tell(const std::string& owner, const std::string& id, Swept what);
  // The session, if `owner` owns it.
  std::shared_ptr<Session> Find(const std::string& owner, const std::string& id);
  // A file call's start: the session found, held by its run lock, touched, restored if it was
  // saved, and `path` made plain (NotFound, or Invalid for the path, otherwise).
  struct FileCall {
    std::shared_ptr<Session> session;
    std::unique_lock<std::mutex> run;
    std::string path;
  };
  SessionExpected<FileCall> StartFileCall(const std::string& owner, const std::string& id,
                                          const std::string& path);
  SessionExpected<void> Close(const std::string& id);
  SessionInfo InfoOf(Session& s);
  // The session's process is gone (found outside an execution): the next reply says so.
  void Lost(Session& s, const char* reason);
  void KernelRestarted(Session& s, const char* reason);
  // The session's processes follow its child (a new one, or none): after every change of it.
  void Rebind(Session& s);
  // Restarts a session whose process is gone; false with the reason when no child is available.
  SessionExpected<void> EnsureChild(Session& s);
  // The snapshot before an execution, for Undo (a session created with checkpoint).
  void Checkpoint(Session& s);
  // Counts the session's kept state into state_bytes; run_mu held.
  static void CountState(Session& s);
  // Adds one session to `use` (its state counted anew when run_mu is free).
  static void AddUse(Session& s, KeyUse& use);
  // A session taken back after a restart is restored into a child on its first use.
  void RestoreSaved(Session& s);
  // Writes the session's file (a durable store only); a failure is logged, never the caller's.
  void Persist(Session& s, SealedSession::State state, std::string_view body);
  // Publishes a session read back from the store (false when full).
  bool Adopt(const std::string& id, Unsealed unsealed);
  static SealedSession HeaderOf(const Session& s, SealedSession::State state);
  // A snapshot of the live session (for `what`: "fork", "export"), or why there is none.
  SessionExpected<Snapshot> SnapshotNow(Session& s, const char* what);
  // A new session of `owner` with `blob` restored in it; closed again if the restore fails.
  SessionExpected<StateCopied> NewFromSnapshot(const std::string& owner, const jail::Limits& limits,
                                               bool checkpoint, std::string_view blob,
                                               const SessionNetwork& network = {});
  // A child for the session: with its network's connector when it has one.
  Expected<std::unique_ptr<jail::WarmChild>> AcquireChild(Session& s);
  // A failed snapshot or restore as the caller hears it; a process that ended marks `s` lost.
  SessionFailure CopyFailure(Session* s, const StateCopyFailure& failure);

  Pool& pool_;
  SessionOptions options_;
  // Reads every session's processes' output and inits' reports; outlives the sessions below.
  ProcessPoller poller_;
  std::unique_ptr<SessionStore> store_;
  std::unique_ptr<SnapshotShelf> shelf_;  // made by Open, with store_
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Session>> sessions_;
  bool stopping_ = false;
  std::condition_variable wake_;
  std::mutex listener_mu_;  // held while the listener is called, and while it is replaced
  SweepListener listener_;
  std::thread sweeper_;
};

}  // namespace execbox::engine
