// E2B's API over execbox, served on the HTTP server's port (docs/e2b.md, "Using the E2B SDK"), so
// that E2B's own SDKs work unchanged with E2B_API_URL and E2B_SANDBOX_URL pointed here.
//
// A sandbox is an execbox session of the API key that created it (the key in X-API-KEY), its
// timeout the session's lifetime. The SDKs send the sandbox's calls (code, files, commands)
// with its id in E2b-Sandbox-Id and without the API key: they carry the access token this
// server gave at creation, which names the sandbox and, through it, the key. Every call goes
// through the engine's gate as that key (ownership, limits, admission, audit); a sandbox is
// not found for any other key.
//
//   control plane (e2b_control.cc): create, connect, get, list, set timeout, pause, fork, kill;
//     metrics (e2b_metrics.cc); snapshots (e2b_snapshots.cc), and E2B's templates, volumes and
//     secrets refused there;
//   code interpreter (e2b_interpreter.cc): /execute (NDJSON stream) and /contexts, each Python
//     context a namespace of the session, each bash or javascript one a process of the session
//     (e2b_kernels.cc), all sharing its work dir;
//   envd (e2b_envd.cc): /health, /files (e2b_files.cc: any path, gzip), and over Connect-RPC
//     (JSON) filesystem.Filesystem's ListDir, Stat, MakeDir, Remove and Move, and directory
//     watching (e2b_watch.cc);
//   envd's process.Process (e2b_process.cc): the session's processes (engine/session_processes.h):
//     Start, Connect, List, SendInput, StreamInput, SendSignal, CloseStdin, Update.
// Anything else of E2B's API answers an error that names it.
#pragma once

#include <chrono>
#include <expected>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/common/calls.h"
#include "api/e2b/e2b_kernel_wire.h"
#include "api/e2b/e2b_wire.h"
#include "api/http/http_api.h"
#include "engine/gate.h"

namespace execbox::api::e2b {

struct E2bOptions {
  // A sandbox created without a timeout lives this long, as on E2B.
  std::chrono::seconds default_timeout{300};
  // The sessions' state dir ("": none): what E2B keeps of each sandbox is kept there too
  // (e2b_records.cc), so that its sandboxes outlive a restart as their sessions do.
  std::string state_dir;
  // [e2b] domain ("": none): a request whose Host is "<port>-<sandbox id>.<domain>" is that
  // sandbox's (e2b_ports.cc), and create answers it as the sandbox's domain, so that the SDK's
  // getHost(port) names this server.
  std::string domain;
};

class E2bApi final : public MountedApi {
 public:
  E2bApi(engine::Gate& gate, HttpApi& http, E2bOptions options = {});
  ~E2bApi() override;  // cancels what runs and waits for it
  E2bApi(const E2bApi&) = delete;
  E2bApi& operator=(const E2bApi&) = delete;

  // /sandboxes..., /v2/sandboxes..., and any request naming a sandbox in E2b-Sandbox-Id.
  bool Claims(const HttpRequest& request) const override;
  void Handle(HttpRequest request, std::shared_ptr<Exchange> exchange) override;
  size_t InFlight() override;
  void CancelAll() override;

  struct Sandbox;  // e2b_sandbox.h

 private:
  // The caller of a control-plane call (X-API-KEY, or Authorization: Bearer), or an answer sent.
  std::optional<ApiKey> Authenticate(const HttpRequest& request, Exchange& exchange);
  // The sandbox a sandbox-plane call names, and its key, when the call carries its token.
  std::optional<std::pair<std::shared_ptr<Sandbox>, ApiKey>> Authorize(const HttpRequest& request,
                                                                       Exchange& exchange);
  // A signed file URL's sandbox (E2B's downloadUrl and uploadUrl, which carry no sandbox id and no
  // token: a signature over the path, the operation, the user and the sandbox's token, perhaps
  // with an expiry), and its key, or an answer sent (401 for a wrong or expired signature).
  std::optional<std::pair<std::shared_ptr<Sandbox>, ApiKey>> AuthorizeSigned(const HttpRequest& request,
                                                                             Exchange& exchange);
  std::shared_ptr<Sandbox> Find(const std::string& id);

  // e2b_ports.cc: the sandbox and port a request's Host names under options_.domain, and a
  // request relayed to a server listening on that port inside the sandbox.
  std::optional<HostTarget> SandboxHostOf(const HttpRequest& request) const;
  void RelayToPort(HttpRequest& request, std::shared_ptr<Exchange>& exchange,
                   std::shared_ptr<Sandbox> sandbox, const ApiKey& key, int port);
  void Forget(const std::string& id);
  // Forgets every sandbox whose session has ended (its timeout, a kill through /v1), so that
  // what is kept here stays within the engine's max_sessions.
  void ForgetEnded();

  // e2b_records.cc: the sandbox's record written (Publish, a context made or removed), removed
  // (Forget), and the records whose sessions came back taken back (at construction).
  std::string RecordDir() const;
  void Keep(Sandbox& sandbox);
  void Unkeep(const std::string& id);
  void TakeBack();

  // e2b_control.cc
  void ControlPlane(HttpRequest& request, std::shared_ptr<Exchange>& exchange);
  void Create(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const ApiKey& key);
  void Connect(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const ApiKey& key,
               const std::string& id);
  void List(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const ApiKey& key);
  void Fork(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const ApiKey& key,
            std::shared_ptr<Sandbox> parent);
  nlohmann::json Describe(Sandbox& sandbox, bool created);
  // e2b_snapshots.cc: POST /sandboxes/{id}/snapshots; and the routes outside /sandboxes:
  // GET /snapshots, DELETE /templates/{id} (a snapshot), GET /templates/aliases/{alias}, and
  // E2B's template builds, volumes and secrets, which answer that they are not offered.
  void CreateSnapshot(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const ApiKey& key,
                      std::shared_ptr<Sandbox> sandbox);
  void OtherPlane(HttpRequest& request, std::shared_ptr<Exchange>& exchange);
  // e2b_metrics.cc: GET /sandboxes/{id}/metrics.
  void Metrics(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const ApiKey& key,
               std::shared_ptr<Sandbox> sandbox);
  // A sandbox for a session just made (created or forked): its lifetime set (refused above the
  // maximum: then the session is closed again), its default context, published.
  engine::Refused<void> Publish(std::shared_ptr<Sandbox> sandbox, const engine::SessionInfo& session,
                                const engine::Caller& caller, const engine::Origin& origin,
                                std::chrono::seconds lifetime);

  // e2b_interpreter.cc
  void Interpreter(HttpRequest& request, std::shared_ptr<Exchange>& exchange,
                   std::shared_ptr<Sandbox> sandbox, const ApiKey& key);
  void Execute(HttpRequest& request, std::shared_ptr<Exchange>& exchange, std::shared_ptr<Sandbox> sandbox,
               const ApiKey& key);
  void Contexts(HttpRequest& request, std::shared_ptr<Exchange>& exchange, std::shared_ptr<Sandbox> sandbox,
                const ApiKey& key);
  // The id of the context /execute uses for `language` when it names none, made if need be; or
  // why there is none.
  std::expected<std::string, std::string> DefaultContextOf(Sandbox& sandbox, Language language);

  // e2b_kernels.cc: a bash or javascript context's execution, on the calling thread: its kernel
  // started (as the key's process of the sandbox) if it has none running, the code given to it,
  // its output to `answer` as it comes; the execution's Result (the value, an error) at its end.
  struct KernelCall;
  engine::Refused<engine::Result> RunInKernel(const Sandbox& sandbox, const KernelCall& call,
                                              StreamedAnswer& answer);
  // Ends the kernel's process, if it runs (a restart or removal of its context).
  void StopKernel(const Sandbox& sandbox, const std::string& context, int32_t pid, const ApiKey& key,
                  const std::string& peer);

  // e2b_envd.cc
  void Envd(HttpRequest& request, std::shared_ptr<Exchange>& exchange, std::shared_ptr<Sandbox> sandbox,
            const ApiKey& key);
  void FilesystemRpc(const std::string& method, HttpRequest& request, std::shared_ptr<Exchange>& exchange,
                     std::shared_ptr<Sandbox> sandbox, const ApiKey& key);

  // e2b_process.cc
  void ProcessRpc(const std::string& method, HttpRequest& request, std::shared_ptr<Exchange>& exchange,
                  std::shared_ptr<Sandbox> sandbox, const ApiKey& key);
  void StartProcess(HttpRequest& request, std::shared_ptr<Exchange>& exchange,
                    std::shared_ptr<Sandbox> sandbox, const ApiKey& key);
  void ConnectProcess(HttpRequest& request, std::shared_ptr<Exchange>& exchange,
                      std::shared_ptr<Sandbox> sandbox, const ApiKey& key);
  void StreamInput(HttpRequest& request, std::shared_ptr<Exchange>& exchange,
                   std::shared_ptr<Sandbox> sandbox, const ApiKey& key);

  // e2b_files.cc: /files; a path outside the home through a command in the sandbox (as a status
  // and a message when it fails).
  void Files(HttpRequest& request, std::shared_ptr<Exchange>& exchange, std::shared_ptr<Sandbox> sandbox,
             const ApiKey& key);
  std::expected<std::string, std::pair<int, std::string>> ReadOutsideHome(const Sandbox& sandbox,
                                                                          const ApiKey& key,
                                                                          const std::string& path,
                                                                          const std::string& peer);
  std::optional<std::pair<int, std::string>> WriteOutsideHome(const Sandbox& sandbox, const ApiKey& key,
                                                              const std::string& path,
                                                              const std::string& content,
                                                              const std::string& peer);

  // e2b_watch.cc: a directory watch, streamed (WatchDir) or polled (CreateWatcher, GetWatcherEvents,
  // RemoveWatcher).
  void WatchDir(HttpRequest& request, std::shared_ptr<Exchange>& exchange, std::shared_ptr<Sandbox> sandbox,
                const ApiKey& key);
  void PolledWatcher(const std::string& method, const nlohmann::json& body,
                     std::shared_ptr<Exchange>& exchange, std::shared_ptr<Sandbox> sandbox, const ApiKey& key,
                     const std::string& peer);

  // A program in the sandbox's session, through the gate as its key, on the calling thread.
  engine::Refused<engine::Result> RunIn(const Sandbox& sandbox, const ApiKey& key,
                                        runtime::PythonProgram program, const std::string& peer,
                                        const engine::ExecuteOptions& options = {});
  // A program for the sandbox's session: its environment and no file collection.
  runtime::PythonProgram ProgramFor(const Sandbox& sandbox, runtime::Mode mode, std::string code);

  engine::Gate& gate_;
  HttpApi& http_;
  E2bOptions options_;

  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Sandbox>> sandboxes_;
  std::mutex records_mu_;  // one record written at a time
  // Its executions, commands and the calls that wait for a session, each on its own thread;
  // last, so that they end before the rest goes.
  Calls calls_;
};

}  // namespace execbox::api::e2b
