#include "cli/repl_command.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "base/base64.h"
#include "base/io.h"
#include "base/unique_fd.h"
#include "cli/limit_options.h"
#include "engine/gate.h"
#include "engine/result_json.h"
#include "engine/result_text.h"

namespace execbox::cli {
namespace {

struct ReplArgs {
  LimitArgs limits;
  std::string lint_profile = "permissive";  // --policy
  bool json = false;
  std::string save_figures;
  std::string guard = "off";  // --guard: every cell's, as a server's [engine] guard
};

const char* const kReplHelp =
    "Reads Python from standard input one cell at a time and runs each cell in the same sandboxed\n"
    "session, so variables and imports persist (numpy, pandas, matplotlib, scipy and more are preloaded).\n"
    "On a terminal it shows a banner and the prompts >>> and ... on stderr; piped input gets neither.\n"
    "\n"
    "A cell is one top-level statement, as in Python's REPL. It goes on while a bracket or a\n"
    "triple-quoted string is open or a line ends with a backslash; a statement whose first line\n"
    "ends with ':' (a compound statement) goes on until a blank line or the next line that is not\n"
    "indented (else/elif/except/finally and comments continue it; any other line starts the next\n"
    "cell). When standard input is not a terminal, blank lines followed by an indented line stay\n"
    "inside the block, as in a script. Blank lines between cells are skipped. A line exit() or\n"
    "quit(), or the end of input, ends the REPL (a pending cell runs first); Ctrl-C ends it at\n"
    "once, with its session (a running cell cannot be interrupted on its own).\n"
    "\n"
    "Output: the cell's stdout and stderr stream live (tracebacks on stderr); then, on stdout, each\n"
    "displayed item's text, a line '[figure WxH PNG, SIZE]' per figure (with '-> DIR/figure-N.png'\n"
    "under --save-figures), the value of a last expression (like Python's echo), and\n"
    "'[file NAME, SIZE bytes, MIME]' for each file the cell created or changed. Limits and other\n"
    "endings are explained on stderr as '[execbox] STATUS: ENAME: EVALUE'; when the session's\n"
    "process was killed (timeout, memory, ...) stderr says '[execbox] session state lost (REASON):\n"
    "...' and the next cell starts from an empty state. The limits apply to each cell.\n"
    "--json prints instead one Result JSON object per cell per line on stdout (the shape of\n"
    "`execbox run --json`, plus session.state: preserved or lost) and nothing else.\n"
    "\n"
    "Exit status: 0 at the end of input; 70 when the sandbox could not be started (or a cell could\n"
    "not be run at all); 2 bad usage.";

// ---- Cell splitting -----------------------------------------------------------------------

// What the scan of one line leaves for the next: a cell cannot end while anything is open.
struct LexState {
  int depth = 0;           // open brackets, parens and braces
  char quote = 0;          // inside a string opened with this quote character
  bool triple = false;     // ... a triple-quoted one
  bool backslash = false;  // the line ended with a backslash outside a string and a comment
  char last = 0;           // last significant character so far (comments and spaces are not)

  bool open() const { return depth > 0 || quote != 0 || backslash; }
};

bool IsQuote(char c) { return c == '"' || c == '\''; }

// Scans a string's body from line[i]; returns the index after the closing quote, or
// line.size() with the string still open.
size_t ScanString(std::string_view line, size_t i, LexState& st) {
  const std::string closing(st.triple ? 3 : 1, st.quote);
  while (i < line.size()) {
    if (line[i] == '\\') {
      if (i + 1 == line.size()) return line.size();  // an escaped newline: still open
      i += 2;
      continue;
    }
    if (line.substr(i, closing.size()) == closing) {
      st.last = st.quote;
      st.quote = 0;
      st.triple = false;
      return i + closing.size();
    }
    ++i;
  }
  // A one-quote string cannot span lines without a backslash: let Python report it.
  if (!st.triple && !line.ends_with('\\')) st.quote = 0;
  return line.size();
}

// Brackets, strings, comments and backslashes, enough to know where a statement ends; the
// sandbox's compile() is what judges the syntax.
void ScanLine(std::string_view line, LexState& st) {
  st.backslash = false;
  size_t i = st.quote != 0 ? ScanString(line, 0, st) : 0;
  while (i < line.size()) {
    char c = line[i];
    if (c == '#') return;
    if (IsQuote(c)) {
      st.quote = c;
      st.triple = line.substr(i, 3) == std::string(3, c);
      i = ScanString(line, i + (st.triple ? 3 : 1), st);
      continue;
    }
    if (c == '\\' && i + 1 == line.size()) {
      st.backslash = true;
      return;
    }
    if (c == '(' || c == '[' || c == '{') ++st.depth;
    if ((c == ')' || c == ']' || c == '}') && st.depth > 0) --st.depth;
    if (!std::isspace(static_cast<unsigned char>(c))) st.last = c;
    ++i;
  }
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool IsBlank(std::string_view line) { return Trim(line).empty(); }
bool IsCommentOnly(std::string_view line) { return Trim(line).starts_with('#'); }
bool IsIndented(std::string_view line) { return line.starts_with(' ') || line.starts_with('\t'); }
bool IsExit(std::string_view line) { return Trim(line) == "exit()" || Trim(line) == "quit()"; }

// else/elif/except/finally at the margin continue the compound statement before them.
bool StartsClause(std::string_view line) {
  for (std::string_view word : {"else", "elif", "except", "finally"}) {
    if (!line.starts_with(word)) continue;
    char next = line.size() > word.size() ? line[word.size()] : ':';
    if (!std::isalnum(static_cast<unsigned char>(next)) && next != '_') return true;
  }
  return false;
}

struct Fed {
  std::vector<std::string> cells;  // completed by this line, in order
  bool exit = false;               // the line was exit() or quit()
};

// Splits lines into cells like Python's REPL (see kReplHelp). With `lookahead` (input that is
// not a terminal, so waiting for the next line costs nothing), blank lines inside a block are
// held until the next line shows whether the block goes on: a script's function bodies have
// them, and ending the block there could only give the next line an IndentationError.
class CellSplitter {
 public:
  explicit CellSplitter(bool lookahead) : lookahead_(lookahead) {}

  Fed Feed(std::string_view line) {
    Fed fed;
    if (!lines_.empty()) {
      if (!state_.open() && lookahead_ && IsBlank(line)) {
        held_.emplace_back(line);
        return fed;
      }
      if (Belongs(line)) {
        for (auto& h : held_) Add(h);
        held_.clear();
        if (Add(line)) fed.cells.push_back(Take());
        return fed;
      }
      fed.cells.push_back(Take());  // the line ends the block and starts the next cell
    }
    if (IsBlank(line) || IsCommentOnly(line)) return fed;
    if (IsExit(line)) {
      fed.exit = true;
      return fed;
    }
    if (Add(line)) fed.cells.push_back(Take());
    return fed;
  }

  // At the end of input: the pending cell, if there is one.
  std::optional<std::string> Finish() {
    if (lines_.empty()) return std::nullopt;
    return Take();
  }

  bool pending() const { return !lines_.empty(); }

 private:
  // Whether a line after a complete header (or decorator) belongs to the pending statement.
  bool Belongs(std::string_view line) const {
    if (state_.open()) return true;
    if (IsBlank(line)) return false;
    if (!head_done_) return true;  // after decorators: the def or class they decorate
    return IsIndented(line) || IsCommentOnly(line) || StartsClause(line);
  }

  // Appends a line; true when it completes the cell (a simple statement's last line).
  bool Add(std::string_view line) {
    bool starts_logical_line = !state_.open();
    lines_.emplace_back(line);
    if (starts_logical_line) decorator_ = Trim(line).starts_with('@');
    ScanLine(line, state_);
    if (head_done_ || state_.open() || decorator_) return false;
    head_done_ = true;
    return state_.last != ':';  // a compound statement goes on with its block
  }

  std::string Take() {
    std::string cell;
    for (const auto& l : lines_) cell += l + "\n";
    lines_.clear();
    held_.clear();
    state_ = {};
    head_done_ = decorator_ = false;
    return cell;
  }

  bool lookahead_;
  std::vector<std::string> lines_, held_;
  LexState state_;
  bool head_done_ = false;  // the first logical line (after decorators) is complete
  bool decorator_ = false;  // the current logical line is a decorator
};

// ---- Figures -------------------------------------------------------------------------------

void Out(std::string_view text) { (void)WriteAll(STDOUT_FILENO, text); }
void Err(std::string_view text) { (void)WriteAll(STDERR_FILENO, text); }

// A bundle's "data", or an empty object where the bundle has none.
const nlohmann::json& Data(const engine::MimeBundle& bundle) {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  auto it = bundle.find("data");
  return it != bundle.end() && it->is_object() ? *it : kEmpty;
}

struct Image {
  std::string extension;  // "png", "jpg", "svg"
  std::string bytes;
};

// The bundle's image, decoded: PNG first (what matplotlib gives), then JPEG, then SVG (text).
std::optional<Image> FindImage(const engine::MimeBundle& bundle) {
  const auto& data = Data(bundle);
  for (auto [mime, ext] :
       {std::pair{"image/png", "png"}, std::pair{"image/jpeg", "jpg"}, std::pair{"image/svg+xml", "svg"}}) {
    if (!data.contains(mime) || !data[mime].is_string()) continue;
    const std::string& value = data[mime].get_ref<const std::string&>();
    std::optional<std::string> bytes = ext == std::string_view("svg") ? value : Base64Decode(value);
    if (bytes) return Image{ext, std::move(*bytes)};
  }
  return std::nullopt;
}

// Writes DIR/figure-N.EXT, never through a symbolic link that someone left at that name.
Expected<std::string> SaveImage(const std::string& dir, int number, const Image& image) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return FailErrno("mkdir(" + dir + ")");
  std::string path = dir + "/figure-" + std::to_string(number) + "." + image.extension;
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd.Valid()) return FailErrno("open(" + path + ")");
  if (auto s = WriteAll(fd.Get(), image.bytes); !s) return std::unexpected(Context(path, s.error()));
  return path;
}

// ---- The session --------------------------------------------------------------------------

class Repl {
 public:
  Repl(const ReplArgs& args, runtime::PythonProgram base, engine::Gate& gate, std::string id)
      : args_(args), base_(std::move(base)), gate_(gate), id_(std::move(id)) {}

  void Run(const std::string& cell) {
    engine::ExecutionRequest request{.program = base_, .session_id = id_};
    request.program.code = cell;
    engine::ExecuteOptions options;
    if (!args_.json) {
      options.on_output = [](jail::Stream s, std::string_view data) {
        (void)WriteAll(s == jail::Stream::kStdout ? STDOUT_FILENO : STDERR_FILENO, data);
      };
    }
    auto result =
        gate_.Execute(LocalCaller(), std::move(request), {.transport = engine::Transport::kCli}, options);
    if (!result) return CouldNotRun(result.error().detail);
    if (result->status == engine::Status::kInternalError) failed_ = true;
    if (args_.json) {
      SaveFigures(*result);
      Out(engine::Dump(engine::ToJson(*result)) + "\n");
      return;
    }
    Show(*result);
    NoteStateLoss(*result);
  }

  // Whether some cell could not be run by the engine (the exit status says so).
  bool failed() const { return failed_; }

 private:
  // The engine could not run the cell at all. In --json the line still comes, so that a
  // reader gets one object per cell.
  void CouldNotRun(const std::string& message) {
    failed_ = true;
    Err("[execbox] the cell could not be run: " + message + "\n");
    if (!args_.json) return;
    engine::Result r{.status = engine::Status::kInternalError};
    r.error = engine::ErrorInfo{
        .ename = "InternalError", .evalue = message, .traceback = {"InternalError: " + message}};
    r.engine = "session";
    r.session = engine::SessionState{.id = id_, .preserved = false, .lost_reason = "internal_error"};
    Out(engine::Dump(engine::ToJson(r)) + "\n");
  }

  // The one text rendering, after the live output; figures are saved as their lines go out.
  void Show(const engine::Result& r) {
    engine::TextOptions text{.streams = false, .session_note = false};
    if (!args_.save_figures.empty()) {
      text.figure_note = [this](size_t, const engine::MimeBundle& bundle) -> std::string {
        auto image = FindImage(bundle);
        if (!image) return "";
        auto path = SaveImage(args_.save_figures, ++figures_, *image);
        if (!path) {
          Err("[execbox] --save-figures: " + path.error().message + "\n");
          return "";
        }
        return " -> " + *path;
      };
    }
    for (const auto& part : engine::RenderText(r, text)) {
      (part.to_stderr ? Err : Out)(part.text + "\n");
    }
  }

  // --json leaves the figures in the JSON and writes the files too, without saying so on stdout.
  void SaveFigures(const engine::Result& r) {
    if (args_.save_figures.empty()) return;
    std::vector<const engine::MimeBundle*> bundles;
    for (const auto& d : r.display) bundles.push_back(&d);
    if (r.result) bundles.push_back(&*r.result);
    for (const auto* b : bundles) {
      auto image = FindImage(*b);
      if (!image) continue;
      if (auto path = SaveImage(args_.save_figures, ++figures_, *image); !path) {
        Err("[execbox] --save-figures: " + path.error().message + "\n");
      }
    }
  }

  // Says once per loss that earlier state is gone. A session repeats "not preserved" in the
  // reply after the one that lost it (for clients that missed it); on a terminal that would
  // say the same thing twice, so a reply whose generation was already announced is quiet.
  void NoteStateLoss(const engine::Result& r) {
    if (!r.session || r.session->preserved) return;
    auto info = gate_.Session(LocalCaller(), id_);
    uint64_t now = info ? info->generation : r.session->generation;
    bool lost_here = now > r.session->generation;  // this cell's process died
    if (!lost_here && announced_ == r.session->generation) return;
    announced_ = now;
    std::string reason = r.session->lost_reason.empty() ? "unknown" : r.session->lost_reason;
    Err("[execbox] session state lost (" + reason + "): variables and imports from earlier cells are gone\n");
  }

  const ReplArgs& args_;
  const runtime::PythonProgram base_;
  engine::Gate& gate_;
  const std::string id_;
  int figures_ = 0;
  std::optional<uint64_t> announced_;  // the fresh generation the user was told about
  bool failed_ = false;
};

// ---- Start-up and the read loop -------------------------------------------------------------

// What every cell shares: the lint profile. An error is bad usage.
Expected<runtime::PythonProgram> BaseProgram(const ReplArgs& a) {
  runtime::PythonProgram p;
  p.display_name = "<stdin>";  // as Python's REPL names its cells in tracebacks
  if (auto profile = runtime::LintProfile(a.lint_profile); !profile) return std::unexpected(profile.error());
  p.lint_profile = a.lint_profile;
  p.collect_files = true;  // to list what each cell wrote
  return p;
}

// One warm worker, no lean one and no prepared one-shot children: the REPL needs its one
// session only.
Expected<std::unique_ptr<engine::Engine>> StartEngine() {
  engine::EngineOptions o;
  o.pool.workers = 1;
  o.pool.lean_workers = 0;
  o.pool.prepared_per_worker = 0;
  o.sessions.max_sessions = 1;
  // A person may leave a prompt open for days; the session must not expire under them.
  o.sessions.idle_ttl = std::chrono::hours(24 * 365);
  return engine::Engine::Create(o);
}

std::string Banner(const std::string& id, const jail::Limits& l) {
  return "execbox repl: sandboxed Python with numpy, pandas, matplotlib, scipy and more preloaded; session " +
         id + "; each cell may use " + std::to_string(l.wall_time.count() / 1000) + " s and " +
         std::to_string(l.memory_bytes >> 20) + " MiB. exit() or Ctrl-D leaves.\n";
}

// Reads cells from standard input until exit()/quit() or its end.
void ReadLoop(Repl& repl, bool interactive) {
  CellSplitter splitter(!interactive);
  std::string line;
  while (true) {
    if (interactive) Err(splitter.pending() ? "... " : ">>> ");
    if (!std::getline(std::cin, line)) break;
    if (line.ends_with('\r')) line.pop_back();
    Fed fed = splitter.Feed(line);
    for (const auto& cell : fed.cells) repl.Run(cell);
    if (fed.exit) return;
  }
  if (interactive) Err("\n");  // the prompt's line, ended as Python ends it on Ctrl-D
  if (auto cell = splitter.Finish()) repl.Run(*cell);
}

int RunRepl(const ReplArgs& a) {
  auto program = BaseProgram(a);
  if (!program) {
    Err("execbox repl: " + program.error().message + "\n");
    return 2;
  }
  auto overrides = LimitOverridesOf(a.limits);
  if (!overrides) {
    Err("execbox repl: " + overrides.error().message + "\n");
    return 2;
  }
  // Bad limits are bad usage, found before a worker is started for them.
  if (auto limits = engine::ApplyLimitOverrides(CommandLineLimits(), jail::Limits{}, *overrides); !limits) {
    Err("execbox repl: " + limits.error().detail + "\n");
    return 2;
  }
  auto engine = StartEngine();
  if (!engine) {
    Err("execbox repl: cannot start the sandbox: " + engine.error().message + "\n");
    return 70;
  }
  engine::Gate gate(**engine, {.limits = CommandLineLimits(),
                               .max_running = 1,
                               .max_queue = 0,
                               .guard = *runtime::GuardNamed(a.guard)});
  // The session takes the limits: they are every cell's.
  auto session = gate.CreateSession(LocalCaller(), *overrides, {.transport = engine::Transport::kCli});
  if (!session) {
    Err("execbox repl: cannot start the session: " + session.error().detail + "\n");
    return session.error().kind == engine::RefusalKind::kInternal ? 70 : 2;
  }
  bool interactive = ::isatty(STDIN_FILENO) == 1;
  if (interactive) Err(Banner(session->id, session->limits));
  Repl repl(a, std::move(*program), gate, session->id);
  ReadLoop(repl, interactive);
  (void)gate.CloseSession(LocalCaller(), session->id, {.transport = engine::Transport::kCli});
  return repl.failed() ? 70 : 0;
}

}  // namespace

void AddReplCommand(CLI::App& app, int& exit_status) {
  auto args = std::make_shared<ReplArgs>();
  CLI::App* repl = app.add_subcommand("repl", "Interactive sandboxed Python prompt on one warm session");
  repl->footer(kReplHelp);
  repl->add_flag("--json", args->json, "Print each cell's full Result JSON, one per line, instead of text");
  AddLimitOptions(*repl, args->limits);
  AddLintProfileOption(*repl, args->lint_profile);
  repl->add_option("--save-figures", args->save_figures,
                   "Write each figure to DIR/figure-N.png (created if missing) and print the path")
      ->type_name("DIR");
  repl->add_option("--guard", args->guard,
                   "audit: audit hooks in the session's interpreter refuse what the sandbox forbids, as\n"
                   "PermissionError, from the first cell on (docs/security.md, \"The guard\")")
      ->check(CLI::IsMember({"off", "audit"}))
      ->default_str("off");
  repl->callback([args, &exit_status] { exit_status = RunRepl(*args); });
}

}  // namespace execbox::cli
