// Code given to a session's process through the gate (Gate::RunProcessCode, E2B's bash and
// javascript contexts), end to end on real warm children: the process's output up to the
// caller's end, a running slot held (so the server's and the key's admission count it), the
// session's wall time and output limit killing the process, a shutdown stopping it, each
// audited as it ended.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "engine/gate.h"
#include "warm/warm_fixture.h"

namespace execbox::engine {
namespace {

using std::chrono::steady_clock;
constexpr auto kLong = std::chrono::seconds(20);
const Caller kOwner{.id = "test"};
const Origin kHere{.transport = Transport::kCli};

class ProcessCodeRuns : public WarmSessions {
 protected:
  void SetUp() override {
    WarmSessions::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    jail::Limits limits = g_engine->pool()->options().limits;
    limits.wall_time = std::chrono::seconds(2);
    limits.output_bytes = 4096;  // 64 times that, 256 KiB, ends an execution
    auto s = g_engine->sessions()->Create("test", limits);
    ASSERT_TRUE(s.has_value()) << s.error().message;
    id_ = s->id;
    audit_path_ = ::testing::TempDir() + "process_code_audit." + std::to_string(getpid()) + ".jsonl";
    std::remove(audit_path_.c_str());
    auto opened = AuditLog::Open(audit_path_, true);
    ASSERT_TRUE(opened.has_value()) << opened.error().message;
    audit_ = std::move(*opened);
    gate_ = std::make_unique<Gate>(
        *g_engine,
        GateOptions{.limits = LimitsConfig{}, .max_running = 1, .max_queue = 1, .audit = audit_.get()});
  }
  void TearDown() override {
    gate_.reset();
    if (!id_.empty()) (void)S().Delete(id_);
    std::remove(audit_path_.c_str());
  }

  // A bash reading its stdin, started through the gate.
  int32_t StartBash() {
    ProcessSpec spec{.argv = {"bash", "--noprofile", "--norc"}, .stdin = true, .tag = "kernel"};
    auto started = gate_->StartProcess(kOwner, id_, spec, kHere);
    EXPECT_TRUE(started.has_value()) << (started ? "" : started.error().detail);
    return started ? started->pid : 0;
  }
  // Runs `input` in `pid`, the execution complete once stdout shows "END\n"; its stdout before
  // that in `out`.
  Refused<ProcessCodeRun> Give(int32_t pid, const std::string& input, std::string* out = nullptr,
                               uint64_t from = 0) {
    std::string seen;
    ProcessCode code{.pid = pid,
                     .input = input,
                     .code = input,
                     .from = from,
                     .on_output = [&](OutputStream stream, std::string_view data, uint64_t) {
                       if (stream == OutputStream::kStdout) seen += data;
                       return seen.ends_with("END\n");
                     }};
    auto ran = gate_->RunProcessCode(kOwner, id_, code, kHere);
    if (out != nullptr) *out = seen;
    return ran;
  }
  std::string AuditText() {
    std::ifstream in(audit_path_);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  std::string id_, audit_path_;
  std::unique_ptr<AuditLog> audit_;
  std::unique_ptr<Gate> gate_;
};

TEST_F(ProcessCodeRuns, OutputUpToTheCallersEndThenTheProcessRunsOn) {
  const int32_t pid = StartBash();
  ASSERT_GT(pid, 0);
  std::string out;
  auto ran = Give(pid, "x=41; echo hi; echo END\n", &out);
  ASSERT_TRUE(ran.has_value()) << ran.error().detail;
  EXPECT_EQ(ran->end, ProcessCodeEnd::kComplete);
  EXPECT_EQ(out, "hi\nEND\n");
  ran = Give(pid, "echo $((x + 1)); echo END\n", &out, ran->info.output_bytes);
  ASSERT_TRUE(ran.has_value());
  EXPECT_EQ(out, "42\nEND\n");
  EXPECT_TRUE(ran->info.running);
  EXPECT_EQ(gate_->running(), 0u);
  // An exit ends the execution with the process, saying how.
  ran = Give(pid, "exit 3\n", &out, ran->info.output_bytes);
  ASSERT_TRUE(ran.has_value());
  EXPECT_EQ(ran->end, ProcessCodeEnd::kExited);
  EXPECT_NE(ran->why.find("status 3"), std::string::npos) << ran->why;
  const std::string audit = AuditText();
  EXPECT_NE(audit.find("\"route\":\"process_code\""), std::string::npos) << audit;
  EXPECT_NE(audit.find("\"status\":\"done\""), std::string::npos) << audit;
  EXPECT_NE(audit.find("\"status\":\"exited\""), std::string::npos) << audit;
}

TEST_F(ProcessCodeRuns, TheWallTimeAndTheOutputLimitKillTheProcess) {
  int32_t pid = StartBash();
  ASSERT_GT(pid, 0);
  const auto t0 = steady_clock::now();
  auto ran = Give(pid, "sleep 60; echo END\n");
  ASSERT_TRUE(ran.has_value()) << ran.error().detail;
  EXPECT_EQ(ran->end, ProcessCodeEnd::kTimedOut);
  EXPECT_NE(ran->why.find("wall-time limit (2 s)"), std::string::npos) << ran->why;
  EXPECT_LT(steady_clock::now() - t0, std::chrono::seconds(30));
  auto end = gate_->WaitProcess(kOwner, id_, pid, steady_clock::now() + kLong, nullptr);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->signal, SIGKILL);

  pid = StartBash();
  ASSERT_GT(pid, 0);
  ran = Give(pid, "yes 0123456789 | head -c 50000000; echo END\n");
  ASSERT_TRUE(ran.has_value()) << ran.error().detail;
  EXPECT_EQ(ran->end, ProcessCodeEnd::kOutputLimit);
  EXPECT_NE(ran->why.find("more than 0 MiB"), std::string::npos) << ran->why;  // 256 KiB
  end = gate_->WaitProcess(kOwner, id_, pid, steady_clock::now() + kLong, nullptr);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->signal, SIGKILL);
  const std::string audit = AuditText();
  EXPECT_NE(audit.find("\"status\":\"timeout\""), std::string::npos) << audit;
  EXPECT_NE(audit.find("\"status\":\"output_limit\""), std::string::npos) << audit;
}

TEST_F(ProcessCodeRuns, ItHoldsARunningSlotAndAShutdownStopsIt) {
  const int32_t pid = StartBash();
  ASSERT_GT(pid, 0);
  std::atomic<bool> started{false};
  std::optional<Refused<ProcessCodeRun>> ran;
  std::thread t([&] {
    ProcessCode code{.pid = pid,
                     .input = "sleep 60; echo END\n",
                     .code = "sleep",
                     .on_started = [&] { started = true; },
                     .on_output = [](OutputStream, std::string_view, uint64_t) { return false; }};
    ran = gate_->RunProcessCode(kOwner, id_, code, kHere);
  });
  const auto deadline = steady_clock::now() + kLong;
  while (!started && steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(started);
  // The server's one slot is taken: an execution queues (max_queue 1) and another is refused.
  EXPECT_EQ(gate_->running(), 1u);
  auto queued =
      gate_->Admit(kOwner, ExecutionRequest{.program = Program("print(1)"), .session_id = id_}, kHere);
  ASSERT_TRUE(queued.has_value()) << queued.error().detail;
  auto refused =
      gate_->Admit(kOwner, ExecutionRequest{.program = Program("print(2)"), .session_id = id_}, kHere);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().reason, RefusalReason::kQueueFull);
  { Admitted dropped = std::move(*queued); }
  gate_->Close();
  t.join();
  ASSERT_TRUE(ran.has_value() && ran->has_value()) << (ran ? ran->error().detail : "");
  EXPECT_EQ((*ran)->end, ProcessCodeEnd::kShutdown);
  EXPECT_NE((*ran)->why.find("shutting down"), std::string::npos) << (*ran)->why;
  EXPECT_EQ(gate_->running(), 0u);
  auto after = Give(pid, "echo END\n");
  ASSERT_FALSE(after.has_value());
  EXPECT_EQ(after.error().reason, RefusalReason::kShuttingDown);
}

}  // namespace
}  // namespace execbox::engine
