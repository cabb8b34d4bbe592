// A policy value in, a contained process out: runs Policy::argv in fresh namespaces, waits for
// it under the limits, and reports exactly what happened.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "jail/capture.h"
#include "jail/policy.h"

namespace execbox::jail {

enum class Stream { kStdout, kStderr };

// Why the run ended, as the supervisor saw it.
enum class Ending {
  kExited,       // the main process exited by itself (any code)
  kSignaled,     // the main process died of a signal nobody here sent
  kWallTimeout,  // the wall-time limit was reached
  kCpuTimeout,   // the CPU-time limit was reached
  kMemoryLimit,  // the cgroup's OOM counter rose
  kOutputLimit,  // a stream wrote more than output_kill_factor * output_bytes
  kCancelled,    // the caller cancelled the run (RunHooks::cancel)
  kSetupFailed,  // the jail could not be built (message says which step)
  kForgedDone,   // a warm child's done marker was not the agent's: the code wrote it (done_check.h)
};
const char* EndingName(Ending ending);

struct Usage {
  uint64_t setup_ms = 0;  // from the call to Run until the code was exec'd: the jail's cost
  uint64_t wall_ms = 0;   // from exec until the code's main process ended
  uint64_t cpu_ms = 0;
  uint64_t peak_memory_bytes = 0;
  uint64_t pids_peak = 0;  // 0 when unknown
};

// Which mechanism enforced each limit, so degradation is visible, never silent.
struct Enforcement {
  std::string memory;     // "cgroup-v2", "cgroup-v1" or "rlimit"
  std::string processes;  // "cgroup-v2", "cgroup-v1" or "rlimit"
  std::string cpu_time;   // "cgroup-v2+rlimit", "cgroup-v1+rlimit" or "rlimit"
  std::string wall_time = "supervisor";
  std::string output = "supervisor";
  std::string disk = "tmpfs";
};

// The isolation layers that were really in force for this run.
struct Layers {
  bool user_ns = false, pid_ns = false, mount_ns = false, net_ns = false, ipc_ns = false, uts_ns = false,
       cgroup_ns = false;
  bool seccomp = false, no_new_privs = false, capabilities_dropped = false;
  int landlock_abi = 0;  // 0: not applied
  // Landlock handled TCP where its ABI can; false for a session's child, whose own servers
  // bind and connect on its loopback (LandlockPlan::tcp_open).
  bool landlock_tcp = true;
  std::string cgroup = "none";
  // Set once the jail reported its start (wire::kWithout*): a container may refuse both.
  bool hostname = false;  // the hostname is the policy's ("sandbox")
  bool proc = false;      // a fresh /proc of the sandbox's own processes (else /proc is empty)
};

// Records what the jail's init said it went without (kStarted's b) in `layers`.
void ApplyStartFlags(int64_t without, Layers& layers);

struct CollectedFile {
  std::string name;
  std::string content;
};

struct Outcome {
  Ending ending = Ending::kExited;
  int exit_code = 0;  // when kExited
  // A warm child said it was done (its report complete) before its process had ended: the
  // exit code is then the one in its report, and the process winds down after the answer.
  bool ended_by_report = false;
  // A session's kernel ended (stopped, or it exited) and a new one runs in the same sandbox:
  // the code's state is gone; its files and the session's processes are kept.
  bool kernel_restarted = false;
  int signal = 0;       // the signal that ended the main process, if any
  std::string message;  // for kSetupFailed, and notes such as skipped files
  Capture stdout_capture{1 << 20};
  Capture stderr_capture{1 << 20};
  std::string report;  // what the code wrote to the report channel (fd 3), bounded
  bool report_truncated = false;
  Usage usage;
  Enforcement enforcement;
  Layers layers;
  std::vector<CollectedFile> files;
  std::vector<std::string> skipped_files;  // "name: reason"
};

struct RunHooks {
  // Live output, called as bytes arrive (before capping); may be empty.
  std::function<void(Stream, std::string_view)> on_output;
  // The agent's report as it arrives, what is kept of it (engine/report.h reads it); may be empty.
  std::function<void(std::string_view)> on_report;
  // Set (from any thread) to stop the run: the tree is killed, the ending is kCancelled.
  // Looked at every 100 ms at most. May be null.
  const std::atomic<bool>* cancel = nullptr;
  // A second such flag, for an owner that stops the run for its own reasons (a session being
  // deleted) while the caller's flag stays the caller's. May be null.
  const std::atomic<bool>* cancel_too = nullptr;
  // The run's CPU weight (Cgroup::SetCpuWeight) while CPUs are contended; 0: kDefaultCpuWeight.
  uint32_t cpu_weight = 0;
};

// Inside, the code has one id (Policy::uid); on the host it is nobody when the supervisor is
// root, else the supervisor's own user (the only id an unprivileged process may map). What the
// code writes into a writable bind belongs to this host user.
inline constexpr uid_t kHostNobody = 65534;
uid_t CodeHostUid();
gid_t CodeHostGid();

// Runs one policy to completion. An error means nothing ran (bad policy, no namespaces);
// everything that happened once the jail existed is in the Outcome.
Expected<Outcome> Run(const Policy& policy, const RunHooks& hooks = {});

}  // namespace execbox::jail
