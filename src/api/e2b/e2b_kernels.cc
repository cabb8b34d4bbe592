// A bash or javascript context's kernel: a process of the sandbox's own (bash, or node running
// kJavascriptKernel), started through the gate as the key's like any command (ownership, the
// process cap, the audit), tagged with its context so that E2B's process list leaves it out.
// Each execution's code is run through the gate (Gate::RunProcessCode: admitted, under the
// sandbox's wall time and output limit, audited) with marks that say where the execution's
// output ends (e2b_kernel_wire.h); its output streams to the caller as the kernel writes it.
// The kernel keeps its state between executions, like a Jupyter kernel: variables, functions,
// the working directory, for bash what it exported.
//
// An execution the gate stopped (the wall time, the output limit, a shutdown) ends the kernel,
// its state with it: the next one starts a new kernel. So does one whose kernel exited (an
// `exit` in the code) or was killed; a pause ends every process, kernels too. A caller that
// goes away leaves the execution running to its end, as Jupyter does: the kernel is not in the
// middle of something next time.
#include <csignal>

#include "api/e2b/e2b_api.h"
#include "api/e2b/e2b_sandbox.h"
#include "base/random.h"

namespace execbox::api::e2b {
namespace {

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

  KernelOutput output(*word);
  auto forward = [&](int stream, const std::string& text) {
    if (!text.empty()) answer.Output(stream == 0 ? jail::Stream::kStdout : jail::Stream::kStderr, text);
  };
  engine::ProcessCode code{
      .pid = pid,
      .input = KernelInput(call.language, call.code, call.env, *word),
      .code = call.code,
      .from = kernel.from,
      .follower = follower.get(),
      .on_started = [&answer] { answer.Started(); },
      .on_output =
          [&](engine::OutputStream stream, std::string_view data, uint64_t offset) {
            const int index = stream == engine::OutputStream::kStdout ? 0 : 1;
            forward(index, output.Add(index, data, offset));
            return output.done();
          },
  };
  auto ran = gate_.RunProcessCode(call.caller, sandbox.id, code, call.origin);
  if (!ran) return std::unexpected(std::move(ran.error()));
  if (ran->end == engine::ProcessCodeEnd::kComplete) {
    kernel.from = output.end_offset();
    return ResultOf(call.language, output.end());
  }
  // The kernel is gone (or killed now): its state with it; the next execution starts another.
  kernel.pid = 0;
  const std::string gone =
      "the " + std::string(language) + " context's state is gone, and its next execution starts it again";
  switch (ran->end) {
    case engine::ProcessCodeEnd::kExited:
      forward(0, output.Rest(0));
      forward(1, output.Rest(1));
      return Failed("KernelEnded", ran->why + "; " + gone);
    case engine::ProcessCodeEnd::kOutputLimit:
      return Failed("OutputLimitError", ran->why + "; " + gone);
    case engine::ProcessCodeEnd::kTimedOut:
      return Failed("TimeoutError", ran->why + "; " + gone);
    case engine::ProcessCodeEnd::kShutdown:
    case engine::ProcessCodeEnd::kComplete:
      break;
  }
  return Failed("Cancelled", ran->why);
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
