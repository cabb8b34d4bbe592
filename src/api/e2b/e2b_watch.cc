// envd's directory watching: filesystem.Filesystem/WatchDir (a server stream of the changes)
// and the polled form the Python SDK uses (CreateWatcher, GetWatcherEvents, RemoveWatcher).
//
// A watch is a process of the session's, started through the gate like any other (audited,
// counted against the session's running processes, ended with the session): a small Python
// program on inotify, run by the sandbox's own interpreter as the sandbox's user, so that it
// sees exactly what code there sees and nothing the host has. It prints "ready" once its
// watches are set, then one JSON line per change; it ends with a status that says why when the
// path cannot be watched. It is tagged kWatchTag, and E2B's process list leaves it out.
#include <csignal>

#include "api/common/json_text.h"
#include "api/e2b/e2b_api.h"
#include "api/e2b/e2b_sandbox.h"
#include "api/e2b/e2b_wire.h"
#include "api/http/auth.h"
#include "api/http/response_stream.h"
#include "base/random.h"

namespace execbox::api::e2b {
namespace {

using Clock = std::chrono::steady_clock;

// What the watcher reads at once; a line longer than this (a path of 4 KiB at most, escaped)
// never comes.
constexpr size_t kReadBytes = 64 << 10;
// Watchers of the polled form one sandbox may hold.
constexpr size_t kMaxPolledWatchers = 16;

// argv[1] the directory, argv[2] "1" for its subdirectories too. Exit 2: no such directory;
// 20: not a directory; 3: inotify refused (the sandbox's watch limit).
constexpr const char* kWatcherScript = R"py(
import ctypes, json, os, struct, sys
root, recursive = sys.argv[1], sys.argv[2] == "1"
if not os.path.lexists(root): sys.exit(2)
if not os.path.isdir(root): sys.exit(20)
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
if fd < 0: sys.exit(3)
# MODIFY ATTRIB MOVED_FROM MOVED_TO CREATE DELETE DELETE_SELF MOVE_SELF
MASK = 0x2 | 0x4 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800
KINDS = ((0x100, "CREATE"), (0x80, "CREATE"), (0x2, "WRITE"), (0x200, "REMOVE"), (0x40, "RENAME"), (0x4, "CHMOD"))
dirs = {}
def watch(d, top):
    wd = libc.inotify_add_watch(fd, os.fsencode(d), MASK)
    if wd < 0:
        if top: sys.exit(3)
        return
    dirs[wd] = d
    if recursive:
        try:
            for e in os.scandir(d):
                if e.is_dir(follow_symlinks=False): watch(e.path, False)
        except OSError:
            pass
watch(root, True)
print("ready", flush=True)
while True:
    data = os.read(fd, 65536)
    at = 0
    while at < len(data):
        wd, mask, cookie, n = struct.unpack_from("iIII", data, at)
        name = os.fsdecode(data[at + 16:at + 16 + n].rstrip(b"\0"))
        at += 16 + n
        base = dirs.get(wd)
        if base is None: continue
        if mask & 0x8000:  # IN_IGNORED: the watch is gone
            del dirs[wd]
            if base == root: sys.exit(0)
            continue
        if mask & (0x400 | 0x800) and base == root: sys.exit(0)  # the directory itself went
        if not name: continue
        path = os.path.join(base, name)
        for bit, kind in KINDS:
            if mask & bit:
                print(json.dumps({"name": os.path.relpath(path, root), "type": kind}), flush=True)
                break
        if recursive and mask & (0x100 | 0x80) and mask & 0x40000000: watch(path, False)
)py";

engine::ProcessSpec WatcherSpec(const std::string& path, bool recursive) {
  engine::ProcessSpec spec;
  spec.argv = {"python3", "-I", "-S", "-c", kWatcherScript, path, recursive ? "1" : "0"};
  spec.tag = kWatchTag;
  return spec;
}

// Why a watcher ended before it was ready.
RpcError WatchFailure(const engine::ProcessInfo& info, const std::string& path) {
  if (info.exit_code == 2) return {"not_found", "no such directory: " + path};
  if (info.exit_code == 20) return {"invalid_argument", path + " is not a directory"};
  if (info.exit_code == 3) return {"resource_exhausted", "the sandbox could not watch " + path};
  return {"internal", "the watch of " + path + " ended (" + info.ended_by + ")"};
}

// The watcher's output as it comes, cut into lines: "ready", then one change per line. The
// complete lines' changes (envd's FilesystemEvent) are added to `events`; `partial` holds an
// unfinished line; `ready` is set by "ready".
void TakeLines(const engine::OutputRead& read, std::string& partial, bool& ready,
               std::vector<nlohmann::json>& events) {
  for (const auto& c : read.chunks) {
    if (c.stream == engine::OutputStream::kStdout) partial += c.data;
  }
  size_t at = 0;
  for (size_t nl; (nl = partial.find('\n', at)) != std::string::npos; at = nl + 1) {
    const std::string line = partial.substr(at, nl - at);
    if (line == "ready") {
      ready = true;
      continue;
    }
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j["name"].is_string() || !j["type"].is_string()) continue;
    events.push_back({{"name", j["name"]}, {"type", "EVENT_TYPE_" + j["type"].get<std::string>()}});
  }
  partial.erase(0, at);
  if (partial.size() > kReadBytes) partial.clear();  // no line of the watcher's
}

// WatchDir's answer: a Connect stream of envelopes, a keep-alive in the silences.
class WatchAnswer final : public Call {
 public:
  explicit WatchAnswer(std::shared_ptr<Exchange> exchange)
      : stream_(std::move(exchange), "application/connect+json",
                {.bytes = Envelope(0, R"({"keepalive":{}})"), .silence = kKeepAliveSilence}) {}
  bool Tick(Clock::time_point now) override {
    if (stream_.client_gone()) return false;
    stream_.Tick(now);
    return true;
  }
  // One WatchDirResponse: its oneof `event` is one of its own fields (start, filesystem,
  // keepalive), unlike process.Process's answers, whose `event` is a message.
  void Event(const nlohmann::json& event) { stream_.Send(Envelope(0, Serialize(event))); }
  void End(const std::optional<RpcError>& error) {
    stream_.SendWhole(Envelope(kEndStream, error ? Serialize({{"error", RpcErrorJson(*error)}}) : "{}"));
  }
  ResponseStream& stream() { return stream_; }

 private:
  ResponseStream stream_;
};

struct WatchRequest {
  std::string path;
  bool recursive = false;
};
std::expected<WatchRequest, RpcError> ReadWatchRequest(const nlohmann::json& body) {
  if (!body.is_object() || !body["path"].is_string())
    return std::unexpected(RpcError{"invalid_argument", "path must be a string"});
  if (body.contains("recursive") && !body["recursive"].is_null() && !body["recursive"].is_boolean())
    return std::unexpected(RpcError{"invalid_argument", "recursive must be a boolean"});
  return WatchRequest{.path = AbsoluteInSandbox(body["path"].get<std::string>()),
                      .recursive = body.value("recursive", false)};
}

}  // namespace

void E2bApi::WatchDir(HttpRequest& request, std::shared_ptr<Exchange>& exchange,
                      std::shared_ptr<Sandbox> sandbox, const ApiKey& key) {
  auto call = std::make_shared<WatchAnswer>(exchange);
  auto message = FirstEnvelope(request.body);
  auto watch = message ? ReadWatchRequest(nlohmann::json::parse(*message, nullptr, false))
                       : std::unexpected(RpcError{"invalid_argument", message.error()});
  if (!watch) {
    call->End(watch.error());
    return call->stream().End();
  }
  const engine::Caller caller = CallerOf(key);
  const engine::Origin origin{.transport = engine::Transport::kE2b, .peer = request.peer};
  calls_.Spawn(
      call,
      [this, call, sandbox, caller, origin, watch = *watch] {
        auto started =
            gate_.StartProcess(caller, sandbox->id, WatcherSpec(watch.path, watch.recursive), origin);
        if (!started) return call->End(RpcError{RpcCodeOf(started.error()), started.error().detail});
        const int32_t pid = started->pid;
        // The session's table, held: the watch ends with the session, and says so.
        auto table = gate_.ProcessesOf(caller, sandbox->id);
        if (!table) return call->End(RpcError{RpcCodeOf(table.error()), table.error().detail});
        std::string partial;
        bool ready = false;
        uint64_t from = 0;
        std::optional<RpcError> error;
        for (;;) {
          auto got = (*table)->Read(pid, from, kReadBytes, Clock::now() + std::chrono::seconds(1),
                                    &call->cancel_flag());
          if (!got) {
            error = RpcError{"unavailable", "the sandbox's session ended"};
            break;
          }
          const bool was_ready = ready;
          std::vector<nlohmann::json> events;
          TakeLines(got->read, partial, ready, events);
          if (!was_ready && ready) call->Event({{"start", nlohmann::json::object()}});
          for (const auto& e : events) call->Event({{"filesystem", e}});
          from = got->read.next_offset;
          if (!got->info.running && from >= got->info.output_bytes) {
            if (!ready) error = WatchFailure(got->info, watch.path);
            break;
          }
          if (call->cancelled() || gate_.closed()) break;
        }
        // The client went, or the server stops: through the gate, audited as any signal.
        (void)gate_.SignalProcess(caller, sandbox->id, pid, SIGKILL, origin);
        if (!call->stream().client_gone()) call->End(error);
      },
      [call] { call->stream().End(); });
}

void E2bApi::PolledWatcher(const std::string& method, const nlohmann::json& body,
                           std::shared_ptr<Exchange>& exchange, std::shared_ptr<Sandbox> sandbox,
                           const ApiKey& key, const std::string& peer) {
  const engine::Caller caller = CallerOf(key);
  auto fail = [exchange](const RpcError& e) {
    exchange->Respond(HttpResponse{.status = HttpStatusOf(e.code), .body = Serialize(RpcErrorJson(e))});
  };
  if (method == "CreateWatcher") {
    auto watch = ReadWatchRequest(body);
    if (!watch) return fail(watch.error());
    return calls_.Spawn([this, exchange, sandbox, caller, fail, watch = *watch, peer] {
      {
        std::lock_guard lock(sandbox->mu);
        if (sandbox->watchers.size() >= kMaxPolledWatchers)
          return fail({"resource_exhausted", "a sandbox holds at most " + std::to_string(kMaxPolledWatchers) +
                                                 " watchers; remove one first"});
      }
      auto started = gate_.StartProcess(caller, sandbox->id, WatcherSpec(watch.path, watch.recursive),
                                        {.transport = engine::Transport::kE2b, .peer = peer});
      if (!started) return fail({RpcCodeOf(started.error()), started.error().detail});
      // Answered once the watches are set (or the watcher has said why it cannot).
      auto table = gate_.ProcessesOf(caller, sandbox->id);
      if (!table) return fail({RpcCodeOf(table.error()), table.error().detail});
      auto watcher = std::make_shared<Sandbox::Watcher>();
      watcher->pid = started->pid;
      const auto deadline = Clock::now() + std::chrono::seconds(30);
      bool ready = false;
      while (!ready) {
        auto got = (*table)->Read(watcher->pid, watcher->offset, kReadBytes, deadline);
        if (!got) return fail({"unavailable", "the sandbox's session ended"});
        TakeLines(got->read, watcher->partial, ready, watcher->pending);
        watcher->offset = got->read.next_offset;
        if (ready) break;
        if (!got->info.running && watcher->offset >= got->info.output_bytes)
          return fail(WatchFailure(got->info, watch.path));
        if (Clock::now() >= deadline) {
          (void)gate_.SignalProcess(caller, sandbox->id, watcher->pid, SIGKILL,
                                    {.transport = engine::Transport::kE2b, .peer = peer});
          return fail({"deadline_exceeded", "the watch of " + watch.path + " did not start"});
        }
      }
      auto random = RandomHex(8);
      if (!random) {
        (void)gate_.SignalProcess(caller, sandbox->id, watcher->pid, SIGKILL,
                                  {.transport = engine::Transport::kE2b, .peer = peer});
        return fail({"internal", "no watcher id could be made"});
      }
      const std::string id = *random;
      {
        std::lock_guard lock(sandbox->mu);
        sandbox->watchers[id] = watcher;
      }
      SendJson(*exchange, 200, {{"watcherId", id}});
    });
  }
  if (!body.is_object() || !body["watcherId"].is_string())
    return fail({"invalid_argument", "watcherId must be a string"});
  const std::string id = body["watcherId"].get<std::string>();
  std::shared_ptr<Sandbox::Watcher> watcher;
  {
    std::lock_guard lock(sandbox->mu);
    auto it = sandbox->watchers.find(id);
    if (it != sandbox->watchers.end()) watcher = it->second;
    if (watcher && method == "RemoveWatcher") sandbox->watchers.erase(it);
  }
  if (!watcher) return fail({"not_found", "no watcher " + id.substr(0, 40)});
  if (method == "RemoveWatcher") {
    return calls_.Spawn([this, exchange, sandbox, caller, watcher, peer] {
      (void)gate_.SignalProcess(caller, sandbox->id, watcher->pid, SIGKILL,
                                {.transport = engine::Transport::kE2b, .peer = peer});
      SendJson(*exchange, 200, nlohmann::json::object());
    });
  }
  calls_.Spawn([this, exchange, sandbox, caller, watcher, fail] {
    // One reader at a time: the offset and the partial line are the watcher's.
    std::lock_guard lock(watcher->mu);
    std::vector<nlohmann::json> taken = std::move(watcher->pending);
    watcher->pending.clear();
    bool ready = true;
    for (;;) {
      auto got = gate_.ReadProcessOutput(caller, sandbox->id, watcher->pid, watcher->offset, kReadBytes,
                                         std::nullopt, nullptr);
      if (!got) return fail({RpcCodeOf(got.error()), got.error().detail});
      TakeLines(got->read, watcher->partial, ready, taken);
      const bool more =
          got->read.next_offset > watcher->offset && got->read.next_offset < got->info.output_bytes;
      watcher->offset = got->read.next_offset;
      if (!more) break;
    }
    nlohmann::json events = nlohmann::json::array();
    for (auto& e : taken) events.push_back(std::move(e));
    SendJson(*exchange, 200, {{"events", events}});
  });
}

}  // namespace execbox::api::e2b
