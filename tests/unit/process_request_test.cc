// The bodies of the session process routes (api/http/process_request.h), read strictly.
#include "api/http/process_request.h"

#include <gtest/gtest.h>

#include <csignal>

namespace execbox::api {
namespace {

TEST(ProcessRequest, AStartTakesACommandOrArgvAndItsOptions) {
  auto command =
      ParseProcessStartBody(R"({"command": "sleep 1", "env": {"A": "b"}, "cwd": "sub", "tag": "t"})");
  ASSERT_TRUE(command.has_value()) << command.error().detail;
  EXPECT_EQ(command->command, "sleep 1");
  EXPECT_EQ(command->env.at("A"), "b");
  EXPECT_EQ(command->cwd, "sub");
  EXPECT_EQ(command->tag, "t");
  EXPECT_FALSE(command->pty);
  auto pty = ParseProcessStartBody(R"({"argv": ["bash"], "pty": true, "rows": 40, "cols": 100})");
  ASSERT_TRUE(pty.has_value()) << pty.error().detail;
  EXPECT_TRUE(pty->pty);
  EXPECT_EQ(pty->rows, 40);
  EXPECT_EQ(pty->cols, 100);
  auto piped = ParseProcessStartBody(R"({"argv": ["cat"], "stdin": true})");
  ASSERT_TRUE(piped.has_value());
  EXPECT_TRUE(piped->stdin);
}

TEST(ProcessRequest, ABadStartIsRefusedNamingTheField) {
  struct Case {
    const char* body;
    const char* type;
  } cases[] = {
      {"{}", "invalid-value"},
      {R"({"command": "x", "argv": ["x"]})", "invalid-value"},
      {R"({"command": "x", "colour": 1})", "unknown-field"},
      {R"({"command": 5})", "wrong-type"},
      {R"({"argv": [1]})", "invalid-value"},
      {R"({"argv": [""]})", "invalid-value"},
      {R"({"command": "x", "env": {"A": 1}})", "invalid-value"},
      {R"({"command": "x", "env": {"A=B": "c"}})", "invalid-value"},
      {R"({"command": "x", "pty": true, "rows": 0})", "invalid-value"},
      {R"({"command": "x", "pty": true, "cols": 4294967296})", "invalid-value"},
      {R"({"command": "x", "pty": true, "cols": 2.5})", "wrong-type"},
      {R"({"command": "x", "rows": 5})", "invalid-value"},
      {R"({"command": "x", "pty": true, "stdin": true})", "invalid-value"},
      {R"({"command": ""})", "invalid-value"},
      {"[]", "invalid-body"},
  };
  for (const auto& c : cases) {
    auto parsed = ParseProcessStartBody(c.body);
    ASSERT_FALSE(parsed.has_value()) << c.body;
    EXPECT_EQ(parsed.error().status, 400) << c.body;
    EXPECT_EQ(parsed.error().type, c.type) << c.body << ": " << parsed.error().detail;
  }
}

TEST(ProcessRequest, InputSignalAndResize) {
  EXPECT_EQ(ParseProcessInputBody(R"({"data": "hi\n"})").value(), "hi\n");
  EXPECT_EQ(ParseProcessInputBody(R"({"data_base64": "AP8="})").value(), std::string("\0\xff", 2));
  EXPECT_EQ(ParseProcessInputBody(R"({})").error().type, "invalid-value");
  EXPECT_EQ(ParseProcessInputBody(R"({"data": "a", "data_base64": "YQ=="})").error().type, "invalid-value");
  EXPECT_EQ(ParseProcessInputBody(R"({"data_base64": "!!"})").error().type, "invalid-base64");
  EXPECT_EQ(ParseProcessSignalBody(R"({"signal": "SIGTERM"})").value(), SIGTERM);
  EXPECT_EQ(ParseProcessSignalBody(R"({"signal": 9})").value(), 9);
  EXPECT_EQ(ParseProcessSignalBody(R"({"signal": "nope"})").error().type, "invalid-value");
  EXPECT_EQ(ParseProcessSignalBody(R"({"signal": 0})").error().type, "invalid-value");
  EXPECT_EQ(ParseProcessSignalBody(R"({})").error().type, "missing-field");
  auto size = ParseProcessResizeBody(R"({"rows": 50, "cols": 120})");
  ASSERT_TRUE(size.has_value());
  EXPECT_EQ(size->rows, 50);
  EXPECT_EQ(ParseProcessResizeBody(R"({"rows": 50})").error().type, "missing-field");
  EXPECT_EQ(ParseProcessResizeBody(R"({"rows": 5000, "cols": 1})").error().type, "invalid-value");
}

}  // namespace
}  // namespace execbox::api
