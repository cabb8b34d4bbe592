#include "base/io.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace execbox {

const std::string& ExecutablePath() {
  static const std::string path = [] {
    char self[4096];
    ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    return n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string();
  }();
  return path;
}

Expected<std::string> ReadFile(const std::string& path, size_t max_bytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.Valid()) return FailErrno("open(" + path + ")");
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.Get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return FailErrno("read(" + path + ")");
    }
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      return Fail(path + " is larger than " + std::to_string(max_bytes) + " bytes");
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

Status WriteFile(const std::string& path, std::string_view data) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.Valid()) return FailErrno("open(" + path + ")");
  ssize_t n = ::write(fd.Get(), data.data(), data.size());
  if (n < 0) return FailErrno("write(" + path + ", \"" + std::string(data) + "\")");
  if (static_cast<size_t>(n) != data.size()) return Fail("short write to " + path);
  return {};
}

Status WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return FailErrno("write");
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

Expected<std::pair<UniqueFd, UniqueFd>> MakePipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return FailErrno("pipe2");
  return std::pair{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

Expected<uint64_t> ParseSize(std::string_view text) {
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr == text.data()) {
    return Fail("'" + std::string(text) + "' is not a size (examples: 4096, 64K, 256M, 1G)");
  }
  std::string unit(ptr, text.data() + text.size());
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  uint64_t mult = 1;
  if (unit.empty() || unit == "B")
    mult = 1;
  else if (unit == "K" || unit == "KB" || unit == "KIB")
    mult = 1ull << 10;
  else if (unit == "M" || unit == "MB" || unit == "MIB")
    mult = 1ull << 20;
  else if (unit == "G" || unit == "GB" || unit == "GIB")
    mult = 1ull << 30;
  else
    return Fail("'" + std::string(text) + "': unknown size unit '" + unit + "'");
  if (value > UINT64_MAX / mult) return Fail("'" + std::string(text) + "' is too large");
  return value * mult;
}

std::optional<uint64_t> ParseU64(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

Expected<std::vector<std::string>> NamesEndingIn(const std::string& dir, std::string_view suffix) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return FailErrno("read the directory " + dir);
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    std::string_view name(e->d_name);
    if (name.size() > suffix.size() && name.ends_with(suffix))
      names.emplace_back(name.substr(0, name.size() - suffix.size()));
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace execbox
