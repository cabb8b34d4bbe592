// Inside the E2B front end (e2b_*.cc): a sandbox as it keeps one, and the answers its three parts
// share. Not for anyone else.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/e2b/e2b_api.h"
#include "api/e2b/e2b_kernel_wire.h"
#include "api/e2b/e2b_wire.h"
#include "engine/refusal.h"

namespace execbox::api::e2b {

// What E2B keeps of a sandbox that an execbox session does not: the token of its sandbox
// calls, its template and metadata, its environment, and its contexts. The session itself
// (its process, work dir, limits, lifetime, owner) is the engine's.
struct E2bApi::Sandbox {
  std::string id;      // the session's id
  std::string key_id;  // the key that created it (the session's owner)
  std::string token;   // its sandbox calls carry it (X-Access-Token, E2B-Traffic-Access-Token)
  std::string template_id;
  nlohmann::json metadata = nlohmann::json::object();  // strings, as sent at creation
  std::map<std::string, std::string> env;              // envVars at creation: every execution's
  std::chrono::system_clock::time_point started;

  // A bash or javascript context's kernel (e2b_kernels.cc): its process, started by the
  // context's first execution, and where in that process's output the next execution's starts.
  struct Kernel {
    std::mutex run;               // one execution at a time, as a Jupyter kernel runs them
    std::atomic<int32_t> pid{0};  // 0: none yet (or it ended)
    uint64_t from = 0;            // guarded by `run`
  };
  struct Context {
    std::string id;
    std::string cwd;  // as code inside the sandbox sees it ("" for the work dir)
    Language language = Language::kPython;
    // The context /execute uses for its language when it names none (Python's: kDefaultContext).
    bool language_default = false;
    uint64_t executions = 0;
    std::shared_ptr<Kernel> kernel;  // for any language but Python (whose contexts are namespaces)
  };
  std::mutex mu;  // guards what follows
  std::chrono::system_clock::time_point end_at;
  std::map<std::string, Context> contexts;  // kDefaultContext always
  // Files' metadata (E2B's X-Metadata-* on an upload), by absolute path: kept here, beside the
  // sandbox, as a tmpfs before Linux 6.6 keeps no user xattrs. What the SDK writes, moves and
  // removes keeps it in step; what code in the sandbox does to a file it does not see
  // (docs/e2b.md).
  std::map<std::string, std::map<std::string, std::string>> file_metadata;
  // The config each process was started with through envd (process.ProcessConfig: its envs
  // and cwd as sent, which the session's table does not keep), by pid, for List; the start
  // time tells a pid used again since (by another start, through /v1) from the one it names.
  struct Started {
    std::chrono::system_clock::time_point at;
    nlohmann::json config;
  };
  std::map<int32_t, Started> processes;

  // A watcher of the polled form (CreateWatcher, e2b_watch.cc): its process and what of its
  // output has been taken.
  struct Watcher {
    int32_t pid = 0;
    std::mutex mu;  // one GetWatcherEvents at a time
    uint64_t offset = 0;
    std::string partial;                  // an unfinished line
    std::vector<nlohmann::json> pending;  // changes read, not yet answered
  };
  std::map<std::string, std::shared_ptr<Watcher>> watchers;  // by watcherId
};

// The tag of a directory watch's process (e2b_watch.cc): E2B's process list leaves it out.
inline constexpr const char* kWatchTag = "execbox:watch-dir";
// The tag of a metrics sample's process (e2b_metrics.cc), left out likewise.
inline constexpr const char* kMetricsTag = "execbox:metrics";
// The tag of a port relay's process (e2b_ports.cc), left out likewise.
inline constexpr const char* kPortTag = "execbox:port-relay";

// A context kernel's process (e2b_kernels.cc) is tagged this and its context's id, and left out
// likewise.
inline constexpr std::string_view kKernelTagPrefix = "execbox:context:";
// What E2B's process list leaves out: the processes this server runs for its own ends.
inline bool InternalTag(std::string_view tag) {
  return tag == kWatchTag || tag == kMetricsTag || tag == kPortTag || tag.starts_with(kKernelTagPrefix);
}

// One execution of a bash or javascript context (E2bApi::RunInKernel).
struct E2bApi::KernelCall {
  std::string context;
  std::shared_ptr<Sandbox::Kernel> kernel;
  Language language = Language::kBash;
  std::string cwd;  // the context's
  std::string code;
  std::map<std::string, std::string> env;  // this execution's env_vars (names IsVariableName)
  engine::Caller caller;
  engine::Origin origin;
};

// At most this many files of a sandbox hold metadata: one more is refused.
inline constexpr size_t kMaxFilesWithMetadata = 4096;

// The templates whose sandboxes an execbox sandbox is: E2B's code interpreter and its base
// (e2b_snapshots.cc). Any other template id a create names must be one of the key's snapshots.
bool KnownTemplate(const std::string& id);

// The context every sandbox has; in the session it is the default context (""), the kernel's.
inline constexpr const char* kDefaultContext = "default";
inline std::string NamespaceOf(const std::string& context) {
  return context == kDefaultContext ? "" : context;
}

// The code interpreter's and envd's keep-alive: well inside any proxy's idle timeout; sent once
// a stream has started (a refusal before it is still an ordinary answer).
inline constexpr std::chrono::seconds kKeepAliveSilence{5};

// envd's Connect-RPC answers (e2b_envd.cc): a unary call's error, with the HTTP status of its
// code; a refusal of the gate's as a Connect code.
void SendRpcError(Exchange& exchange, const RpcError& error);
std::string RpcCodeOf(const engine::Refusal& refusal);

// E2B's error body, {"code": status, "message"}, with that status.
void SendError(Exchange& exchange, int status, const std::string& message);
void SendJson(Exchange& exchange, int status, const nlohmann::json& body);
// A refusal of the gate's, with the status the HTTP API gives it.
void SendRefusal(Exchange& exchange, const engine::Refusal& refusal);
int StatusOf(const engine::Refusal& refusal);
// The request's JSON object body ({} when empty), or an answer sent.
std::optional<nlohmann::json> JsonBody(const HttpRequest& request, Exchange& exchange);
// A page of a list as E2B's API asks for it: `limit` items (1-1000, default 100) from
// `nextToken` (an offset this server gave in x-next-token), or an answer sent (400).
struct Page {
  size_t limit = 100, offset = 0;
};
std::optional<Page> PageOf(const HttpRequest& request, Exchange& exchange);
// A query parameter, percent-decoded.
std::optional<std::string> QueryParam(std::string_view query, std::string_view name);

}  // namespace execbox::api::e2b
