// envd's process.Process requests as the session's process table takes them
// (api/e2b/e2b_process_request.h): what the SDKs send, and malformed requests refused as
// invalid_argument before anything runs.
#include "api/e2b/e2b_process_request.h"

#include <gtest/gtest.h>

namespace execbox::api::e2b {
namespace {

using nlohmann::json;

TEST(E2bProcessRequest, CommandsRunIsTheTablesShellCommand) {
  // commands.run('ls -la', {envs, cwd}) as the SDKs send it.
  const json start = {{"process",
                       {{"cmd", "/bin/bash"},
                        {"args", {"-l", "-c", "ls -la"}},
                        {"envs", {{"A", "1"}}},
                        {"cwd", "/work/sub"}}},
                      {"stdin", false}};
  auto s = StartSpecOf(start, {{"A", "sandbox"}, {"B", "2"}});
  ASSERT_TRUE(s.has_value()) << s.error().message;
  EXPECT_EQ(s->spec.command, "ls -la");
  EXPECT_TRUE(s->spec.argv.empty());
  EXPECT_EQ(s->spec.env, (std::map<std::string, std::string>{{"A", "1"}, {"B", "2"}}));
  EXPECT_EQ(s->spec.cwd, "/home/user/sub");
  EXPECT_FALSE(s->spec.stdin);
  EXPECT_FALSE(s->spec.pty);
  // List gives back what was sent, not what the sandbox added.
  EXPECT_EQ(s->config, (json{{"cmd", "/bin/bash"},
                             {"args", {"-l", "-c", "ls -la"}},
                             {"envs", {{"A", "1"}}},
                             {"cwd", "/work/sub"}}));
}

TEST(E2bProcessRequest, APtyAndAnyOtherProgram) {
  // pty.create({rows, cols}) starts an interactive login bash; no stdin field: open.
  const json start = {{"process", {{"cmd", "/bin/bash"}, {"args", {"-i", "-l"}}}},
                      {"pty", {{"size", {{"cols", 100}, {"rows", 30}}}}},
                      {"tag", "term"}};
  auto s = StartSpecOf(start, {});
  ASSERT_TRUE(s.has_value()) << s.error().message;
  EXPECT_EQ(s->spec.argv, (std::vector<std::string>{"/bin/bash", "-i", "-l"}));
  EXPECT_TRUE(s->spec.command.empty());
  EXPECT_TRUE(s->spec.pty);
  EXPECT_EQ(s->spec.rows, 30);
  EXPECT_EQ(s->spec.cols, 100);
  EXPECT_EQ(s->spec.tag, "term");
  EXPECT_TRUE(s->spec.stdin);
  EXPECT_TRUE(s->spec.cwd.empty());  // the table's default: the work dir, /home/user
  // A size past uint16_t is passed on as 0, for the table to refuse.
  auto huge = StartSpecOf({{"process", {{"cmd", "sh"}}}, {"pty", {{"size", {{"rows", 70000}}}}}}, {});
  ASSERT_TRUE(huge.has_value());
  EXPECT_EQ(huge->spec.rows, 0);
  EXPECT_EQ(huge->spec.cols, 80);
}

TEST(E2bProcessRequest, AnEmptyCommandIsBashsOwnArgv) {
  auto s = StartSpecOf({{"process", {{"cmd", "/bin/bash"}, {"args", {"-l", "-c", ""}}}}}, {});
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE(s->spec.command.empty());
  EXPECT_EQ(s->spec.argv, (std::vector<std::string>{"/bin/bash", "-l", "-c", ""}));
}

TEST(E2bProcessRequest, MalformedStartsAreInvalidArguments) {
  for (const json& bad : {json::object(), json{{"process", "ls"}}, json{{"process", {{"cmd", ""}}}},
                          json{{"process", {{"cmd", 5}}}}, json{{"process", {{"cmd", "ls"}, {"args", "-l"}}}},
                          json{{"process", {{"cmd", "ls"}, {"args", {1}}}}},
                          json{{"process", {{"cmd", "ls"}, {"envs", {{"A", 1}}}}}},
                          json{{"process", {{"cmd", "ls"}, {"envs", {"A"}}}}}}) {
    auto s = StartSpecOf(bad, {});
    ASSERT_FALSE(s.has_value()) << bad.dump();
    EXPECT_EQ(s.error().code, "invalid_argument");
  }
}

TEST(E2bProcessRequest, SelectorsByPidOrTag) {
  EXPECT_EQ(SelectorOf({{"process", {{"pid", 42}}}})->pid, 42);
  EXPECT_EQ(SelectorOf({{"process", {{"pid", "42"}}}})->pid, 42);  // a protobuf integer as text
  EXPECT_EQ(SelectorOf({{"process", {{"tag", "web"}}}})->tag, "web");
  EXPECT_EQ(SelectorOf({{"process", {{"tag", "web"}}}})->pid, 0);
  for (const json& bad : {json::object(), json{{"process", {{"pid", 0}}}}, json{{"process", {{"pid", -1}}}},
                          json{{"process", {{"pid", 4294967295u}}}}, json{{"process", {{"pid", "4x"}}}},
                          json{{"process", {{"tag", ""}}}}}) {
    EXPECT_FALSE(SelectorOf(bad).has_value()) << bad.dump();
  }
}

TEST(E2bProcessRequest, UnaryCalls) {
  EXPECT_TRUE(ProcessCallOf("List", json::object()).has_value());
  const json pid = {{"pid", 7}};
  // "aGk=" is "hi": as stdin, as pty input, and unpadded or URL-safe as protobuf's JSON allows.
  EXPECT_EQ(ProcessCallOf("SendInput", {{"process", pid}, {"input", {{"stdin", "aGk="}}}})->input, "hi");
  EXPECT_EQ(ProcessCallOf("SendInput", {{"process", pid}, {"input", {{"pty", "aGk"}}}})->input, "hi");
  EXPECT_EQ(ProcessCallOf("SendInput", {{"process", pid}, {"input", {{"stdin", "-_8="}}}})->input,
            "\xfb\xff");
  EXPECT_FALSE(ProcessCallOf("SendInput", {{"process", pid}, {"input", json::object()}}).has_value());
  EXPECT_FALSE(ProcessCallOf("SendInput", {{"process", pid}, {"input", {{"stdin", "a*b="}}}}).has_value());
  EXPECT_FALSE(ProcessCallOf("SendInput", {{"input", {{"stdin", "aGk="}}}}).has_value());  // no process
  EXPECT_EQ(ProcessCallOf("SendSignal", {{"process", pid}, {"signal", "SIGNAL_SIGKILL"}})->signal, 9);
  EXPECT_EQ(ProcessCallOf("SendSignal", {{"process", pid}, {"signal", "SIGNAL_SIGTERM"}})->signal, 15);
  EXPECT_EQ(ProcessCallOf("SendSignal", {{"process", pid}, {"signal", 9}})->signal, 9);
  EXPECT_FALSE(ProcessCallOf("SendSignal", {{"process", pid}, {"signal", "SIGNAL_UNSPECIFIED"}}).has_value());
  EXPECT_FALSE(ProcessCallOf("SendSignal", {{"process", pid}}).has_value());
  auto resize =
      ProcessCallOf("Update", {{"process", pid}, {"pty", {{"size", {{"rows", 30}, {"cols", 100}}}}}});
  ASSERT_TRUE(resize.has_value() && resize->size.has_value());
  EXPECT_EQ(*resize->size, (std::pair<uint16_t, uint16_t>{30, 100}));
  EXPECT_FALSE(ProcessCallOf("Update", {{"process", pid}})->size.has_value());
  EXPECT_EQ(ProcessCallOf("CloseStdin", {{"process", pid}})->selector.pid, 7);
}

TEST(E2bProcessRequest, AStreamOfInputStartsWithItsProcess) {
  auto s = StreamInputOf({R"({"start":{"process":{"pid":3}}})", R"({"data":{"input":{"stdin":"aGk="}}})",
                          R"({"keepalive":{}})", R"({"data":{"input":{"pty":"eW8="}}})"});
  ASSERT_TRUE(s.has_value()) << s.error().message;
  EXPECT_EQ(s->selector.pid, 3);
  EXPECT_EQ(s->inputs, (std::vector<std::string>{"hi", "yo"}));
  EXPECT_FALSE(StreamInputOf({}).has_value());
  EXPECT_FALSE(StreamInputOf({R"({"data":{"input":{"stdin":"aGk="}}})"}).has_value());
  EXPECT_FALSE(StreamInputOf({R"({"start":{"process":{"pid":3}}})", "not json"}).has_value());
}

TEST(E2bProcessRequest, ConfigOfAProcessStartedElsewhere) {
  engine::ProcessInfo shell;
  shell.command = "sleep 5";
  EXPECT_EQ(ConfigOf(shell),
            (json{{"cmd", "/bin/bash"}, {"args", {"-l", "-c", "sleep 5"}}, {"envs", json::object()}}));
  engine::ProcessInfo program;
  program.argv = {"python3", "-m", "http.server"};
  EXPECT_EQ(ConfigOf(program),
            (json{{"cmd", "python3"}, {"args", {"-m", "http.server"}}, {"envs", json::object()}}));
}

}  // namespace
}  // namespace execbox::api::e2b
