#include "engine/packages.h"

#include <algorithm>
#include <set>

namespace execbox::engine {
namespace {

// Runs inside the sandbox. A distribution's modules come from its top_level.txt, else from the
// first component of the files it installed, else (an .egg-info that is one file, as Debian's
// sympy and XlsxWriter have) from its name, when a module of that name sits beside it; only
// identifiers not starting with "_" count.
// Only dist-packages and site-packages: the standard library is not a package.
constexpr const char* kListing = R"PY(import importlib.metadata as md
import json
import os
import sys
found = {}
for d in md.distributions():
    try:
        name = d.metadata["Name"]
    except Exception:
        continue
    where = str(getattr(d, "_path", ""))
    if not name or name.lower() in found or ("dist-packages" not in where and "site-packages" not in where):
        continue
    top = (d.read_text("top_level.txt") or "").split()
    if not top:
        for f in d.files or []:
            first = f.parts[0] if f.parts else ""
            if first and first != ".." and not first.endswith((".dist-info", ".egg-info", ".pth")):
                top.append(first[:-3] if first.endswith(".py") else first)
    if not top:
        base = os.path.dirname(where)
        for guess in (name.replace("-", "_"), name.replace("-", "_").lower()):
            if os.path.isdir(os.path.join(base, guess)) or os.path.isfile(os.path.join(base, guess + ".py")):
                top.append(guess)
                break
    modules = sorted({m for m in top if m.isidentifier() and not m.startswith("_")})
    found[name.lower()] = {"name": name, "version": d.version, "modules": modules}
print(json.dumps({"python": "%d.%d.%d" % sys.version_info[:3],
                  "packages": sorted(found.values(), key=lambda p: p["name"].lower())}))
)PY";

}  // namespace

runtime::PythonProgram PackageListingProgram(const jail::Limits& limits) {
  runtime::PythonProgram program;
  program.code = kListing;
  program.display_name = "<packages>";
  program.limits = limits;
  program.collect_files = false;
  program.seed_matplotlib = false;
  return program;
}

Expected<PackageCatalog> ParsePackageListing(const Result& result) {
  if (result.status != Status::kOk) {
    return Fail("the package listing ended with " + std::string(StatusName(result.status)) +
                (result.error ? ": " + result.error->ename + ": " + result.error->evalue : ""));
  }
  if (result.stdout_text.truncated) return Fail("the package listing was longer than the output limit");
  auto j = nlohmann::json::parse(result.stdout_text.text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j["packages"].is_array() || !j["python"].is_string())
    return Fail("the package listing is not the JSON it should be");
  PackageCatalog catalog{.python = j["python"].get<std::string>(), .packages = {}};
  for (const auto& p : j["packages"]) {
    if (!p.is_object() || !p["name"].is_string() || !p["version"].is_string() || !p["modules"].is_array())
      return Fail("the package listing has an entry of the wrong shape");
    InstalledPackage package{.name = p["name"], .version = p["version"], .modules = {}};
    for (const auto& m : p["modules"]) {
      if (m.is_string()) package.modules.push_back(m.get<std::string>());
    }
    catalog.packages.push_back(std::move(package));
  }
  return catalog;
}

nlohmann::json ToJson(const PackageCatalog& catalog) {
  nlohmann::json packages = nlohmann::json::array();
  for (const auto& p : catalog.packages)
    packages.push_back({{"name", p.name}, {"version", p.version}, {"modules", p.modules}});
  return {{"python", catalog.python}, {"packages", packages}};
}

std::vector<std::string> ModuleNames(const PackageCatalog& catalog) {
  std::set<std::string> names;
  for (const auto& p : catalog.packages) names.insert(p.modules.begin(), p.modules.end());
  return {names.begin(), names.end()};
}

}  // namespace execbox::engine
