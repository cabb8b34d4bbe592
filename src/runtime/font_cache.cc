#include "runtime/font_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "base/io.h"
#include "jail/sandbox.h"
#include "runtime/python_program.h"

namespace execbox::runtime {

std::string ExecboxCacheDir() {
  // A service's own (systemd's CacheDirectory=execbox sets CACHE_DIRECTORY, a list).
  for (const char* name : {"EXECBOX_CACHE_DIR", "CACHE_DIRECTORY"}) {
    if (const char* dir = std::getenv(name); dir != nullptr && dir[0] == '/') {
      std::string first(dir);
      return first.substr(0, first.find(':'));
    }
  }
  if (::geteuid() == 0) return "/var/cache/execbox";
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] == '/') {
    return std::string(xdg) + "/execbox";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] == '/') {
    return std::string(home) + "/.cache/execbox";
  }
  return "";
}

namespace {

std::string CacheDir() {
  std::string root = ExecboxCacheDir();
  return root.empty() ? root : root + "/matplotlib";
}

constexpr const char* kSeedDir = "/opt/execbox/matplotlib/";
constexpr size_t kMaxCacheFile = 4u << 20;

bool MakeDirs(const std::string& path) {
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    std::string prefix = path.substr(0, slash);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return false;
    if (slash == std::string::npos) return true;
  }
}

std::vector<jail::SyntheticFile> LoadCache(const std::string& dir) {
  std::vector<jail::SyntheticFile> files;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return files;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 6 || name.substr(name.size() - 5) != ".json") continue;
    auto content = ReadFile(dir + "/" + name, kMaxCacheFile);
    if (content) files.push_back({.path = kSeedDir + name, .content = std::move(*content)});
  }
  ::closedir(d);
  return files;
}

// Runs matplotlib's font scan in a jail of its own and keeps the files it wrote.
std::vector<jail::SyntheticFile> BuildInJail() {
  PythonProgram p;
  p.code = "import os\nos.environ['MPLCONFIGDIR'] = os.path.abspath('mpl')\nimport matplotlib.font_manager\n";
  p.seed_matplotlib = false;
  p.limits.wall_time = std::chrono::seconds(60);
  auto policy = MakePolicy(p);
  if (!policy) return {};
  auto out = jail::Run(*policy);
  if (!out || out->ending != jail::Ending::kExited || out->exit_code != 0) return {};
  std::vector<jail::SyntheticFile> files;
  for (auto& f : out->files) {
    if (f.name.rfind("mpl/", 0) != 0 || f.name.find('/', 4) != std::string::npos) continue;
    if (f.content.size() > kMaxCacheFile) continue;
    files.push_back({.path = kSeedDir + f.name.substr(4), .content = std::move(f.content)});
  }
  return files;
}

// Written to a temporary name and renamed: concurrent first runs never see half a file.
void Save(const std::string& dir, const std::vector<jail::SyntheticFile>& files) {
  for (const auto& f : files) {
    std::string name = f.path.substr(std::string(kSeedDir).size());
    std::string tmp = dir + "/." + name + "." + std::to_string(::getpid());
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!fd.Valid()) continue;
    bool ok = static_cast<bool>(WriteAll(fd.Get(), f.content));
    fd.Reset();
    if (!ok || ::rename(tmp.c_str(), (dir + "/" + name).c_str()) != 0) ::unlink(tmp.c_str());
  }
}

}  // namespace

std::string MatplotlibCacheDir() { return CacheDir(); }

const std::vector<jail::SyntheticFile>& MatplotlibSeedFiles() {
  static const std::vector<jail::SyntheticFile> files = [] {
    std::string dir = CacheDir();
    if (dir.empty()) return std::vector<jail::SyntheticFile>{};
    auto cached = LoadCache(dir);
    if (!cached.empty()) return cached;
    // Building costs one extra jail run; only worth it when the result can be kept.
    if (!MakeDirs(dir) || ::access(dir.c_str(), W_OK) != 0) return std::vector<jail::SyntheticFile>{};
    auto built = BuildInJail();
    Save(dir, built);
    return built;
  }();
  return files;
}

}  // namespace execbox::runtime
