#include "runtime/import_scan.h"

#include <algorithm>

namespace execbox::runtime {
namespace {

// Names as Python reads them; any non-ASCII byte is taken as part of one (a UTF-8 identifier).
bool IsNameStart(unsigned char c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}
bool IsNameChar(unsigned char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }

// The tokens the scan needs: names, and the punctuation that ends or joins a statement.
enum class Kind { kName, kDot, kComma, kEnd /* NEWLINE or ';' */, kColon, kOther };
struct Token {
  Kind kind;
  std::string_view text;
};

class Lexer {
 public:
  explicit Lexer(std::string_view s) : s_(s) {}
  // False at the end of the source.
  bool Next(Token& t) {
    for (;;) {
      if (i_ >= s_.size()) {
        if (depth_ == 0 && !ended_) {  // a final statement without its newline
          ended_ = true;
          t = {Kind::kEnd, {}};
          return true;
        }
        return false;
      }
      const unsigned char c = s_[i_];
      if (c == '\n') {
        ++i_;
        if (depth_ == 0) {
          t = {Kind::kEnd, {}};
          return true;
        }
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\r' || c == '\f') {
        ++i_;
        continue;
      }
      if (c == '\\' && i_ + 1 < s_.size() && (s_[i_ + 1] == '\n' || s_[i_ + 1] == '\r')) {
        // A continued line (LF, CR LF or CR): the statement goes on.
        i_ += s_.substr(i_ + 1, 2) == "\r\n" ? 3 : 2;
        continue;
      }
      if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
        continue;
      }
      if (c == '"' || c == '\'') {
        SkipString();
        t = {Kind::kOther, {}};
        return true;
      }
      if (IsNameStart(c)) {
        size_t start = i_;
        while (i_ < s_.size() && IsNameChar(s_[i_])) ++i_;
        // A string's prefix (r, b, u, f and their pairs) is part of the literal.
        if (i_ < s_.size() && (s_[i_] == '"' || s_[i_] == '\'') && i_ - start <= 2 && IsStringPrefix(start)) {
          SkipString();
          t = {Kind::kOther, {}};
          return true;
        }
        t = {Kind::kName, s_.substr(start, i_ - start)};
        return true;
      }
      ++i_;
      switch (c) {
        case '.':
          t = {Kind::kDot, {}};
          return true;
        case ',':
          t = {Kind::kComma, {}};
          return true;
        case '(':
        case '[':
        case '{':
          ++depth_;  // brackets matter only for where a statement ends
          t = {Kind::kOther, {}};
          return true;
        case ')':
        case ']':
        case '}':
          if (depth_ > 0) --depth_;
          t = {Kind::kOther, {}};
          return true;
        case ';':
          t = {Kind::kEnd, {}};
          return true;
        case ':':
          t = {depth_ == 0 ? Kind::kColon : Kind::kOther, {}};
          return true;
        default:
          t = {Kind::kOther, {}};
          return true;
      }
    }
  }

 private:
  bool IsStringPrefix(size_t start) const {
    for (size_t k = start; k < i_; ++k) {
      char p = static_cast<char>(s_[k] | 0x20);
      if (p != 'r' && p != 'b' && p != 'u' && p != 'f') return false;
    }
    return true;
  }
  // From an opening quote to just past the closing one (or the end of the source).
  void SkipString() {
    const char q = s_[i_];
    const bool triple = i_ + 2 < s_.size() && s_[i_ + 1] == q && s_[i_ + 2] == q;
    i_ += triple ? 3 : 1;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '\\') {
        i_ += 2;  // an escaped character, in a raw string too as far as the quote goes
        continue;
      }
      if (!triple && c == '\n') return;  // unterminated: a syntax error the child reports
      if (c == q && (!triple || (i_ + 2 < s_.size() && s_[i_ + 1] == q && s_[i_ + 2] == q))) {
        i_ += triple ? 3 : 1;
        return;
      }
      ++i_;
    }
  }
  std::string_view s_;
  size_t i_ = 0;
  int depth_ = 0;
  bool ended_ = false;
};

bool IsDynamicName(std::string_view n) {
  return n == "__import__" || n == "importlib" || n == "exec" || n == "eval" || n == "runpy";
}

}  // namespace

ImportScan ScanImports(std::string_view source) {
  ImportScan scan;
  auto add = [&](std::string_view name) {
    if (std::find(scan.modules.begin(), scan.modules.end(), name) != scan.modules.end()) return;
    if (scan.modules.size() >= kMaxScannedModules) {
      scan.dynamic = true;
      return;
    }
    scan.modules.emplace_back(name);
  };
  Lexer lex(source);
  Token t;
  bool at_start = true;  // the next token begins a statement
  // Within `import a.b as c, d` (kImport) or `from a.b` before its `import` (kFrom): the state
  // of the statement being read; kNone elsewhere.
  enum class In { kNone, kImport, kFrom } in = In::kNone;
  bool want_module = false;  // the next name is a module's first component
  bool after_as = false;     // `as NAME` is being read
  bool relative = false;
  std::string_view from_module;
  while (lex.Next(t)) {
    const bool starts = at_start;
    at_start = t.kind == Kind::kEnd || t.kind == Kind::kColon;
    if (t.kind == Kind::kEnd) {
      in = In::kNone;
      continue;
    }
    if (t.kind == Kind::kName && IsDynamicName(t.text)) scan.dynamic = true;
    if (starts && t.kind == Kind::kName && (t.text == "import" || t.text == "from")) {
      in = t.text == "import" ? In::kImport : In::kFrom;
      want_module = true;
      after_as = false;
      relative = false;
      from_module = {};
      continue;
    }
    if (in == In::kImport) {
      if (t.kind == Kind::kName && t.text == "as") {
        after_as = true;
      } else if (t.kind == Kind::kName && want_module && !after_as) {
        add(t.text);
        want_module = false;
      } else if (t.kind == Kind::kComma) {
        want_module = true;
        after_as = false;
      }
    } else if (in == In::kFrom) {
      if (t.kind == Kind::kDot && want_module) {
        relative = true;
      } else if (t.kind == Kind::kName && t.text == "import") {
        if (!relative && !from_module.empty()) add(from_module);
        in = In::kNone;  // what follows are names within the module
      } else if (t.kind == Kind::kName && want_module) {
        from_module = t.text;
        want_module = false;
      }
    }
  }
  return scan;
}

}  // namespace execbox::runtime
