#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "base/base64.h"
#include "engine/mime.h"
#include "engine/packages.h"
#include "engine/report.h"
#include "jail/policy.h"
#include "runtime/python_program.h"

namespace execbox::engine {
namespace {

TEST(Base64, RoundTripsEveryLength) {
  std::string data;
  for (int i = 0; i < 300; ++i) {
    data.push_back(static_cast<char>(i * 37));
    auto back = Base64Decode(Base64Encode(data));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, data);
  }
  EXPECT_EQ(Base64Encode("Man"), "TWFu");
  EXPECT_EQ(Base64Encode("Ma"), "TWE=");
  EXPECT_FALSE(Base64Decode("TWE").has_value());
  EXPECT_FALSE(Base64Decode("T=Fu").has_value());
  EXPECT_FALSE(Base64Decode("TW!u").has_value());
}

TEST(Mime, SniffsContentNotJustNames) {
  EXPECT_EQ(SniffMimeType("x.txt", std::string("\x89PNG\r\n\x1a\n....", 12)), "image/png");
  EXPECT_EQ(SniffMimeType("plot.png", "not really a png"), "text/plain");
  EXPECT_EQ(SniffMimeType("data.csv", "a,b\n1,2\n"), "text/csv");
  EXPECT_EQ(SniffMimeType("out", "<svg xmlns='http://www.w3.org/2000/svg'/>"), "image/svg+xml");
  EXPECT_EQ(SniffMimeType("blob", std::string("\x00\x01\x02", 3)), "application/octet-stream");
  EXPECT_EQ(SniffMimeType("bad.txt", "\xff\xfe"), "application/octet-stream");
  EXPECT_EQ(SniffMimeType("r.pdf", "%PDF-1.7"), "application/pdf");
}

TEST(Utf8, RejectsOverlongAndSurrogates) {
  EXPECT_TRUE(IsValidUtf8("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));          // cut short
}

TEST(Report, ParsesEventsInOrder) {
  AgentReport r = ParseReport(
      R"({"type":"stream","name":"stdout","text":"a"})"
      "\n"
      R"({"type":"stream","name":"stdout","text":"b"})"
      "\n"
      R"({"type":"stream","name":"stderr","text":"c"})"
      "\n"
      R"({"type":"display","data":{"text/plain":"fig","image/png":"iVBO"},"metadata":{"width":10}})"
      "\n"
      R"({"type":"result","data":{"text/plain":"42"}})"
      "\n"
      R"({"type":"exit","code":0})"
      "\n");
  ASSERT_EQ(r.streams.size(), 2u);
  EXPECT_EQ(r.streams[0].name, "stdout");
  EXPECT_EQ(r.streams[0].text, "ab");
  EXPECT_EQ(r.streams[1].text, "c");
  ASSERT_EQ(r.display.size(), 1u);
  EXPECT_EQ(r.display[0]["data"]["image/png"], "iVBO");
  EXPECT_EQ(r.display[0]["metadata"]["width"], 10);
  ASSERT_TRUE(r.result.has_value());
  EXPECT_EQ((*r.result)["data"]["text/plain"], "42");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.malformed_lines, 0u);
}

TEST(Report, SurvivesHostileLines) {
  std::string deep(100000, '[');
  AgentReport r =
      ParseReport(deep + "\nnot json\n" + R"({"type":"display","data":"oops"})" + "\n" +
                  R"({"type":"display","data":{"image/png":7}})" + "\n" +
                  R"({"type":"error","phase":"run","ename":"ValueError","evalue":"x","traceback":[1,"ok"]})" +
                  "\n" + R"({"type":"stream","name":"/etc/passwd","text":"x"})");
  EXPECT_EQ(r.malformed_lines, 2u);
  ASSERT_EQ(r.display.size(), 1u);  // the bundle with a bad value keeps text/plain only
  EXPECT_EQ(r.display[0]["data"].size(), 1u);
  EXPECT_EQ(r.display[0]["data"]["text/plain"], "");
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.error->ename, "ValueError");
  EXPECT_EQ(r.error->traceback, std::vector<std::string>{"ok"});
  EXPECT_TRUE(r.streams.empty());
}

TEST(Report, SyntaxErrorPosition) {
  AgentReport r = ParseReport(
      R"({"type":"error","phase":"compile","ename":"SyntaxError","evalue":"invalid syntax","line":2,"column":5,"text":"x = = 1"})");
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.error_phase, "compile");
  EXPECT_EQ(r.error->line, 2);
  EXPECT_EQ(r.error->column, 5);
  EXPECT_EQ(r.error->text, "x = = 1");
}

}  // namespace
}  // namespace execbox::engine

namespace execbox::engine {
namespace {

TEST(Report, TakesInstalledPackagesAndIgnoresTheirWrongShapes) {
  AgentReport r =
      ParseReport(R"({"type":"installed","packages":[{"name":"a-b","version":"1.0","modules":["a_b",3]},7]})"
                  "\n"
                  R"({"type":"installed","packages":"not a list"})"
                  "\n");
  ASSERT_EQ(r.installed.size(), 1u);
  EXPECT_EQ(r.installed[0].name, "a-b");
  EXPECT_EQ(r.installed[0].version, "1.0");
  EXPECT_EQ(r.installed[0].modules, std::vector<std::string>{"a_b"});
}

TEST(Report, TakesNetworkAttemptsBoundedAndAsRefusedOnly) {
  // What the sandbox says it tried without network: refused, whatever it claims, bounded, once.
  std::string many;
  for (int i = 0; i < 100; ++i) many += R"({"host":"h)" + std::to_string(i) + R"(","port":80},)";
  AgentReport r = ParseReport(
      R"({"type":"network_attempts","attempts":[{"host":"example.com","port":443,"allowed":true},)"
      R"({"host":")" + std::string(1000, 'x') + R"(","port":99999},"junk",)" + many +
      R"({"host":"last","port":1}],"omitted":5})" "\n" R"({"type":"network_attempts","attempts":[{"host":"again"}]})" "\n");
  ASSERT_TRUE(r.network_attempts.has_value());
  const NetRecord& n = *r.network_attempts;
  ASSERT_EQ(n.connections.size(), 64u);
  EXPECT_EQ(n.connections[0].host, "example.com");
  EXPECT_EQ(n.connections[0].port, 443);
  EXPECT_FALSE(n.connections[0].allowed);
  EXPECT_EQ(n.connections[0].reason, "no network");
  EXPECT_EQ(n.connections[1].host.size(), kMaxNetRuleBytes);
  EXPECT_EQ(n.connections[1].port, 0);
  EXPECT_EQ(n.omitted, 103u - 64 + 5);  // the objects past the 64th, and what the agent omitted
  EXPECT_EQ(n.allowed + n.refused, 0u);  // counted nowhere: the sandbox said it
  EXPECT_FALSE(ParseReport(R"({"type":"network_attempts","attempts":"no"})" "\n").network_attempts);
}

TEST(Report, TakesTheGuardsRefusalsBoundedAndOnce) {
  std::string many;
  for (int i = 0; i < 70; ++i) many += R"({"event":"open","detail":"d)" + std::to_string(i) + R"("},)";
  // A multi-byte character across the detail's bound is cut before it, never through it.
  const std::string long_detail = std::string(399, 'x') + "\u00e9tail";
  AgentReport r = ParseReport(R"({"type":"guard","mode":"audit","refused":[{"event":"os.system","detail":")" +
                              long_detail + R"("},7,)" + many +
                              R"({"event":"last"}],"omitted":2})"
                              "\n" +
                              R"({"type":"guard","mode":"audit","refused":[{"event":"again"}]})"
                              "\n");
  ASSERT_TRUE(r.guard.has_value());
  ASSERT_EQ(r.guard->refused.size(), 64u);
  EXPECT_EQ(r.guard->refused[0].event, "os.system");
  EXPECT_EQ(r.guard->refused[0].detail, std::string(399, 'x'));
  EXPECT_EQ(r.guard->refused[1].detail, "d0");
  EXPECT_EQ(r.guard->omitted, 71u - 63 + 2);  // the objects past the 64th, and what the agent omitted
  // Only the guard's one mode; anything else is no guard at all.
  EXPECT_FALSE(ParseReport(R"({"type":"guard","mode":"off","refused":[]})"
                           "\n")
                   .guard);
  EXPECT_TRUE(ParseReport(R"({"type":"guard","mode":"audit"})"
                          "\n")
                  .guard);
}

TEST(PackageNames, TakesNamesWithVersionsAndNothingElse) {
  for (const char* ok : {"tqdm", "python-docx", "a_b.c", "x==1.2", "x>=1,<2", "pkg[extra]==1.0", "z~=2.1"}) {
    EXPECT_TRUE(runtime::CheckPackageNames({ok})) << ok;
  }
  for (const char* bad : {"", "../x", "/var/tmp/x.whl", "-r", "--index-url=http://x",
                          "x @ file:///etc/passwd", "a b", "x;y", "-", "x==", "http://pypi.org/simple/x"}) {
    auto checked = runtime::CheckPackageNames({bad});
    ASSERT_FALSE(checked) << bad;
    EXPECT_NE(checked.error().message.find("is not a package name"), std::string::npos);
  }
  EXPECT_FALSE(runtime::CheckPackageNames(std::vector<std::string>(runtime::kMaxPackages + 1, "x")));
  // A name that is not printable is not echoed back.
  auto hidden = runtime::CheckPackageNames({"x\n\x01"});
  ASSERT_FALSE(hidden);
  EXPECT_EQ(hidden.error().message.find('\n'), std::string::npos);
}

TEST(PackagePolicy, TheWheelhouseIsBoundReadOnlyAndPipFindsItUnlessItPinsHashes) {
  char dir[] = "/var/tmp/execbox-wheelhouse-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  auto has = [](const jail::Policy& p, const std::string& entry) {
    return std::find(p.env.begin(), p.env.end(), entry) != p.env.end();
  };
  jail::Policy none = runtime::BasePythonPolicy();
  EXPECT_TRUE(has(none, "PIP_NO_INDEX=1"));
  // Under a network policy pip may reach an index the policy allows.
  runtime::PythonProgram networked;
  networked.code = "1";
  networked.egress = true;
  auto with_network = runtime::MakePolicy(networked);
  ASSERT_TRUE(with_network.has_value()) << with_network.error().message;
  EXPECT_FALSE(has(*with_network, "PIP_NO_INDEX=1"));
  EXPECT_TRUE(has(*with_network, "PIP_ONLY_BINARY=:all:"));
  EXPECT_FALSE(has(none, std::string("PIP_FIND_LINKS=") + runtime::kWheelhouseDir));
  EXPECT_TRUE(std::none_of(none.binds.begin(), none.binds.end(),
                           [](const jail::Bind& b) { return !b.inside.empty(); }));

  jail::Policy plain = runtime::BasePythonPolicy(dir);
  EXPECT_TRUE(has(plain, std::string("PIP_FIND_LINKS=") + runtime::kWheelhouseDir));
  ASSERT_FALSE(plain.binds.empty());
  EXPECT_EQ(plain.binds.back().path, dir);
  EXPECT_EQ(plain.binds.back().inside, runtime::kWheelhouseDir);
  EXPECT_TRUE(plain.binds.back().required);
  plain.argv = {"/usr/bin/python3"};
  EXPECT_TRUE(jail::Validate(plain));

  const std::string pins = std::string(dir) + "/" + runtime::kWheelhouseHashes;
  {
    std::ofstream out(pins);
    out << "x==1.0 --hash=sha256:" << std::string(64, 'a') << "\n";
  }
  EXPECT_FALSE(has(runtime::BasePythonPolicy(dir), std::string("PIP_FIND_LINKS=") + runtime::kWheelhouseDir));
  ::unlink(pins.c_str());
  ::rmdir(dir);
}

TEST(Wheelhouse, ListsWheelsByTheirFileNames) {
  char dir[] = "/var/tmp/execbox-wheelhouse-list-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  for (const char* file :
       {"python_docx-0.8.11-py3-none-any.whl", "Foo.Bar-2.0-1-cp311-cp311-linux_x86_64.whl",
        "tqdm-4.64.1-py2.py3-none-any.whl", "tqdm-4.64.1-py3-none-any.whl", "notes.txt", "x-1.0.tar.gz",
        "-1.0-py3-none-any.whl", "bad$name-1.0-py3-none-any.whl", "nover.whl"}) {
    std::ofstream(std::string(dir) + "/" + file) << "";
  }
  auto wheels = ListWheelhouse(dir);
  std::vector<std::string> seen;
  for (const auto& w : wheels) seen.push_back(w.name + " " + w.version);
  EXPECT_EQ(seen, (std::vector<std::string>{"foo-bar 2.0", "python-docx 0.8.11", "tqdm 4.64.1"}));
  EXPECT_EQ(ListWheelhouse(dir, 1).size(), 1u);
  EXPECT_TRUE(ListWheelhouse("/nonexistent/wheels").empty());
  PackageCatalog catalog{.python = "3.11.2", .packages = {}, .wheelhouse = wheels};
  EXPECT_EQ(ToJson(catalog)["wheelhouse"][0], (nlohmann::json{{"name", "foo-bar"}, {"version", "2.0"}}));
  catalog.wheelhouse.reset();
  EXPECT_FALSE(ToJson(catalog).contains("wheelhouse"));
  std::filesystem::remove_all(dir);
}

TEST(PackagePolicy, APackageSetIsNamedInTheRequestAndBuiltIntoItsOwnWritableBind) {
  const std::string name(64, 'a');
  runtime::PythonProgram use;
  use.code = "1";
  use.packages = {"tqdm"};
  use.package_set = name;
  auto request = runtime::MakeRequest(use, false);
  ASSERT_TRUE(request) << request.error().message;
  EXPECT_EQ(nlohmann::json::parse(*request)["package_set"],
            std::string(runtime::kPackageSetsDir) + "/" + name);
  // Only a digest's characters make a name: never a path.
  for (const char* bad : {"../x", "ABC", "a/b", ""}) {
    use.package_set = bad;
    auto r = runtime::MakeRequest(use, false);
    EXPECT_EQ(r.has_value(), std::string(bad).empty()) << bad;
    if (r) {
      EXPECT_FALSE(nlohmann::json::parse(*r).contains("package_set"));
    }
  }

  runtime::PythonProgram build;
  build.packages = {"tqdm"};
  build.package_set = name;
  build.package_set_build_dir = "/var/tmp";
  build.limits.work_dir_bytes = 5 << 20;
  auto policy = runtime::MakePolicy(build);
  ASSERT_TRUE(policy) << policy.error().message;
  const std::string inside = std::string(runtime::kPackageSetsDir) + "/" + name;
  const jail::Bind& bind = policy->binds.back();
  EXPECT_EQ(bind.path, "/var/tmp");
  EXPECT_EQ(bind.inside, inside);
  EXPECT_TRUE(bind.writable);
  auto env = policy->env;
  EXPECT_NE(std::find(env.begin(), env.end(), "PYTHONUSERBASE=" + inside), env.end());
  EXPECT_EQ(
      std::count_if(env.begin(), env.end(), [](const auto& e) { return e.starts_with("PYTHONUSERBASE="); }),
      1);
  EXPECT_NE(std::find(env.begin(), env.end(), "EXECBOX_INSTALL_MAX_BYTES=5242880"), env.end());
  EXPECT_NE(std::find(env.begin(), env.end(), "EXECBOX_INSTALL_MAX_FILES=50000"), env.end());
  // The request's code never runs where a set is built.
  build.code = "print(1)";
  EXPECT_FALSE(runtime::MakePolicy(build));
  // The sets, read-only, for every child of a zygote.
  jail::Policy base = runtime::BasePythonPolicy("", "/var/tmp");
  EXPECT_EQ(base.binds.back().inside, runtime::kPackageSetsDir);
  EXPECT_FALSE(base.binds.back().writable);
}

TEST(PackagePolicy, ABindsPlaceInsideIsAbsoluteWithoutDotDot) {
  jail::Policy p = runtime::BasePythonPolicy();
  p.argv = {"/usr/bin/python3"};
  p.binds.push_back({.path = "/var/lib/wheels", .inside = "/opt/../etc"});
  EXPECT_FALSE(jail::Validate(p));
  p.binds.back().inside = "opt/wheels";
  EXPECT_FALSE(jail::Validate(p));
  p.binds.back().inside = "/opt/wheels";
  EXPECT_TRUE(jail::Validate(p));
}

}  // namespace
}  // namespace execbox::engine
