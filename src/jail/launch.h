// Internal to the jail layer: starting a jail's init (shared by one-shot runs and long-lived
// zygote workers) and watching a live execution (shared by cold runs and warm children).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/unique_fd.h"
#include "jail/cgroup.h"
#include "jail/done_check.h"
#include "jail/sandbox.h"

namespace execbox::jail {

using Clock = std::chrono::steady_clock;

// The host's ends (and, until the child has them, the child's ends) of one execution's pipes.
struct Channels {
  UniqueFd stdin_read, stdin_write, stdout_read, stdout_write, stderr_read, stderr_write;
  UniqueFd report_read, report_write, control_host, control_child;
};

// Pipes for stdin/stdout/stderr and, if asked, the report; `control` adds the socketpair.
// `report_socket` makes the report channel a SOCK_SEQPACKET socketpair (a zygote's commands).
Expected<Channels> MakeChannels(bool report, bool report_socket, bool control);

// A jail whose init is running with the code started (or starting).
struct Launched {
  pid_t init = -1;
  std::unique_ptr<Cgroup> cgroup;
  Channels ch;
  Layers layers;
  Enforcement enforcement;
  Clock::time_point started;
  // Kills and reaps the init if still owned.
  ~Launched();
  Launched() = default;
  Launched(Launched&&) noexcept;
  Launched& operator=(Launched&&) = delete;
};

// Starts the code: kGo, the input files, kInputsDone.
Status SendInputs(int fd, const Policy& policy);

// Validates the policy, makes the cgroup, clones the init, maps ids and sends the inputs.
Expected<Launched> Launch(const Policy& policy);

// What the supervisor watches while an execution is live.
struct WatchSpec {
  const Limits* limits = nullptr;
  const std::string* stdin_data = nullptr;
  uint64_t max_file_bytes = 0;
  const RunHooks* hooks = nullptr;
  Cgroup* cgroup = nullptr;
  std::function<void()> kill_tree;  // SIGKILL the whole tree, now
  // A session's: a stop ends the code's process (its kernel) alone, and the execution ends once
  // code_ended gives the kernel's wait status (its init reported it, having killed what the
  // kernel left) and the output is closed; the machine lives on. Past kStopGrace, kill_tree.
  // Empty: a stop asks the zygote to kill the tree, and the execution ends with the tree.
  std::function<void()> stop_code;
  std::function<std::optional<int>()> code_ended;
  // A session's execution ends when a byte 'D' arrives here (its channel, relayed by the
  // session's init from the kernel) and check_done then confirms it; the process lives on.
  // -1: no marker.
  int done_fd = -1;
  // A one-shot warm child's: the end of its report (EOF: the agent's os._exit closed it) is the
  // claim, and check_done confirms it (the process is exiting), so the result need not wait
  // for the exit's teardown. Unconfirmed (the code closed its report fd and runs on), the
  // execution ends with the tree, as if there were no claim. The code holds no channel to
  // write a marker on.
  bool report_end_claims_done = false;
  // Asked after a claim until it confirms or kDoneCheckWindow has passed (then a 'D' ends the
  // execution as kForgedDone). Required with either: a claim nobody can confirm is not believed.
  std::function<DoneCheck()> check_done;
  CgroupUsage base;  // the group's counters when the execution began (sessions reuse a group)
};

// For tests: waits this long between a confirmed 'D' and asking the zygote for the files, so
// that a one-shot child has surely ended (and its files been sent unasked) first.
void DelayCollectForTesting(std::chrono::milliseconds delay);

class Watch {
 public:
  Watch(const WatchSpec& spec, Channels& ch, Outcome& out);
  void Loop();
  std::optional<Ending> stop_reason() const { return stop_reason_; }
  bool exited() const { return exited_; }
  int wait_status() const { return wait_status_; }
  // A session's: the kernel's status as its init reported it, over the init's own.
  void OverrideWaitStatus(int status) { wait_status_ = status; }
  uint64_t tree_cpu_us() const { return tree_cpu_us_; }
  uint64_t tree_maxrss_kib() const { return tree_maxrss_kib_; }
  Clock::time_point started_at() const { return started_at_; }
  Clock::time_point ended_at() const { return ended_at_; }
  bool setup_failed() const { return setup_failed_; }
  bool report_done() const { return report_done_; }
  // A session's kernel ended (code_ended said so) and the tree was not killed: its init lives.
  bool kernel_ended_alone() const { return kernel_ended_ && !tree_killed_; }
  // After a session execution: asks the zygote for the files changed since its last
  // collection and reads them (and nothing else) until it says kCollected. `send` false: the
  // zygote only notes the files as they are (the next collection reports what changes after).
  void Collect(bool send = true);

 private:
  void Stop(Ending reason);
  void ReadOutput(UniqueFd& fd, Stream stream);
  void ReadReport();
  void WriteStdin();
  void ReadControl();
  void CheckLimits();
  void Abandon(const char* why);
  void KillTree();
  void CheckKernelEnded();
  void DrainOutput();
  void ReadDone();
  void ClaimDoneAtReportEnd();
  void CheckDoneClaim();
  void TakeDone();

  const WatchSpec& spec_;
  Channels& ch_;
  Outcome& out_;
  size_t stdin_sent_ = 0;
  bool control_open_ = true;
  bool exited_ = false;
  bool setup_failed_ = false;
  bool report_done_ = false;
  bool collecting_ = false;
  bool done_open_ = true;
  // A 'D' arrived (or, report_end_claims_done, the report ended) and is being checked (since
  // then); void: the process is ending instead, or the report's end was not the agent's.
  std::optional<Clock::time_point> done_claimed_at_;
  bool claimed_by_report_end_ = false;
  bool done_claim_void_ = false;
  bool kernel_ended_ = false;
  bool tree_killed_ = false;
  int wait_status_ = 0;
  uint64_t tree_cpu_us_ = 0;
  uint64_t tree_maxrss_kib_ = 0;
  std::optional<Ending> stop_reason_;
  std::optional<Clock::time_point> kill_at_;
  Clock::time_point started_at_ = Clock::now();
  Clock::time_point ended_at_{};
  Clock::time_point deadline_;
};

// Sets ending/exit_code/signal from what the watch saw.
void ClassifyEnding(const Limits& limits, const Watch& w, const CgroupUsage& cg, Outcome& out);

bool SendWireHeader(int fd, const void* header, size_t size);
bool SendBytes(int fd, std::string_view data);
std::string NextCgroupName();

}  // namespace execbox::jail
