// E2B's wire formats (api/e2b/e2b_wire.h): result lines, Connect envelopes, multipart uploads and
// the paths an SDK sends, including the hostile ones.
#include "api/e2b/e2b_wire.h"

#include <gtest/gtest.h>

namespace execbox::api::e2b {
namespace {

TEST(E2bWire, ResultMessageNamesTheMimeTypesAsE2bDoes) {
  nlohmann::json bundle = {{"data",
                            {{"text/plain", "42"},
                             {"text/html", "<b>42</b>"},
                             {"image/png", "iVBOR"},
                             {"application/json", {{"a", 1}}},
                             {"application/vnd.custom", "x"}}},
                           {"metadata", nlohmann::json::object()}};
  auto m = ResultMessage(bundle, true);
  EXPECT_EQ(m["type"], "result");
  EXPECT_EQ(m["text"], "42");
  EXPECT_EQ(m["html"], "<b>42</b>");
  EXPECT_EQ(m["png"], "iVBOR");
  EXPECT_EQ(m["json"]["a"], 1);
  EXPECT_EQ(m["extra"]["application/vnd.custom"], "x");  // as E2B's server nests the rest
  EXPECT_FALSE(m.contains("application/vnd.custom"));
  EXPECT_EQ(m["is_main_result"], true);
  auto frame = ResultMessage({{"data",
                               {{"text/plain", "   a\n0  1"},
                                {"application/vnd.e2b.data+json", {{"a", {1}}}},
                                {"application/vnd.e2b.chart+json", {{"type", "bar"}}}}}},
                             false);
  EXPECT_EQ(frame["data"]["a"][0], 1);
  EXPECT_EQ(frame["chart"]["type"], "bar");
  EXPECT_EQ(frame["extra"], nlohmann::json::object());
  EXPECT_EQ(frame["is_main_result"], false);
}

TEST(E2bWire, TextLosesOnePairOfEnclosingQuotesAsOnE2b) {
  EXPECT_EQ(E2bText("'bar'"), "bar");
  EXPECT_EQ(E2bText("\"it's\""), "it's");
  EXPECT_EQ(E2bText("'a\\nb'"), "a\\nb");  // only the quotes: the escapes stay
  EXPECT_EQ(E2bText("'"), "");
  EXPECT_EQ(E2bText("''"), "");
  EXPECT_EQ(E2bText("('a', 'b')"), "('a', 'b')");
  EXPECT_EQ(E2bText("'a\""), "'a\"");  // the quotes do not pair
  EXPECT_EQ(E2bText("42"), "42");
  EXPECT_EQ(E2bText(""), "");
  EXPECT_EQ(ResultMessage({{"data", {{"text/plain", "'x'"}}}}, true)["text"], "x");
}

TEST(E2bWire, EndOfExecutionOrdersDisplayResultErrorCountEnd) {
  engine::Result r;
  r.display.push_back({{"data", {{"image/png", "p"}}}});
  r.result = nlohmann::json{{"data", {{"text/plain", "1"}}}};
  r.error = engine::ErrorInfo{
      .ename = "ValueError", .evalue = "bad", .traceback = {"Traceback:", "ValueError: bad"}};
  auto lines = EndOfExecution(r, 7);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0]["is_main_result"], false);
  EXPECT_EQ(lines[1]["is_main_result"], true);
  EXPECT_EQ(lines[2]["type"], "error");
  EXPECT_EQ(lines[2]["name"], "ValueError");
  EXPECT_EQ(lines[2]["traceback"], "Traceback:\nValueError: bad");
  EXPECT_EQ(lines[3]["execution_count"], 7);
  EXPECT_EQ(lines[4]["type"], "end_of_execution");
  // One line each, never a blank one: the SDK parses every line as JSON.
  std::string text = Line(StreamMessage(false, "a\nb\n"));
  EXPECT_EQ(text.find('\n'), text.size() - 1);
}

TEST(E2bWire, EnvelopesRoundTripAndRefuseWhatIsNotOne) {
  std::string e = Envelope(0, R"({"a":1})");
  ASSERT_EQ(e.size(), 5u + 7u);
  EXPECT_EQ(e[4], 7);
  EXPECT_EQ(FirstEnvelope(e).value(), R"({"a":1})");
  EXPECT_FALSE(FirstEnvelope("").has_value());
  EXPECT_FALSE(FirstEnvelope(e.substr(0, 8)).has_value());  // cut short
  std::string huge = Envelope(0, "x");
  huge[1] = '\x7f';  // claims 2 GB
  EXPECT_FALSE(FirstEnvelope(huge).has_value());
  std::string compressed = e;
  compressed[0] = 1;
  EXPECT_FALSE(FirstEnvelope(compressed).has_value());
  EXPECT_EQ(Envelope(kEndStream, "{}")[0], 2);
  EXPECT_EQ(HttpStatusOf("not_found"), 404);
  EXPECT_EQ(HttpStatusOf("unimplemented"), 501);
  EXPECT_EQ(HttpStatusOf("no-such-code"), 500);
}

TEST(E2bWire, AClientStreamIsEveryEnvelopeUpToItsEnd) {
  const std::string body = Envelope(0, "{\"a\":1}") + Envelope(0, "{}") + Envelope(kEndStream, "{}");
  auto messages = Envelopes(body);
  ASSERT_TRUE(messages.has_value()) << messages.error();
  EXPECT_EQ(*messages, (std::vector<std::string>{"{\"a\":1}", "{}"}));
  EXPECT_TRUE(Envelopes("")->empty());
  EXPECT_FALSE(Envelopes(body.substr(0, body.size() - 1)).has_value());           // the last one cut short
  EXPECT_FALSE(Envelopes(Envelope(0, "{}") + std::string(2, '\0')).has_value());  // a header cut short
}

TEST(E2bWire, AProcessEndsAsGoSaysIt) {
  EXPECT_EQ(ProcessEndEvent(0, std::nullopt),
            (nlohmann::json{{"exitCode", 0}, {"exited", true}, {"status", "exit status 0"}}));
  const auto three = ProcessEndEvent(3, std::nullopt);
  EXPECT_EQ(three["status"], "exit status 3");
  EXPECT_EQ(three["error"], "exit status 3");
  const auto killed = ProcessEndEvent(std::nullopt, 9);
  EXPECT_EQ(killed["exitCode"], -1);
  EXPECT_EQ(killed["exited"], false);
  EXPECT_EQ(killed["status"], "signal: killed");
  EXPECT_EQ(killed["error"], "signal: killed");
  EXPECT_EQ(ProcessEndEvent(std::nullopt, 15)["status"], "signal: terminated");
  EXPECT_EQ(ProcessEndEvent(std::nullopt, 40)["status"], "signal: signal 40");
  EXPECT_EQ(ProcessEndEvent(std::nullopt, std::nullopt)["exited"], false);
}

TEST(E2bWire, MultipartFilesAndMalformedBodies) {
  const std::string type = "multipart/form-data; boundary=----X1";
  std::string body =
      "------X1\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/home/user/a.csv\"\r\n"
      "Content-Type: application/octet-stream\r\n\r\na,b\r\n1,2\r\n"
      "------X1\r\nContent-Disposition: form-data; name=\"file\"; filename=\"b.bin\"\r\n\r\n";
  body += std::string("\x00\x01", 2);
  body += "\r\n------X1--\r\n";
  auto files = ParseMultipart(type, body);
  ASSERT_TRUE(files.has_value()) << files.error();
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ((*files)[0].filename, "/home/user/a.csv");
  EXPECT_EQ((*files)[0].content, "a,b\r\n1,2");  // the part's own CRLFs are kept
  EXPECT_EQ((*files)[1].filename, "b.bin");
  EXPECT_EQ((*files)[1].content, std::string("\x00\x01", 2));
  EXPECT_FALSE(ParseMultipart("application/json", body).has_value());
  EXPECT_FALSE(ParseMultipart("multipart/form-data", body).has_value());  // no boundary
  EXPECT_FALSE(ParseMultipart(type, body.substr(0, body.size() / 2)).has_value());
  EXPECT_FALSE(ParseMultipart(type, "garbage").has_value());
  EXPECT_FALSE(ParseMultipart(type, "------X1--\r\n").has_value());  // no file part
}

TEST(E2bWire, PathsMapOntoTheWorkDirOnly) {
  EXPECT_EQ(WorkDirPath("/home/user/a.csv").value(), "a.csv");
  EXPECT_EQ(WorkDirPath("/work/sub/a.csv").value(), "sub/a.csv");
  EXPECT_EQ(WorkDirPath("a.csv").value(), "a.csv");
  EXPECT_EQ(WorkDirPath("~/a.csv").value(), "a.csv");
  EXPECT_FALSE(WorkDirPath("/etc/passwd").has_value());
  EXPECT_FALSE(WorkDirPath("/home/username/x").has_value());  // not under /home/user
  EXPECT_FALSE(WorkDirPath("/home/user").has_value());        // a directory
  // ".." is passed on as it is: the session's file calls refuse it (Sessions::WriteFile).
  EXPECT_EQ(WorkDirPath("/home/user/../x").value(), "../x");
  EXPECT_NE(WorkDirPath("/work").error().find("is a directory"), std::string::npos);  // the home
  EXPECT_NE(WorkDirPath("/workspace/a").error().find("outside the sandbox's home (/home/user"),
            std::string::npos);
}

TEST(E2bWire, TheHomeHasOneNameInsideTheSandbox) {
  EXPECT_EQ(SandboxPath("/home/user/x"), "/home/user/x");
  EXPECT_EQ(SandboxPath("/home/user"), "/home/user");
  EXPECT_EQ(SandboxPath("~"), "/home/user");
  EXPECT_EQ(SandboxPath("~/a/b.txt"), "/home/user/a/b.txt");
  EXPECT_EQ(SandboxPath("/work"), "/home/user");
  EXPECT_EQ(SandboxPath("/work/a.txt"), "/home/user/a.txt");
  EXPECT_EQ(SandboxPath("/workspace/a.txt"), "/workspace/a.txt");  // only the alias itself
  EXPECT_EQ(SandboxPath("~user/a.txt"), "~user/a.txt");
  EXPECT_EQ(SandboxPath("a.txt"), "a.txt");  // relative: to the home, where it runs
  EXPECT_EQ(SandboxPath("/tmp"), "/tmp");
}

TEST(E2bWire, AbsolutePathsInTheSandbox) {
  EXPECT_EQ(AbsoluteInSandbox(""), "/home/user");
  EXPECT_EQ(AbsoluteInSandbox("sub/"), "/home/user/sub");
  EXPECT_EQ(AbsoluteInSandbox("/work/a"), "/home/user/a");
  EXPECT_EQ(AbsoluteInSandbox("/tmp/"), "/tmp");
  EXPECT_EQ(AbsoluteInSandbox("/"), "/");
}

TEST(E2bWire, ShellQuoting) { EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'"); }

TEST(E2bWire, FileMetadataComesFromXMetadataHeadersAndIsChecked) {
  auto got = FileMetadataOf({{"x-metadata-author", "me"}, {"x-metadata-rev", "2"}, {"content-type", "x"}});
  ASSERT_TRUE(got) << got.error();
  EXPECT_EQ(*got, (std::map<std::string, std::string>{{"author", "me"}, {"rev", "2"}}));
  EXPECT_TRUE(FileMetadataOf({{"content-type", "x"}})->empty());
  EXPECT_FALSE(FileMetadataOf({{"x-metadata-", "v"}}));             // no key
  EXPECT_FALSE(FileMetadataOf({{"x-metadata-a/b", "v"}}));          // not a token
  EXPECT_FALSE(FileMetadataOf({{"x-metadata-k", "line\nbreak"}}));  // not printable
  EXPECT_FALSE(FileMetadataOf({{"x-metadata-k", std::string(1025, 'v')}}));
  EXPECT_FALSE(FileMetadataOf({{"x-metadata-" + std::string(129, 'k'), "v"}}));
  std::map<std::string, std::string> many;
  for (size_t i = 0; i <= kMaxMetadataKeys; ++i) many["x-metadata-k" + std::to_string(i)] = "v";
  EXPECT_FALSE(FileMetadataOf(many));
}

TEST(E2bWire, AHostNamesASandboxsPortOnlyWhenWhollyShapedSo) {
  auto target = HostTargetOf("8080-s_abc.execbox.test", "execbox.test");
  ASSERT_TRUE(target);
  EXPECT_EQ(target->port, 8080);
  EXPECT_EQ(target->id, "s_abc");
  EXPECT_EQ(HostTargetOf("49999-s_abc.execbox.test:8443", "execbox.test")->port, 49999);
  for (const char* host :
       {"65536-s_abc.execbox.test", "123456-s_a.execbox.test", "0-s_a.execbox.test", "-s_a.execbox.test",
        "80-.execbox.test", "x80-s_a.execbox.test", "80s_a.execbox.test", "80-s_a.otherexecbox.test",
        "80-s_a.execbox.test.evil", "execbox.test", "", ":80", "80-s_a.EXECBOX.test"}) {
    EXPECT_FALSE(HostTargetOf(host, "execbox.test")) << host;
  }
  EXPECT_FALSE(HostTargetOf("80-s_a.execbox.test", ""));  // no domain: no sandbox hosts
}

TEST(E2bWire, ARelayedAnswerIsPassedOnWithoutItsHopHeaders) {
  auto answer = ParseRelayedAnswer(
      "HTTP/1.0 404 Not Found\r\nContent-Type: text/html\r\nConnection: close\r\nX-Access-Token: t\r\n"
      "Server: SimpleHTTP\r\nX-Kept: yes\r\n\r\n<p>no</p>");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 404);
  EXPECT_EQ(answer->content_type, "text/html");
  EXPECT_EQ(answer->body, "<p>no</p>");
  EXPECT_EQ(answer->headers, (std::vector<std::pair<std::string, std::string>>{{"x-kept", "yes"}}));
  EXPECT_TRUE(IsHopHeader("e2b-traffic-access-token"));
  EXPECT_FALSE(IsHopHeader("x-kept"));
}

TEST(E2bWire, AChunkedAnswerIsUndoneAndABrokenOneRefused) {
  auto chunked = ParseRelayedAnswer(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\n\r\n");
  ASSERT_TRUE(chunked);
  EXPECT_EQ(chunked->body, "Wikipedia");
  for (const char* body :
       {"4\r\nWik", "zz\r\nWiki\r\n0\r\n\r\n", "4\r\nWiki", "\r\n", "ffffffffffffffff\r\nx\r\n0\r\n\r\n"}) {
    EXPECT_FALSE(
        ParseRelayedAnswer(std::string("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n") + body))
        << body;
  }
  for (const char* raw : {"", "SSH-2.0-OpenSSH\r\n\r\n", "HTTP/1.1 2x0 OK\r\n\r\n", "HTTP/1.1 999 No\r\n\r\n",
                          "HTTP/1.1 20\r\n\r\n", "HTTP/1.1 200 OK\r\nno end of headers"}) {
    EXPECT_FALSE(ParseRelayedAnswer(raw)) << raw;
  }
}

}  // namespace
}  // namespace execbox::api::e2b
