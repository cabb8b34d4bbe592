// E2B's code interpreter (port 49999): /execute streams an execution as NDJSON lines, and
// /contexts makes, lists, restarts and removes the sandbox's contexts. A Python context is a
// context of the session (the default one its kernel, any other an interpreter process the
// kernel makes: execbox_agent/contexts.py); each execution there is the gate's (admitted on the
// I/O thread, run on a thread of its own) like any other. A bash or javascript context is a
// kernel process of the session's own (e2b_kernels.cc). All share the session's work dir.
#include "api/common/json_text.h"
#include "api/e2b/e2b_api.h"
#include "api/e2b/e2b_kernel_wire.h"
#include "api/e2b/e2b_sandbox.h"
#include "api/e2b/e2b_wire.h"
#include "api/http/auth.h"
#include "api/http/http_wire.h"
#include "api/http/response_stream.h"
#include "base/random.h"

namespace execbox::api::e2b {
namespace {

// Contexts of one sandbox (namespaces, kernels), each holding what its code keeps: enough for
// any notebook-shaped use, and a bound on what one sandbox's table holds.
constexpr size_t kMaxContexts = 64;

// Output as E2B's kernel gives it: a message per whole line (Python writes print()'s text and
// its newline apart), a line still open sent after kLinger without its end (a prompt, a
// progress bar), and whatever remains at the end. Called from the output thread and the
// ticker; what one stream has open is sent before the other stream's next text, so the order
// of the two stays as written.
class LineBuffer {
 public:
  static constexpr std::chrono::milliseconds kLinger{200};
  explicit LineBuffer(ResponseStream& stream) : stream_(stream) {}
  void Add(int which, std::string_view data) {
    std::lock_guard lock(mu_);
    std::string text = WholeUtf8(carry_[which], data);
    if (text.empty()) return;
    SendOpen(1 - which);
    if (open_[which].empty()) since_[which] = std::chrono::steady_clock::now();
    open_[which] += text;
    const size_t cut = open_[which].rfind('\n');
    if (cut == std::string::npos) return;
    Send(which, open_[which].substr(0, cut + 1));
    open_[which].erase(0, cut + 1);
    since_[which] = std::chrono::steady_clock::now();
  }
  void SendStale() {
    std::lock_guard lock(mu_);
    for (int i = 0; i < 2; ++i) {
      if (!open_[i].empty() && std::chrono::steady_clock::now() - since_[i] > kLinger) SendOpen(i);
    }
  }
  void SendAll() {
    std::lock_guard lock(mu_);
    for (int i = 0; i < 2; ++i) {
      open_[i] += carry_[i];
      carry_[i].clear();
      SendOpen(i);
    }
  }

 private:
  void SendOpen(int which) {
    if (open_[which].empty()) return;
    Send(which, open_[which]);
    open_[which].clear();
  }
  void Send(int which, std::string text) { stream_.Send(Line(StreamMessage(which == 1, std::move(text)))); }

  ResponseStream& stream_;
  std::mutex mu_;
  std::string carry_[2], open_[2];
  std::chrono::steady_clock::time_point since_[2];
};

// /execute's answer, an NDJSON stream: the output as E2B's kernel gives it, then the lines that
// end the execution. It starts once the execution has its slot, as E2B's does at once: the SDK's
// timeoutMs counts from there.
class ExecuteAnswer final : public StreamedAnswer {
 public:
  ExecuteAnswer(std::shared_ptr<Exchange> exchange, std::shared_ptr<E2bApi::Sandbox> sandbox,
                std::string context, std::function<bool()> ended)
      : stream_(std::move(exchange), "application/x-ndjson",
                {.bytes = Line({{"type", "keepalive"}}), .silence = kKeepAliveSilence}),
        lines_(stream_),
        sandbox_(std::move(sandbox)),
        context_(std::move(context)),
        ended_(std::move(ended)) {}

  // An error the SDK shows, ending the stream.
  void EndWithError(const std::string& name, const std::string& value) {
    stream_.SendWhole(
        Line({{"type", "error"}, {"name", name}, {"value", value}, {"traceback", name + ": " + value}}));
    stream_.SendWhole(Line({{"type", "end_of_execution"}}));
    stream_.End();
  }

  void Started() override { stream_.Start(); }
  void Output(jail::Stream which, std::string_view data) override {
    lines_.Add(which == jail::Stream::kStdout ? 0 : 1, data);
  }
  // A figure or display() as it comes (E2B's onResult while the code runs), after the output
  // printed before it.
  bool WantsDisplay() const override { return true; }
  void Display(const engine::MimeBundle& bundle) override {
    lines_.SendAll();
    stream_.SendWhole(Line(ResultMessage(bundle, false)));
    ++displayed_;
  }
  bool Tick(std::chrono::steady_clock::time_point now) override {
    if (stream_.client_gone()) return false;
    lines_.SendStale();
    stream_.Tick(now);
    return true;
  }
  void Finish(engine::Refused<engine::Result> outcome) override;

 private:
  ResponseStream stream_;
  LineBuffer lines_;
  std::atomic<size_t> displayed_{0};  // display items sent as they came
  const std::shared_ptr<E2bApi::Sandbox> sandbox_;
  const std::string context_;
  // Whether the sandbox's session has ended (killed, timed out); forgets it if so.
  const std::function<bool()> ended_;
};

void ExecuteAnswer::Finish(engine::Refused<engine::Result> outcome) {
  const bool not_found = !outcome && outcome.error().reason == engine::RefusalReason::kSessionNotFound;
  if (not_found || ended_()) {
    // The sandbox ended while its code ran. On E2B the connection drops with the sandbox, and
    // the SDK (which then finds it not running) rejects with "the sandbox was killed"; an
    // execution that resolved would tell its caller the code had its say.
    lines_.SendAll();
    if (!stream_.started())
      return SendError(stream_.exchange(), 404, "sandbox " + sandbox_->id + " not found");
    return stream_.Abort();
  }
  if (!outcome) return EndWithError("Refused", outcome.error().detail);
  lines_.SendAll();
  const engine::Result& r = *outcome;
  uint64_t count = 0;
  {
    std::lock_guard lock(sandbox_->mu);
    if (r.session && !r.session->preserved) {
      // The session's process ended (a limit, a crash): every context starts empty again.
      for (auto& [id, c] : sandbox_->contexts) c.executions = 0;
    }
    auto it = sandbox_->contexts.find(context_);
    if (it != sandbox_->contexts.end()) count = ++it->second.executions;
  }
  if (r.session && !r.session->preserved) {
    stream_.SendWhole(
        Line(StreamMessage(true, "execbox: this sandbox's Python state was lost (" + r.session->lost_reason +
                                     "); every context starts empty, files in the work dir remain\n")));
  }
  for (const auto& line : EndOfExecution(r, count, displayed_.load())) stream_.SendWhole(Line(line));
  stream_.End();
}

}  // namespace

void E2bApi::Interpreter(HttpRequest& request, std::shared_ptr<Exchange>& exchange,
                         std::shared_ptr<Sandbox> sandbox, const ApiKey& key) {
  if (request.path == "/execute") {
    if (request.method != "POST") return SendError(*exchange, 405, "/execute takes POST");
    return Execute(request, exchange, std::move(sandbox), key);
  }
  if (request.path == "/contexts" || request.path.starts_with("/contexts/"))
    return Contexts(request, exchange, std::move(sandbox), key);
  SendError(*exchange, 404,
            request.method + " " + request.path.substr(0, 100) + " is not part of E2B's code interpreter");
}

void E2bApi::Execute(HttpRequest& request, std::shared_ptr<Exchange>& exchange,
                     std::shared_ptr<Sandbox> sandbox, const ApiKey& key) {
  auto body = JsonBody(request, *exchange);
  if (!body) return;
  if (!(*body)["code"].is_string()) return SendError(*exchange, 400, "code must be a string");
  const nlohmann::json context_field = body->value("context_id", nlohmann::json());
  const nlohmann::json language_field = body->value("language", nlohmann::json());
  const nlohmann::json env_field = body->value("env_vars", nlohmann::json());
  if (!context_field.is_null() && !context_field.is_string())
    return SendError(*exchange, 400, "context_id must be a string");
  if (!context_field.is_null() && !language_field.is_null())
    return SendError(*exchange, 400, "give context_id or language, not both (a context has its language)");
  if (!env_field.is_null() && !env_field.is_object())
    return SendError(*exchange, 400, "env_vars must be an object of strings");
  std::map<std::string, std::string> env;
  if (env_field.is_object()) {
    for (const auto& [k, v] : env_field.items()) {
      if (!v.is_string())
        return SendError(*exchange, 400, "env_vars." + k.substr(0, 100) + " must be a string");
      env[k] = v.get<std::string>();
    }
  }
  const std::optional<Language> language = LanguageOf(language_field);
  std::string context = context_field.is_string() ? context_field.get<std::string>() : kDefaultContext;
  if (language && *language != Language::kPython) {
    // The language's own default context, made by its first execution (as E2B's server does).
    auto made = DefaultContextOf(*sandbox, *language);
    if (!made) return SendError(*exchange, 400, made.error());
    context = *made;
  }
  Sandbox::Context found;
  {
    std::lock_guard lock(sandbox->mu);
    auto it = sandbox->contexts.find(context);
    if (it == sandbox->contexts.end())
      return SendError(*exchange, 404, "context " + context.substr(0, 100) + " not found");
    found = it->second;
  }
  auto answer = std::make_shared<ExecuteAnswer>(exchange, sandbox, context, [this, key, id = sandbox->id] {
    if (gate_.SessionLimits(CallerOf(key), id)) return false;
    Forget(id);
    return true;
  });
  // Not a language of ours: an error the SDK shows (a bare 400 would reach the caller without
  // its reason).
  if (!language) return answer->EndWithError("UnsupportedLanguage", LanguageProblem(language_field));

  if (found.language != Language::kPython) {
    for (const auto& [name, value] : env) {
      if (!IsVariableName(name))
        return SendError(*exchange, 400, "env_vars: '" + name.substr(0, 100) + "' is not a variable name");
    }
    KernelCall call{.context = context,
                    .kernel = found.kernel,
                    .language = found.language,
                    .cwd = found.cwd,
                    .code = (*body)["code"].get<std::string>(),
                    .env = std::move(env),
                    .caller = CallerOf(key),
                    .origin = {.transport = engine::Transport::kE2b, .peer = request.peer}};
    auto outcome = std::make_shared<std::optional<engine::Refused<engine::Result>>>();
    calls_.Spawn(
        answer,
        [this, sandbox, call = std::move(call), answer, outcome] {
          *outcome = RunInKernel(*sandbox, call, *answer);
        },
        [answer, outcome] { answer->Finish(std::move(**outcome)); });
    return;
  }

  auto program = ProgramFor(*sandbox, runtime::Mode::kRun, (*body)["code"].get<std::string>());
  program.extra_mimes = runtime::kExtraMimes;  // data, chart and json, as E2B's kernel gives them
  for (auto& [k, v] : env) program.env[k] = std::move(v);
  program.context = NamespaceOf(context);
  program.cwd = found.cwd;
  engine::ExecutionRequest call{.program = std::move(program), .limits = {}, .session_id = sandbox->id};
  auto admitted = gate_.Admit(CallerOf(key), std::move(call),
                              {.transport = engine::Transport::kE2b, .peer = request.peer});
  if (!admitted) {
    if (admitted.error().reason == engine::RefusalReason::kSessionNotFound) {
      Forget(sandbox->id);
      return SendError(*exchange, 404, "sandbox " + sandbox->id + " not found (it ended)");
    }
    return answer->EndWithError("Refused", admitted.error().detail);
  }
  calls_.Run(gate_, std::move(*admitted), std::move(answer));
}

std::expected<std::string, std::string> E2bApi::DefaultContextOf(Sandbox& sandbox, Language language) {
  std::string id;
  {
    std::lock_guard lock(sandbox.mu);
    for (const auto& [cid, c] : sandbox.contexts) {
      if (c.language == language && c.language_default) return cid;
    }
    if (sandbox.contexts.size() >= kMaxContexts)
      return std::unexpected("a sandbox holds at most " + std::to_string(kMaxContexts) + " contexts");
    auto made = RandomHex(8);
    if (!made) return std::unexpected("no randomness for a context id");
    id = *made;
    sandbox.contexts[id] = {.id = id,
                            .cwd = "",
                            .language = language,
                            .language_default = true,
                            .kernel = std::make_shared<Sandbox::Kernel>()};
  }
  Keep(sandbox);
  return id;
}

void E2bApi::Contexts(HttpRequest& request, std::shared_ptr<Exchange>& exchange,
                      std::shared_ptr<Sandbox> sandbox, const ApiKey& key) {
  const std::string& method = request.method;
  auto describe = [](const Sandbox::Context& c) {
    return nlohmann::json{
        {"id", c.id}, {"language", LanguageName(c.language)}, {"cwd", c.cwd.empty() ? kHome : c.cwd}};
  };
  if (request.path == "/contexts") {
    if (method == "GET") {
      nlohmann::json list = nlohmann::json::array();
      std::lock_guard lock(sandbox->mu);
      for (const auto& [id, c] : sandbox->contexts) list.push_back(describe(c));
      return SendJson(*exchange, 200, list);
    }
    if (method != "POST") return SendError(*exchange, 405, "/contexts takes GET and POST");
    auto body = JsonBody(request, *exchange);
    if (!body) return;
    const nlohmann::json language_field = body->value("language", nlohmann::json());
    const std::optional<Language> language = LanguageOf(language_field);
    if (!language) return SendError(*exchange, 400, LanguageProblem(language_field));
    const nlohmann::json cwd = body->value("cwd", nlohmann::json());
    if (!cwd.is_null() && !cwd.is_string()) return SendError(*exchange, 400, "cwd must be a string");
    auto id = RandomHex(8);
    if (!id) return SendError(*exchange, 500, "no randomness for a context id");
    Sandbox::Context context{
        .id = *id, .cwd = cwd.is_string() ? SandboxPath(cwd.get<std::string>()) : "", .language = *language};
    if (*language != Language::kPython) context.kernel = std::make_shared<Sandbox::Kernel>();
    if (context.cwd == kHome) context.cwd.clear();
    {
      std::lock_guard lock(sandbox->mu);
      if (sandbox->contexts.size() >= kMaxContexts)
        return SendError(*exchange, 400,
                         "a sandbox holds at most " + std::to_string(kMaxContexts) + " contexts");
      sandbox->contexts[context.id] = context;
    }
    Keep(*sandbox);
    return SendJson(*exchange, 200, describe(context));
  }
  std::string_view rest = std::string_view(request.path).substr(std::string_view("/contexts/").size());
  const bool restart = rest.ends_with("/restart");
  if (restart) rest.remove_suffix(std::string_view("/restart").size());
  const std::string id(rest);
  if ((restart && method != "POST") || (!restart && method != "DELETE"))
    return SendError(*exchange, 405, "a context is removed with DELETE and restarted with POST .../restart");
  if (!restart && id == kDefaultContext)
    return SendError(*exchange, 400, "the default context cannot be removed; restart it to empty it");
  std::shared_ptr<Sandbox::Kernel> kernel;
  {
    std::lock_guard lock(sandbox->mu);
    auto it = sandbox->contexts.find(id);
    if (it == sandbox->contexts.end())
      return SendError(*exchange, 404, "context " + id.substr(0, 100) + " not found");
    kernel = it->second.kernel;
    if (kernel != nullptr) {
      // A kernel's context: its process ends; a restarted one gets a new kernel at its next
      // execution (one still running on the old one ends with the process).
      if (restart) {
        it->second.kernel = std::make_shared<Sandbox::Kernel>();
        it->second.executions = 0;
      } else {
        sandbox->contexts.erase(it);
      }
    }
  }
  if (kernel != nullptr) {
    if (!restart) Keep(*sandbox);
    return calls_.Spawn([this, exchange, sandbox, key, id, pid = kernel->pid.load(), peer = request.peer] {
      StopKernel(*sandbox, id, pid, key, peer);
      exchange->Respond(HttpResponse{.status = 204, .content_type = "", .body = ""});
    });
  }
  // The context is dropped inside the session, after whatever runs there now.
  calls_.Spawn([this, exchange, sandbox, key, id, restart, peer = request.peer] {
    auto program = ProgramFor(*sandbox, runtime::Mode::kDropContext, "");
    program.context = NamespaceOf(id);
    auto dropped = RunIn(*sandbox, key, std::move(program), peer);
    if (!dropped) return SendRefusal(*exchange, dropped.error());
    // The session's kernel may have ended meanwhile (a limit): its contexts went with it.
    if (dropped->error && dropped->status != engine::Status::kOk &&
        (!dropped->session || dropped->session->preserved))
      return SendError(*exchange, 500, "the context was not reset: " + dropped->error->evalue);
    {
      std::lock_guard lock(sandbox->mu);
      if (restart) {
        if (auto it = sandbox->contexts.find(id); it != sandbox->contexts.end()) it->second.executions = 0;
      } else {
        sandbox->contexts.erase(id);
      }
    }
    if (!restart) Keep(*sandbox);
    exchange->Respond(HttpResponse{.status = 204, .content_type = "", .body = ""});
  });
}

}  // namespace execbox::api::e2b
