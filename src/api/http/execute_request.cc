#include "api/http/execute_request.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include "api/common/json_text.h"
#include "api/schema/lint_schema.h"
#include "api/schema/network_schema.h"
#include "api/schema/request_schema.h"
#include "base/base64.h"

namespace execbox::api {

namespace {

using nlohmann::json;

// Deeper documents are refused before parsing (as json_rpc.cc does for MCP): nothing a client
// sends nests this far, and every level costs whoever walks the value later.
constexpr int kMaxJsonDepth = 64;
// Every parsed value costs ~16-60 bytes whatever its text costs ("0," is 2 bytes): a body of
// 48 MiB of zeros would cost the server over a GiB as a DOM. A real request holds a few dozen.
constexpr size_t kMaxJsonValues = 100'000;
// What the jail accepts (jail::ValidateRelativeName): 255 bytes a component, 1020 in all.
constexpr size_t kMaxComponentBytes = 255;
constexpr size_t kMaxPathBytes = 255 * 4;

// ---- Problems ------------------------------------------------------------------------------

Problem MakeProblem(int status, std::string type, std::string title, std::string detail,
                    json extra = json::object()) {
  return Problem{.status = status,
                 .type = std::move(type),
                 .title = std::move(title),
                 .detail = std::move(detail),
                 .extra = std::move(extra)};
}

std::unexpected<Problem> Refuse(int status, std::string type, std::string title, std::string detail,
                                json extra = json::object()) {
  return std::unexpected(
      MakeProblem(status, std::move(type), std::move(title), std::move(detail), std::move(extra)));
}

// Client-chosen text (a key, a path) in a problem: cut at a character boundary so a hostile
// megabyte-long key does not come back in the error.
std::string Clipped(std::string_view text, size_t max_bytes = 100) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

std::string Quoted(std::string_view text) { return "'" + Clipped(text) + "'"; }

std::unexpected<Problem> UnknownField(const std::string& field, const std::string& allowed,
                                      const std::string& hint = "") {
  return Refuse(400, "unknown-field", "Unknown field",
                "unknown field " + Quoted(field) + " (allowed: " + allowed + ")" + hint,
                {{"field", Clipped(field)}});
}

std::unexpected<Problem> MissingField(const std::string& field) {
  return Refuse(400, "missing-field", "Missing field", "'" + field + "' is required", {{"field", field}});
}

using engine::Described;

std::unexpected<Problem> WrongType(const std::string& field, const std::string& expected, const json& got) {
  return Refuse(400, "wrong-type", "Wrong type",
                "'" + field + "' must be " + expected + ", not " + Described(got),
                {{"field", field}, {"expected", expected}});
}

std::unexpected<Problem> InvalidValue(const std::string& field, const std::string& why) {
  return Refuse(400, "invalid-value", "Invalid value", "'" + field + "' " + why, {{"field", field}});
}

// ---- UTF-8 and JSON ------------------------------------------------------------------------

// The offset of the first byte that does not start a well-formed UTF-8 sequence (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF), or npos.
size_t FirstInvalidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return i;
    }
    if (i + len > n) return i;
    if (p[i + 1] < lo || p[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k) {
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

// Builds the DOM through SAX, refusing duplicate keys (which parser's value wins is a classic
// smuggling ambiguity) and documents of too many values, and keeping the parser's message.
class StrictBuilder : public nlohmann::json_sax<json> {
 public:
  bool null() override { return Place(json(nullptr)) != nullptr; }
  bool boolean(bool v) override { return Place(json(v)) != nullptr; }
  bool number_integer(number_integer_t v) override { return Place(json(v)) != nullptr; }
  bool number_unsigned(number_unsigned_t v) override { return Place(json(v)) != nullptr; }
  bool number_float(number_float_t v, const string_t&) override { return Place(json(v)) != nullptr; }
  bool string(string_t& v) override { return Place(json(std::move(v))) != nullptr; }
  bool binary(binary_t&) override {
    return Fail(MakeProblem(400, "malformed-json", "Malformed JSON", "binary value"));
  }
  bool start_object(std::size_t) override { return Open(json::object()); }
  bool key(string_t& k) override {
    if (stack_.back()->contains(k)) {
      return Fail(MakeProblem(400, "duplicate-key", "Duplicate JSON key",
                              "the key " + Quoted(k) + " appears twice in one object",
                              {{"key", Clipped(k)}}));
    }
    key_ = std::move(k);
    return true;
  }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(json::array()); }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    // "[json.exception.parse_error.101] parse error at line 1, column 7: ..." without the tag.
    std::string message = e.what();
    if (message.starts_with("[json.exception.")) {
      if (size_t end = message.find("] "); end != std::string::npos) message.erase(0, end + 2);
    }
    return Fail(MakeProblem(400, "malformed-json", "Malformed JSON", message));
  }

  json& root() { return root_; }
  std::optional<Problem>& failure() { return failure_; }

 private:
  bool Fail(Problem p) {
    if (!failure_) failure_ = std::move(p);
    return false;
  }
  json* Place(json v) {
    if (++values_ > kMaxJsonValues) {
      Fail(MakeProblem(413, "too-many-values", "Too many JSON values",
                       "the body holds more than " + std::to_string(kMaxJsonValues) + " JSON values"));
      return nullptr;
    }
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();  // stable: the array grows again only after this child is closed
    }
    json& slot = top[key_];  // std::map: stable
    slot = std::move(v);
    return &slot;
  }
  bool Open(json container) {
    json* at = Place(std::move(container));
    if (at == nullptr) return false;
    stack_.push_back(at);
    return true;
  }
  bool Close() {
    stack_.pop_back();
    return true;
  }

  json root_;
  std::vector<json*> stack_;
  std::string key_;
  size_t values_ = 0;
  std::optional<Problem> failure_;
};

// ---- Fields --------------------------------------------------------------------------------
// Which fields a body may carry, whether each is required, may be null and has the right JSON
// type: the request schema's (api/schema/request_schema.h). What is checked beyond that is each
// field's own reader below.

// What a body says, as its fields are read.
struct Reading {
  engine::ExecutionRequest call;
  bool checkpoint = false;
  size_t max_files = kMaxInputFiles;
};

using Read = std::expected<void, Problem>;

// The first key of `object` (in its order) that `request` does not carry.
Read RefuseUnknown(const json& object, Request request, const std::string& prefix) {
  for (const auto& item : object.items()) {
    const std::string& key = item.key();
    if (FindField(request, key) != nullptr) continue;
    // The one field the session route leaves out: its session is the path's.
    const bool in_path = request == kSessionExecuteBody && FindField(kExecuteBody, key) != nullptr;
    return UnknownField(prefix + key, AllowedNames(request),
                        in_path ? "; the session is the one named in the path" : "");
  }
  return {};
}

// The field's value in `object`; null when it is absent or null and may be; a problem when it
// is required and absent, or not of its type.
std::expected<const json*, Problem> Present(const json& object, const RequestField& field,
                                            const std::string& prefix) {
  const std::string name = prefix + std::string(field.name);
  auto it = object.find(field.name);
  if (it == object.end()) {
    if (field.required) return MissingField(name);
    return nullptr;
  }
  if (it->is_null() && field.nullable) return nullptr;
  if (!HasType(field, *it)) return WrongType(name, ExpectedType(field), *it);
  return &*it;
}

Read ReadCode(const json& value, Reading& out) {
  const std::string& code = value.get_ref<const std::string&>();
  if (size_t nul = code.find('\0'); nul != std::string::npos) {
    return InvalidValue("code", "contains a NUL character (at byte " + std::to_string(nul) +
                                    "), which Python source cannot hold");
  }
  out.call.program.code = code;
  return {};
}

Read ReadPolicy(const json& value, Reading& out) {
  const std::string& policy = value.get_ref<const std::string&>();
  if (!runtime::LintProfile(policy)) {
    std::vector<std::string> known = runtime::LintProfileNames();
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    return Refuse(400, "unknown-policy", "Unknown policy profile",
                  "unknown policy profile " + Quoted(policy) + " (known: " + list + ")",
                  {{"field", "policy"}, {"known", known}});
  }
  out.call.program.lint_profile = policy;
  return {};
}

// The name tracebacks give the code (`execbox run script.py` sends "script.py"): one line.
Read ReadFilename(const RequestField& field, const json& value, Reading& out) {
  const std::string& name = value.get_ref<const std::string&>();
  if (name.size() < field.min_length || name.size() > field.max_length ||
      name.find_first_of(std::string("\n\r\0", 3)) != std::string::npos) {
    return InvalidValue("filename", "must be one line of " + std::to_string(field.min_length) + " to " +
                                        std::to_string(field.max_length) + " bytes");
  }
  out.call.program.display_name = name;
  return {};
}

// `limits`: an object of the limit schema's names (engine/limit_schema.h), each checked for its
// type here and for its bounds by the gate.
Read ReadLimits(const json& value, Reading& out) {
  auto overrides = engine::ReadLimitOverrides(value, "limits.");
  if (!overrides) return std::unexpected(ProblemOf(overrides.error()));
  out.call.limits = std::move(*overrides);
  return {};
}

// One of files[]: its shape first (the request schema's InputFile), then its name (unique, and
// neither the directory of another nor under another) and its content.
Read ReadFile(const json& file, const std::string& at, std::set<std::string>& names, Reading& out) {
  if (auto s = RefuseUnknown(file, kInputFile, at + "."); !s) return s;
  for (const RequestField* field : FieldsOf(kInputFile)) {
    if (auto value = Present(file, *field, at + "."); !value)
      return std::unexpected(std::move(value.error()));
  }
  auto name = ValidateFilePath(file["name"].get_ref<const std::string&>());
  if (!name) {
    Problem p = std::move(name.error());
    p.detail = at + ".name: " + p.detail;
    p.extra["field"] = at + ".name";
    return std::unexpected(std::move(p));
  }
  if (names.contains(*name)) {
    return Refuse(400, "duplicate-file", "Duplicate file", at + ".name: " + Quoted(*name) + " is given twice",
                  {{"field", at + ".name"}});
  }
  // "a" and "a/b" cannot both be: one needs "a" to be a file, the other a directory.
  for (size_t slash = name->find('/'); slash != std::string::npos; slash = name->find('/', slash + 1)) {
    if (names.contains(name->substr(0, slash))) {
      return Refuse(400, "duplicate-file", "Duplicate file",
                    at + ".name: " + Quoted(*name) + " needs " + Quoted(name->substr(0, slash)) +
                        " to be a directory, but another file has that name",
                    {{"field", at + ".name"}});
    }
  }
  if (auto it = names.lower_bound(*name + "/"); it != names.end() && it->starts_with(*name + "/")) {
    return Refuse(
        400, "duplicate-file", "Duplicate file",
        at + ".name: " + Quoted(*name) + " is also a directory of another file (" + Quoted(*it) + ")",
        {{"field", at + ".name"}});
  }
  auto content = Base64Decode(file["content_base64"].get_ref<const std::string&>());
  if (!content) {
    return Refuse(400, "invalid-base64", "Invalid base64",
                  "'" + at +
                      ".content_base64' is not valid base64 (standard alphabet, with padding, no "
                      "whitespace or line breaks)",
                  {{"field", at + ".content_base64"}});
  }
  names.insert(*name);
  out.call.program.inputs.push_back({.name = std::move(*name), .content = std::move(*content)});
  return {};
}

// files[]: decoded and their names checked (whether they fit the work dir is the gate's to say).
Read ReadFiles(const RequestField& field, const json& files, Reading& out) {
  if (files.size() > out.max_files) {
    return Refuse(422, "limit-exceeded", "Limit exceeded",
                  "'files' holds " + std::to_string(files.size()) +
                      " files, above this server's maximum of " + std::to_string(out.max_files),
                  {{"limit", "files"}, {"requested", files.size()}, {"maximum", out.max_files}});
  }
  std::set<std::string> names;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string at = "files[" + std::to_string(i) + "]";
    if (!ItemHasType(field, files[i])) return WrongType(at, ExpectedType(field.items), files[i]);
    if (auto s = ReadFile(files[i], at, names, out); !s) return s;
  }
  return {};
}

// "packages": strings (their form is the gate's to check: runtime::CheckPackageNames).
// An array field's strings into `to`, each item's type checked (what they may be is the gate's).
Read ReadStrings(const RequestField& field, const json& value, std::vector<std::string>& to) {
  std::vector<std::string> items;
  for (size_t i = 0; i < value.size(); ++i) {
    if (!ItemHasType(field, value[i]))
      return WrongType(std::string(field.name) + "[" + std::to_string(i) + "]", ExpectedType(field.items),
                       value[i]);
    items.push_back(value[i].get<std::string>());
  }
  to = std::move(items);
  return {};
}

Read ReadSessionId(const RequestField& field, const json& value, Reading& out) {
  const std::string& id = value.get_ref<const std::string&>();
  if (id.size() < field.min_length) return InvalidValue("session_id", "must not be empty");
  out.call.session_id = id;
  return {};
}

// "network": {allow?: [strings], deny?: [strings]}, each entry parsed (api/schema/network_schema.h).
Read ReadNetwork(const json& value, Reading& out) {
  auto policy = ReadNetworkPolicy(value);
  if (!policy) {
    const FieldFault& fault = policy.error();
    return Refuse(400, fault.type, "Invalid value", fault.detail, {{"field", fault.field}});
  }
  out.call.network = std::move(*policy);
  return {};
}

Read ReadLintField(const json& value, Reading& out) {
  auto codes = ReadLint(value);
  if (!codes) {
    const FieldFault& fault = codes.error();
    return Refuse(400, fault.type, "Invalid value", fault.detail, {{"field", fault.field}});
  }
  out.call.program.lint_block = std::move(*codes);
  return {};
}

// A field's own checks, once its type is known to be the schema's.
Read ReadField(const RequestField& field, const json& value, Reading& out) {
  switch (field.id) {
    case FieldId::kCode:
      return ReadCode(value, out);
    case FieldId::kStdin:
      out.call.program.stdin_data = value.get<std::string>();
      return {};
    case FieldId::kFiles:
      return ReadFiles(field, value, out);
    case FieldId::kLimits:
      return ReadLimits(value, out);
    case FieldId::kCheckpoint:
      out.checkpoint = value.get<bool>();
      return {};
    case FieldId::kPolicy:
      return ReadPolicy(value, out);
    case FieldId::kFilename:
      return ReadFilename(field, value, out);
    case FieldId::kPackages:
      return ReadStrings(field, value, out.call.program.packages);
    case FieldId::kSessionId:
      return ReadSessionId(field, value, out);
    case FieldId::kNetwork:
      return ReadNetwork(value, out);
    case FieldId::kAnalyzers:
      return ReadStrings(field, value, out.call.program.analyzers);
    case FieldId::kLint:
      return ReadLintField(value, out);
    case FieldId::kGuard: {
      auto guard = runtime::GuardNamed(value.get<std::string>());
      if (!guard) return InvalidValue("guard", "must be 'off' or 'audit'");
      out.call.program.guard = *guard;
      return {};
    }
    case FieldId::kFileName:
    case FieldId::kFileContent:
      break;  // a file's, read with it (ReadFile)
    case FieldId::kArgv:
    case FieldId::kCommand:
    case FieldId::kEnv:
    case FieldId::kCwd:
    case FieldId::kPty:
    case FieldId::kRows:
    case FieldId::kCols:
    case FieldId::kProcessStdin:
    case FieldId::kTag:
    case FieldId::kData:
    case FieldId::kDataBase64:
    case FieldId::kSignal:
    case FieldId::kResizeRows:
    case FieldId::kResizeCols:
      break;  // a process route's (process_request.cc)
    case FieldId::kPid:
    case FieldId::kInput:
    case FieldId::kCloseStdin:
    case FieldId::kOffset:
    case FieldId::kMaxBytes:
    case FieldId::kWaitSeconds:
    case FieldId::kToolSignal:
      break;  // an MCP process tool's (mcp_process_tools.cc)
  }
  return {};
}

// The body as `request`: unknown fields first, then each field in the schema's order.
std::expected<Reading, Problem> ReadBody(std::string_view body, Request request, Reading out) {
  auto doc = ParseJsonObject(body);
  if (!doc) return std::unexpected(std::move(doc.error()));
  if (auto s = RefuseUnknown(*doc, request, ""); !s) return std::unexpected(std::move(s.error()));
  for (const RequestField* field : FieldsOf(request)) {
    auto value = Present(*doc, *field, "");
    if (!value) return std::unexpected(std::move(value.error()));
    if (*value == nullptr) continue;
    if (auto s = ReadField(*field, **value, out); !s) return std::unexpected(std::move(s.error()));
  }
  return out;
}

}  // namespace

std::expected<json, Problem> ParseJsonObject(std::string_view body) {
  if (body.empty())
    return Refuse(400, "malformed-json", "Malformed JSON", "the body is empty; a JSON object is required");
  if (size_t bad = FirstInvalidUtf8(body); bad != std::string_view::npos) {
    return Refuse(400, "invalid-utf8", "Invalid UTF-8",
                  "the body is not valid UTF-8 (byte " + std::to_string(bad) + ")", {{"offset", bad}});
  }
  if (MaxDepth(body) > kMaxJsonDepth) {
    return Refuse(
        400, "too-deep", "JSON nested too deeply",
        "the body nests arrays and objects deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  StrictBuilder builder;
  bool ok = json::sax_parse(body, &builder, json::input_format_t::json, /*strict=*/true);
  if (!ok || builder.failure()) {
    if (builder.failure()) return std::unexpected(std::move(*builder.failure()));
    return Refuse(400, "malformed-json", "Malformed JSON", "the body is not valid JSON");
  }
  if (!builder.root().is_object()) {
    return Refuse(400, "invalid-body", "Body is not a JSON object",
                  std::string("the body must be a JSON object, not ") + Described(builder.root()));
  }
  return std::move(builder.root());
}

std::expected<engine::ExecutionRequest, Problem> ParseExecuteBody(std::string_view body,
                                                                  bool allow_session_id, size_t max_files) {
  Reading reading{.max_files = max_files};
  reading.call.program.mode = runtime::Mode::kRun;
  reading.call.program.collect_files = true;  // as `execbox run --json`: the files come back in the result
  auto read = ReadBody(body, allow_session_id ? kExecuteBody : kSessionExecuteBody, std::move(reading));
  if (!read) return std::unexpected(std::move(read.error()));
  return std::move(read->call);
}

std::expected<engine::ExecutionRequest, Problem> ParseCheckBody(std::string_view body) {
  Reading reading;
  reading.call.program.mode = runtime::Mode::kCheck;
  reading.call.program.collect_files = false;  // as `execbox check`: nothing to collect
  auto read = ReadBody(body, kCheckBody, std::move(reading));
  if (!read) return std::unexpected(std::move(read.error()));
  return std::move(read->call);
}

std::expected<SessionBody, Problem> ParseSessionBody(std::string_view body) {
  SessionBody out;
  if (body.empty()) return out;
  auto read = ReadBody(body, kSessionBody, Reading{});
  if (!read) return std::unexpected(std::move(read.error()));
  out.limits = std::move(read->call.limits);
  out.checkpoint = read->checkpoint;
  out.packages = std::move(read->call.program.packages);
  out.network = std::move(read->call.network);
  return out;
}

std::expected<std::string, Problem> ValidateFilePath(std::string_view path) {
  auto bad = [&](const std::string& why) {
    return Refuse(400, "invalid-path", "Invalid file path", why, {{"path", Clipped(path, 200)}});
  };
  if (path.empty()) return bad("the path is empty");
  if (FirstInvalidUtf8(path) != std::string_view::npos) return bad("the path is not valid UTF-8");
  for (size_t i = 0; i < path.size(); ++i) {
    auto c = static_cast<unsigned char>(path[i]);
    if (c < 0x20 || c == 0x7f) {
      return bad("the path has a NUL or control character (byte " + std::to_string(i) + ")");
    }
  }
  if (path.size() > kMaxPathBytes) {
    return bad("the path is " + std::to_string(path.size()) + " bytes long, more than " +
               std::to_string(kMaxPathBytes));
  }
  if (path.front() == '/')
    return bad("the path " + Quoted(path) + " is absolute; it must be relative to the work dir");
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(start, end - start);
    if (part.empty()) return bad("the path " + Quoted(path) + " has an empty component");
    if (part == "." || part == "..") return bad("the path " + Quoted(path) + " has a '.' or '..' component");
    if (part.size() > kMaxComponentBytes) {
      return bad("a component of the path is longer than " + std::to_string(kMaxComponentBytes) + " bytes");
    }
    start = end + 1;
  }
  std::string out(path);
  // The jail checks again; a name it refuses must be refused here, with a 400, not fail later.
  if (auto valid = jail::ValidateRelativeName(out); !valid) return bad(valid.error().message);
  return out;
}

}  // namespace execbox::api
