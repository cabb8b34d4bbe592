// A bash or javascript context's kernel: a process of the sandbox's own (bash, or node running
// kJavascriptKernel), started through the gate as the key's like any command (ownership, the
// process cap, the audit), tagged with its context so that E2B's process list leaves it out.
// Each execution's code is given to it through the gate (audited as code) with marks that say
// where the execution's output ends (e2b_kernel_wire.h); its output streams to the caller as
// the kernel writes it. The kernel keeps its state between executions, like a Jupyter kernel:
// variables, functions, the working directory, for bash what it exported.
//
// An execution past the sandbox's wall-time limit ends the kernel (its state with it): the next
// one starts a new kernel. So does one whose kernel exited (an `exit` in the code) or was
// killed; a pause ends every process, kernels too. A caller that goes away leaves the execution
// running to its end, as Jupyter does: the kernel is not in the middle of something next time.
#include <csignal>

#include "api/e2b/e2b_api.h"
#include "api/e2b/e2b_sandbox.h"
#include "base/random.h"

namespace execbox::api::e2b {
namespace {

constexpr size_t kReadBytes = 1u << 20;
constexpr std::chrono::milliseconds kPoll{250};

engine::Result Failed(std::string name, std::string value) {
  engine::Result r;
  r.error = engine::ErrorInfo{.ename = name, .evalue = value, .traceback = {name + ": " + value}};
  return r;
}

std::string TagOf(const std::string& context) { return std::string(kKernelTagPrefix) + context; }

// The execution's Result from its stdout mark (KernelOutput::end()).
engine::Result ResultOf(Language language, const nlohmann::json& end) {
  engine::Result r;
  if (!end.is_object()) return Failed("KernelError", "the kernel's end of this execution was not readable");
  if (language == Language::kBash) {
    const int status = end.value("status", 0);
    // As Jupyter's bash kernel reports it: the last command's exit status.
    if (status != 0)
      r.error =
          engine::ErrorInfo{.ename = "ExitCode",
                            .evalue = std::to_string(status),
                            .traceback = {"the last command exited with status " + std::to_string(status)}};
    return r;
  }
  if (end.contains("text") && end["text"].is_string())
    r.result =
        engine::MimeBundle{{"data", {{"text/plain", end["text"]}}}, {"metadata", nlohmann::json::object()}};
  if (const auto& e = end.value("error", nlohmann::json()); e.is_object()) {
    r.error = engine::ErrorInfo{.ename = e.value("name", "Error"), .evalue = e.value("value", "")};
    r.error->traceback = {e.value("traceback", r.error->ename + ": " + r.error->evalue)};
  }
  return r;
}

}  // namespace

engine::Refused<engine::Result> E2bApi::RunInKernel(const Sandbox& sandbox, const KernelCall& call,
                                                    StreamedAnswer& answer) {
  Sandbox::Kernel& kernel = *call.kernel;
  std::lock_guard run(kernel.run);
  const std::string tag = TagOf(call.context);
  const char* language = LanguageName(call.language);
  auto table = gate_.ProcessesOf(call.caller, sandbox.id);
  if (!table) return std::unexpected(std::move(table.error()));

  // The kernel of the executions before, if it still runs (the same pid with the same tag: after
  // a pause, its pid may be another process's).
  std::unique_ptr<engine::SessionProcesses::Follower> follower;
  if (const int32_t pid = kernel.pid.load(); pid != 0) {
    auto info = (*table)->Get(pid);
    auto followed = info && info->running && info->tag == tag ? (*table)->Follow(pid, kernel.from)
                                                              : std::unexpected(engine::ProcessFailure{});
    if (followed) follower = std::move(*followed);
  }
  if (!follower) {
    engine::ProcessSpec spec{
        .argv = KernelArgv(call.language), .env = sandbox.env, .cwd = call.cwd, .stdin = true, .tag = tag};
    auto started = gate_.StartProcess(call.caller, sandbox.id, spec, call.origin, &follower);
    if (!started) {
      kernel.pid = 0;
      engine::Refusal refusal = std::move(started.error());
      refusal.detail = "the " + std::string(language) + " context could not start: " + refusal.detail;
      return std::unexpected(std::move(refusal));
    }
    kernel.pid = started->pid;
    kernel.from = 0;
    table = gate_.ProcessesOf(call.caller, sandbox.id);  // a start may have restarted the sandbox
    if (!table) return std::unexpected(std::move(table.error()));
  }
  const int32_t pid = kernel.pid.load();
  auto word = RandomHex(12);
  if (!word) return Failed("KernelError", "no randomness for the execution's marks");
  auto limits = gate_.SessionLimits(call.caller, sandbox.id);
  if (!limits) return std::unexpected(std::move(limits.error()));

  answer.Started();
  auto given =
      gate_.GiveProcessCode(call.caller, sandbox.id, pid,
                            KernelInput(call.language, call.code, call.env, *word), call.code, call.origin);
  if (!given) return std::unexpected(std::move(given.error()));

  KernelOutput output(*word);
  uint64_t from = kernel.from;
  const auto until = std::chrono::steady_clock::now() + limits->wall_time;
  // As a Python execution's output is stopped: past the factor times what a Result keeps.
  const uint64_t most_output = limits->output_bytes * limits->output_kill_factor;
  uint64_t forwarded = 0;
  auto forward = [&](int stream, const std::string& text) {
    forwarded += text.size();
    if (!text.empty()) answer.Output(stream == 0 ? jail::Stream::kStdout : jail::Stream::kStderr, text);
  };
  for (;;) {
    auto got = (*table)->Read(pid, from, kReadBytes, std::chrono::steady_clock::now() + kPoll, nullptr,
                              follower.get());
    if (!got) return std::unexpected(gate_.FromProcess(got.error()));
    for (const auto& chunk : got->read.chunks) {
      if (chunk.stream == engine::OutputStream::kPty) continue;
      const int stream = chunk.stream == engine::OutputStream::kStdout ? 0 : 1;
      forward(stream, output.Add(stream, chunk.data, chunk.offset));
    }
    from = got->read.next_offset;
    forwarded += got->read.dropped;  // written, though not held for us (the session's output cap)
    if (forwarded > most_output) {
      (void)gate_.SignalProcess(call.caller, sandbox.id, pid, SIGKILL, call.origin);
      kernel.pid = 0;
      return Failed("OutputLimitError", "the execution wrote more than " + std::to_string(most_output >> 20) +
                                            " MiB; the " + language +
                                            " context was restarted, its state is gone");
    }
    if (output.done()) break;
    if (!got->info.running && from >= got->info.output_bytes) {
      forward(0, output.Rest(0));
      forward(1, output.Rest(1));
      kernel.pid = 0;
      const std::string how =
          got->info.exit_code ? "exited with status " + std::to_string(*got->info.exit_code)
          : got->info.signal  ? "was killed (" + engine::SignalName(*got->info.signal) + ")"
                              : "ended with its sandbox";
      return Failed("KernelEnded", "the " + std::string(language) + " context's process " + how +
                                       "; its state is gone, and the next execution starts it again");
    }
    if (std::chrono::steady_clock::now() >= until || gate_.closed()) {
      (void)gate_.SignalProcess(call.caller, sandbox.id, pid, SIGKILL, call.origin);
      kernel.pid = 0;
      const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(limits->wall_time).count();
      return Failed("TimeoutError", "the execution ran past the sandbox's wall-time limit (" +
                                        std::to_string(seconds) + " s); the " + language +
                                        " context was restarted, its state is gone");
    }
  }
  kernel.from = output.end_offset();
  return ResultOf(call.language, output.end());
}

void E2bApi::StopKernel(const Sandbox& sandbox, const std::string& context, int32_t pid, const ApiKey& key,
                        const std::string& peer) {
  if (pid == 0) return;
  const engine::Caller caller = CallerOf(key);
  auto info = gate_.GetProcess(caller, sandbox.id, pid);
  if (!info || !info->running || info->tag != TagOf(context)) return;
  (void)gate_.SignalProcess(caller, sandbox.id, pid, SIGKILL,
                            {.transport = engine::Transport::kE2b, .peer = peer});
}

}  // namespace execbox::api::e2b
