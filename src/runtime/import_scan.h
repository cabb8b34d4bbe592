// What a piece of Python imports, read from its tokens on the host before a zygote is chosen
// (engine/zygote_choice.h): the syntax check's AST is built inside the child, after the fork
// it would have to choose. The scan is a router's guess, never a rule: a module it misses or
// misreads is imported at run time by whichever child runs the code, so a wrong answer costs
// time, never correctness.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace execbox::runtime {

struct ImportScan {
  // The top-level package of each absolute `import a.b` / `from a.b import c`, each once, in
  // order of appearance (relative imports name the code's own files: not listed).
  std::vector<std::string> modules;
  // The code may import what no statement names: it uses __import__, importlib, exec, eval or
  // runpy, or it names more modules than the scan keeps (kMaxScannedModules).
  bool dynamic = false;
};

inline constexpr size_t kMaxScannedModules = 256;

// Tokenizes `source` as Python does as far as imports go: comments, string literals of every
// prefix and quoting (their contents are not code), bracketed and backslash-continued lines,
// and statements after `;` or a compound statement's `:`. Never fails: bytes it cannot read
// are skipped.
ImportScan ScanImports(std::string_view source);

// Whether `top_level` is a module of the sandbox's standard library (sys.stdlib_module_names of
// the interpreter the build found at /usr/bin/python3).
bool IsStandardModule(std::string_view top_level);

}  // namespace execbox::runtime
