#include "api/http/execute_request.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include "api/mcp/json_rpc.h"
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

// Absent and null are the same for an optional field.
const json* Optional(const json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

std::expected<std::optional<std::string>, Problem> OptionalString(const json& object, const char* name,
                                                                  const std::string& field) {
  const json* value = Optional(object, name);
  if (value == nullptr) return std::nullopt;
  if (!value->is_string()) return WrongType(field, "a string", *value);
  return value->get<std::string>();
}

std::string Join(std::initializer_list<const char*> names) {
  std::string out;
  for (const char* n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

std::expected<std::string, Problem> ReadCode(const json& body) {
  auto it = body.find("code");
  if (it == body.end()) return MissingField("code");
  if (!it->is_string()) return WrongType("code", "a string", *it);
  std::string code = it->get<std::string>();
  if (size_t nul = code.find('\0'); nul != std::string::npos) {
    return InvalidValue("code", "contains a NUL character (at byte " + std::to_string(nul) +
                                    "), which Python source cannot hold");
  }
  return code;
}

std::expected<std::string, Problem> ReadPolicy(const json& body) {
  auto policy = OptionalString(body, "policy", "policy");
  if (!policy) return std::unexpected(policy.error());
  if (!*policy) return std::string("permissive");
  if (!runtime::PolicyProfile(**policy)) {
    std::vector<std::string> known = runtime::PolicyProfileNames();
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    return Refuse(400, "unknown-policy", "Unknown policy profile",
                  "unknown policy profile " + Quoted(**policy) + " (known: " + list + ")",
                  {{"field", "policy"}, {"known", known}});
  }
  return **policy;
}

// `limits`: an object of the limit schema's names (engine/limit_schema.h), each checked for its
// type here and for its bounds by the gate.
std::expected<engine::LimitOverrides, Problem> ReadLimits(const json& body) {
  const json* object = Optional(body, "limits");
  if (object == nullptr) return engine::LimitOverrides{};
  if (!object->is_object()) return WrongType("limits", "an object", *object);
  auto overrides = engine::ReadLimitOverrides(*object, "limits.");
  if (!overrides) return std::unexpected(ProblemOf(overrides.error()));
  return std::move(*overrides);
}

// files[]: decoded and their names checked (whether they fit the work dir is the gate's to say).
std::expected<std::vector<jail::InputFile>, Problem> ReadFiles(const json& body, size_t max_files) {
  std::vector<jail::InputFile> inputs;
  const json* files = Optional(body, "files");
  if (files == nullptr) return inputs;
  if (!files->is_array()) return WrongType("files", "an array", *files);
  if (files->size() > max_files) {
    return Refuse(422, "limit-exceeded", "Limit exceeded",
                  "'files' holds " + std::to_string(files->size()) +
                      " files, above this server's maximum of " + std::to_string(max_files),
                  {{"limit", "files"}, {"requested", files->size()}, {"maximum", max_files}});
  }
  std::set<std::string> names;
  for (size_t i = 0; i < files->size(); ++i) {
    const json& file = (*files)[i];
    std::string at = "files[" + std::to_string(i) + "]";
    if (!file.is_object()) return WrongType(at, "an object", file);
    for (const auto& item : file.items()) {
      if (item.key() != "name" && item.key() != "content_base64") {
        return UnknownField(at + "." + item.key(), "name, content_base64");
      }
    }
    auto name_it = file.find("name");
    if (name_it == file.end()) return MissingField(at + ".name");
    if (!name_it->is_string()) return WrongType(at + ".name", "a string", *name_it);
    auto content_it = file.find("content_base64");
    if (content_it == file.end()) return MissingField(at + ".content_base64");
    if (!content_it->is_string()) return WrongType(at + ".content_base64", "a string", *content_it);

    auto name = ValidateFilePath(name_it->get<std::string>());
    if (!name) {
      Problem p = std::move(name.error());
      p.detail = at + ".name: " + p.detail;
      p.extra["field"] = at + ".name";
      return std::unexpected(std::move(p));
    }
    if (names.contains(*name)) {
      return Refuse(400, "duplicate-file", "Duplicate file",
                    at + ".name: " + Quoted(*name) + " is given twice", {{"field", at + ".name"}});
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
    auto content = Base64Decode(content_it->get_ref<const std::string&>());
    if (!content) {
      return Refuse(400, "invalid-base64", "Invalid base64",
                    "'" + at +
                        ".content_base64' is not valid base64 (standard alphabet, with padding, no "
                        "whitespace or line breaks)",
                    {{"field", at + ".content_base64"}});
    }
    names.insert(*name);
    inputs.push_back({.name = std::move(*name), .content = std::move(*content)});
  }
  return inputs;
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

// "packages": an array of strings (their form is the gate's to check: runtime::CheckPackageNames).
std::expected<std::vector<std::string>, Problem> ReadPackages(const json& doc) {
  std::vector<std::string> names;
  auto it = doc.find("packages");
  if (it == doc.end() || it->is_null()) return names;
  if (!it->is_array()) return WrongType("packages", "an array of strings", *it);
  for (size_t i = 0; i < it->size(); ++i) {
    const json& name = (*it)[i];
    if (!name.is_string()) return WrongType("packages[" + std::to_string(i) + "]", "a string", name);
    names.push_back(name.get<std::string>());
  }
  return names;
}

std::expected<engine::ExecutionRequest, Problem> ParseExecuteBody(std::string_view body,
                                                                  bool allow_session_id, size_t max_files) {
  auto doc = ParseJsonObject(body);
  if (!doc) return std::unexpected(std::move(doc.error()));
  const std::string allowed =
      allow_session_id
          ? Join({"code", "stdin", "files", "limits", "policy", "filename", "packages", "session_id"})
          : Join({"code", "stdin", "files", "limits", "policy", "filename", "packages"});
  for (const auto& item : doc->items()) {
    const std::string& k = item.key();
    if (k == "code" || k == "stdin" || k == "files" || k == "limits" || k == "policy" || k == "filename" ||
        k == "packages")
      continue;
    if (k == "session_id" && allow_session_id) continue;
    return UnknownField(k, allowed, k == "session_id" ? "; the session is the one named in the path" : "");
  }

  engine::ExecutionRequest call;
  runtime::PythonProgram& p = call.program;
  p.mode = runtime::Mode::kRun;
  p.collect_files = true;  // as `execbox run --json`: the files come back in the result

  auto code = ReadCode(*doc);
  if (!code) return std::unexpected(std::move(code.error()));
  p.code = std::move(*code);

  auto stdin_data = OptionalString(*doc, "stdin", "stdin");
  if (!stdin_data) return std::unexpected(std::move(stdin_data.error()));
  if (*stdin_data) p.stdin_data = std::move(**stdin_data);

  auto policy = ReadPolicy(*doc);
  if (!policy) return std::unexpected(std::move(policy.error()));
  p.policy = std::move(*policy);

  // The name tracebacks give the code (`execbox run script.py` sends "script.py"): one line.
  auto filename = OptionalString(*doc, "filename", "filename");
  if (!filename) return std::unexpected(std::move(filename.error()));
  if (*filename) {
    const std::string& name = **filename;
    if (name.empty() || name.size() > kMaxPathBytes ||
        name.find_first_of(std::string("\n\r\0", 3)) != std::string::npos)
      return InvalidValue("filename", "must be one line of 1 to " + std::to_string(kMaxPathBytes) + " bytes");
    p.display_name = name;
  }

  auto limits = ReadLimits(*doc);
  if (!limits) return std::unexpected(std::move(limits.error()));
  call.limits = std::move(*limits);

  auto inputs = ReadFiles(*doc, max_files);
  if (!inputs) return std::unexpected(std::move(inputs.error()));
  p.inputs = std::move(*inputs);

  auto packages = ReadPackages(*doc);
  if (!packages) return std::unexpected(std::move(packages.error()));
  p.packages = std::move(*packages);

  if (allow_session_id) {
    auto id = OptionalString(*doc, "session_id", "session_id");
    if (!id) return std::unexpected(std::move(id.error()));
    if (*id) {
      if ((*id)->empty()) return InvalidValue("session_id", "must not be empty");
      call.session_id = std::move(**id);
    }
  }
  return call;
}

std::expected<engine::ExecutionRequest, Problem> ParseCheckBody(std::string_view body) {
  auto doc = ParseJsonObject(body);
  if (!doc) return std::unexpected(std::move(doc.error()));
  for (const auto& item : doc->items()) {
    if (item.key() != "code" && item.key() != "policy") return UnknownField(item.key(), "code, policy");
  }
  engine::ExecutionRequest call;
  runtime::PythonProgram& p = call.program;
  p.mode = runtime::Mode::kCheck;
  auto code = ReadCode(*doc);
  if (!code) return std::unexpected(std::move(code.error()));
  p.code = std::move(*code);
  auto policy = ReadPolicy(*doc);
  if (!policy) return std::unexpected(std::move(policy.error()));
  p.policy = std::move(*policy);

  p.collect_files = false;  // as `execbox check`: nothing to collect
  return call;
}

std::expected<SessionBody, Problem> ParseSessionBody(std::string_view body) {
  SessionBody out;
  if (body.empty()) return out;
  auto doc = ParseJsonObject(body);
  if (!doc) return std::unexpected(std::move(doc.error()));
  for (const auto& item : doc->items()) {
    if (item.key() == "checkpoint") {
      if (!item.value().is_boolean()) return WrongType("checkpoint", "a boolean", item.value());
      out.checkpoint = item.value().get<bool>();
    } else if (item.key() != "limits" && item.key() != "packages") {
      return UnknownField(item.key(), "limits, checkpoint, packages");
    }
  }
  auto packages = ReadPackages(*doc);
  if (!packages) return std::unexpected(std::move(packages.error()));
  out.packages = std::move(*packages);
  auto limits = ReadLimits(*doc);
  if (!limits) return std::unexpected(std::move(limits.error()));
  out.limits = std::move(*limits);
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
