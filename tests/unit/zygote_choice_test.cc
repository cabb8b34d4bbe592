// The router's reading of a program's imports (runtime/import_scan.h) and the rule that picks a
// zygote from it (engine/zygote_choice.h). Each wrong answer here costs only speed, so the cases
// are the ones that would cost it often: the shapes of import statements models write, and text
// that looks like an import but is not code.
#include "engine/zygote_choice.h"

#include <gtest/gtest.h>

#include "runtime/import_scan.h"

namespace execbox {
namespace {

using runtime::ScanImports;
using Modules = std::vector<std::string>;

TEST(ImportScan, ReadsEveryShapeOfImportStatement) {
  EXPECT_EQ(ScanImports("import os").modules, Modules({"os"}));
  EXPECT_EQ(ScanImports("import os.path, json as j,\tcollections.abc as c\n").modules,
            Modules({"os", "json", "collections"}));
  EXPECT_EQ(ScanImports("from datetime import date\nfrom xml.etree import ElementTree as ET").modules,
            Modules({"datetime", "xml"}));
  EXPECT_EQ(ScanImports("from math import (\n  sqrt,\n  pi,\n)\nimport re").modules, Modules({"math", "re"}));
  EXPECT_EQ(ScanImports("import json; import csv\nx = 1; from io import StringIO").modules,
            Modules({"json", "csv", "io"}));
  EXPECT_EQ(ScanImports("try: import numpy\nexcept ImportError: numpy = None").modules, Modules({"numpy"}));
  EXPECT_EQ(ScanImports("def f():\n    import pandas as pd\n    return pd\n").modules, Modules({"pandas"}));
  EXPECT_EQ(ScanImports("if True:\n\tfrom scipy import stats").modules, Modules({"scipy"}));
  EXPECT_EQ(ScanImports("import \\\n  numpy").modules, Modules({"numpy"}));
  EXPECT_EQ(ScanImports("import json, \\\r\n  csv\r\nimport re").modules, Modules({"json", "csv", "re"}));
  EXPECT_EQ(ScanImports("import os\nimport os.path\nfrom os import sep").modules, Modules({"os"}));
  EXPECT_EQ(ScanImports("from __future__ import annotations").modules, Modules({"__future__"}));
  EXPECT_EQ(ScanImports("import café").modules, Modules({"café"}));
  EXPECT_EQ(ScanImports("import numpy").dynamic, false);
}

TEST(ImportScan, IgnoresWhatIsNotAnImportStatement) {
  EXPECT_TRUE(ScanImports("# import numpy\nprint(1)").modules.empty());
  EXPECT_TRUE(ScanImports("s = 'import numpy'\nt = \"from pandas import x\"").modules.empty());
  EXPECT_TRUE(
      ScanImports("doc = '''\nimport numpy\n'''\nd2 = \"\"\"from scipy import x\"\"\"").modules.empty());
  EXPECT_TRUE(ScanImports("r = rb'import numpy'\nf = f\"{x}\\\" import pandas\"").modules.empty());
  EXPECT_TRUE(ScanImports("s = 'it\\'s'\nt = 'a' # import numpy").modules.empty());
  EXPECT_TRUE(
      ScanImports("def gen():\n    yield from range(3)\nraise ValueError() from None").modules.empty());
  EXPECT_TRUE(ScanImports("x = [\nimport_count for import_count in y]\nfrom_ = 3").modules.empty());
  // Relative imports name the code's own files.
  EXPECT_TRUE(ScanImports("from . import sibling\nfrom .pkg.mod import thing").modules.empty());
  // Broken code: the child reports the syntax error; the scan only must not stop.
  EXPECT_EQ(ScanImports("s = 'unterminated\nimport json\nx = (\n").modules, Modules({"json"}));
  EXPECT_TRUE(ScanImports("").modules.empty());
  EXPECT_TRUE(ScanImports("'''never closed\nimport numpy").modules.empty());
}

TEST(ImportScan, FlagsWhatMayImportWithoutAStatement) {
  EXPECT_TRUE(ScanImports("m = __import__('numpy')").dynamic);
  EXPECT_TRUE(ScanImports("import importlib\nimportlib.import_module('pandas')").dynamic);
  EXPECT_TRUE(ScanImports("exec('import numpy')").dynamic);
  EXPECT_TRUE(ScanImports("eval(code)").dynamic);
  EXPECT_TRUE(ScanImports("import runpy").dynamic);
  EXPECT_FALSE(ScanImports("print('exec')").dynamic);  // in a string: not a name
  std::string many;
  for (size_t i = 0; i <= runtime::kMaxScannedModules; ++i) many += "import m" + std::to_string(i) + "\n";
  auto scan = ScanImports(many);
  EXPECT_TRUE(scan.dynamic);
  EXPECT_EQ(scan.modules.size(), runtime::kMaxScannedModules);
}

TEST(ImportScan, KnowsTheStandardLibrary) {
  for (const char* m :
       {"os", "sys", "json", "asyncio", "xml", "__future__", "_thread", "sqlite3", "zoneinfo"})
    EXPECT_TRUE(runtime::IsStandardModule(m)) << m;
  for (const char* m : {"numpy", "pandas", "matplotlib", "requests", "", "OS", "os.path", "execbox_agent"})
    EXPECT_FALSE(runtime::IsStandardModule(m)) << m;
}

engine::ZygoteKind Choose(const std::string& code) {
  runtime::PythonProgram p;
  p.code = code;
  return engine::ChooseZygote(p);
}

TEST(ZygoteChoice, StandardLibraryCodeGoesToTheLeanZygote) {
  using engine::ZygoteKind;
  EXPECT_EQ(Choose("print(1)"), ZygoteKind::kLean);
  EXPECT_EQ(Choose("import json, math, re\nfrom collections import Counter\nprint(Counter('aab'))"),
            ZygoteKind::kLean);
  EXPECT_EQ(Choose("s = 'import numpy'  # import pandas"), ZygoteKind::kLean);
  EXPECT_EQ(Choose("import numpy as np"), ZygoteKind::kFull);
  EXPECT_EQ(Choose("import json\nimport matplotlib.pyplot as plt"), ZygoteKind::kFull);
  EXPECT_EQ(Choose("from mymodule import helper"), ZygoteKind::kFull);  // an input file, or a package
  EXPECT_EQ(Choose("np = __import__('numpy')"), ZygoteKind::kFull);
  EXPECT_EQ(Choose("import importlib\nimportlib.import_module('json')"), ZygoteKind::kFull);

  runtime::PythonProgram with_packages;
  with_packages.code = "print(1)";
  with_packages.packages = {"tinypkg"};
  EXPECT_EQ(engine::ChooseZygote(with_packages), ZygoteKind::kFull);
  runtime::PythonProgram check;
  check.mode = runtime::Mode::kCheck;
  check.code = "import numpy";
  EXPECT_EQ(engine::ChooseZygote(check), ZygoteKind::kLean);  // compiled and checked, never run
}

}  // namespace
}  // namespace execbox
