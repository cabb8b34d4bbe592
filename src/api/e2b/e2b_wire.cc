#include "api/e2b/e2b_wire.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <iterator>
#include <map>

#include "api/http/http_wire.h"

namespace execbox::api::e2b {
namespace {

// E2B's names for the MIME types its Result has fields for (its code interpreter's
// api/models/result.py). Its kernel adds e2b/data (a DataFrame's columns) and e2b/chart (a
// matplotlib figure's chart); the agent gives them under JSON types of ours when asked
// (runtime::kExtraMimes).
const std::map<std::string, std::string>& FieldNames() {
  static const std::map<std::string, std::string> names = {
      {"text/plain", "text"},
      {"text/html", "html"},
      {"text/markdown", "markdown"},
      {"image/svg+xml", "svg"},
      {"image/png", "png"},
      {"image/jpeg", "jpeg"},
      {"application/pdf", "pdf"},
      {"text/latex", "latex"},
      {"application/json", "json"},
      {"application/javascript", "javascript"},
      {"application/vnd.e2b.data+json", "data"},
      {"application/vnd.e2b.chart+json", "chart"},
  };
  return names;
}

std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// A parameter of a header value such as `form-data; name="file"; filename="a.txt"`.
std::optional<std::string> Parameter(std::string_view header, std::string_view name) {
  size_t at = 0;
  while ((at = header.find(';', at)) != std::string_view::npos) {
    std::string_view rest = Trim(header.substr(at + 1));
    at += 1;
    if (!rest.starts_with(name) || rest.size() <= name.size() || rest[name.size()] != '=') continue;
    rest.remove_prefix(name.size() + 1);
    if (!rest.empty() && rest.front() == '"') {
      std::string value;
      for (size_t i = 1; i < rest.size(); ++i) {
        if (rest[i] == '\\' && i + 1 < rest.size()) {
          value += rest[++i];
        } else if (rest[i] == '"') {
          return value;
        } else {
          value += rest[i];
        }
      }
      return std::nullopt;  // unterminated
    }
    return std::string(Trim(rest.substr(0, rest.find(';'))));
  }
  return std::nullopt;
}

}  // namespace

std::string Line(const nlohmann::json& message) { return Dump(message) + "\n"; }

nlohmann::json StreamMessage(bool stderr_stream, std::string text) {
  return {{"type", stderr_stream ? "stderr" : "stdout"},
          {"text", std::move(text)},
          {"timestamp", Rfc3339(std::chrono::system_clock::now())}};
}

std::string E2bText(std::string text) {
  // E2B's server drops one pair of enclosing quotes, whatever is between them: the repr 'x' of
  // a str reaches its SDKs as x (os.getenv("X") as the last line gives the value itself).
  if (!text.empty() && (text.front() == '\'' || text.front() == '"') && text.back() == text.front())
    return text.size() == 1 ? "" : text.substr(1, text.size() - 2);
  return text;
}

nlohmann::json ResultMessage(const engine::MimeBundle& bundle, bool main_result) {
  nlohmann::json message = {{"type", "result"}};
  nlohmann::json extra = nlohmann::json::object();
  const auto& names = FieldNames();
  if (bundle.is_object() && bundle.contains("data") && bundle["data"].is_object()) {
    for (const auto& [mime, value] : bundle["data"].items()) {
      auto it = names.find(mime);
      if (it == names.end()) {
        extra[mime] = value;
      } else if (mime == "text/plain" && value.is_string()) {
        message["text"] = E2bText(value.get<std::string>());
      } else {
        message[it->second] = value;
      }
    }
  }
  message["extra"] = std::move(extra);
  message["is_main_result"] = main_result;
  return message;
}

std::vector<nlohmann::json> EndOfExecution(const engine::Result& result, uint64_t execution_count,
                                           size_t streamed) {
  std::vector<nlohmann::json> lines;
  for (size_t i = streamed; i < result.display.size(); ++i)
    lines.push_back(ResultMessage(result.display[i], false));
  if (result.result) lines.push_back(ResultMessage(*result.result, true));
  if (result.error) {
    std::string traceback;
    for (const auto& line : result.error->traceback) {
      if (!traceback.empty() && traceback.back() != '\n') traceback += '\n';
      traceback += line;
    }
    if (traceback.empty()) traceback = result.error->ename + ": " + result.error->evalue;
    lines.push_back({{"type", "error"},
                     {"name", result.error->ename},
                     {"value", result.error->evalue},
                     {"traceback", traceback}});
  }
  lines.push_back({{"type", "number_of_executions"}, {"execution_count", execution_count}});
  lines.push_back({{"type", "end_of_execution"}});
  return lines;
}

std::string Envelope(uint8_t flags, std::string_view message) {
  std::string out;
  out.reserve(5 + message.size());
  out += static_cast<char>(flags);
  const auto n = static_cast<uint32_t>(message.size());
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((n >> shift) & 0xff);
  out.append(message);
  return out;
}

std::expected<std::string, std::string> FirstEnvelope(std::string_view body) {
  if (body.size() < 5) return std::unexpected("the request is not a Connect envelope (too short)");
  if ((static_cast<uint8_t>(body[0]) & 0x01) != 0)
    return std::unexpected("compressed Connect messages are not supported");
  uint32_t n = 0;
  for (int i = 1; i <= 4; ++i) n = (n << 8) | static_cast<uint8_t>(body[i]);
  if (body.size() - 5 < n) return std::unexpected("the Connect envelope is cut short");
  return std::string(body.substr(5, n));
}

std::expected<std::vector<std::string>, std::string> Envelopes(std::string_view body) {
  std::vector<std::string> messages;
  while (!body.empty()) {
    auto message = FirstEnvelope(body);
    if (!message) return std::unexpected(message.error());
    const bool end = (static_cast<uint8_t>(body[0]) & kEndStream) != 0;
    body.remove_prefix(5 + message->size());
    if (end) break;
    messages.push_back(std::move(*message));
  }
  return messages;
}

int HttpStatusOf(const std::string& code) {
  static const std::map<std::string, int> statuses = {
      {"canceled", 499},
      {"unknown", 500},
      {"invalid_argument", 400},
      {"deadline_exceeded", 504},
      {"not_found", 404},
      {"already_exists", 409},
      {"permission_denied", 403},
      {"resource_exhausted", 429},
      {"failed_precondition", 400},
      {"aborted", 409},
      {"out_of_range", 400},
      {"unimplemented", 501},
      {"internal", 500},
      {"unavailable", 503},
      {"data_loss", 500},
      {"unauthenticated", 401},
  };
  auto it = statuses.find(code);
  return it == statuses.end() ? 500 : it->second;
}

nlohmann::json RpcErrorJson(const RpcError& error) {
  return {{"code", error.code}, {"message", error.message}};
}

nlohmann::json ProcessEndEvent(std::optional<int> exit_code, std::optional<int> signal) {
  // Go's names of Linux's signals (syscall's signal table), as os.ProcessState.String() says them.
  static const char* const kGoSignalNames[] = {
      "",
      "hangup",
      "interrupt",
      "quit",
      "illegal instruction",
      "trace/breakpoint trap",
      "aborted",
      "bus error",
      "floating point exception",
      "killed",
      "user defined signal 1",
      "segmentation fault",
      "user defined signal 2",
      "broken pipe",
      "alarm clock",
      "terminated",
      "stack fault",
      "child exited",
      "continued",
      "stopped (signal)",
      "stopped",
      "stopped (tty input)",
      "stopped (tty output)",
      "urgent I/O condition",
      "CPU time limit exceeded",
      "file size limit exceeded",
      "virtual timer expired",
      "profiling timer expired",
      "window changed",
      "I/O possible",
      "power failure",
      "bad system call",
  };
  constexpr int kNamed = static_cast<int>(std::size(kGoSignalNames));
  if (exit_code) {
    const std::string status = "exit status " + std::to_string(*exit_code);
    nlohmann::json end = {{"exitCode", *exit_code}, {"exited", true}, {"status", status}};
    if (*exit_code != 0) end["error"] = status;
    return end;
  }
  std::string status = "ended with its sandbox";
  if (signal) {
    status = *signal > 0 && *signal < kNamed ? std::string("signal: ") + kGoSignalNames[*signal]
                                             : "signal: signal " + std::to_string(*signal);
  }
  return {{"exitCode", -1}, {"exited", false}, {"status", status}, {"error", status}};
}

std::expected<std::vector<FormFile>, std::string> ParseMultipart(std::string_view content_type,
                                                                 std::string_view body) {
  if (!Trim(content_type.substr(0, content_type.find(';'))).starts_with("multipart/form-data"))
    return std::unexpected("the upload must be multipart/form-data or application/octet-stream");
  auto boundary = Parameter(content_type, "boundary");
  if (!boundary || boundary->empty() || boundary->size() > 200)
    return std::unexpected("the multipart Content-Type has no usable boundary");
  const std::string delimiter = "--" + *boundary;
  std::vector<FormFile> files;
  size_t at = body.find(delimiter);
  if (at == std::string_view::npos) return std::unexpected("the multipart body has no part");
  while (true) {
    at += delimiter.size();
    if (body.substr(at, 2) == "--") break;  // the closing delimiter
    if (body.substr(at, 2) != "\r\n") return std::unexpected("a multipart delimiter is not followed by CRLF");
    at += 2;
    const size_t headers_end = body.find("\r\n\r\n", at);
    if (headers_end == std::string_view::npos)
      return std::unexpected("a multipart part has no end of headers");
    std::string_view headers = body.substr(at, headers_end - at);
    const size_t content_start = headers_end + 4;
    const size_t next = body.find("\r\n" + delimiter, content_start);
    if (next == std::string_view::npos) return std::unexpected("the multipart body is cut short");
    std::optional<std::string> filename;
    size_t line_start = 0;
    while (line_start <= headers.size()) {
      size_t line_end = headers.find("\r\n", line_start);
      if (line_end == std::string_view::npos) line_end = headers.size();
      std::string_view line = headers.substr(line_start, line_end - line_start);
      const size_t colon = line.find(':');
      if (colon != std::string_view::npos) {
        std::string name(Trim(line.substr(0, colon)));
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (name == "content-disposition") filename = Parameter(line.substr(colon + 1), "filename");
      }
      line_start = line_end + 2;
    }
    if (filename) files.push_back({*filename, std::string(body.substr(content_start, next - content_start))});
    at = next + 2;
  }
  if (files.empty()) return std::unexpected("the multipart body has no file part");
  return files;
}

std::expected<std::string, std::string> WorkDirPath(std::string_view path) {
  std::string_view rest = path;
  auto strip = [&](std::string_view prefix) {
    if (rest == prefix) {
      rest = {};
      return true;
    }
    if (rest.starts_with(prefix) && rest.size() > prefix.size() && rest[prefix.size()] == '/') {
      rest.remove_prefix(prefix.size() + 1);
      return true;
    }
    return false;
  };
  if (!strip("~") && !strip(kHome) && !strip(kWorkDirAlias) && rest.starts_with('/')) {
    return std::unexpected("'" + std::string(path.substr(0, 200)) + "' is outside the sandbox's home (" +
                           kHome + ", also " + kWorkDirAlias +
                           "); files elsewhere are reachable only from code or commands");
  }
  while (rest.starts_with('/')) rest.remove_prefix(1);
  if (rest.empty())
    return std::unexpected("'" + std::string(path.substr(0, 200)) + "' is a directory, not a file");
  return std::string(rest);
}

std::string SandboxPath(std::string_view path) {
  for (std::string_view other : {std::string_view("~"), std::string_view(kWorkDirAlias)}) {
    if (path == other) return kHome;
    if (path.starts_with(other) && path.size() > other.size() && path[other.size()] == '/')
      return std::string(kHome) + std::string(path.substr(other.size()));
  }
  return std::string(path);
}

std::string AbsoluteInSandbox(std::string_view sent) {
  std::string path = SandboxPath(sent);
  if (path.empty() || path.front() != '/') path = std::string(kHome) + (path.empty() ? "" : "/" + path);
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

std::string ShellQuote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::expected<std::map<std::string, std::string>, std::string> FileMetadataOf(
    const std::map<std::string, std::string>& headers) {
  constexpr std::string_view kPrefix = "x-metadata-";
  const std::string_view token_marks = "!#$%&'*+-.^_`|~";
  std::map<std::string, std::string> metadata;
  for (const auto& [name, value] : headers) {
    if (!name.starts_with(kPrefix)) continue;
    const std::string key = name.substr(kPrefix.size());
    if (key.empty() || key.size() > 128 || !std::all_of(key.begin(), key.end(), [&](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || token_marks.find(c) != std::string_view::npos;
        }))
      return std::unexpected("metadata key '" + key.substr(0, 128) +
                             "' is not 1 to 128 letters, digits or HTTP token marks");
    if (value.size() > 1024 ||
        !std::all_of(value.begin(), value.end(), [](char c) { return c >= 0x20 && c <= 0x7e; }))
      return std::unexpected("metadata value of '" + key +
                             "' is not at most 1024 printable ASCII characters");
    metadata[key] = value;
  }
  if (metadata.size() > kMaxMetadataKeys)
    return std::unexpected("a file holds at most " + std::to_string(kMaxMetadataKeys) + " metadata keys");
  return metadata;
}

std::optional<HostTarget> HostTargetOf(std::string_view host, std::string_view domain) {
  if (domain.empty()) return std::nullopt;
  if (const size_t colon = host.rfind(':'); colon != std::string_view::npos) host = host.substr(0, colon);
  if (host.size() <= domain.size() + 1 || !host.ends_with(domain) ||
      host[host.size() - domain.size() - 1] != '.')
    return std::nullopt;
  host.remove_suffix(domain.size() + 1);
  const size_t dash = host.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash > 5) return std::nullopt;
  int port = 0;
  for (char c : host.substr(0, dash)) {
    if (c < '0' || c > '9') return std::nullopt;
    port = port * 10 + (c - '0');
  }
  if (port < 1 || port > 65535 || host.size() == dash + 1) return std::nullopt;
  return HostTarget{.port = port, .id = std::string(host.substr(dash + 1))};
}

bool IsHopHeader(std::string_view name) {
  for (std::string_view h : {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te",
                             "trailer", "upgrade", "proxy-authorization", "content-length", "x-access-token",
                             "e2b-traffic-access-token", "e2b-sandbox-id", "e2b-sandbox-port"}) {
    if (name == h) return true;
  }
  return false;
}

namespace {

// A chunked body undone, or nullopt when it is not one.
std::optional<std::string> Unchunked(const std::string& in) {
  std::string body;
  for (size_t at = 0;;) {
    const size_t eol = in.find("\r\n", at);
    if (eol == std::string::npos || eol == at) return std::nullopt;
    size_t size = 0;
    const auto [end, ec] = std::from_chars(in.data() + at, in.data() + eol, size, 16);
    // A chunk extension (";name=value") may follow the size.
    if (ec != std::errc() || (end != in.data() + eol && *end != ';')) return std::nullopt;
    if (size == 0) return body;
    if (size > in.size() || eol + 2 + size + 2 > in.size()) return std::nullopt;
    body.append(in, eol + 2, size);
    at = eol + 2 + size + 2;
  }
}

}  // namespace

std::optional<HttpResponse> ParseRelayedAnswer(const std::string& raw) {
  const size_t end = raw.find("\r\n\r\n");
  if (end == std::string::npos || !raw.starts_with("HTTP/1.")) return std::nullopt;
  const size_t line_end = raw.find("\r\n");
  const size_t space = raw.find(' ');
  if (space == std::string::npos || space > line_end || line_end - space < 4) return std::nullopt;
  int status = 0;
  const auto [status_end, ec] = std::from_chars(raw.data() + space + 1, raw.data() + space + 4, status);
  if (ec != std::errc() || status_end != raw.data() + space + 4 || status < 100 || status > 599)
    return std::nullopt;
  HttpResponse response{.status = status, .content_type = ""};
  bool chunked = false;
  for (size_t at = line_end + 2; at < end;) {
    const size_t next = raw.find("\r\n", at);
    std::string line = raw.substr(at, next - at);
    at = next + 2;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    if (name == "content-type") {
      response.content_type = value;
    } else if (name == "transfer-encoding") {
      chunked = value.find("chunked") != std::string::npos;
    } else if (!IsHopHeader(name) && name != "date" && name != "server") {
      response.headers.emplace_back(name, value);
    }
  }
  response.body = raw.substr(end + 4);
  if (chunked) {
    auto body = Unchunked(response.body);
    if (!body) return std::nullopt;
    response.body = std::move(*body);
  }
  return response;
}

}  // namespace execbox::api::e2b
