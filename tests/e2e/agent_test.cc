// Issue 3's semantics through the real binary and the real sandbox: syntax errors, notebook
// results, rich output, figures, streams, files and the policy lint.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/base64.h"
#include "e2e/harness.h"

namespace execbox::e2e {
namespace {

using nlohmann::json;

json Ok(const Invocation& r) {
  EXPECT_TRUE(r.json.is_object()) << r.out << r.err;
  return r.json.is_object() ? r.json : json::object();
}

std::string Traceback(const json& j) {
  std::string tb;
  for (const auto& line : j["error"]["traceback"]) tb += line.get<std::string>() + "\n";
  return tb;
}

// Width and height from a PNG's IHDR chunk.
std::pair<uint32_t, uint32_t> PngSize(const std::string& png) {
  auto be32 = [&](size_t at) {
    return (static_cast<uint32_t>(static_cast<uint8_t>(png[at])) << 24) |
           (static_cast<uint32_t>(static_cast<uint8_t>(png[at + 1])) << 16) |
           (static_cast<uint32_t>(static_cast<uint8_t>(png[at + 2])) << 8) |
           static_cast<uint32_t>(static_cast<uint8_t>(png[at + 3]));
  };
  if (png.size() < 24 || png.substr(0, 8) != std::string("\x89PNG\r\n\x1a\n", 8)) return {0, 0};
  return {be32(16), be32(20)};
}

struct SyntaxCase {
  std::string code, ename;
  int line;
  std::string text;
};

TEST(Agent, SyntaxErrorsOfEachKindAndTheCodeDoesNotRun) {
  std::vector<SyntaxCase> cases = {
      {"print('ran')\nx = = 1\n", "SyntaxError", 2, "x = = 1"},
      {"print('ran')\ndef f(:\n    pass\n", "SyntaxError", 2, "def f(:"},
      {"print('ran')\nif True:\nprint(1)\n", "IndentationError", 3, "print(1)"},
      {"print('ran')\nif True:\n\tx = 1\n        y = 2\n", "TabError", 4, "        y = 2"},
  };
  for (const auto& c : cases) {
    json j = Ok(RunCode(c.code));
    EXPECT_EQ(j["status"], "syntax_error") << c.code;
    EXPECT_EQ(j["error"]["ename"], c.ename) << c.code;
    EXPECT_EQ(j["error"]["line"], c.line) << c.code;
    EXPECT_TRUE(j["error"]["column"].is_number_integer()) << c.code;
    EXPECT_EQ(j["error"]["text"], c.text) << c.code;
    std::string tb = Traceback(j);
    EXPECT_NE(tb.find("^"), std::string::npos) << tb;
    EXPECT_NE(tb.find("File \"<cell>\", line " + std::to_string(c.line)), std::string::npos) << tb;
    EXPECT_EQ(j["stdout"], "") << "the code must not run: " << c.code;
  }
}

TEST(Agent, LastExpressionIsTheResultAndIsNotPrinted) {
  json j = Ok(RunCode("x = 21\nx * 2\n"));
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["result"]["data"]["text/plain"], "42");
  EXPECT_EQ(j["stdout"], "");
  EXPECT_TRUE(Ok(RunCode("x = 1\n"))["result"].is_null());
  EXPECT_TRUE(Ok(RunCode("None\n"))["result"].is_null());
}

TEST(Agent, DisplayKeepsOrderAndStreamsKeepInterleaving) {
  json j = Ok(RunCode(
      "import sys\nprint('a')\ndisplay(1)\nprint('b', file=sys.stderr)\ndisplay('two')\nprint('c')\n"));
  ASSERT_EQ(j["display"].size(), 2u) << j.dump(2);
  EXPECT_EQ(j["display"][0]["data"]["text/plain"], "1");
  EXPECT_EQ(j["display"][1]["data"]["text/plain"], "'two'");
  ASSERT_EQ(j["streams"].size(), 3u) << j["streams"].dump();
  EXPECT_EQ(j["streams"][0], (json{{"name", "stdout"}, {"text", "a\n"}}));
  EXPECT_EQ(j["streams"][1], (json{{"name", "stderr"}, {"text", "b\n"}}));
  EXPECT_EQ(j["streams"][2], (json{{"name", "stdout"}, {"text", "c\n"}}));
  EXPECT_EQ(j["stdout"], "a\nc\n");
  EXPECT_EQ(j["stderr"], "b\n");
}

TEST(Agent, DataFrameHasHtml) {
  json j = Ok(RunCode("import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})\n"));
  EXPECT_EQ(j["status"], "ok");
  ASSERT_TRUE(j["result"].is_object()) << j.dump(2);
  EXPECT_NE(j["result"]["data"]["text/html"].get<std::string>().find("<table"), std::string::npos);
  EXPECT_NE(j["result"]["data"]["text/plain"].get<std::string>().find("a"), std::string::npos);
}

TEST(Agent, FiguresShownAndForgottenComeBackAsPng) {
  json j =
      Ok(RunCode("import matplotlib.pyplot as plt\n"
                 "plt.figure(figsize=(4, 3), dpi=100)\nplt.plot([1, 2, 3])\nplt.show()\n"
                 "plt.figure(figsize=(2, 2), dpi=100)\nplt.bar([1, 2], [3, 4])\n"));
  EXPECT_EQ(j["status"], "ok") << j.dump(2);
  ASSERT_EQ(j["display"].size(), 2u) << j.dump(2);
  for (const auto& d : j["display"]) {
    auto png = Base64Decode(d["data"]["image/png"].get<std::string>());
    ASSERT_TRUE(png.has_value());
    auto [w, h] = PngSize(*png);
    EXPECT_EQ(w, d["metadata"]["width"]);
    EXPECT_EQ(h, d["metadata"]["height"]);
  }
  auto first = PngSize(*Base64Decode(j["display"][0]["data"]["image/png"].get<std::string>()));
  EXPECT_EQ(first, (std::pair<uint32_t, uint32_t>{400, 300}));
}

TEST(Agent, TracebacksHaveNoAgentFramesEvenFromLibraries) {
  json j = Ok(RunCode("import json\n\ndef parse(s):\n    return json.loads(s)\n\nparse('{')\n"));
  EXPECT_EQ(j["status"], "error");
  EXPECT_EQ(j["error"]["ename"], "JSONDecodeError");
  std::string tb = Traceback(j);
  EXPECT_NE(tb.find("File \"<cell>\", line 6"), std::string::npos) << tb;
  EXPECT_NE(tb.find("return json.loads(s)"), std::string::npos) << tb;
  EXPECT_NE(tb.find("json/decoder.py"), std::string::npos) << tb;
  EXPECT_EQ(tb.find("agent.py"), std::string::npos) << tb;
  EXPECT_EQ(tb.find("execbox"), std::string::npos) << tb;
}

TEST(Agent, InvalidUtf8AndNulBytesInOutput) {
  json j = Ok(RunCode("import sys\nsys.stdout.buffer.write(b'a\\xff\\x00b\\n')\nprint('\\udc80')\n"));
  EXPECT_EQ(j["status"], "ok") << j.dump(2);
  std::string out = j["stdout"];
  EXPECT_NE(out.find("a\xef\xbf\xbd"), std::string::npos) << out;  // U+FFFD for 0xff
  EXPECT_NE(out.find(std::string("\0b", 2)), std::string::npos);
}

TEST(Agent, SourceThatIsNotUtf8RunsWithReplacementCharacters) {
  json j = Ok(RunCode("print('caf\xe9')\n"));
  EXPECT_EQ(j["status"], "ok") << j.dump(2);
  EXPECT_EQ(j["stdout"], "caf\xef\xbf\xbd\n");
}

TEST(Agent, FilesInAndOutWithMimeTypeAndContent) {
  std::string in = "/tmp/execbox-e2e-agent-in-" + std::to_string(::getpid());
  { std::ofstream(in) << "x,y\n1,2\n"; }
  json j =
      Ok(RunCode("import csv\nrows = list(csv.reader(open('in.csv')))\n"
                 "open('out.csv', 'w').write('n\\n%d\\n' % len(rows))\n",
                 Mode::kRoot, {"--file", "in.csv=" + in}));
  std::filesystem::remove(in);
  EXPECT_EQ(j["status"], "ok") << j.dump(2);
  ASSERT_EQ(j["files"].size(), 1u) << j["files"].dump();
  EXPECT_EQ(j["files"][0]["name"], "out.csv");
  EXPECT_EQ(j["files"][0]["mime_type"], "text/csv");
  EXPECT_EQ(Base64Decode(j["files"][0]["content_base64"].get<std::string>()), "n\n2\n");
}

TEST(Agent, StdinInputAndSystemExit) {
  std::string in = "/tmp/execbox-e2e-agent-stdin-" + std::to_string(::getpid());
  { std::ofstream(in) << "Ada\n"; }
  json j =
      Ok(RunCode("name = input()\nprint('hi', name)\ntry:\n    input()\nexcept EOFError:\n    print('eof')\n",
                 Mode::kRoot, {"--stdin", in}));
  std::filesystem::remove(in);
  EXPECT_EQ(j["stdout"], "hi Ada\neof\n");
  Invocation r = RunCode("import sys\nsys.exit(3)\n");
  EXPECT_EQ(Ok(r)["exit_code"], 3);
  EXPECT_EQ(r.exit_status, 3);
}

TEST(Agent, StrictPolicyRefusesObfuscatedImportsAndPermissiveRunsThem) {
  for (const char* code :
       {"__import__('os').system('ls')\n", "import os as o\no.system('ls')\n",
        "from subprocess import run as r\nr(['ls'])\n", "getattr(__builtins__, 'ev' + 'al')('1')\n",
        "import importlib\nimportlib.import_module('so' + 'cket')\n", "import socket\n"}) {
    json j = Ok(RunCode(code, Mode::kRoot, {"--policy", "strict"}));
    EXPECT_EQ(j["status"], "policy_violation") << code << j.dump(2);
    ASSERT_FALSE(j["findings"].empty()) << code;
    const json& f = j["findings"][0];
    EXPECT_FALSE(f["rule"].get<std::string>().empty());
    EXPECT_GE(f["line"].get<int>(), 1);
    EXPECT_FALSE(f["suggestion"].get<std::string>().empty());
  }
  json j = Ok(RunCode("import os\nprint(os.system('true'))\n", Mode::kRoot, {"--policy", "permissive"}));
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["stdout"], "0\n");
  EXPECT_EQ(RunExecbox({"run", "--policy", "nonsense", "-c", "pass"}).exit_status, 2);
}

TEST(Agent, CheckNeverRunsTheCode) {
  Invocation clean = RunExecbox({"check", "--json", "-c", "while True:\n    pass\n"});
  EXPECT_EQ(clean.exit_status, 0) << clean.out << clean.err;
  EXPECT_EQ(clean.json["status"], "ok");
  Invocation bad = RunExecbox({"check", "--json", "-c", "x = (1,\n"});
  EXPECT_EQ(bad.exit_status, 1);
  EXPECT_EQ(bad.json["status"], "syntax_error");
  EXPECT_EQ(bad.json["error"]["line"], 1);
  Invocation refused = RunExecbox({"check", "--json", "--policy", "strict", "-c", "import subprocess\n"});
  EXPECT_EQ(refused.exit_status, 1);
  EXPECT_EQ(refused.json["status"], "policy_violation");
}

TEST(Agent, MatplotlibStartsWithAPrebuiltFontList) {
  // As root the font list is built once into /var/cache/execbox and seeded into every run.
  json j = Ok(
      RunCode("import glob, os\nprint(len(glob.glob(os.environ['MPLCONFIGDIR'] + '/fontlist-*.json')))\n"));
  EXPECT_EQ(j["stdout"], "1\n") << j.dump(2);
}

TEST(Agent, EveryPackageOfTheStackImports) {
  json j =
      Ok(RunCode("import numpy, pandas, matplotlib, scipy, sympy, seaborn, PIL, sklearn, statsmodels, "
                 "networkx, openpyxl, bs4\n"
                 "print('ok')\n",
                 Mode::kRoot, {"--timeout", "120", "--cpu-time", "120", "--memory", "1G"}));
  EXPECT_EQ(j["status"], "ok") << j["stderr"];
  EXPECT_EQ(j["stdout"], "ok\n");
}

}  // namespace
}  // namespace execbox::e2e
