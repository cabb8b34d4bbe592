#include "api/e2b/e2b_kernel_wire.h"

#include <algorithm>
#include <cctype>

#include "api/e2b/e2b_wire.h"

namespace execbox::api::e2b {
namespace {

// Marks: stdout "\x1e<word> <json>\x1e", stderr "\x1e<word>\x1e" (0x1e: ASCII's record
// separator, which text seldom holds; the word makes a mark the code printed impossible).
constexpr char kMark = '\x1e';

enum class MarkKind { kNone, kPartial, kWhole };
struct MarkAt {
  MarkKind kind = MarkKind::kNone;
  size_t end = 0;  // just past it (kWhole)
  std::string_view content;
};

// Whether `text` at `at` (a kMark) is this execution's mark of `stream`.
MarkAt FindMark(std::string_view text, size_t at, int stream, std::string_view word) {
  std::string_view rest = text.substr(at + 1);
  if (rest.size() < word.size()) return {word.starts_with(rest) ? MarkKind::kPartial : MarkKind::kNone};
  if (!rest.starts_with(word)) return {};
  rest.remove_prefix(word.size());
  if (rest.empty()) return {MarkKind::kPartial};
  const size_t start = at + 1 + word.size();
  if (stream == 1) return rest[0] == kMark ? MarkAt{MarkKind::kWhole, start + 1, {}} : MarkAt{};
  if (rest[0] != ' ') return {};
  const size_t close = rest.find(kMark);
  if (close == std::string_view::npos) return {MarkKind::kPartial};
  return {MarkKind::kWhole, start + close + 1, rest.substr(1, close - 1)};
}

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

}  // namespace

std::optional<Language> LanguageOf(const nlohmann::json& language) {
  if (language.is_null()) return Language::kPython;
  if (!language.is_string()) return std::nullopt;
  std::string name = Lower(language.get<std::string>());
  name.erase(0, name.find_first_not_of(" \t"));
  name.erase(name.find_last_not_of(" \t") + 1);
  if (name.empty() || name == "python" || name == "python3") return Language::kPython;
  if (name == "bash") return Language::kBash;
  if (name == "javascript" || name == "js") return Language::kJavascript;
  return std::nullopt;
}

const char* LanguageName(Language language) {
  switch (language) {
    case Language::kBash:
      return "bash";
    case Language::kJavascript:
      return "javascript";
    case Language::kPython:
      break;
  }
  return "python";
}

std::string LanguageProblem(const nlohmann::json& language) {
  const std::string name = language.is_string() ? "'" + language.get<std::string>().substr(0, 40) + "'"
                                                : "of type " + std::string(language.type_name());
  return "language " + name + " is not available: execbox contexts run python, bash and javascript";
}

std::vector<std::string> KernelArgv(Language language) {
  if (language == Language::kJavascript) return {"node", "-e", kJavascriptKernel};
  // No profile or rc: the kernel starts as the sandbox's environment is, the same each time.
  return {"bash", "--noprofile", "--norc"};
}

bool IsVariableName(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return c == '_' || std::isalnum(static_cast<unsigned char>(c)); });
}

std::string KernelInput(Language language, std::string_view code,
                        const std::map<std::string, std::string>& env, std::string_view word) {
  if (language == Language::kJavascript) {
    const nlohmann::json request{{"word", word}, {"code", code}, {"env", env}};
    return request.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  // The code runs in the kernel's shell itself (eval), so what it sets, exports, defines or
  // cd's into stays; its stdin is /dev/null, never the rest of what the host writes. Builtins
  // by that name: a function the code defines (printf, say) does not bend the marks.
  std::string in;
  if (!env.empty()) {
    in += "__execbox_env=$(builtin declare -p";
    for (const auto& [name, value] : env) in += " " + name;
    in += " 2>/dev/null)\nbuiltin export";
    for (const auto& [name, value] : env) in += " " + name + "=" + ShellQuote(value);
    in += "\n";
  }
  in += "builtin eval " + ShellQuote(code) + " </dev/null\n__execbox_status=$?\n";
  if (!env.empty()) {
    in += "builtin unset";
    for (const auto& [name, value] : env) in += " " + name;
    in += "\nbuiltin eval \"$__execbox_env\"\nbuiltin unset __execbox_env\n";
  }
  const std::string w(word);
  in += "builtin printf '\\036%s {\"status\":%d}\\036' " + w + " \"$__execbox_status\"\n";
  in += "builtin printf '\\036%s\\036' " + w + " >&2\n";
  return in;
}

KernelOutput::KernelOutput(std::string word) : word_(std::move(word)) {}

std::string KernelOutput::Add(int stream, std::string_view data, uint64_t offset) {
  if (seen_[stream]) return "";  // written after its mark: no execution's output
  std::string& held = held_[stream];
  held.append(data);
  for (size_t from = 0;;) {
    const size_t at = held.find(kMark, from);
    if (at == std::string::npos) return std::exchange(held, {});
    const MarkAt mark = FindMark(held, at, stream, word_);
    if (mark.kind == MarkKind::kNone) {
      from = at + 1;
      continue;
    }
    std::string out = held.substr(0, at);
    if (mark.kind == MarkKind::kPartial) {
      held.erase(0, at);
      return out;
    }
    seen_[stream] = true;
    // The mark ends within this text: what follows it in this text is dropped with it.
    end_offset_ = std::max(end_offset_, offset + data.size());
    if (stream == 0) end_ = nlohmann::json::parse(mark.content, nullptr, false);
    if (end_.is_discarded()) end_ = nullptr;
    held.clear();
    return out;
  }
}

std::string KernelOutput::Rest(int stream) { return std::exchange(held_[stream], {}); }

const char* const kJavascriptKernel = R"js((() => {
  const vm = require('vm');
  const util = require('util');
  globalThis.require = require;  // modules for the code, as Node's REPL gives them
  const report = (e) => process.stderr.write(e && e.stack ? e.stack + '\n' : 'Uncaught ' + util.inspect(e) + '\n');
  process.on('uncaughtException', report);
  process.on('unhandledRejection', report);
  const failure = (e) => e instanceof Error
    ? {name: e.name, value: e.message, traceback: e.stack || e.name + ': ' + e.message}
    : {name: 'Error', value: util.inspect(e), traceback: 'Uncaught ' + util.inspect(e)};
  // Code with a top-level await, run as an async function: the first of these that compiles
  // (its value; its last line's value; none). Its declarations stay inside the function.
  const runAsync = async (code, filename) => {
    const lines = code.replace(/\s+$/, '').split('\n');
    const last = lines.pop().replace(/;\s*$/, '');
    const forms = ['(async () => (\n' + code + '\n))()',
                   '(async () => {\n' + lines.join('\n') + '\nreturn (' + last + '\n)})()',
                   '(async () => {\n' + code + '\n})()'];
    for (let i = 0; ; ++i) {
      let script;
      try {
        script = new vm.Script(forms[i], {filename, lineOffset: -1});
      } catch (e) {
        if (i + 1 < forms.length && e instanceof SyntaxError) continue;
        throw e;
      }
      return await script.runInThisContext();
    }
  };
  let count = 0;
  async function run(request) {
    const saved = {};
    for (const [k, v] of Object.entries(request.env)) {
      saved[k] = process.env[k];
      process.env[k] = v;
    }
    const end = {};
    const filename = 'execution_' + ++count + '.js';
    try {
      let value;
      try {
        value = vm.runInThisContext(request.code, {filename});
      } catch (e) {
        if (!(e instanceof SyntaxError) || !/await is only valid/.test(e.message)) throw e;
        value = await runAsync(request.code, filename);
      }
      if (value !== null && typeof value === 'object' && typeof value.then === 'function') value = await value;
      if (value !== undefined) end.text = util.inspect(value);
    } catch (e) {
      end.error = failure(e);
    }
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    process.stdout.write('\x1e' + request.word + ' ' + JSON.stringify(end) + '\x1e');
    process.stderr.write('\x1e' + request.word + '\x1e');
  }
  let queue = Promise.resolve();
  let pending = '';
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (data) => {
    pending += data;
    for (let nl; (nl = pending.indexOf('\n')) >= 0;) {
      const request = JSON.parse(pending.slice(0, nl));
      pending = pending.slice(nl + 1);
      queue = queue.then(() => run(request));
    }
  });
})();
)js";

}  // namespace execbox::api::e2b
