// E2B's wire formats, without I/O: the code interpreter's NDJSON lines, Connect's envelopes
// (the envd RPCs with the JSON codec), multipart uploads, and how a path the SDK sends maps
// into an execbox sandbox. Everything here is a pure function, so it is tested alone
// (tests/unit/e2b_wire_test.cc).
#pragma once

#include <cstdint>
#include <expected>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/http/http_types.h"
#include "engine/result.h"
#include "jail/policy.h"

namespace execbox::api::e2b {

// The version of E2B's in-sandbox daemon (envd) this server answers as. The SDKs switch on it:
// >= 0.4.0 sends no default user, >= 0.5.7 may upload as application/octet-stream, >= 0.6.2
// sends file metadata (X-Metadata-* headers on an upload; FileMetadataOf). Watch events with
// their entry (0.6.3) are not offered.
inline constexpr const char* kEnvdVersion = "0.6.2";
// The sandbox's home, where the SDKs expect the user's files: its work dir. /work is another name
// of it (jail::kWorkDirAlias), taken from a client and answered as /home/user, the name E2B's
// envd gives (it resolves links in what it lists).
inline constexpr const char* kHome = jail::kHomeDir;
inline constexpr const char* kWorkDirAlias = jail::kWorkDirAlias;

// One NDJSON line (with its '\n') of /execute's stream.
std::string Line(const nlohmann::json& message);
// {"type": "stdout"|"stderr", "text", "timestamp"}.
nlohmann::json StreamMessage(bool stderr_stream, std::string text);
// A Jupyter MIME bundle ({"data": {...}}) as E2B's server sends a result: text (E2bText),
// html, markdown, svg, png, jpeg, pdf, latex, json, javascript, data and chart (from
// runtime::kExtraMimes), every other MIME type in `extra` under its own name, and
// is_main_result.
nlohmann::json ResultMessage(const engine::MimeBundle& bundle, bool main_result);
// text/plain as E2B's server passes it on: without one pair of enclosing quotes ('x' -> x).
std::string E2bText(std::string text);
// The lines that end an execution, after its live output: display outputs and figures, the
// last expression's value, the error (one that the limits caused too), the execution count,
// and end_of_execution.
// `streamed`: how many of the result's display items were sent already, as they came.
std::vector<nlohmann::json> EndOfExecution(const engine::Result& result, uint64_t execution_count,
                                           size_t streamed = 0);

// Connect's envelope: a flags byte, a 4-byte big-endian length, the message.
inline constexpr uint8_t kEndStream = 0x02;
std::string Envelope(uint8_t flags, std::string_view message);
// The first message of an enveloped request body, or why it is not one.
std::expected<std::string, std::string> FirstEnvelope(std::string_view body);
// Every message of an enveloped request body (a client stream), in order, up to an end-stream
// envelope if the body has one; or why it is not such a body.
std::expected<std::vector<std::string>, std::string> Envelopes(std::string_view body);
// Connect's error codes and the HTTP status each has for a unary call.
struct RpcError {
  std::string code;  // "invalid_argument", "not_found", "unimplemented", ...
  std::string message;
};
int HttpStatusOf(const std::string& code);
nlohmann::json RpcErrorJson(const RpcError& error);

// envd's ProcessEvent.EndEvent (JSON mapping) of a process that ended: as Go's os.ProcessState
// gives it, which envd forwards: an exit is {exitCode N, exited, status "exit status N"}, a
// signal {exitCode -1, status "signal: killed"}, and `error` (the SDKs' CommandExitError
// message) the same text unless it exited 0. Neither known: it ended with its session.
nlohmann::json ProcessEndEvent(std::optional<int> exit_code, std::optional<int> signal);

// One part of a multipart/form-data body.
struct FormFile {
  std::string filename;  // the part's filename (E2B puts the destination path there)
  std::string content;
};
// The file parts of a multipart/form-data body, given the request's Content-Type.
std::expected<std::vector<FormFile>, std::string> ParseMultipart(std::string_view content_type,
                                                                 std::string_view body);

// A path the SDK sent, for a file the host reads or writes in the work dir: relative to the
// sandbox's home, or under ~, /home/user or /work. The path relative to the work dir, or why
// not (a path elsewhere in the sandbox, which only code inside it can reach).
std::expected<std::string, std::string> WorkDirPath(std::string_view path);
// A path the SDK sent, as code inside the sandbox names it, with the home by one name: "~",
// "~/...", "/work" and "/work/..." become /home/user[/...]; a relative path stays relative (to
// the home, the cwd of what runs there); any other path is left as it is.
std::string SandboxPath(std::string_view path);
// A path the SDK sent as an absolute path inside the sandbox, without a trailing slash: a
// relative one is relative to the home, as envd makes it; the home by its one name.
std::string AbsoluteInSandbox(std::string_view path);
// A sandbox's port as a Host header names it (E2B's getHost): "<port>-<sandbox id>.<domain>",
// perhaps with ":<port of this server>"; nullopt for any other host, a port not 1-65535, or
// no id.
struct HostTarget {
  int port = 0;
  std::string id;
};
std::optional<HostTarget> HostTargetOf(std::string_view host, std::string_view domain);
// A header that belongs to one hop (RFC 9110 7.6.1), or to this server (the sandbox's token
// and routing headers): never passed on by the port relay, either way. `name` lower-cased.
bool IsHopHeader(std::string_view name);
// What a server in the sandbox answered an HTTP/1.0 request with, read to the connection's end,
// as this server sends it on (its status, content type and end-to-end headers; a chunked body
// undone, for a server that sends one anyway); nullopt when it is not an HTTP answer.
std::optional<HttpResponse> ParseRelayedAnswer(const std::string& raw);

// A file's metadata as an upload's X-Metadata-<key> headers give it (keys lower-cased, as HTTP
// header names are), or why it is refused: keys of HTTP token characters, values of printable
// US-ASCII (as the SDK checks them), at most kMaxMetadataKeys, each key 128 and value 1024
// bytes at most.
inline constexpr size_t kMaxMetadataKeys = 32;
std::expected<std::map<std::string, std::string>, std::string> FileMetadataOf(
    const std::map<std::string, std::string>& headers);

// Quoted for a POSIX shell ('...' with each ' as '\'').
std::string ShellQuote(std::string_view text);

}  // namespace execbox::api::e2b
