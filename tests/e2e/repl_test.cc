// `execbox repl` with cells piped in, through the real binary: cell splitting, state kept
// across cells, what is printed where, --json, figures, and a timeout that loses the state.
// As root the warm session must start. As the unprivileged user it runs where the host gives
// that user cgroups; elsewhere the REPL must refuse cleanly (exit 70, the reason on stderr).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "e2e/harness.h"

namespace execbox::e2e {
namespace {

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

std::vector<nlohmann::json> JsonLines(const std::string& out) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    lines.push_back(nlohmann::json::parse(line, nullptr, false));
  }
  return lines;
}

class Repl : public BothModes {
 protected:
  Invocation Session(const std::string& script, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"repl"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunExecbox(args, GetParam(), script);
  }

  // False, once the refusal is checked, where this user gets no warm sandbox; the caller
  // skips the rest. As root the REPL must start.
  bool Started(const Invocation& r) {
    if (GetParam() == Mode::kRoot || r.exit_status != 70) return true;
    EXPECT_NE(r.err.find("execbox repl: cannot start the sandbox"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("cgroup"), std::string::npos) << r.err;
    EXPECT_EQ(Count(r.err, "\n"), 1u) << "one line: " << r.err;
    EXPECT_EQ(r.out, "");
    return false;
  }
};

#define REPL_STARTED(r) \
  if (!Started(r)) GTEST_SKIP() << "no warm sandbox for this user: " << (r).err

TEST_P(Repl, StatePersistsAcrossCellsAndValuesAreEchoed) {
  Invocation r = Session("x = 41\n\n\nx + 1\nimport math\nmath.floor(2.5)\nNone\n");
  REPL_STARTED(r);
  EXPECT_EQ(r.out, "42\n2\n") << r.err;
  EXPECT_EQ(r.err.find("[execbox]"), std::string::npos) << r.err;
  EXPECT_EQ(r.exit_status, 0);
}

TEST_P(Repl, CompoundStatementEndsAtTheDedentedLine) {
  Invocation r = Session(
      "total = 0\n"
      "for i in range(3):\n"
      "    total += i\n"
      "    print('i', i)\n"
      "print('after', total)\n"
      "if total > 100:\n"
      "    print('big')\n"
      "else:\n"
      "    print('small')\n"
      "\n"
      "def f(n):\n"
      "    doubled = n * 2\n"
      "\n"  // a blank line inside the body: piped input keeps the block open
      "    return doubled + 1\n"
      "f(total)\n");
  REPL_STARTED(r);
  EXPECT_EQ(r.out, "i 0\ni 1\ni 2\nafter 3\nsmall\n7\n") << r.err;
  EXPECT_EQ(r.err.find("Error"), std::string::npos) << r.err;
}

TEST_P(Repl, BracketsStringsAndBackslashesContinueACell) {
  Invocation r = Session(
      "values = [1,\n"
      "          2,\n"
      "          3]\n"
      "sum(values)\n"
      "text = '''first:\n"
      "# not a comment\n"
      "last'''\n"
      "text.count(':'), len(text.splitlines())\n"
      "n = 1 + \\\n"
      "    2\n"
      "n\n");
  REPL_STARTED(r);
  EXPECT_EQ(r.out, "6\n(1, 3)\n3\n") << r.err;
}

TEST_P(Repl, TracebackGoesToStderrOnceAndLaterCellsKeepTheState) {
  Invocation r = Session("x = 5\n1 / 0\nprint('still', x)\n");
  REPL_STARTED(r);
  EXPECT_EQ(r.out, "still 5\n") << r.err;
  EXPECT_NE(r.err.find("Traceback (most recent call last):"), std::string::npos) << r.err;
  EXPECT_EQ(Count(r.err, "ZeroDivisionError: division by zero"), 1u) << r.err;
  EXPECT_EQ(r.err.find("[execbox]"), std::string::npos) << "an error is the code's own: " << r.err;
  EXPECT_EQ(r.exit_status, 0);
}

TEST_P(Repl, PlotPrintsAFigureLineAndCanSaveIt) {
  const std::string script = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()\n";
  Invocation r = Session(script);
  REPL_STARTED(r);
  std::regex figure(R"(\[figure 640x480 PNG, [0-9]+\.[0-9] KiB\])");
  EXPECT_TRUE(std::regex_search(r.out, figure)) << r.out << r.err;

  std::string dir = "/tmp/execbox-repl-figures-" + std::to_string(::getpid()) + "-" + ModeName(GetParam());
  std::filesystem::remove_all(dir);
  ASSERT_EQ(::mkdir(dir.c_str(), 0777), 0);
  ::chmod(dir.c_str(), 0777);  // the unprivileged user writes here too
  Invocation saved = Session(script, {"--save-figures", dir});
  std::string path = dir + "/figure-1.png";
  EXPECT_NE(saved.out.find("-> " + path), std::string::npos) << saved.out << saved.err;
  std::ifstream png(path, std::ios::binary);
  std::string magic(8, '\0');
  png.read(magic.data(), 8);
  EXPECT_EQ(magic, std::string("\x89PNG\r\n\x1a\n", 8)) << path;
  std::filesystem::remove_all(dir);
}

TEST_P(Repl, FilesTheCellWroteAreListed) {
  Invocation r = Session("n = open('notes.txt', 'w').write('hello')\nprint(n)\n");
  REPL_STARTED(r);
  EXPECT_EQ(r.out, "[file notes.txt, 5 bytes, text/plain]\n5\n") << r.err;
}

// A warm session's home is /home/user (its cwd and HOME, a shell's too), and /work names it:
// what one cell writes under either name the next reads under the other.
TEST_P(Repl, TheHomeIsHomeUserAndWorkNamesItAcrossCells) {
  Invocation r = Session(
      "_ = open('/work/a.txt', 'w').write('w')\n"
      "open('/home/user/a.txt').read()\n"
      "_ = open('/home/user/b.txt', 'w').write('h')\n"
      "open('/work/b.txt').read()\n"
      "import os, subprocess\n"
      "os.getcwd(), os.environ['HOME'], os.path.expanduser('~'), "
      "subprocess.run(['/bin/bash', '-c', 'pwd'], capture_output=True, text=True).stdout\n",
      {"--json"});
  REPL_STARTED(r);
  auto lines = JsonLines(r.out);
  ASSERT_EQ(lines.size(), 6u) << r.out << r.err;
  for (const auto& j : lines) ASSERT_TRUE(j.is_object() && j["status"] == "ok") << r.out;
  EXPECT_EQ(lines[0]["files"][0]["name"], "a.txt") << lines[0].dump();
  EXPECT_EQ(lines[1]["result"]["data"]["text/plain"], "'w'");
  EXPECT_EQ(lines[2]["files"][0]["name"], "b.txt") << lines[2].dump();
  EXPECT_EQ(lines[3]["result"]["data"]["text/plain"], "'h'");
  EXPECT_EQ(lines[5]["result"]["data"]["text/plain"],
            "('/home/user', '/home/user', '/home/user', '/home/user\\n')");
}

TEST_P(Repl, JsonGivesOneResultPerCell) {
  Invocation r = Session("x = 1\nx + 1\n1 / 0\nprint('out')\n", {"--json"});
  REPL_STARTED(r);
  auto lines = JsonLines(r.out);
  ASSERT_EQ(lines.size(), 4u) << r.out << r.err;
  for (const auto& j : lines) {
    ASSERT_TRUE(j.is_object()) << r.out;
    EXPECT_EQ(j["session"]["state"], "preserved") << j.dump();
    EXPECT_EQ(j["session"]["id"], lines[0]["session"]["id"]);
  }
  EXPECT_EQ(lines[0]["status"], "ok");
  EXPECT_EQ(lines[1]["result"]["data"]["text/plain"], "2");
  EXPECT_EQ(lines[2]["status"], "error");
  EXPECT_EQ(lines[2]["error"]["ename"], "ZeroDivisionError");
  EXPECT_EQ(lines[3]["stdout"], "out\n");
  EXPECT_EQ(r.err, "") << "--json writes nothing else, the traceback is in the JSON";
}

// --guard: every cell runs with the guard, the first included, and the text says what it refused.
TEST_P(Repl, GuardRefusesFromTheFirstCellOn) {
  Invocation r = Session("import os\nx = 1\nos.system('true')\nx + 1\n", {"--guard", "audit", "--json"});
  REPL_STARTED(r);
  auto lines = JsonLines(r.out);
  ASSERT_EQ(lines.size(), 4u) << r.out << r.err;
  EXPECT_EQ(lines[0]["guard"]["mode"], "audit") << lines[0].dump();
  EXPECT_EQ(lines[2]["status"], "error");
  EXPECT_EQ(lines[2]["error"]["ename"], "PermissionError") << lines[2].dump();
  EXPECT_EQ(lines[2]["guard"]["refused"][0]["event"], "os.system") << lines[2].dump();
  EXPECT_EQ(lines[3]["result"]["data"]["text/plain"], "2");  // the state is the session's, as ever
  r = Session("import os\nos.system('true')\n", {"--guard", "audit"});
  EXPECT_NE(r.err.find("PermissionError: execbox guard: os.system refused"), std::string::npos) << r.err;
  EXPECT_NE(
      r.err.find("[execbox] guard refused os.system: running programs is not allowed, by <stdin-2> line 1"),
      std::string::npos)
      << r.err;
}

TEST_P(Repl, TimeoutSaysTheStateIsLostAndTheNextCellStartsEmpty) {
  Invocation r = Session(
      "x = 1\n"
      "while True:\n"
      "    pass\n"
      "\n"
      "'x' in globals()\n"
      "y = 2\n"
      "while True: pass\n"
      "y\n",
      {"--timeout", "2"});
  REPL_STARTED(r);
  EXPECT_EQ(r.out, "False\n") << r.err;
  const std::string timeout = "[execbox] timeout: TimeoutError: execution exceeded the time limit of 2 s\n";
  const std::string lost =
      "[execbox] session state lost (timeout): variables and imports from earlier cells are gone\n";
  // Once per loss, right after the cell that lost it (not again for the cell after).
  EXPECT_EQ(Count(r.err, lost), 2u) << r.err;
  EXPECT_EQ(Count(r.err, timeout + lost), 2u) << r.err;
  EXPECT_NE(r.err.find("NameError: name 'y' is not defined"), std::string::npos) << r.err;
  EXPECT_EQ(r.exit_status, 0);

  Invocation j = Session("x = 1\nwhile True: pass\n'x' in globals()\n", {"--timeout", "2", "--json"});
  auto lines = JsonLines(j.out);
  ASSERT_EQ(lines.size(), 3u) << j.out << j.err;
  EXPECT_EQ(lines[1]["status"], "timeout");
  EXPECT_EQ(lines[1]["session"]["state"], "lost");
  EXPECT_EQ(lines[1]["session"]["reason"], "timeout");
  EXPECT_EQ(lines[2]["result"]["data"]["text/plain"], "False");
}

TEST_P(Repl, ExitStopsReadingAndEndOfInputRunsThePendingCell) {
  Invocation r = Session("print(1)\nexit()\nprint(2)\n");
  REPL_STARTED(r);
  EXPECT_EQ(r.out, "1\n") << r.err;
  EXPECT_EQ(r.exit_status, 0);

  Invocation eof = Session("def f():\n    return 7\nf()");  // no newline at the end
  EXPECT_EQ(eof.out, "7\n") << eof.err;
  EXPECT_EQ(eof.exit_status, 0);
}

TEST_P(Repl, BadOptionsAreUsageErrors) {
  Invocation r = Session("print(1)\n", {"--policy", "nope"});
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_NE(r.err.find("unknown policy profile 'nope'"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

INSTANTIATE_TEST_SUITE_P(Modes, Repl, ::testing::Values(Mode::kRoot, Mode::kUnprivileged),
                         [](const auto& param_info) { return ModeName(param_info.param); });

}  // namespace
}  // namespace execbox::e2e
