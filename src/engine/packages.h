// What the sandbox's own interpreter has installed (issue 16's "what is available, stated"):
// each distribution's name, version and the modules it provides, as that interpreter reports
// them (importlib.metadata over its dist-packages), never a list kept by hand.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/result.h"
#include "runtime/python_program.h"

namespace execbox::engine {

struct PackageCatalog {
  std::string python;                      // "3.11.2"
  std::vector<InstalledPackage> packages;  // sorted by name, case-insensitively
};

// The listing as a program for the sandbox (permissive, no files, no plots) with `limits`.
runtime::PythonProgram PackageListingProgram(const jail::Limits& limits);
// The catalog from that program's Result, or why there is none.
Expected<PackageCatalog> ParsePackageListing(const Result& result);
// {"python", "packages": [{name, version, modules}]}.
nlohmann::json ToJson(const PackageCatalog& catalog);
// Every module name, sorted, for a one-line summary (an MCP tool's description).
std::vector<std::string> ModuleNames(const PackageCatalog& catalog);

}  // namespace execbox::engine
