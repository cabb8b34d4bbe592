// What the sandbox's own interpreter has installed (issue 16's "what is available, stated"):
// each distribution's name, version and the modules it provides, as that interpreter reports
// them (importlib.metadata over its dist-packages), never a list kept by hand.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/result.h"
#include "runtime/python_program.h"

namespace execbox::engine {

// A wheel in the operator's wheelhouse, as its file name (PEP 427) says: what a request's
// `packages` or `pip install` in the sandbox can install.
struct WheelhouseEntry {
  std::string name;  // normalized: lower case, "-" between words ("python-docx")
  std::string version;
};

struct PackageCatalog {
  std::string python;                      // "3.11.2"
  std::vector<InstalledPackage> packages;  // sorted by name, case-insensitively
  // The server's wheelhouse, read at each call (the operator may add wheels); nullopt without one.
  std::optional<std::vector<WheelhouseEntry>> wheelhouse;
};

// The wheels in `dir` (files named *.whl, not following links into subdirectories), sorted and
// without duplicates, at most `most`; none when it cannot be read.
std::vector<WheelhouseEntry> ListWheelhouse(const std::string& dir, size_t most = 1000);

// The listing as a program for the sandbox (permissive, no files, no plots) with `limits`.
runtime::PythonProgram PackageListingProgram(const jail::Limits& limits);
// The catalog from that program's Result, or why there is none.
Expected<PackageCatalog> ParsePackageListing(const Result& result);
// {"python", "packages": [{name, version, modules}], "wheelhouse"?: [{name, version}]}.
nlohmann::json ToJson(const PackageCatalog& catalog);
// Every module name, sorted, for a one-line summary (an MCP tool's description).
std::vector<std::string> ModuleNames(const PackageCatalog& catalog);

}  // namespace execbox::engine
