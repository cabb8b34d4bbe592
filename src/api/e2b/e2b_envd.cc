// E2B's envd (port 49983), as much as the SDKs' common calls need: /health; /files (e2b_files.cc:
// any path, gzip); and over Connect-RPC with the JSON codec, process.Process (every RPC, over the
// session's processes: e2b_process.cc) and filesystem.Filesystem: ListDir, Stat, MakeDir, Remove
// and Move (each run inside the sandbox as its code would), and directory watching
// (e2b_watch.cc).
#include "api/common/json_text.h"
#include "api/e2b/e2b_api.h"
#include "api/e2b/e2b_sandbox.h"
#include "api/e2b/e2b_wire.h"
#include "api/http/auth.h"
#include "api/http/http_wire.h"
#include "base/base64.h"

namespace execbox::api::e2b {
namespace {

constexpr std::string_view kProcessService = "/process.Process/";
constexpr std::string_view kFilesystemService = "/filesystem.Filesystem/";

// E2B's `user`: envd runs a call as the user it names (HTTP Basic on its RPCs, `username` on
// /files; none named: the default). Every process and file of an execbox sandbox is its
// user's, `user`; a call that names another is refused rather than run as someone else.
std::optional<std::string> UserNamed(const HttpRequest& request) {
  if (request.path == "/files") {
    if (auto user = QueryParam(request.query, "username"); user && !user->empty()) return user;
  }
  std::string_view authorization = request.Header("authorization");
  if (authorization.size() <= 6 || authorization.substr(0, 6) != "Basic ") return std::nullopt;
  auto decoded = Base64Decode(authorization.substr(6));
  if (!decoded) return std::string("(not base64)");
  std::string user = decoded->substr(0, decoded->find(':'));
  if (user.empty()) return std::nullopt;
  return user;
}

// The agent's listdir entry as envd's EntryInfo (JSON mapping of the protobuf message).
nlohmann::json EntryInfo(const nlohmann::json& e) {
  static const std::map<std::string, std::string> types = {
      {"file", "FILE_TYPE_FILE"}, {"dir", "FILE_TYPE_DIRECTORY"}, {"symlink", "FILE_TYPE_SYMLINK"}};
  auto type = types.find(e.value("type", ""));
  const double modified = e.value("modified", 0.0);
  const auto seconds = static_cast<int64_t>(modified);
  nlohmann::json j = {
      {"name", e.value("name", "")},
      {"type", type == types.end() ? "FILE_TYPE_UNSPECIFIED" : type->second},
      {"path", e.value("path", "")},
      {"size", std::to_string(e.value("size", static_cast<int64_t>(0)))},
      {"mode", e.value("mode", 0)},
      {"permissions", e.value("permissions", "")},
      {"owner", e.value("owner", "")},
      {"group", e.value("group", "")},
      {"modifiedTime", Rfc3339(std::chrono::system_clock::time_point(std::chrono::seconds(seconds)))}};
  if (e.contains("symlink_target") && e["symlink_target"].is_string())
    j["symlinkTarget"] = e["symlink_target"];
  return j;
}

// The entry with its file's metadata, when an upload gave it some.
nlohmann::json WithMetadata(nlohmann::json entry, E2bApi::Sandbox& sandbox) {
  if (entry.value("type", "") != "FILE_TYPE_FILE") return entry;
  std::lock_guard lock(sandbox.mu);
  auto it = sandbox.file_metadata.find(entry.value("path", ""));
  if (it != sandbox.file_metadata.end()) entry["metadata"] = it->second;
  return entry;
}

// The metadata of `path` and of what is under it, taken out of `kept`.
std::vector<std::pair<std::string, std::map<std::string, std::string>>> TakeUnder(
    std::map<std::string, std::map<std::string, std::string>>& kept, const std::string& path) {
  std::vector<std::pair<std::string, std::map<std::string, std::string>>> taken;
  for (auto it = kept.lower_bound(path); it != kept.end() && it->first.starts_with(path);) {
    const std::string rest = it->first.substr(path.size());
    if (!rest.empty() && rest[0] != '/') {  // "/a/bc" is not under "/a/b"
      ++it;
      continue;
    }
    taken.emplace_back(rest, std::move(it->second));
    it = kept.erase(it);
  }
  return taken;
}

// What the SDK removed (`to` empty) or moved: the metadata of the path and of what is under it
// goes with it, and what the destination held is gone. Whether anything changed.
bool MoveMetadata(E2bApi::Sandbox& sandbox, const std::string& from, const std::string& to) {
  std::lock_guard lock(sandbox.mu);
  auto taken = TakeUnder(sandbox.file_metadata, from);
  bool changed = !taken.empty();
  if (to.empty()) return changed;
  changed = !TakeUnder(sandbox.file_metadata, to).empty() || changed;
  for (auto& [rest, metadata] : taken) sandbox.file_metadata[to + rest] = std::move(metadata);
  return changed;
}

// The application/json a sandbox operation answered with, or the error it ended in.
std::expected<nlohmann::json, RpcError> Answer(const engine::Refused<engine::Result>& outcome) {
  if (!outcome) return std::unexpected(RpcError{RpcCodeOf(outcome.error()), outcome.error().detail});
  const engine::Result& r = *outcome;
  if (r.error) {
    const std::string& name = r.error->ename;
    const std::string code = name == "FileNotFoundError"            ? "not_found"
                             : name == "NotADirectoryError"         ? "invalid_argument"
                             : name == "PermissionError"            ? "permission_denied"
                             : name == "FileExistsError"            ? "already_exists"
                             : r.status == engine::Status::kTimeout ? "deadline_exceeded"
                                                                    : "internal";
    return std::unexpected(RpcError{code, r.error->evalue.empty() ? name : r.error->evalue});
  }
  if (!r.result || !(*r.result)["data"].contains("application/json"))
    return std::unexpected(RpcError{"internal", "the sandbox gave no answer"});
  return (*r.result)["data"]["application/json"];
}

}  // namespace

void SendRpcError(Exchange& exchange, const RpcError& error) {
  exchange.Respond(HttpResponse{.status = HttpStatusOf(error.code), .body = Serialize(RpcErrorJson(error))});
}

std::string RpcCodeOf(const engine::Refusal& refusal) {
  switch (refusal.kind) {
    case engine::RefusalKind::kBadRequest:
      return "invalid_argument";
    case engine::RefusalKind::kNotFound:
      return "not_found";
    case engine::RefusalKind::kConflict:
      return "failed_precondition";
    case engine::RefusalKind::kTooLarge:
    case engine::RefusalKind::kUnprocessable:
      return "out_of_range";
    case engine::RefusalKind::kTooMany:
      return "resource_exhausted";
    case engine::RefusalKind::kUnavailable:
      return "unavailable";
    case engine::RefusalKind::kInternal:
      break;
  }
  return "internal";
}

void E2bApi::Envd(HttpRequest& request, std::shared_ptr<Exchange>& exchange, std::shared_ptr<Sandbox> sandbox,
                  const ApiKey& key) {
  const std::string& path = request.path;
  if (path == "/health")
    return exchange->Respond(HttpResponse{.status = 204, .content_type = "", .body = ""});
  if (auto user = UserNamed(request); user && *user != "user") {
    const std::string why = "E2B's user '" + user->substr(0, 32) +
                            "' is not offered by execbox: every process and file of a sandbox is its "
                            "user's, 'user' (uid 1000 inside, unprivileged); there is no root inside";
    if (path == "/files") return SendError(*exchange, 403, why);
    // A streaming call (Start, Connect, WatchDir, StreamInput) hears its error at the stream's end.
    if (request.Header("content-type").starts_with("application/connect+")) {
      return exchange->Respond(
          HttpResponse{.status = 200,
                       .content_type = "application/connect+json",
                       .body = Envelope(kEndStream, Serialize({{"error", RpcErrorJson({"permission_denied", why})}}))});
    }
    return SendRpcError(*exchange, {"permission_denied", why});
  }
  if (path == "/files") return Files(request, exchange, std::move(sandbox), key);
  if (path.starts_with(kProcessService)) {
    if (request.method != "POST") return SendRpcError(*exchange, {"unimplemented", "Connect-RPC takes POST"});
    return ProcessRpc(path.substr(kProcessService.size()), request, exchange, std::move(sandbox), key);
  }
  if (path.starts_with(kFilesystemService) && request.method == "POST")
    return FilesystemRpc(path.substr(kFilesystemService.size()), request, exchange, std::move(sandbox), key);
  SendError(*exchange, 404,
            request.method + " " + path.substr(0, 100) + " is not part of envd's API in execbox");
}

void E2bApi::FilesystemRpc(const std::string& method, HttpRequest& request,
                           std::shared_ptr<Exchange>& exchange, std::shared_ptr<Sandbox> sandbox,
                           const ApiKey& key) {
  if (method == "WatchDir") return WatchDir(request, exchange, std::move(sandbox), key);
  if (method == "CreateWatcher" || method == "GetWatcherEvents" || method == "RemoveWatcher") {
    auto body = nlohmann::json::parse(request.body.empty() ? "{}" : request.body, nullptr, false);
    return PolledWatcher(method, body, exchange, std::move(sandbox), key, request.peer);
  }
  const bool known = method == "ListDir" || method == "Stat" || method == "MakeDir" || method == "Remove" ||
                     method == "Move";
  if (!known) {
    return SendRpcError(*exchange, {"unimplemented", "filesystem.Filesystem/" + method.substr(0, 40) +
                                                         " is not implemented by execbox"});
  }
  auto body = nlohmann::json::parse(request.body.empty() ? "{}" : request.body, nullptr, false);
  if (!body.is_object())
    return SendRpcError(*exchange, {"invalid_argument", "the request must be a JSON object"});
  const std::string field = method == "Move" ? "source" : "path";
  if (!body[field].is_string())
    return SendRpcError(*exchange, {"invalid_argument", field + " must be a string"});
  const std::string path = AbsoluteInSandbox(body[field].get<std::string>());
  std::string destination;
  if (method == "Move") {
    if (!body["destination"].is_string())
      return SendRpcError(*exchange, {"invalid_argument", "destination must be a string"});
    destination = AbsoluteInSandbox(body["destination"].get<std::string>());
  }
  const uint32_t depth = body.contains("depth") && body["depth"].is_number_unsigned()
                             ? std::clamp<uint32_t>(body["depth"].get<uint32_t>(), 1, 16)
                             : 1;
  calls_.Spawn([this, exchange, sandbox, key, method, path, destination, depth, peer = request.peer] {
    // The entry at `p`, from a listing of its parent (what Stat and the changes answer with).
    auto stat = [&](const std::string& p) -> std::expected<nlohmann::json, RpcError> {
      if (p == "/") return nlohmann::json{{"name", "/"}, {"type", "FILE_TYPE_DIRECTORY"}, {"path", "/"}};
      const size_t slash = p.rfind('/');
      auto program = ProgramFor(*sandbox, runtime::Mode::kListDir, slash == 0 ? "/" : p.substr(0, slash));
      auto listed = Answer(RunIn(*sandbox, key, std::move(program), peer));
      if (!listed) return std::unexpected(listed.error());
      for (const auto& e : listed->value("entries", nlohmann::json::array())) {
        if (e.value("path", "") == p) return WithMetadata(EntryInfo(e), *sandbox);
      }
      return std::unexpected(RpcError{"not_found", "no such file or directory: " + p});
    };
    auto command = [&](const std::string& line) -> std::optional<RpcError> {
      auto done = RunIn(*sandbox, key, ProgramFor(*sandbox, runtime::Mode::kCommand, line), peer);
      auto answer = Answer(done);
      if (!answer) return answer.error();
      const int code = answer->value("exit_code", 0);
      if (code == 0) return std::nullopt;
      if (code == 17) return RpcError{"already_exists", "already exists: " + path};
      if (code == 2) return RpcError{"not_found", "no such file or directory: " + path};
      return RpcError{"internal", done->stderr_text.text.empty() ? "exit status " + std::to_string(code)
                                                                 : done->stderr_text.text.substr(0, 1000)};
    };
    const std::string q = ShellQuote(path);
    std::expected<nlohmann::json, RpcError> reply;
    if (method == "ListDir") {
      auto program = ProgramFor(*sandbox, runtime::Mode::kListDir, path);
      program.list_depth = depth;
      auto listed = Answer(RunIn(*sandbox, key, std::move(program), peer));
      if (!listed) {
        reply = std::unexpected(listed.error());
      } else {
        nlohmann::json entries = nlohmann::json::array();
        for (const auto& e : listed->value("entries", nlohmann::json::array()))
          entries.push_back(WithMetadata(EntryInfo(e), *sandbox));
        reply = nlohmann::json{{"entries", entries}};
      }
    } else if (method == "Stat") {
      auto entry = stat(path);
      reply = entry ? std::expected<nlohmann::json, RpcError>(nlohmann::json{{"entry", *entry}})
                    : std::unexpected(entry.error());
    } else {
      std::string line;
      if (method == "MakeDir")
        line = "if [ -e " + q + " ] || [ -L " + q + " ]; then exit 17; fi; mkdir -p -- " + q;
      if (method == "Remove")
        line = "if [ ! -e " + q + " ] && [ ! -L " + q + " ]; then exit 2; fi; rm -rf -- " + q;
      if (method == "Move") {
        line = "if [ ! -e " + q + " ] && [ ! -L " + q + " ]; then exit 2; fi; mv -f -- " + q + " " +
               ShellQuote(destination);
      }
      if (auto failed = command(line)) {
        reply = std::unexpected(*failed);
      } else if ((method == "Remove" || method == "Move") &&
                 MoveMetadata(*sandbox, path, method == "Move" ? destination : "")) {
        Keep(*sandbox);
      }
      if (!reply) {
        // the command's failure, as it is
      } else if (method == "Remove") {
        reply = nlohmann::json::object();
      } else {
        auto entry = stat(method == "Move" ? destination : path);
        reply = entry ? std::expected<nlohmann::json, RpcError>(nlohmann::json{{"entry", *entry}})
                      : std::unexpected(entry.error());
      }
    }
    if (!reply) return SendRpcError(*exchange, reply.error());
    SendJson(*exchange, 200, *reply);
  });
}

}  // namespace execbox::api::e2b
