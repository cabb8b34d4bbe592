// The HTTP body parser, and what the gate makes of what it parsed: the limits a request runs
// with (engine/limit_schema.h) and the refusals of limits and inputs, as HTTP problems.
#include "api/http/execute_request.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <set>

#include "api/http/openapi.h"
#include "api/mcp/mcp_tools.h"
#include "base/base64.h"
#include "base/build_info.h"
#include "lib/test_paths.h"

namespace execbox::api {
namespace {

using nlohmann::json;

constexpr size_t kTestMaxFiles = 4;

engine::LimitsConfig TestConfig() {
  engine::LimitsConfig c;
  c.maxima.wall_time = std::chrono::seconds(300);
  c.maxima.cpu_time = std::chrono::seconds(300);
  c.maxima.memory_bytes = 4096ull << 20;
  c.maxima.max_processes = 256;
  c.maxima.output_bytes = 16ull << 20;
  c.maxima.work_dir_bytes = 1024ull << 20;
  return c;
}

// A cold engine: admitting runs nothing, it only decides.
engine::Engine& ColdEngine() {
  static auto engine = engine::Engine::Create({.warm = false});
  return **engine;
}

// The body through the parser and the gate's admission: the request as it would run, or the
// problem the client gets.
std::expected<engine::ExecutionRequest, Problem> Admit(const std::string& body, bool allow_session_id = true,
                                                       engine::LimitsConfig config = TestConfig(),
                                                       bool check = false) {
  auto r = check ? ParseCheckBody(body) : ParseExecuteBody(body, allow_session_id, kTestMaxFiles);
  if (!r) return std::unexpected(r.error());
  engine::Gate gate(ColdEngine(), {.limits = config, .max_running = 8, .max_queue = 8});
  auto admitted = gate.Admit({.id = "test"}, std::move(*r), {});
  if (!admitted) return std::unexpected(ProblemOf(admitted.error()));
  return admitted->resolved();
}

// The Problem a body gets; fails the test when it is accepted.
Problem ExecuteProblem(const std::string& body, bool allow_session_id = true) {
  auto r = Admit(body, allow_session_id);
  EXPECT_FALSE(r.has_value()) << "accepted: " << body;
  return r.has_value() ? Problem{.status = 0, .type = "accepted"} : r.error();
}

Problem JsonProblem(std::string_view body) {
  auto r = ParseJsonObject(body);
  EXPECT_FALSE(r.has_value()) << "accepted: " << body;
  return r.has_value() ? Problem{.status = 0, .type = "accepted"} : r.error();
}

void ExpectProblem(const Problem& p, int status, const std::string& type, const std::string& in_detail = "") {
  EXPECT_EQ(p.status, status) << p.type << ": " << p.detail;
  EXPECT_EQ(p.type, type) << p.detail;
  EXPECT_FALSE(p.title.empty());
  EXPECT_FALSE(p.detail.empty());
  if (!in_detail.empty()) {
    EXPECT_NE(p.detail.find(in_detail), std::string::npos) << p.detail;
  }
}

std::string Nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// ---- ParseJsonObject ------------------------------------------------------------------------

TEST(ParseJsonObject, AcceptsAnObject) {
  auto r = ParseJsonObject(R"j({"a": [1, 2.5, "x", null, true, {"b": {}}], "é": "日本 🎉"})j");
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  EXPECT_EQ((*r)["a"][1], 2.5);
  EXPECT_EQ((*r)["a"][5]["b"], json::object());
  EXPECT_EQ((*r)["é"], "日本 🎉");
  EXPECT_TRUE(ParseJsonObject("\xEF\xBB\xBF{}").has_value());  // a UTF-8 byte order mark
  EXPECT_TRUE(ParseJsonObject(" \n{ }\n").has_value());
}

TEST(ParseJsonObject, EmptyAndMalformedBodies) {
  ExpectProblem(JsonProblem(""), 400, "malformed-json", "empty");
  ExpectProblem(JsonProblem("{"), 400, "malformed-json", "line 1");
  ExpectProblem(JsonProblem(R"j({"a":})j"), 400, "malformed-json", "column 6");
  ExpectProblem(JsonProblem("{} {}"), 400, "malformed-json");
  ExpectProblem(JsonProblem("{'a': 1}"), 400, "malformed-json");
  ExpectProblem(JsonProblem(R"j({"a": 1,})j"), 400, "malformed-json");
  ExpectProblem(JsonProblem("{\"a\": \"x\ny\"}"), 400, "malformed-json");  // raw control character
  ExpectProblem(JsonProblem(std::string("{\"a\": \"\0\"}", 9)), 400, "malformed-json");
  ExpectProblem(JsonProblem(R"j({"a": 1} // comment)j"), 400, "malformed-json");
  ExpectProblem(JsonProblem(R"j({"a": NaN})j"), 400, "malformed-json");
  // Escapes that name no character: a lone surrogate either way round.
  ExpectProblem(JsonProblem(R"j({"a": "\ud800"})j"), 400, "malformed-json");
  ExpectProblem(JsonProblem(R"j({"a": "\udc00x"})j"), 400, "malformed-json");
  // The parser's own words, without nlohmann's exception tag.
  EXPECT_EQ(JsonProblem("{").detail.find("[json.exception"), std::string::npos);
}

TEST(ParseJsonObject, RefusesInvalidUtf8Anywhere) {
  for (const std::string& bad : std::vector<std::string>{
           std::string("{\"a\": \"\xff\"}"),              // never valid
           std::string("{\"a\": \"\xc0\x80\"}"),          // overlong NUL
           std::string("{\"a\": \"\xe0\x80\xaf\"}"),      // overlong '/'
           std::string("{\"a\": \"\xed\xa0\x80\"}"),      // an encoded surrogate
           std::string("{\"a\": \"\xf4\x90\x80\x80\"}"),  // above U+10FFFF
           std::string("{\"a\": \"\xe6\x97\"}"),          // cut short
           std::string("{\"\xfe\": 1}"),                  // in a key
           std::string("{\"a\": 1}\x80"),                 // outside any string
       }) {
    ExpectProblem(JsonProblem(bad), 400, "invalid-utf8");
  }
  EXPECT_EQ(JsonProblem("{\"ab\": \"\xff\"}").extra["offset"], 8);
  // Every valid sequence length, at the edges of its ranges.
  EXPECT_TRUE(ParseJsonObject("{\"a\": \"\x7f \xc2\x80 \xdf\xbf \xe0\xa0\x80 \xed\x9f\xbf \xee\x80\x80 "
                              "\xf0\x90\x80\x80 \xf4\x8f\xbf\xbf\"}")
                  .has_value());
}

TEST(ParseJsonObject, RefusesDeepNestingBeforeParsing) {
  EXPECT_TRUE(ParseJsonObject("{\"a\": " + Nested(63) + "}").has_value());
  ExpectProblem(JsonProblem("{\"a\": " + Nested(64) + "}"), 400, "too-deep", "64");
  // A million brackets never reach the parser; brackets inside strings do not count.
  ExpectProblem(JsonProblem(std::string(1'000'000, '[')), 400, "too-deep");
  EXPECT_TRUE(ParseJsonObject("{\"a\": \"" + std::string(1000, '[') + "\\\"[[\"}").has_value());
}

TEST(ParseJsonObject, RefusesNonObjects) {
  for (const char* body : {"[]", "1", "\"x\"", "null", "true", "[{}]"}) {
    ExpectProblem(JsonProblem(body), 400, "invalid-body");
  }
  EXPECT_NE(JsonProblem("[]").detail.find("an array"), std::string::npos);
}

TEST(ParseJsonObject, RefusesDuplicateKeys) {
  ExpectProblem(JsonProblem(R"j({"code": "1", "code": "2"})j"), 400, "duplicate-key", "'code'");
  ExpectProblem(JsonProblem(R"j({"a": {"b": 1, "b": 1}})j"), 400, "duplicate-key", "'b'");
  EXPECT_TRUE(ParseJsonObject(R"j({"a": {"b": 1}, "b": {"a": 1}})j").has_value());
}

TEST(ParseJsonObject, RefusesTooManyValues) {
  std::string body = "{\"a\": [0";
  for (int i = 0; i < 100'000; ++i) body += ",0";
  body += "]}";
  ExpectProblem(JsonProblem(body), 413, "too-many-values");
  std::string fine = "{\"a\": [0";
  for (int i = 0; i < 50'000; ++i) fine += ",0";
  fine += "]}";
  EXPECT_TRUE(ParseJsonObject(fine).has_value());
}

// ---- ParseExecuteBody -----------------------------------------------------------------------

TEST(ParseExecuteBody, MinimalBodyTakesTheDefaults) {
  engine::LimitsConfig limits = TestConfig();
  limits.defaults.wall_time = std::chrono::seconds(7);
  auto r = Admit(R"j({"code": "print(1)"})j", true, limits);
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  const runtime::PythonProgram& p = r->program;
  EXPECT_EQ(p.mode, runtime::Mode::kRun);
  EXPECT_EQ(p.code, "print(1)");
  EXPECT_EQ(p.lint_profile, "permissive");
  EXPECT_EQ(p.stdin_data, "");
  EXPECT_TRUE(p.inputs.empty());
  EXPECT_TRUE(p.collect_files);
  EXPECT_EQ(p.limits.wall_time, std::chrono::seconds(7));
  EXPECT_EQ(p.limits.memory_bytes, limits.defaults.memory_bytes);
  EXPECT_EQ(p.limits.work_dir_bytes, limits.defaults.work_dir_bytes);
  EXPECT_FALSE(r->session_id.has_value());
}

TEST(ParseExecuteBody, EveryFieldIsRead) {
  auto with_session = ParseExecuteBody(R"j({"code": "1", "session_id": "s-123"})j", true);
  ASSERT_TRUE(with_session.has_value());
  EXPECT_EQ(with_session->session_id, "s-123");
  json body = {{"code", "x = input()\nx"},
               {"stdin", "hello\n"},
               {"policy", "strict"},
               {"files",
                {{{"name", "data/in.csv"}, {"content_base64", Base64Encode("a,b\n1,2\n")}},
                 {{"name", "empty"}, {"content_base64", ""}}}},
               {"limits",
                {{"timeout_seconds", 2.5},
                 {"cpu_seconds", 1},
                 {"memory_mb", 512},
                 {"max_processes", 8},
                 {"output_bytes", 4096},
                 {"disk_mb", 100}}}};
  auto r = Admit(body.dump());
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  const runtime::PythonProgram& p = r->program;
  EXPECT_EQ(p.code, "x = input()\nx");
  EXPECT_EQ(p.stdin_data, "hello\n");
  EXPECT_EQ(p.lint_profile, "strict");
  ASSERT_EQ(p.inputs.size(), 2u);
  EXPECT_EQ(p.inputs[0].name, "data/in.csv");
  EXPECT_EQ(p.inputs[0].content, "a,b\n1,2\n");
  EXPECT_EQ(p.inputs[1].name, "empty");
  EXPECT_EQ(p.inputs[1].content, "");
  EXPECT_EQ(p.limits.wall_time, std::chrono::milliseconds(2500));
  EXPECT_EQ(p.limits.cpu_time, std::chrono::seconds(1));
  EXPECT_EQ(p.limits.memory_bytes, 512ull << 20);
  EXPECT_EQ(p.limits.max_processes, 8u);
  EXPECT_EQ(p.limits.output_bytes, 4096u);
  EXPECT_EQ(p.limits.work_dir_bytes, 100ull << 20);
  // What a request does not name stays the server's.
  EXPECT_EQ(p.limits.tmp_bytes, jail::Limits{}.tmp_bytes);
  EXPECT_EQ(p.limits.open_files, jail::Limits{}.open_files);
}

TEST(ParseExecuteBody, FilenameIsWhatTracebacksShow) {
  auto named = Admit(R"j({"code": "1", "filename": "/home/me/script.py"})j");
  ASSERT_TRUE(named.has_value()) << named.error().detail;
  EXPECT_EQ(named->program.display_name, "/home/me/script.py");
  auto unnamed = Admit(R"j({"code": "1"})j");
  ASSERT_TRUE(unnamed.has_value());
  EXPECT_EQ(unnamed->program.display_name, "<cell>");
  ExpectProblem(ExecuteProblem(json{{"code", "1"}, {"filename", "a\nb"}}.dump()), 400, "invalid-value",
                "'filename'");
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "filename": ""})j"), 400, "invalid-value", "'filename'");
  ExpectProblem(ExecuteProblem(json{{"code", "1"}, {"filename", std::string(1021, 'a')}}.dump()), 400,
                "invalid-value", "'filename'");
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "filename": 7})j"), 400, "wrong-type", "'filename'");
}

TEST(ParseExecuteBody, GuardIsOffOrAudit) {
  auto guarded = Admit(R"j({"code": "1", "guard": "audit"})j");
  ASSERT_TRUE(guarded.has_value()) << guarded.error().detail;
  EXPECT_EQ(guarded->program.guard, runtime::Guard::kAudit);
  auto plain = Admit(R"j({"code": "1", "guard": "off"})j");
  ASSERT_TRUE(plain.has_value()) << plain.error().detail;
  EXPECT_EQ(plain->program.guard, runtime::Guard::kOff);
  EXPECT_EQ(Admit(R"j({"code": "1"})j")->program.guard, runtime::Guard::kOff);
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "guard": "strict"})j"), 400, "invalid-value", "'guard'");
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "guard": true})j"), 400, "wrong-type", "'guard'");
  // A session's executions have the server's guard: the field is a one-shot's.
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "guard": "audit"})j", /*allow_session_id=*/false), 400,
                "unknown-field", "guard");
}

TEST(ParseExecuteBody, NullIsAbsentForOptionalFields) {
  auto r = Admit(
      R"j({"code": "1", "stdin": null, "files": null, "limits": {"memory_mb": null}, "policy": null, "filename": null, "session_id": null})j");
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  EXPECT_EQ(r->program.lint_profile, "permissive");
  EXPECT_EQ(r->program.display_name, "<cell>");
  EXPECT_FALSE(r->session_id.has_value());
  ExpectProblem(ExecuteProblem(R"j({"code": null})j"), 400, "wrong-type", "'code'");
}

TEST(ParseExecuteBody, CodeIsRequiredAndMustBeAString) {
  ExpectProblem(ExecuteProblem(R"j({})j"), 400, "missing-field", "'code' is required");
  ExpectProblem(ExecuteProblem(R"j({"stdin": "x"})j"), 400, "missing-field", "'code'");
  Problem p = ExecuteProblem(R"j({"code": 5})j");
  ExpectProblem(p, 400, "wrong-type", "'code' must be a string, not 5");
  EXPECT_EQ(p.extra["field"], "code");
  ExpectProblem(ExecuteProblem(R"j({"code": ["print(1)"]})j"), 400, "wrong-type", "not an array");
  ExpectProblem(ExecuteProblem(R"j({"code": "print(1)\u0000"})j"), 400, "invalid-value", "NUL");
  EXPECT_TRUE(Admit(R"j({"code": ""})j", false).has_value());
}

TEST(ParseExecuteBody, UnknownFieldsAnywhereAreNamed) {
  Problem top = ExecuteProblem(R"j({"code": "1", "timeout": 5})j");
  ExpectProblem(top, 400, "unknown-field", "'timeout'");
  EXPECT_EQ(top.extra["field"], "timeout");
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "limits": {"memory": 5}})j"), 400, "unknown-field",
                "'limits.memory'");
  ExpectProblem(
      ExecuteProblem(R"j({"code": "1", "files": [{"name": "a", "content_base64": "", "mode": 1}]})j"), 400,
      "unknown-field", "'files[0].mode'");
  // Unknown fields are found before a missing code is.
  ExpectProblem(ExecuteProblem(R"j({"cod": "1"})j"), 400, "unknown-field", "'cod'");
  // A hostile key is not echoed whole.
  Problem huge = ExecuteProblem("{\"code\": \"1\", \"" + std::string(100'000, 'k') + "\": 1}");
  ExpectProblem(huge, 400, "unknown-field");
  EXPECT_LT(huge.detail.size(), 400u);
}

TEST(ParseExecuteBody, SessionIdOnlyWhereAllowed) {
  auto r = ParseExecuteBody(R"j({"code": "1", "session_id": "abc"})j", true);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->session_id, "abc");
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "session_id": "abc"})j", false), 400, "unknown-field",
                "'session_id'");
  // A session on an engine without sessions: the gate says why.
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "session_id": "abc"})j"), 409, "sessions-unavailable");
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "session_id": 7})j"), 400, "wrong-type", "'session_id'");
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "session_id": ""})j"), 400, "invalid-value", "'session_id'");
}

TEST(ParseExecuteBody, WrongTypesNameTheFieldAndTheType) {
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "stdin": 5})j"), 400, "wrong-type",
                "'stdin' must be a string");
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "policy": true})j"), 400, "wrong-type",
                "'policy' must be a string");
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "files": {}})j"), 400, "wrong-type",
                "'files' must be an array");
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "files": ["a"]})j"), 400, "wrong-type",
                "'files[0]' must be an object");
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "files": [{"name": 1, "content_base64": ""}]})j"), 400,
                "wrong-type", "'files[0].name' must be a string");
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "files": [{"name": "a", "content_base64": null}]})j"), 400,
                "wrong-type", "'files[0].content_base64' must be a string");
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "limits": []})j"), 400, "wrong-type",
                "'limits' must be an object");
  Problem p = ExecuteProblem(R"j({"code": "1", "limits": {"memory_mb": "512"}})j");
  ExpectProblem(p, 400, "wrong-type", "'limits.memory_mb' must be an integer, not a string");
  EXPECT_EQ(p.extra["expected"], "an integer");
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "limits": {"memory_mb": 1.5}})j"), 400, "wrong-type",
                "must be an integer, not 1.5");
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "limits": {"timeout_seconds": "5"}})j"), 400, "wrong-type",
                "'limits.timeout_seconds' must be a number");
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "limits": {"max_processes": true}})j"), 400, "wrong-type",
                "not a boolean");
}

TEST(ParseExecuteBody, MissingFileFields) {
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "files": [{"content_base64": ""}]})j"), 400, "missing-field",
                "'files[0].name' is required");
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "files": [{"name": "a"}]})j"), 400, "missing-field",
                "'files[0].content_base64' is required");
}

TEST(ParseExecuteBody, LimitsAboveTheMaximumAre422) {
  Problem p = ExecuteProblem(R"j({"code": "1", "limits": {"memory_mb": 8192}})j");
  ExpectProblem(p, 422, "limit-exceeded", "'limits.memory_mb' asks for 8192 MiB");
  EXPECT_NE(p.detail.find("4096"), std::string::npos) << p.detail;
  EXPECT_EQ(p.extra, json({{"limit", "memory_mb"}, {"requested", 8192}, {"maximum", 4096}}));

  p = ExecuteProblem(R"j({"code": "1", "limits": {"timeout_seconds": 300.5}})j");
  ExpectProblem(p, 422, "limit-exceeded", "300.5 s");
  EXPECT_EQ(p.extra["maximum"], 300);
  EXPECT_EQ(p.extra["limit"], "timeout_seconds");
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "limits": {"cpu_seconds": 1e300}})j"), 422,
                "limit-exceeded");
  // Past a double's range is not a number nlohmann can hold: the parser refuses it.
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "limits": {"cpu_seconds": 1e400}})j"), 400, "malformed-json",
                "overflow");
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "limits": {"memory_mb": 1e300}})j"), 422, "limit-exceeded");
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "limits": {"max_processes": 257}})j"), 422,
                "limit-exceeded");
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "limits": {"output_bytes": 18446744073709551615}})j"), 422,
                "limit-exceeded");
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "limits": {"output_bytes": 16777217}})j"), 422,
                "limit-exceeded");
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "limits": {"disk_mb": 1025}})j"), 422, "limit-exceeded");
  // Exactly the maximum is fine; so is a whole number written as a float.
  auto r = Admit(
      R"j({"code": "1", "limits": {"timeout_seconds": 300, "memory_mb": 4096.0, "output_bytes": 16777216, "disk_mb": 1024, "max_processes": 256}})j");
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  EXPECT_EQ(r->program.limits.memory_bytes, 4096ull << 20);
  EXPECT_EQ(r->program.limits.output_bytes, 16ull << 20);
}

TEST(ParseExecuteBody, NonPositiveOrTinyLimitsAre400) {
  for (const char* limit :
       {"timeout_seconds", "cpu_seconds", "memory_mb", "max_processes", "output_bytes", "disk_mb"}) {
    for (const char* value : {"0", "-1", "-1e300", "-0.0"}) {
      std::string body = std::string(R"j({"code": "1", "limits": {")j") + limit + "\": " + value + "}}";
      ExpectProblem(ExecuteProblem(body), 400, "invalid-value", std::string("'limits.") + limit + "'");
    }
  }
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "limits": {"memory_mb": 8}})j"), 400, "invalid-value", "16");
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "limits": {"output_bytes": 100}})j"), 400, "invalid-value",
                "1024");
  // A fraction of a millisecond still gets one.
  auto r = Admit(R"j({"code": "1", "limits": {"timeout_seconds": 0.0015}})j");
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  EXPECT_EQ(r->program.limits.wall_time, std::chrono::milliseconds(2));
}

TEST(ParseExecuteBody, UnknownPolicyNamesTheKnownOnes) {
  Problem p = ExecuteProblem(R"j({"code": "1", "policy": "paranoid"})j");
  ExpectProblem(p, 400, "unknown-policy", "'paranoid'");
  for (const auto& name : runtime::LintProfileNames()) {
    EXPECT_NE(p.detail.find(name), std::string::npos) << p.detail;
  }
  EXPECT_EQ(p.extra["known"], json(runtime::LintProfileNames()));
}

TEST(ParseExecuteBody, Files) {
  auto file = [](const std::string& name, const std::string& content) {
    return json{{"name", name}, {"content_base64", Base64Encode(content)}};
  };
  auto body = [](json files) { return json{{"code", "1"}, {"files", std::move(files)}}.dump(); };

  Problem p =
      ExecuteProblem(body({file("a", ""), file("b", ""), file("c", ""), file("d", ""), file("e", "")}));
  ExpectProblem(p, 422, "limit-exceeded", "5 files");
  EXPECT_EQ(p.extra, json({{"limit", "files"}, {"requested", 5}, {"maximum", 4}}));

  ExpectProblem(ExecuteProblem(body({file("a", "1"), file("a", "2")})), 400, "duplicate-file", "'a'");
  ExpectProblem(ExecuteProblem(body({file("a", "1"), file("a/b", "2")})), 400, "duplicate-file", "files[1]");
  ExpectProblem(ExecuteProblem(body({file("a/b/c", "1"), file("a/b", "2")})), 400, "duplicate-file",
                "files[1]");
  EXPECT_TRUE(
      Admit(body({file("a/b", "1"), file("a/c", "2"), file("ab", "3"), file("a.b", "")})).has_value());

  for (const char* bad : {"../x", "/etc/passwd", "a/../../b", "a//b", "a/", "", ".", "x/./y"}) {
    Problem q = ExecuteProblem(body({file(bad, "")}));
    ExpectProblem(q, 400, "invalid-path", "files[0].name");
    EXPECT_EQ(q.extra["field"], "files[0].name");
  }
  ExpectProblem(ExecuteProblem(R"j({"code": "1", "files": [{"name": "a\u0000b", "content_base64": ""}]})j"),
                400, "invalid-path", "NUL");

  for (const char* bad : {"TWE", "TW!u", "TWE=\n", " TWFu", "TWFu===="}) {
    json f = {{"name", "a"}, {"content_base64", bad}};
    ExpectProblem(ExecuteProblem(body({f})), 400, "invalid-base64", "files[0].content_base64");
  }

  // Binary content survives.
  std::string binary("\x00\xff\x80 \x89PNG", 8);
  auto r = Admit(body({file("bin", binary)}));
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  EXPECT_EQ(r->program.inputs[0].content, binary);
}

TEST(ParseExecuteBody, FilesLargerThanTheWorkDirAre413) {
  json body = {{"code", "1"},
               {"limits", {{"disk_mb", 1}}},
               {"files",
                {{{"name", "a"}, {"content_base64", Base64Encode(std::string(600'000, 'x'))}},
                 {{"name", "b"}, {"content_base64", Base64Encode(std::string(600'000, 'y'))}}}}};
  Problem p = ExecuteProblem(body.dump());
  ExpectProblem(p, 413, "inputs-too-large", "1200000 bytes");
  EXPECT_NE(p.detail.find("disk_mb"), std::string::npos) << p.detail;
  body["limits"]["disk_mb"] = 2;
  EXPECT_TRUE(Admit(body.dump()).has_value());
}

TEST(ParseExecuteBody, BodyProblemsComeFirst) {
  ExpectProblem(ExecuteProblem(""), 400, "malformed-json");
  ExpectProblem(ExecuteProblem("[]"), 400, "invalid-body");
  ExpectProblem(ExecuteProblem("{\"code\": \"\xff\"}"), 400, "invalid-utf8");
}

// ---- ParseCheckBody -------------------------------------------------------------------------

TEST(ParseCheckBody, CodeAndPolicyOnly) {
  engine::LimitsConfig limits = TestConfig();
  limits.defaults.wall_time = std::chrono::seconds(60);
  auto r = Admit(R"j({"code": "def f(:", "policy": "strict"})j", false, limits, /*check=*/true);
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  EXPECT_EQ(r->program.mode, runtime::Mode::kCheck);
  EXPECT_EQ(r->program.code, "def f(:");
  EXPECT_EQ(r->program.lint_profile, "strict");
  EXPECT_FALSE(r->program.collect_files);
  EXPECT_EQ(r->program.limits.wall_time, std::chrono::seconds(10)) << "a check never needs more";
  EXPECT_EQ(ParseCheckBody(R"j({"code": "1"})j")->program.lint_profile, "permissive");

  auto problem = [&](const std::string& body) {
    auto c = ParseCheckBody(body);
    EXPECT_FALSE(c.has_value()) << body;
    return c.has_value() ? Problem{} : c.error();
  };
  ExpectProblem(problem(R"j({"code": "1", "stdin": ""})j"), 400, "unknown-field", "'stdin'");
  ExpectProblem(problem(R"j({"code": "1", "limits": {}})j"), 400, "unknown-field", "'limits'");
  ExpectProblem(problem(R"j({"policy": "strict"})j"), 400, "missing-field", "'code'");
  ExpectProblem(problem(R"j({"code": "1", "policy": "nope"})j"), 400, "unknown-policy");
  ExpectProblem(problem(R"j({"code": 1})j"), 400, "wrong-type");
  ExpectProblem(problem("{"), 400, "malformed-json");
}

// ---- ValidateFilePath -----------------------------------------------------------------------

TEST(ValidateFilePath, AcceptsRelativePaths) {
  for (const std::string& good : std::vector<std::string>{
           "a", "a.txt", "dir/sub/file.csv", ".hidden", "..x", "x..", "a b", "日本.txt", "back\\slash", "...",
           std::string(255, 'n'), std::string(255, 'n') + "/" + std::string(255, 'm')}) {
    auto r = ValidateFilePath(good);
    ASSERT_TRUE(r.has_value()) << good << ": " << r.error().detail;
    EXPECT_EQ(*r, good);
  }
}

TEST(ValidateFilePath, RefusesWhatTheJailWould) {
  for (const std::string& bad : std::vector<std::string>{
           std::string(), std::string("/abs"), std::string("/"), std::string(".."), std::string("../a"),
           std::string("a/.."), std::string("a/./b"), std::string("a//b"), std::string("a/"),
           std::string("./a"), std::string("a\nb"), std::string("a\tb"), std::string("a\x7f"),
           std::string("a\0b", 3), std::string("\xff.txt"), std::string("\xc0\xae\xc0\xae/x"),
           std::string(256, 'n'),
           std::string(255, 'a') + "/" + std::string(255, 'b') + "/" + std::string(255, 'c') + "/" +
               std::string(255, 'd')}) {
    auto r = ValidateFilePath(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    ExpectProblem(r.error(), 400, "invalid-path");
  }
}

// ---- The OpenAPI document -------------------------------------------------------------------

json Document() {
  json doc = json::parse(OpenApiDocument(engine::LimitsConfig{}), nullptr, false);
  EXPECT_FALSE(doc.is_discarded()) << "the OpenAPI document is not valid JSON";
  return doc;
}

TEST(OpenApiDocument, IsOpenApi31WithEveryRoute) {
  json doc = Document();
  EXPECT_EQ(doc["openapi"], "3.1.0");
  EXPECT_EQ(doc["jsonSchemaDialect"], "https://json-schema.org/draft/2020-12/schema");
  EXPECT_TRUE(doc["info"].contains("title"));
  EXPECT_EQ(doc["info"]["version"], kVersion) << "the release, from CMakeLists.txt";
  const std::vector<std::pair<std::string, std::vector<std::string>>> routes = {
      {"/v1/execute", {"post"}},
      {"/v1/check", {"post"}},
      {"/v1/packages", {"get"}},
      {"/v1/sessions", {"post", "get"}},
      {"/v1/sessions/{id}", {"get", "delete"}},
      {"/v1/sessions/{id}/execute", {"post"}},
      {"/v1/sessions/{id}/fork", {"post"}},
      {"/v1/sessions/{id}/files/{path}", {"put", "get"}},
      {"/v1/sessions/{id}/undo", {"post"}},
      {"/v1/sessions/{id}/pause", {"post"}},
      {"/v1/sessions/{id}/resume", {"post"}},
      {"/v1/sessions/{id}/snapshot", {"get"}},
      {"/v1/sessions/import", {"post"}},
      {"/v1/sessions/{id}/processes", {"post", "get"}},
      {"/v1/sessions/{id}/processes/{pid}", {"get"}},
      {"/v1/sessions/{id}/processes/{pid}/output", {"get"}},
      {"/v1/sessions/{id}/processes/{pid}/input", {"post"}},
      {"/v1/sessions/{id}/processes/{pid}/close-stdin", {"post"}},
      {"/v1/sessions/{id}/processes/{pid}/signal", {"post"}},
      {"/v1/sessions/{id}/processes/{pid}/resize", {"post"}},
      {"/v1/openapi.json", {"get"}},
      {"/livez", {"get"}},
      {"/readyz", {"get"}},
      {"/metrics", {"get"}},
      {"/mcp", {"post", "delete", "get"}},
  };
  for (const auto& [path, methods] : routes) {
    ASSERT_TRUE(doc["paths"].contains(path)) << path;
    for (const auto& m : methods) {
      ASSERT_TRUE(doc["paths"][path].contains(m)) << m << " " << path;
      const json& op = doc["paths"][path][m];
      EXPECT_TRUE(op.contains("operationId")) << m << " " << path;
      EXPECT_TRUE(op.contains("responses")) << m << " " << path;
    }
  }
  EXPECT_EQ(doc["paths"].size(), routes.size());
  for (const char* schema : {"Result", "Problem", "ExecuteRequest", "Limits", "InputFile", "SessionInfo",
                             "ProcessStartRequest", "ProcessInfo", "ProcessOutput", "Signal"}) {
    EXPECT_TRUE(doc["components"]["schemas"].contains(schema)) << schema;
  }
}

TEST(OpenApiDocument, BearerAuthEverywhereButTheProbes) {
  json doc = Document();
  EXPECT_EQ(doc["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
  EXPECT_EQ(doc["security"], json::parse(R"j([{"bearer": []}])j"));
  for (const auto& [path, item] : doc["paths"].items()) {
    for (const auto& [method, op] : item.items()) {
      if (method == "parameters") continue;
      bool is_public = path == "/livez" || path == "/readyz";
      EXPECT_EQ(op.contains("security") && op["security"].empty(), is_public) << method << " " << path;
      if (!is_public) {
        EXPECT_TRUE(op["responses"].contains("401")) << method << " " << path;
      }
    }
  }
}

TEST(OpenApiDocument, EveryRefResolvesAndOperationIdsAreUnique) {
  json doc = Document();
  std::set<std::string> ids;
  std::function<void(const json&)> walk = [&](const json& j) {
    if (j.is_object()) {
      if (auto ref = j.find("$ref"); ref != j.end() && ref->is_string()) {
        std::string target = ref->get<std::string>();
        ASSERT_TRUE(target.starts_with("#/")) << target;
        EXPECT_TRUE(doc.contains(json::json_pointer(target.substr(1)))) << target;
      }
      for (const auto& [k, v] : j.items()) walk(v);
    } else if (j.is_array()) {
      for (const auto& v : j) walk(v);
    }
  };
  walk(doc);
  for (const auto& [path, item] : doc["paths"].items()) {
    for (const auto& [method, op] : item.items()) {
      if (op.contains("operationId")) {
        EXPECT_TRUE(ids.insert(op["operationId"]).second) << op["operationId"];
      }
    }
  }
}

TEST(OpenApiDocument, RequestSchemasMatchTheParser) {
  json schemas = Document()["components"]["schemas"];
  auto keys = [](const json& object) {
    std::set<std::string> out;
    for (const auto& [k, v] : object.items()) out.insert(k);
    return out;
  };
  EXPECT_EQ(keys(schemas["ExecuteRequest"]["properties"]),
            (std::set<std::string>{"code", "stdin", "files", "limits", "policy", "filename", "packages",
                                   "session_id", "network", "analyzers", "lint", "guard"}));
  EXPECT_EQ(schemas["ExecuteRequest"]["additionalProperties"], false);
  EXPECT_EQ(keys(schemas["Limits"]["properties"]),
            (std::set<std::string>{"timeout_seconds", "cpu_seconds", "memory_mb", "max_processes",
                                   "output_bytes", "disk_mb"}));
  EXPECT_EQ(schemas["Limits"]["additionalProperties"], false);
  EXPECT_EQ(keys(schemas["InputFile"]["properties"]), (std::set<std::string>{"name", "content_base64"}));
  EXPECT_EQ(keys(schemas["CheckRequest"]["properties"]),
            (std::set<std::string>{"code", "policy", "analyzers", "lint"}));
  EXPECT_EQ(keys(schemas["Lint"]["properties"]), (std::set<std::string>{"block"}));
  std::set<std::string> policies;
  for (const auto& p : schemas["Policy"]["enum"]) policies.insert(p.get<std::string>());
  auto known = runtime::LintProfileNames();
  EXPECT_EQ(policies, std::set<std::string>(known.begin(), known.end()));
}

TEST(OpenApiDocument, TheCheckedInLimitsAreTheSchemasDefaults) {
  // The served document writes these from the limit schema; the file must already say so.
  json checked_in = json::parse(std::ifstream(std::string(test::kSourceDir) + "/docs/openapi.json"));
  const json& schemas = checked_in["components"]["schemas"];
  EXPECT_EQ(schemas["Limits"], OpenApiLimitsSchema(engine::LimitsConfig{}))
      << "write " << OpenApiLimitsSchema(engine::LimitsConfig{}).dump(2);
  EXPECT_EQ(schemas["Result"]["properties"]["limits"], OpenApiResultLimitsSchema())
      << "write " << OpenApiResultLimitsSchema().dump(2);
}

TEST(OpenApiDocument, ServedWithTheServersOwnDefaultsAndMaxima) {
  engine::LimitsConfig config;
  config.defaults.memory_bytes = 200ull << 20;
  config.maxima.wall_time = std::chrono::seconds(90);
  json doc = json::parse(OpenApiDocument(config));
  const json& limits = doc["components"]["schemas"]["Limits"]["properties"];
  EXPECT_EQ(limits["memory_mb"]["default"], 200);
  EXPECT_EQ(limits["timeout_seconds"]["maximum"], 90);
  for (const auto& spec : engine::LimitTable()) {
    const std::string name(spec.name);
    ASSERT_TRUE(limits.contains(name)) << name;
    EXPECT_EQ(limits[name]["minimum"], engine::LimitJsonSchema(spec, config)["minimum"]) << name;
  }
}

TEST(McpToolSchemas, TakeEveryLimitWithTheServersValues) {
  engine::LimitsConfig config;
  config.defaults.wall_time = std::chrono::seconds(12);
  config.maxima.memory_bytes = 600ull << 20;
  json tools = ToolDefinitions(config);
  json execute, create;
  for (const auto& t : tools) {
    if (t["name"] == "execute_python") execute = t["inputSchema"]["properties"];
    if (t["name"] == "create_session") create = t["inputSchema"]["properties"];
  }
  json names = json::array();
  for (const auto& t : tools) names.push_back(t["name"]);
  EXPECT_EQ(names, json({"execute_python", "check_python", "create_session", "fork_session", "pause_session",
                         "resume_session", "close_session"}));
  ASSERT_TRUE(execute.is_object());
  for (const auto& spec : engine::LimitTable()) {
    const std::string name(spec.name);
    EXPECT_EQ(execute[name], engine::LimitJsonSchema(spec, config)) << name;
    EXPECT_EQ(create[name], engine::LimitJsonSchema(spec, config)) << name;
  }
  EXPECT_EQ(execute["timeout_seconds"]["default"], 12);
  EXPECT_EQ(execute["memory_mb"]["maximum"], 600);
  // And the arguments parse as the schema says, refusals named for the model.
  auto parsed = ParseExecuteArguments({{"code", "1"}, {"timeout_seconds", 5}, {"memory_mb", 300}});
  ASSERT_TRUE(parsed.has_value()) << parsed.error().detail;
  EXPECT_EQ(parsed->limits.size(), 2u);
  auto bad = ParseExecuteArguments({{"code", "1"}, {"memory_mb", "lots"}});
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().detail.find("'memory_mb' must be an integer"), std::string::npos)
      << bad.error().detail;
  EXPECT_FALSE(ParseExecuteArguments({{"code", "1"}, {"gpu", 1}}).has_value());
  // network: the same shape and reader as /v1/execute's.
  auto net = ParseExecuteArguments(
      {{"code", "1"}, {"network", {{"allow", {"*.example.test:443"}}, {"deny", {"x.example.test"}}}}});
  ASSERT_TRUE(net.has_value()) << net.error().detail;
  ASSERT_TRUE(net->network.has_value());
  EXPECT_EQ(net->network->allow.size(), 1u);
  EXPECT_EQ(net->network->deny.size(), 1u);
  for (json value : {json{{"allow", {"value name"}}}, json{{"allow", "a.test"}}, json{{"other", json::array()}},
                   json("a.test")}) {
    auto refused = ParseExecuteArguments({{"code", "1"}, {"network", value}});
    ASSERT_FALSE(refused.has_value()) << value.dump();
    EXPECT_EQ(refused.error().type, "invalid-arguments");
    EXPECT_NE(refused.error().detail.find("network"), std::string::npos) << refused.error().detail;
  }
  EXPECT_FALSE(ParseExecuteArguments({{"timeout_seconds", 1}}).has_value());
}

TEST(OpenApiDocument, ResultSchemaNamesEveryStatus) {
  json result = Document()["components"]["schemas"]["Result"];
  std::set<std::string> statuses;
  for (const auto& s : result["properties"]["status"]["enum"]) statuses.insert(s.get<std::string>());
  EXPECT_EQ(statuses, (std::set<std::string>{"ok", "error", "syntax_error", "policy_violation", "timeout",
                                             "memory_limit", "output_limit", "killed", "internal_error"}));
}

}  // namespace
}  // namespace execbox::api

namespace execbox::api {
namespace {

TEST(McpToolSchemas, OfferPackagesOnlyWithAWheelhouse) {
  engine::LimitsConfig config;
  auto execute_tool = [&](const std::optional<std::vector<std::string>>& wheelhouse) {
    for (const auto& t : ToolDefinitions(config, {"numpy"}, wheelhouse))
      if (t["name"] == "execute_python") return t;
    return json();
  };
  EXPECT_FALSE(execute_tool(std::nullopt)["inputSchema"]["properties"].contains("packages"));
  json with = execute_tool(std::vector<std::string>{"polars", "tqdm"});
  EXPECT_EQ(with["inputSchema"]["properties"]["packages"]["items"]["type"], "string");
  EXPECT_NE(with["description"].get<std::string>().find("The wheelhouse has: polars, tqdm."),
            std::string::npos);
  auto parsed = ParseExecuteArguments(json{{"code", "import x"}, {"packages", {"x==1.0", "y"}}});
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->program.packages, (std::vector<std::string>{"x==1.0", "y"}));
  EXPECT_FALSE(ParseExecuteArguments(json{{"code", ""}, {"packages", "x"}}));
  EXPECT_FALSE(ParseExecuteArguments(json{{"code", ""}, {"packages", {1}}}));
}

TEST(McpToolSchemas, ARefusalCarriesHttpsProblemAsStructuredContent) {
  engine::Refusal refusal =
      engine::OverCap(engine::RefusalReason::kKeySessions, "k", "max_sessions", 2, 2, "sessions open");
  json result = RefusalToolResult(refusal);
  EXPECT_TRUE(result["isError"].get<bool>());
  const json& problem = result["structuredContent"];
  EXPECT_EQ(problem["type"], "urn:execbox:problem:key-sessions");
  EXPECT_EQ(problem["status"], 429);
  EXPECT_EQ(problem["title"], refusal.title);
  EXPECT_EQ(problem["detail"], refusal.detail);
  EXPECT_EQ(problem["cap"], "max_sessions");
  EXPECT_EQ(problem["limit"], 2);
  EXPECT_EQ(result["content"][0]["text"].get<std::string>().rfind("[execbox] refused (key-sessions): ", 0),
            0u);
}

TEST(McpToolSchemas, CreateSessionTakesPackagesBesideItsLimits) {
  engine::LimitsConfig config;
  auto create_tool = [&](const std::optional<std::vector<std::string>>& wheelhouse) {
    for (const auto& t : ToolDefinitions(config, {}, wheelhouse))
      if (t["name"] == "create_session") return t;
    return json();
  };
  EXPECT_FALSE(create_tool(std::nullopt)["inputSchema"]["properties"].contains("packages"));
  json with = create_tool(std::vector<std::string>{"polars"});
  EXPECT_EQ(with["inputSchema"]["properties"]["packages"]["maxItems"], runtime::kMaxPackages);
  // The answer's schema, or a refusal's problem (RefusalToolResult's structuredContent).
  EXPECT_EQ(with["outputSchema"]["type"], "object");
  ASSERT_EQ(with["outputSchema"]["anyOf"].size(), 2u);
  EXPECT_TRUE(with["outputSchema"]["anyOf"][0]["properties"].contains("installed"));
  EXPECT_EQ(with["outputSchema"]["anyOf"][1]["required"], (json{"type", "title", "status", "detail"}));
  auto parsed = ParseCreateSessionArguments(json{{"packages", {"x==1.0"}}, {"memory_mb", 300}});
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->packages, (std::vector<std::string>{"x==1.0"}));
  ASSERT_EQ(parsed->limits.size(), 1u);
  EXPECT_EQ(parsed->limits[0].spec->name, "memory_mb");
  auto none = ParseCreateSessionArguments(json{{"packages", nullptr}});
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->packages.empty());
  EXPECT_TRUE(none->limits.empty());
  EXPECT_FALSE(ParseCreateSessionArguments(json{{"packages", "x"}}));
  EXPECT_FALSE(ParseCreateSessionArguments(json{{"packages", {1}}}));
  auto unknown = ParseCreateSessionArguments(json{{"gpu", 1}});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().type, "unknown-field");
}

}  // namespace
}  // namespace execbox::api

namespace execbox::api {
namespace {

TEST(ExecuteBody, NetworkIsParsedAndBadEntriesNamed) {
  auto ok = ParseExecuteBody(R"({"code":"1","network":{"allow":["*.example.test:443","10.0.0.0/8"],"deny":["x.example.test"]}})",
                             true);
  ASSERT_TRUE(ok.has_value());
  ASSERT_TRUE(ok->network.has_value());
  EXPECT_EQ(ok->network->allow.size(), 2u);
  EXPECT_EQ(ok->network->deny.size(), 1u);
  auto none = ParseExecuteBody(R"({"code":"1"})", true);
  ASSERT_TRUE(none.has_value());
  EXPECT_FALSE(none->network.has_value());
  for (const char* body : {R"({"code":"1","network":{"allow":["bad name"]}})",
                           R"({"code":"1","network":{"allow":"a.test"}})",
                           R"({"code":"1","network":{"allow":[1]}})",
                           R"({"code":"1","network":{"other":[]}})"}) {
    auto bad = ParseExecuteBody(body, true);
    ASSERT_FALSE(bad.has_value()) << body;
    EXPECT_EQ(bad.error().status, 400) << body;
  }
  auto named = ParseExecuteBody(R"({"code":"1","network":{"allow":["ok.test","10.0.0.1/8"]}})", true);
  ASSERT_FALSE(named.has_value());
  EXPECT_NE(named.error().detail.find("10.0.0.1/8"), std::string::npos) << named.error().detail;
  // A session's execution cannot ask for a network (its session's is the one it was created
  // with): the field is unknown on that route.
  auto in_session = ParseExecuteBody(R"({"code":"1","network":{"allow":["a.test"]}})", false);
  ASSERT_FALSE(in_session.has_value());
}

}  // namespace
}  // namespace execbox::api
