// A directory of the test's own under the system's temporary directory, removed with
// everything in it when the test ends.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace execbox::test {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "execbox_test") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + ".XXXXXX")).string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // The path of `name` in it, and the same written with `content`.
  std::string Path(const std::string& name) const { return (path_ / name).string(); }
  std::string File(const std::string& name, const std::string& content = "") const {
    const std::string path = Path(name);
    std::ofstream(path) << content;
    return path;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace execbox::test
