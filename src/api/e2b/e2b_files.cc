// envd's /files: one file's bytes into or out of the sandbox, at any path, with gzip as the
// client asks (Content-Encoding on an upload, Accept-Encoding on a download).
//
// A path in the home (/home/user, its alias /work, ~, or relative) is read and written by the
// zygote, which holds the home by descriptor from outside the sandbox and follows nothing the
// code planted there (jail::WarmChild::PutFile/GetFile). Any other path (/tmp/repo/README.md,
// /etc/passwd) is read or written by a command inside the sandbox, as its user, exactly as its
// code could: what the sandbox cannot write (its read-only system) is refused as it would
// refuse the code. A read that way passes through the command's output, so it is capped by the
// session's output limit (3/4 of it, base64's cost); the refusal says so.
#include "api/e2b/e2b_api.h"
#include "api/e2b/e2b_sandbox.h"
#include "api/e2b/e2b_wire.h"
#include "api/http/auth.h"
#include "api/http/http_wire.h"
#include "base/base64.h"
#include "base/gzip.h"

namespace execbox::api::e2b {
namespace {

// The largest file read from the home (the home itself is capped far lower by default).
constexpr uint64_t kMaxReadBytes = 256ull << 20;

// Exit statuses of the scripts below, each its own answer.
constexpr int kNotFound = 2, kIsDirectory = 21, kNotRegular = 22, kNoAccess = 13, kTooLarge = 27;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Where a path the client sent lies: the home (the zygote's route, relative to it), or
// elsewhere in the sandbox (absolute).
struct FilePath {
  std::string absolute;  // as answered to the client
  std::optional<std::string> in_home;
};
std::expected<FilePath, std::string> Locate(std::string_view sent) {
  // Outside the home a command of the sandbox's gets the path: no name of a file holds these.
  for (char c : sent) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return std::unexpected("file name has a NUL or control character");
  }
  FilePath p{.absolute = AbsoluteInSandbox(sent), .in_home = std::nullopt};
  const std::string home = std::string(kHome) + "/";
  if (p.absolute == kHome || p.absolute == "/")
    return std::unexpected("'" + std::string(sent.substr(0, 200)) + "' is a directory, not a file");
  if (p.absolute.starts_with(home)) p.in_home = p.absolute.substr(home.size());
  return p;
}

HttpResponse FileResponse(std::string content, bool gzip) {
  HttpResponse response{
      .status = 200, .content_type = "application/octet-stream", .body = std::move(content)};
  response.headers.push_back({"Vary", "Accept-Encoding"});
  if (gzip) {
    response.body = Gzip(response.body);
    response.headers.push_back({"Content-Encoding", "gzip"});
  }
  return response;
}

// What a script's failure means for the client: a status and a message.
std::pair<int, std::string> ScriptFailure(int code, const std::string& path, const std::string& stderr_text,
                                          uint64_t cap) {
  switch (code) {
    case kNotFound:
      return {404, "no such file: " + path};
    case kIsDirectory:
      return {400, path + " is a directory, not a file"};
    case kNotRegular:
      return {400, path + " is not a regular file"};
    case kNoAccess:
      return {403, path + ": permission denied"};
    case kTooLarge:
      return {413, path + " is larger than the " + std::to_string(cap) +
                       " bytes a file outside the home can be read in (the session's output limit); copy it "
                       "into " +
                       kHome + " to read it whole"};
    default:
      break;
  }
  std::string why = stderr_text.substr(0, 1000);
  while (!why.empty() && why.back() == '\n') why.pop_back();
  if (why.empty()) why = "exit status " + std::to_string(code);
  if (why.find("No space left") != std::string::npos) return {507, why};
  if (why.find("Read-only file system") != std::string::npos ||
      why.find("Permission denied") != std::string::npos)
    return {403, why};
  return {400, why};
}

}  // namespace

void E2bApi::Files(HttpRequest& request, std::shared_ptr<Exchange>& exchange,
                   std::shared_ptr<Sandbox> sandbox, const ApiKey& key) {
  const engine::Caller caller = CallerOf(key);
  const std::string sent = QueryParam(request.query, "path").value_or("");
  // `username` (E2B's user) was checked by Envd: every file of the sandbox's is its user's.
  if (request.method == "GET") {
    auto path = Locate(sent);
    if (!path) return SendError(*exchange, 400, path.error());
    const bool gzip = AcceptsGzip(request.Header("accept-encoding"));
    return calls_.Spawn([this, exchange, sandbox, key, caller, path = *path, gzip, peer = request.peer] {
      if (path.in_home) {
        auto content = gate_.ReadSessionFile(caller, sandbox->id, *path.in_home, kMaxReadBytes);
        if (!content) return SendRefusal(*exchange, content.error());
        return exchange->Respond(FileResponse(std::move(*content), gzip));
      }
      auto content = ReadOutsideHome(*sandbox, key, path.absolute, peer);
      if (!content) return SendError(*exchange, content.error().first, content.error().second);
      exchange->Respond(FileResponse(std::move(*content), gzip));
    });
  }
  if (request.method != "POST") return SendError(*exchange, 405, "/files takes GET and POST");
  const std::string encoding = Lower(request.Header("content-encoding"));
  if (!encoding.empty() && encoding != "identity" && encoding != "gzip" && encoding != "x-gzip")
    return SendError(*exchange, 415,
                     "a body is taken as is or gzip-compressed, not '" + encoding.substr(0, 40) + "'");
  if (!encoding.empty() && encoding != "identity") {
    // No more than the sandbox's larger disk holds: a small body cannot inflate past that.
    auto limits = gate_.SessionLimits(caller, sandbox->id);
    if (!limits) return SendRefusal(*exchange, limits.error());
    auto inflated = Gunzip(request.body, std::max(limits->work_dir_bytes, limits->tmp_bytes));
    if (!inflated) {
      return SendError(*exchange, inflated.error().kind == GunzipError::kTooLarge ? 413 : 400,
                       inflated.error().message + (inflated.error().kind == GunzipError::kTooLarge
                                                       ? ", more than the sandbox's disk holds"
                                                       : ""));
    }
    request.body = std::move(*inflated);
  }
  std::vector<FormFile> files;
  if (Essence(request.Header("content-type")) == "application/octet-stream") {
    files.push_back({sent, std::move(request.body)});
  } else {
    auto parts = ParseMultipart(request.Header("content-type"), request.body);
    if (!parts) return SendError(*exchange, 400, parts.error());
    files = std::move(*parts);
    // One path in the query names the file; without it each part's filename is its path.
    if (!sent.empty()) {
      for (auto& f : files) f.filename = sent;
    }
  }
  std::vector<FilePath> paths;
  for (const auto& f : files) {
    auto path = Locate(f.filename);
    if (!path) return SendError(*exchange, 400, path.error());
    paths.push_back(*path);
  }
  auto metadata = FileMetadataOf(request.headers);
  if (!metadata) return SendError(*exchange, 400, metadata.error());
  if (!metadata->empty()) {
    std::lock_guard lock(sandbox->mu);
    if (sandbox->file_metadata.size() + paths.size() > kMaxFilesWithMetadata)
      return SendError(
          *exchange, 400,
          "a sandbox keeps metadata for at most " + std::to_string(kMaxFilesWithMetadata) + " files");
  }
  calls_.Spawn([this, exchange, sandbox, key, caller, files = std::move(files), paths, metadata = *metadata,
                peer = request.peer] {
    nlohmann::json written = nlohmann::json::array();
    bool changed = false;  // the metadata kept
    for (size_t i = 0; i < files.size(); ++i) {
      const FilePath& p = paths[i];
      if (p.in_home) {
        auto done = gate_.WriteSessionFile(caller, sandbox->id, *p.in_home, files[i].content);
        if (!done) return SendRefusal(*exchange, done.error());
      } else if (auto failed = WriteOutsideHome(*sandbox, key, p.absolute, files[i].content, peer)) {
        return SendError(*exchange, failed->first, failed->second);
      }
      nlohmann::json entry = {
          {"name", p.absolute.substr(p.absolute.rfind('/') + 1)}, {"type", "file"}, {"path", p.absolute}};
      // What is written is the file's metadata from now on (none, when the upload sent none).
      std::lock_guard lock(sandbox->mu);
      if (metadata.empty()) {
        changed = sandbox->file_metadata.erase(p.absolute) > 0 || changed;
      } else {
        sandbox->file_metadata[p.absolute] = metadata;
        entry["metadata"] = metadata;
        changed = true;
      }
      written.push_back(std::move(entry));
    }
    if (changed) Keep(*sandbox);
    SendJson(*exchange, 200, written);
  });
}

std::expected<std::string, std::pair<int, std::string>> E2bApi::ReadOutsideHome(const Sandbox& sandbox,
                                                                                const ApiKey& key,
                                                                                const std::string& path,
                                                                                const std::string& peer) {
  auto limits = gate_.SessionLimits(CallerOf(key), sandbox.id);
  if (!limits) return std::unexpected(std::pair{StatusOf(limits.error()), limits.error().detail});
  const uint64_t cap = limits->output_bytes / 4 * 3;
  const std::string script =
      "f=" + ShellQuote(path) + "\n" + "[ -e \"$f\" ] || exit " + std::to_string(kNotFound) + "\n" +
      "[ -d \"$f\" ] && exit " + std::to_string(kIsDirectory) + "\n" + "[ -f \"$f\" ] || exit " +
      std::to_string(kNotRegular) + "\n" + "[ -r \"$f\" ] || exit " + std::to_string(kNoAccess) + "\n" +
      "s=$(stat -L -c %s -- \"$f\") || exit 1\n" + "[ \"$s\" -le " + std::to_string(cap) + " ] || exit " +
      std::to_string(kTooLarge) + "\n" + "exec base64 -w0 -- \"$f\"\n";
  auto done = RunIn(sandbox, key, ProgramFor(sandbox, runtime::Mode::kCommand, script), peer);
  if (!done) return std::unexpected(std::pair{StatusOf(done.error()), done.error().detail});
  const engine::Result& r = *done;
  if (r.status != engine::Status::kOk || !r.result || !(*r.result)["data"].contains("application/json"))
    return std::unexpected(std::pair{
        500, "the sandbox could not read " + path + " (" + std::string(engine::StatusName(r.status)) + ")"});
  const int code = (*r.result)["data"]["application/json"].value("exit_code", 0);
  if (code != 0) return std::unexpected(ScriptFailure(code, path, r.stderr_text.text, cap));
  // A file that grew past the cap between the check and the read is cut: said, not half-sent.
  auto content = r.stdout_text.truncated ? std::nullopt : Base64Decode(r.stdout_text.text);
  if (!content) return std::unexpected(ScriptFailure(kTooLarge, path, "", cap));
  return std::move(*content);
}

std::optional<std::pair<int, std::string>> E2bApi::WriteOutsideHome(const Sandbox& sandbox, const ApiKey& key,
                                                                    const std::string& path,
                                                                    const std::string& content,
                                                                    const std::string& peer) {
  // As envd does, the parents are made; the file is replaced by what is written.
  const std::string script = "f=" + ShellQuote(path) + "\n" + "[ -d \"$f\" ] && exit " +
                             std::to_string(kIsDirectory) + "\n" +
                             "mkdir -p -- \"$(dirname -- \"$f\")\" || exit 1\n" + "exec cat > \"$f\"\n";
  auto program = ProgramFor(sandbox, runtime::Mode::kCommand, script);
  program.stdin_data = content;
  auto done = RunIn(sandbox, key, std::move(program), peer);
  if (!done) return std::pair{StatusOf(done.error()), done.error().detail};
  const engine::Result& r = *done;
  if (r.status != engine::Status::kOk || !r.result || !(*r.result)["data"].contains("application/json"))
    return std::pair{
        500, "the sandbox could not write " + path + " (" + std::string(engine::StatusName(r.status)) + ")"};
  const int code = (*r.result)["data"]["application/json"].value("exit_code", 0);
  if (code != 0) return ScriptFailure(code, path, r.stderr_text.text, 0);
  return std::nullopt;
}

}  // namespace execbox::api::e2b
