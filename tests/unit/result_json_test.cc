// A Result read back from its JSON (what `execbox run` does with a local server's answer): every
// field a client renders survives the round trip, and a malformed answer is an error that says
// what is wrong, never a crash or a made-up result.
#include "engine/result_json.h"

#include <gtest/gtest.h>

#include "base/base64.h"

namespace execbox::engine {
namespace {

using nlohmann::json;

Result Everything() {
  Result r;
  r.status = Status::kError;
  r.exit_code = 1;
  r.signal = 9;
  r.stdout_text = {.text = "out\n", .truncated = true, .total_bytes = 100, .dropped_bytes = 96};
  r.stderr_text = {.text = "err\n", .truncated = false, .total_bytes = 4, .dropped_bytes = 0};
  r.streams = {{"stdout", "out\n"}, {"stderr", "err\n"}};
  r.streams_truncated = true;
  r.result = json{{"data", {{"text/plain", "42"}}}, {"metadata", json::object()}};
  r.display = {json{{"data", {{"image/png", Base64Encode("png")}}}, {"metadata", {{"width", 4}}}}};
  r.error = ErrorInfo{.ename = "SyntaxError",
                      .evalue = "bad",
                      .traceback = {"Traceback", "SyntaxError: bad"},
                      .line = 3,
                      .column = 7,
                      .text = "x = (1,"};
  r.findings = {
      {.rule = "R1", .severity = "warning", .line = 2, .column = 1, .message = "m", .suggestion = "s"}};
  r.usage = {.setup_ms = 1, .wall_ms = 2, .cpu_ms = 3, .peak_memory_bytes = 4, .pids_peak = 0};
  r.files = {
      {.name = "a/b.bin", .mime_type = "application/octet-stream", .content = std::string("\0\xff", 2)}};
  r.skipped_files = {"big.bin: larger than the limit"};
  r.engine = "warm";
  r.session = SessionState{.id = "s_1", .generation = 2, .preserved = false, .lost_reason = "timeout"};
  return r;
}

// The JSON without what ResultFromJson does not read back.
json Rendered(const Result& r) {
  json j = ToJson(r);
  j.erase("limits");
  j.erase("isolation");
  return j;
}

TEST(ResultFromJson, EveryRenderedFieldSurvivesTheRoundTrip) {
  const Result r = Everything();
  auto back = ResultFromJson(ToJson(r));
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(Rendered(*back), Rendered(r));
  EXPECT_EQ(back->stdout_text.dropped_bytes, 96u);
  EXPECT_EQ(back->files[0].content, std::string("\0\xff", 2));
  EXPECT_EQ(ProcessExitCode(*back), ProcessExitCode(r));

  Result plain;  // ok, nothing optional
  auto plain_back = ResultFromJson(ToJson(plain));
  ASSERT_TRUE(plain_back.has_value()) << plain_back.error().message;
  EXPECT_EQ(Rendered(*plain_back), Rendered(plain));
  EXPECT_FALSE(plain_back->error.has_value());
  EXPECT_FALSE(plain_back->session.has_value());
}

TEST(ResultFromJson, MalformedAnswersAreErrors) {
  const json good = ToJson(Everything());
  EXPECT_FALSE(ResultFromJson(json::array()).has_value());
  auto without = [&](const char* key) {
    json j = good;
    j.erase(key);
    return ResultFromJson(j);
  };
  for (const char* key : {"status", "exit_code", "stdout", "stderr_truncated", "streams", "display", "error",
                          "findings", "usage", "files", "skipped_files"}) {
    auto r = without(key);
    ASSERT_FALSE(r.has_value()) << key;
    EXPECT_NE(r.error().message.find(key), std::string::npos) << r.error().message;
  }
  json unknown = good;
  unknown["status"] = "exploded";
  auto u = ResultFromJson(unknown);
  ASSERT_FALSE(u.has_value());
  EXPECT_NE(u.error().message.find("exploded"), std::string::npos);
  json wrong = good;
  wrong["exit_code"] = "one";
  EXPECT_FALSE(ResultFromJson(wrong).has_value());
  json not_base64 = good;
  not_base64["files"][0]["content_base64"] = "%%%";
  EXPECT_FALSE(ResultFromJson(not_base64).has_value());
}

}  // namespace
}  // namespace execbox::engine
