// A bash or javascript context's protocol (api/e2b/e2b_kernel_wire.h): the marks that end an
// execution, found however the output is cut, and never in what the code printed; the input
// each kernel is given, run here by the host's own bash and node (the same programs a sandbox
// binds), so that the marks and the state kept between executions are the kernels' own.
#include "api/e2b/e2b_kernel_wire.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace execbox::api::e2b {
namespace {

constexpr char kWord[] = "0123abcd";

TEST(KernelLanguage, NamesAsE2bGivesThem) {
  EXPECT_EQ(LanguageOf(nullptr), Language::kPython);
  EXPECT_EQ(LanguageOf("Python3"), Language::kPython);
  EXPECT_EQ(LanguageOf(""), Language::kPython);
  EXPECT_EQ(LanguageOf(" BASH "), Language::kBash);
  EXPECT_EQ(LanguageOf("js"), Language::kJavascript);
  EXPECT_EQ(LanguageOf("javascript"), Language::kJavascript);
  EXPECT_FALSE(LanguageOf("r"));
  EXPECT_FALSE(LanguageOf(3));
  EXPECT_NE(LanguageProblem("r").find("'r'"), std::string::npos);
  EXPECT_NE(LanguageProblem(3).find("number"), std::string::npos);
  EXPECT_STREQ(LanguageName(Language::kJavascript), "javascript");
}

TEST(KernelLanguage, VariableNamesAreWhatAShellCanSet) {
  EXPECT_TRUE(IsVariableName("A_1"));
  EXPECT_TRUE(IsVariableName("_x"));
  EXPECT_FALSE(IsVariableName(""));
  EXPECT_FALSE(IsVariableName("1A"));
  EXPECT_FALSE(IsVariableName("A=B"));
  EXPECT_FALSE(IsVariableName("$(reboot)"));
  EXPECT_FALSE(IsVariableName("a b"));
}

TEST(KernelOutput, TextBeforeTheMarksPassesAndTheMarksEndTheExecution) {
  KernelOutput out(kWord);
  EXPECT_EQ(out.Add(0, "hello\n", 0), "hello\n");
  EXPECT_EQ(out.Add(1, "warn\n", 6), "warn\n");
  EXPECT_FALSE(out.done());
  EXPECT_EQ(out.Add(0,
                    "tail\x1e"
                    "0123abcd {\"status\":2}\x1e",
                    11),
            "tail");
  EXPECT_FALSE(out.done());
  EXPECT_EQ(out.end()["status"], 2);
  EXPECT_EQ(out.Add(1,
                    "\x1e"
                    "0123abcd\x1e",
                    40),
            "");
  EXPECT_TRUE(out.done());
  EXPECT_EQ(out.end_offset(), 50u);
  EXPECT_EQ(out.Add(0, "late", 50), "");  // after its mark: no execution's
}

TEST(KernelOutput, AMarkCutAnywhereIsHeldUntilItIsWhole) {
  const std::string stdout_text =
      "a\x1e"
      "0123abcd {\"text\":\"4\"}\x1e";
  for (size_t cut = 1; cut < stdout_text.size(); ++cut) {
    KernelOutput out(kWord);
    std::string passed = out.Add(0, stdout_text.substr(0, cut), 0);
    passed += out.Add(0, stdout_text.substr(cut), cut);
    EXPECT_EQ(passed, "a") << cut;
    EXPECT_EQ(out.end()["text"], "4") << cut;
  }
}

TEST(KernelOutput, TextLikeAMarkIsText) {
  // Another word, separators alone, the word without its separator, a bare mark on stdout, a
  // stdout mark on stderr: each passes whole once the next byte shows it is not a mark.
  for (const std::string text : {"x\x1e"
                                 "ffff {}\x1e y",
                                 "\x1e\x1e"
                                 "z",
                                 "0123abcd {}\x1e"
                                 "z",
                                 "\x1e"
                                 "0123abcd\x1e"
                                 "z"}) {
    KernelOutput out(kWord);
    EXPECT_EQ(out.Add(0, text, 0), text);
    EXPECT_FALSE(out.done());
  }
  KernelOutput err(kWord);
  EXPECT_EQ(err.Add(1,
                    "\x1e"
                    "0123abcd {}\x1e"
                    "z",
                    0),
            "\x1e"
            "0123abcd {}\x1e"
            "z");
  // A start held, then the kernel ends: what was held is the code's.
  KernelOutput cut(kWord);
  EXPECT_EQ(cut.Add(0,
                    "z\x1e"
                    "0123",
                    50),
            "z");
  EXPECT_EQ(cut.Rest(0),
            "\x1e"
            "0123");
  EXPECT_EQ(cut.Rest(0), "");
}

TEST(KernelOutput, AnEndThatIsNotJsonIsNull) {
  KernelOutput out(kWord);
  out.Add(0,
          "\x1e"
          "0123abcd {oops\x1e",
          0);
  EXPECT_TRUE(out.end().is_null());
}

struct Ran {
  std::string out, err;
};

// `argv` run by the host with `input` on its stdin; its two streams apart.
Ran RunWith(const std::vector<std::string>& argv, const std::string& input) {
  char dir[] = "/tmp/kernel-wire.XXXXXX";
  EXPECT_NE(::mkdtemp(dir), nullptr);
  const std::string in = std::string(dir) + "/in", out = std::string(dir) + "/out",
                    err = std::string(dir) + "/err";
  std::ofstream(in) << input;
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (!std::freopen(in.c_str(), "r", stdin) || !std::freopen(out.c_str(), "w", stdout) ||
        !std::freopen(err.c_str(), "w", stderr))
      ::_exit(126);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  auto read = [](const std::string& path) {
    std::stringstream s;
    s << std::ifstream(path).rdbuf();
    return s.str();
  };
  Ran ran{read(out), read(err)};
  std::remove(in.c_str());
  std::remove(out.c_str());
  std::remove(err.c_str());
  ::rmdir(dir);
  return ran;
}

// Each execution's output and end, as the host reads them back (stdout then stderr: the
// order within one stream is all that a mark needs).
std::vector<std::pair<Ran, nlohmann::json>> Executions(const Ran& ran,
                                                       const std::vector<std::string>& words) {
  std::vector<std::pair<Ran, nlohmann::json>> found;
  size_t at[2] = {0, 0};
  const std::string* streams[2] = {&ran.out, &ran.err};
  for (const auto& w : words) {
    KernelOutput out(w);
    Ran texts;
    for (int s = 0; s < 2; ++s) {
      const std::string& text = *streams[s];
      std::string& into = s == 0 ? texts.out : texts.err;
      while (at[s] < text.size() && !out.done()) {
        into += out.Add(s, text.substr(at[s], 1), at[s]);
        ++at[s];
        if (s == 0 && !out.end().is_null()) break;
      }
    }
    EXPECT_TRUE(out.done()) << w;
    found.emplace_back(texts, out.end());
  }
  return found;
}

TEST(KernelInput, BashKeepsItsStateAndEachExecutionEndsWithItsStatus) {
  const std::string code1 =
      "n=41; f() { echo \"f:$1\"; }; printf() { echo bent; }; cd /tmp\n"
      "echo 'quoted '\\''text'\\'''; echo err >&2";
  const std::string code2 =
      "echo $((n + 1)) $(pwd) \"$X\"; f z; read -r line; echo \"read:${line:-none}\"; false";
  const std::string code3 = "echo \"${X:-unset}\"; cat <<EOF\nheredoc $n\nEOF";
  std::string input = KernelInput(Language::kBash, code1, {}, "w1");
  input += KernelInput(Language::kBash, code2, {{"X", "it's $HOME"}}, "w2");
  input += KernelInput(Language::kBash, code3, {}, "w3");
  auto runs = Executions(RunWith(KernelArgv(Language::kBash), input), {"w1", "w2", "w3"});
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].first.out, "quoted 'text'\n");
  EXPECT_EQ(runs[0].first.err, "err\n");
  EXPECT_EQ(runs[0].second["status"], 0);
  // Its variables, functions and cwd stay; this execution's env is set as given; stdin is empty.
  EXPECT_EQ(runs[1].first.out, "42 /tmp it's $HOME\nf:z\nread:none\n");
  EXPECT_EQ(runs[1].second["status"], 1);
  EXPECT_EQ(runs[2].first.out, "unset\nheredoc 41\n");
}

TEST(KernelInput, JavascriptKeepsItsDeclarationsAndReportsValuesAndErrors) {
  if (::access("/usr/bin/node", X_OK) != 0) GTEST_SKIP() << "no node on this host";
  std::string input =
      KernelInput(Language::kJavascript, "const a = 40\nlet b = 1\nconsole.log('log')", {}, "w1");
  input += KernelInput(Language::kJavascript, "a + b + (process.env.Y || '')", {{"Y", "!"}}, "w2");
  input += KernelInput(Language::kJavascript, "class Bad extends Error {}; throw new Bad('no')", {}, "w3");
  input += KernelInput(Language::kJavascript, "process.env.Y === undefined ? 'restored' : 'kept'", {}, "w4");
  input += KernelInput(Language::kJavascript, "await Promise.resolve(a)", {}, "w5");
  input += KernelInput(Language::kJavascript, "function (", {}, "w6");
  input += KernelInput(Language::kJavascript, "process.exit(0)", {}, "w7");  // ends the input too
  auto ran = RunWith({"/usr/bin/node", "-e", kJavascriptKernel}, input);
  auto runs = Executions(ran, {"w1", "w2", "w3", "w4", "w5", "w6"});
  ASSERT_EQ(runs.size(), 6u);
  EXPECT_EQ(runs[0].first.out, "log\n");
  EXPECT_FALSE(runs[0].second.contains("text"));
  EXPECT_EQ(runs[1].second["text"], "'41!'");
  EXPECT_EQ(runs[2].second["error"]["name"], "Error");  // a subclass keeps Error's name unless it sets one
  EXPECT_EQ(runs[2].second["error"]["value"], "no");
  EXPECT_NE(runs[2].second["error"]["traceback"].get<std::string>().find("execution_3.js"),
            std::string::npos);
  EXPECT_EQ(runs[3].second["text"], "'restored'");
  EXPECT_EQ(runs[4].second["text"], "40");
  EXPECT_EQ(runs[5].second["error"]["name"], "SyntaxError");
}

}  // namespace
}  // namespace execbox::api::e2b
