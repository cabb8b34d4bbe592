#include "engine/audit.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string_view>

#include "base/sha256.h"

namespace execbox::engine {

namespace {

// RFC 3339 in UTC with milliseconds: 2025-01-31T12:34:56.789Z.
std::string Now() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  tm utc{};
  gmtime_r(&ts.tv_sec, &utc);
  char buffer[64];
  const size_t n = std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%S", &utc);
  const auto ms = static_cast<int>(ts.tv_nsec / 1'000'000);  // 0-999
  std::string text(buffer, n);
  text.push_back('.');
  text.push_back(static_cast<char>('0' + ms / 100));
  text.push_back(static_cast<char>('0' + ms / 10 % 10));
  text.push_back(static_cast<char>('0' + ms % 10));
  text.push_back('Z');
  return text;
}

}  // namespace

Expected<std::unique_ptr<AuditLog>> AuditLog::Open(const std::string& path, bool include_code) {
  if (path.empty()) return Fail("empty path");
  int fd;
  if (path == "-") {
    fd = ::fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return FailErrno("dup(stderr)");
  } else {
    fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
    if (fd < 0) return FailErrno("open(" + path + ")");
  }
  return std::unique_ptr<AuditLog>(new AuditLog(UniqueFd(fd), include_code));
}

void AuditLog::Write(const AuditRecord& record) {
  nlohmann::ordered_json line;
  line["time"] = Now();
  line["key_id"] = record.caller_id;
  line["transport"] = record.transport;
  line["session_id"] =
      record.session_id.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(record.session_id);
  line["route"] = record.route;
  line["code_sha256"] = Sha256Hex(record.code);
  line["code_bytes"] = record.code.size();
  line["status"] = record.status;
  line["usage"] = nlohmann::ordered_json(record.usage);
  line["peer"] = record.peer;
  if (!record.network.is_null()) line["network"] = nlohmann::ordered_json(record.network);
  if (!record.guard.is_null()) line["guard"] = nlohmann::ordered_json(record.guard);
  if (include_code_) line["code"] = record.code;
  std::string text = line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  text.push_back('\n');

  std::lock_guard lock(mu_);
  std::string_view rest(text);
  while (!rest.empty()) {
    const ssize_t n = ::write(fd_.Get(), rest.data(), rest.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      // The caller cannot act on it; say so once rather than on every execution.
      if (!write_failed_) {
        write_failed_ = true;
        std::fprintf(stderr, "execbox: audit log write failed: %s\n", std::strerror(errno));
      }
      return;
    }
    rest.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace execbox::engine
