// A code context in a language other than Python (E2B's `bash` and `javascript` contexts),
// without I/O: each such context is a process of the sandbox's own (its kernel: bash, or node
// running kJavascriptKernel) that reads one execution at a time on its stdin and, after it,
// writes an end mark on each of its two streams: on stdout the execution's end (its exit
// status, or the last expression's value and an error), on stderr a bare mark, so that the host
// knows both streams are complete. Each execution's mark holds a random word of its own, so the
// code's output cannot end an execution by chance. Pure functions, tested alone
// (tests/unit/e2b_kernel_wire_test.cc).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace execbox::api::e2b {

enum class Language { kPython, kBash, kJavascript };

// The language a request names (E2B's names; any case, "js" for javascript; null or "" for
// Python), or nullopt for one execbox has no kernel for.
std::optional<Language> LanguageOf(const nlohmann::json& language);
// "python", "bash", "javascript": as E2B lists a context's language.
const char* LanguageName(Language language);
// Why `language` cannot have a context, naming it.
std::string LanguageProblem(const nlohmann::json& language);

// The kernel's argv (bash, node: looked up in the sandbox's PATH).
std::vector<std::string> KernelArgv(Language language);
// A variable name the kernel can set: [A-Za-z_][A-Za-z0-9_]*.
bool IsVariableName(std::string_view name);
// What is written to the kernel's stdin to run `code` once, with `env` set for this execution
// only (names IsVariableName), ending with the marks of `word`.
std::string KernelInput(Language language, std::string_view code,
                        const std::map<std::string, std::string>& env, std::string_view word);

// An execution's output as the kernel writes it, up to its end marks.
class KernelOutput {
 public:
  explicit KernelOutput(std::string word);
  // Text of stream 0 (stdout) or 1 (stderr) that starts at `offset` of the process's output:
  // what of it (and of what came before) is the code's output, to pass on now. A part that
  // may be the start of a mark is held until the next text shows whether it is.
  std::string Add(int stream, std::string_view data, uint64_t offset);
  // Both marks seen: the execution is over.
  bool done() const { return seen_[0] && seen_[1]; }
  // The offset just past the later mark: where the next execution's output starts.
  uint64_t end_offset() const { return end_offset_; }
  // What a stream still holds back (the kernel ended before its mark).
  std::string Rest(int stream);
  // The stdout mark's content: bash {"status": N}; javascript {"text"?: value, "error"?:
  // {"name", "value", "traceback"}}. Null until seen, or when it is not JSON.
  const nlohmann::json& end() const { return end_; }

 private:
  const std::string word_;
  std::string held_[2];
  uint64_t held_at_[2] = {0, 0};  // the offset of held_[i]'s first byte
  bool seen_[2] = {false, false};
  uint64_t end_offset_ = 0;
  nlohmann::json end_;
};

// The node program of a javascript context: runs each execution in the kernel's one global
// scope (so `let`, `const`, functions and `require`d modules stay for the next), awaits a
// promise the code ends with, and reports the value as util.inspect gives it.
extern const char* const kJavascriptKernel;

}  // namespace execbox::api::e2b
