#include "engine/packages.h"

#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <string_view>

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
  nlohmann::json j = {{"python", catalog.python}, {"packages", packages}};
  if (catalog.wheelhouse) {
    nlohmann::json wheels = nlohmann::json::array();
    for (const auto& w : *catalog.wheelhouse) wheels.push_back({{"name", w.name}, {"version", w.version}});
    j["wheelhouse"] = std::move(wheels);
  }
  return j;
}

std::vector<WheelhouseEntry> ListWheelhouse(const std::string& dir, size_t most) {
  std::set<std::pair<std::string, std::string>> found;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return {};
  while (struct dirent* e = ::readdir(d)) {
    std::string_view file(e->d_name);
    // name-version(-build)?-python-abi-platform.whl, name with "_" for any run of "-_.".
    if (!file.ends_with(".whl") || file.size() > 255) continue;
    size_t first = file.find('-');
    size_t second = first == std::string_view::npos ? first : file.find('-', first + 1);
    if (first == 0 || second == std::string_view::npos) continue;
    std::string name;
    for (char c : file.substr(0, first)) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') {
        name.clear();
        break;
      }
      name += c == '_' || c == '.' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    std::string version(file.substr(first + 1, second - first - 1));
    if (name.empty() || version.empty()) continue;
    found.emplace(std::move(name), std::move(version));
    if (found.size() >= most) break;
  }
  ::closedir(d);
  std::vector<WheelhouseEntry> out;
  for (const auto& [name, version] : found) out.push_back({.name = name, .version = version});
  return out;
}

std::vector<std::string> ModuleNames(const PackageCatalog& catalog) {
  std::set<std::string> names;
  for (const auto& p : catalog.packages) names.insert(p.modules.begin(), p.modules.end());
  return {names.begin(), names.end()};
}

}  // namespace execbox::engine
