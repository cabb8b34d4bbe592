#include "cli/keep_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/io.h"
#include "base/unique_fd.h"
#include "jail/policy.h"

namespace execbox::cli {
namespace {

// Opens (creating) each directory of `parts` below `root`, refusing symlinks at every step.
Expected<UniqueFd> OpenParentDir(int root, const std::string& name, std::string& leaf) {
  UniqueFd dir(::fcntl(root, F_DUPFD_CLOEXEC, 3));
  size_t start = 0;
  for (size_t slash = name.find('/'); slash != std::string::npos; slash = name.find('/', start)) {
    std::string part = name.substr(start, slash - start);
    if (::mkdirat(dir.Get(), part.c_str(), 0755) != 0 && errno != EEXIST) return FailErrno("mkdir " + part);
    UniqueFd next(::openat(dir.Get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next.Valid()) return FailErrno("open directory " + part + " (a symlink is not followed)");
    dir = std::move(next);
    start = slash + 1;
  }
  leaf = name.substr(start);
  return dir;
}

}  // namespace

Status WriteFilesUnder(const std::string& dir, const std::vector<engine::OutputFile>& files) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return FailErrno("mkdir " + dir);
  UniqueFd root(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root.Valid()) return FailErrno("open " + dir);
  // One bad file does not cost the others: every file is tried, every failure reported.
  std::string failures;
  auto note = [&failures](const std::string& message) {
    failures += (failures.empty() ? "" : "; ") + message;
  };
  for (const auto& f : files) {
    if (auto valid = jail::ValidateRelativeName(f.name); !valid) {
      note(valid.error().message);
      continue;
    }
    std::string leaf;
    auto parent = OpenParentDir(root.Get(), f.name, leaf);
    if (!parent) {
      note(f.name + ": " + parent.error().message);
      continue;
    }
    UniqueFd out(
        ::openat(parent->Get(), leaf.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!out.Valid()) {
      note(FailErrno("create " + f.name + " under " + dir + " (a symlink is not followed)").error().message);
      continue;
    }
    if (auto s = WriteAll(out.Get(), f.content); !s) note(f.name + ": " + s.error().message);
  }
  if (!failures.empty()) return Fail(failures);
  return {};
}

}  // namespace execbox::cli
