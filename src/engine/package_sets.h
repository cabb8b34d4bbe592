// Package sets: a one-shot execution's `packages`, installed once and then reused.
//
// Installing from the wheelhouse costs about two seconds (pip resolving, unpacking, the import
// check), and a one-shot execution's work dir is gone when it ends, so a model that sends the
// same `packages` with every execution would pay that every time. Instead, the first such
// request builds a package set: the same install (the agent's wheelhouse.py), in a cold jail of
// its own that runs no code of the request, into a host directory bound writable there. The
// host then makes the set its own (its files the server's, read-only to the code, at most a
// work dir's size) and adds the manifest of what was installed. Every later request with the
// same packages, while the wheelhouse is unchanged, finds the set read-only at
// runtime::kPackageSetsDir through its zygote's bind, and the agent imports from it.
//
// Why it is safe to share: a set holds only what pip unpacked from the operator's wheels for
// these names (no sdist is built, PIP_ONLY_BINARY) and was never writable by a request's code;
// its name is a digest of the names asked for and of the wheelhouse's listing (each file's
// name, size, times and inode), so a changed wheel is a different set. Sessions install into
// their own work dir as before (their packages are theirs to change).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "engine/cold_execution.h"

namespace execbox::engine {

class PackageSets {
 public:
  // A set in use by one execution: it is not removed until every lease on it is gone.
  class Lease {
   public:
    Lease(PackageSets* owner, std::string name) : owner_(owner), name_(std::move(name)) {}
    Lease(Lease&& other) noexcept
        : owner_(std::exchange(other.owner_, nullptr)), name_(std::move(other.name_)) {}
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    const std::string& name() const { return name_; }

   private:
    PackageSets* owner_;
    std::string name_;
  };

  // Sets live in a directory of this server's own under `parent` (made if missing), removed when
  // the PackageSets is; directories left by servers that ended without removing theirs are
  // removed here. `wheelhouse` is the operator's, as the engine has it.
  static Expected<std::unique_ptr<PackageSets>> Open(const std::string& parent, std::string wheelhouse,
                                                     size_t max_sets = kMaxSets);
  ~PackageSets();
  PackageSets(const PackageSets&) = delete;
  PackageSets& operator=(const PackageSets&) = delete;

  // The host directory holding the sets, for the zygote's bind (WorkerOptions::package_sets).
  const std::string& dir() const { return dir_; }

  // The set for `program`'s packages, built now (under the program's limits) when there is none.
  // nullopt when it cannot be had: the wheelhouse cannot be read, the install failed (then for a
  // while no new build is tried for these names), or it was cancelled. The caller then installs
  // in the execution as before, which reports any failure the way it always did.
  std::optional<Lease> Acquire(const runtime::PythonProgram& program, const ExecuteOptions& options);

  // How many sets are ready (tests, /metrics-like reporting).
  size_t ready_count();

  // More sets than this: the least recently used ones not in use are removed.
  static constexpr size_t kMaxSets = 32;
  // After a failed build, requests with the same names install in the execution for this long.
  static constexpr std::chrono::seconds kRetryAfterFailure{60};

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    bool ready = false;
    bool building = false;
    int users = 0;
    uint64_t last_used = 0;
    Clock::time_point retry_at{};
  };

  PackageSets(std::string dir, int lock_fd, std::string wheelhouse, size_t max_sets)
      : dir_(std::move(dir)), lock_fd_(lock_fd), wheelhouse_(std::move(wheelhouse)), max_sets_(max_sets) {}
  // The digest naming the set for these names and the wheelhouse as it is now; "" when the
  // wheelhouse cannot be read or holds more entries than are read for it (then each execution
  // installs its packages itself).
  std::string NameFor(const std::vector<std::string>& packages) const;
  // Why a build failed is for the server's log (the execution that falls back reports its own).
  execbox::Status Build(const std::string& name, const runtime::PythonProgram& program,
                        const ExecuteOptions& options);
  void Release(const std::string& name);
  void EvictLocked();

  std::string dir_;
  int lock_fd_;  // held (flock) while this server lives: how a later one tells a stale directory
  std::string wheelhouse_;
  size_t max_sets_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, Entry> entries_;
  uint64_t uses_ = 0;
};

// Where a server keeps its package sets: <cache dir>/package-sets (runtime::ExecboxCacheDir),
// "" when there is no cache dir.
std::string DefaultPackageSetsParent();

}  // namespace execbox::engine
