#include "engine/package_sets.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <system_error>

#include "base/io.h"
#include "base/random.h"
#include "base/sha256.h"
#include "engine/result_json.h"
#include "jail/sandbox.h"
#include "runtime/font_cache.h"

namespace execbox::engine {
namespace {

namespace fs = std::filesystem;

constexpr char kServerPrefix[] = "server-";
constexpr char kLockFile[] = ".lock";
constexpr char kBuildPrefix[] = ".build-";
constexpr size_t kMaxWheelhouseEntries = 10000;

// Directories of servers that are gone: nobody holds their lock.
void RemoveStale(const std::string& parent) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename();
    if (!name.starts_with(kServerPrefix) || !entry.is_directory(ec) || entry.is_symlink(ec)) continue;
    int fd = ::open((entry.path() / kLockFile).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    bool stale = fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (fd >= 0) ::close(fd);
    if (stale) fs::remove_all(entry.path(), ec);
  }
}

// Makes what the build wrote the server's own, readable by the code and by nobody else's
// writes, and measures it. False for anything but files, directories and symlinks, or past
// `most` bytes or runtime::kMaxPackageSetFiles entries. The build's jail has ended: nothing
// changes under this walk.
bool Seal(const std::string& dir, uint64_t most) {
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  uint64_t bytes = 0, entries = 0;
  std::error_code ec;
  auto seal = [&](const fs::path& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return false;
    if (::lchown(path.c_str(), uid, gid) != 0) return false;
    if (S_ISLNK(st.st_mode)) return true;  // resolved inside the jail, never here
    mode_t mode = 0;
    if (S_ISDIR(st.st_mode)) {
      mode = 0755;
    } else if (S_ISREG(st.st_mode)) {
      mode = (st.st_mode & S_IXUSR) != 0 ? 0755 : 0644;
      bytes += static_cast<uint64_t>(st.st_size);
    } else {
      return false;
    }
    return ::chmod(path.c_str(), mode) == 0;
  };
  if (!seal(dir)) return false;
  for (fs::recursive_directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec)) {
    if (!seal(it->path()) || bytes > most || ++entries > runtime::kMaxPackageSetFiles) return false;
  }
  return !ec;
}

bool WriteManifest(const std::string& dir, const std::vector<InstalledPackage>& installed) {
  const std::string text = nlohmann::json{{"installed", InstalledJson(installed)}}.dump();
  const std::string path = dir + "/manifest.json";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool ok = WriteAll(fd, text) && ::fchmod(fd, 0644) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

std::string DefaultPackageSetsParent() {
  std::string cache = runtime::ExecboxCacheDir();
  return cache.empty() ? cache : cache + "/package-sets";
}

Expected<std::unique_ptr<PackageSets>> PackageSets::Open(const std::string& parent, std::string wheelhouse,
                                                         size_t max_sets) {
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) return Fail("package sets: cannot make " + parent + ": " + ec.message());
  RemoveStale(parent);
  auto suffix = RandomHex(8);
  if (!suffix) return std::unexpected(suffix.error());
  const std::string dir = parent + "/" + kServerPrefix + *suffix;
  // 0711: the code reaches a set it is given the name of, as the host user it maps to (nobody
  // when this is root), and cannot list the others; nor can another host process of that user
  // find a set being built (its directory is that user's until it is sealed).
  if (::mkdir(dir.c_str(), 0700) != 0 || ::chmod(dir.c_str(), 0711) != 0)
    return FailErrno("package sets: cannot make " + dir);
  int lock =
      ::open((dir + "/" + kLockFile).c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (lock < 0 || ::flock(lock, LOCK_EX | LOCK_NB) != 0) {
    if (lock >= 0) ::close(lock);
    fs::remove_all(dir, ec);
    return FailErrno("package sets: cannot lock " + dir);
  }
  return std::unique_ptr<PackageSets>(new PackageSets(dir, lock, std::move(wheelhouse), max_sets));
}

PackageSets::~PackageSets() {
  std::error_code ec;
  fs::remove_all(dir_, ec);
  ::close(lock_fd_);
}

PackageSets::Lease::~Lease() {
  if (owner_ != nullptr) owner_->Release(name_);
}

std::string PackageSets::NameFor(const std::vector<std::string>& packages) const {
  std::vector<std::string> names = packages;
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::string text = "execbox package set 1\n";
  for (const auto& n : names) text += "package " + n + "\n";
  // pip reads only the wheelhouse's top level (--find-links), and so does this listing.
  DIR* d = ::opendir(wheelhouse_.c_str());
  if (d == nullptr) return "";
  std::vector<std::string> files;
  while (dirent* e = ::readdir(d)) {
    std::string entry = e->d_name;
    if (entry == "." || entry == "..") continue;
    struct stat st {};
    if (::fstatat(::dirfd(d), e->d_name, &st, 0) != 0) continue;
    char line[512];
    std::snprintf(line, sizeof line, " %lld %lld.%09ld %lld.%09ld %llu\n", static_cast<long long>(st.st_size),
                  static_cast<long long>(st.st_mtim.tv_sec), st.st_mtim.tv_nsec,
                  static_cast<long long>(st.st_ctim.tv_sec), st.st_ctim.tv_nsec,
                  static_cast<unsigned long long>(st.st_ino));
    files.push_back("file " + entry + line);
    if (files.size() > kMaxWheelhouseEntries) {
      // A digest of part of the listing could name two wheelhouses alike: no set for this one.
      ::closedir(d);
      return "";
    }
  }
  ::closedir(d);
  std::sort(files.begin(), files.end());
  for (const auto& f : files) text += f;
  return Sha256Hex(text);
}

std::optional<PackageSets::Lease> PackageSets::Acquire(const runtime::PythonProgram& program,
                                                       const ExecuteOptions& options) {
  if (program.packages.empty() || program.mode != runtime::Mode::kRun) return std::nullopt;
  const std::string name = NameFor(program.packages);
  if (name.empty()) return std::nullopt;
  std::unique_lock lock(mu_);
  // Looked up again after every wait: the map may have changed meanwhile.
  while (entries_[name].building) {
    if (options.cancel != nullptr && options.cancel->load()) return std::nullopt;
    changed_.wait_for(lock, std::chrono::milliseconds(100));
  }
  if (!entries_[name].ready) {
    if (Clock::now() < entries_[name].retry_at) return std::nullopt;
    entries_[name].building = true;
    lock.unlock();
    const auto built = Build(name, program, options);
    lock.lock();
    Entry& entry = entries_[name];
    entry.building = false;
    entry.ready = built.has_value();
    // A cancelled build says nothing about the names: the next request tries again.
    const bool cancelled = options.cancel != nullptr && options.cancel->load();
    if (!built && !cancelled) {
      entry.retry_at = Clock::now() + kRetryAfterFailure;
      std::fprintf(
          stderr, "execbox: package set %.12s not built, installs are per execution for %lld s: %s\n",
          name.c_str(), static_cast<long long>(kRetryAfterFailure.count()), built.error().message.c_str());
    }
    changed_.notify_all();
    if (!built) return std::nullopt;
  }
  Entry& entry = entries_[name];
  ++entry.users;
  entry.last_used = ++uses_;
  EvictLocked();
  return Lease(this, name);
}

execbox::Status PackageSets::Build(const std::string& name, const runtime::PythonProgram& program,
                                   const ExecuteOptions& options) {
  auto suffix = RandomHex(8);
  if (!suffix) return std::unexpected(suffix.error());
  const std::string staging = dir_ + "/" + kBuildPrefix + *suffix;
  if (::mkdir(staging.c_str(), 0700) != 0) return FailErrno("cannot make " + staging);
  auto built = [&]() -> execbox::Status {
    if (::chown(staging.c_str(), jail::CodeHostUid(), jail::CodeHostGid()) != 0)
      return FailErrno("cannot give " + staging + " to the code's user");
    runtime::PythonProgram build;
    build.mode = runtime::Mode::kRun;
    build.display_name = "<packages>";
    build.packages = program.packages;
    build.limits = program.limits;
    build.collect_files = false;
    build.seed_matplotlib = false;
    build.wheelhouse = wheelhouse_;
    build.package_set = name;
    build.package_set_build_dir = staging;
    auto result = ExecuteCold(build, ExecuteOptions{.cancel = options.cancel});
    if (!result) return std::unexpected(result.error());
    if (result->status != engine::Status::kOk || result->error || result->exit_code != 0) {
      return Fail(std::string("the install ended ") + StatusName(result->status) +
                  (result->error ? ": " + result->error->ename + ": " + result->error->evalue : ""));
    }
    if (!Seal(staging, program.limits.work_dir_bytes))
      return Fail("it holds more than " + std::to_string(program.limits.work_dir_bytes) + " bytes or " +
                  std::to_string(runtime::kMaxPackageSetFiles) +
                  " files, or what is not a file, directory or link");
    if (!WriteManifest(staging, result->installed)) return FailErrno("cannot write its manifest");
    if (::rename(staging.c_str(), (dir_ + "/" + name).c_str()) != 0)
      return FailErrno("cannot put it in place");
    return {};
  }();
  std::error_code ec;
  if (!built) fs::remove_all(staging, ec);
  return built;
}

void PackageSets::Release(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(name);
  if (it != entries_.end() && it->second.users > 0) --it->second.users;
  EvictLocked();
}

void PackageSets::EvictLocked() {
  // Failures are remembered only until they may be tried again.
  const auto now = Clock::now();
  std::erase_if(entries_, [&](const auto& e) {
    return !e.second.ready && !e.second.building && e.second.users == 0 && e.second.retry_at <= now;
  });
  for (;;) {
    size_t ready = 0;
    auto oldest = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (!it->second.ready) continue;
      ++ready;
      if (it->second.users == 0 &&
          (oldest == entries_.end() || it->second.last_used < oldest->second.last_used))
        oldest = it;
    }
    if (ready <= max_sets_ || oldest == entries_.end()) return;
    std::error_code ec;
    fs::remove_all(dir_ + "/" + oldest->first, ec);
    entries_.erase(oldest);
  }
}

size_t PackageSets::ready_count() {
  std::lock_guard lock(mu_);
  return static_cast<size_t>(
      std::count_if(entries_.begin(), entries_.end(), [](const auto& e) { return e.second.ready; }));
}

}  // namespace execbox::engine
