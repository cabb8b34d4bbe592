// Small I/O helpers with errors as values.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/unique_fd.h"

namespace execbox {

// Reads a whole file (up to max_bytes; more is an error).
Expected<std::string> ReadFile(const std::string& path, size_t max_bytes = 64u << 20);
// Writes data to an existing file, as cgroup and /proc control files want (one write).
Status WriteFile(const std::string& path, std::string_view data);
// Writes all of data to fd, retrying on EINTR and short writes.
Status WriteAll(int fd, std::string_view data);
// A pipe with both ends close-on-exec.
Expected<std::pair<UniqueFd, UniqueFd>> MakePipe();
// Parses sizes such as 256M, 1G, 4096, 64KiB.
Expected<uint64_t> ParseSize(std::string_view text);
// A decimal number, trailing newlines and spaces allowed; nothing for anything else.
std::optional<uint64_t> ParseU64(std::string_view text);
// The names in `dir` that end in `suffix`, without it, sorted (what a state dir holds of one
// kind: a caller still checks each is a name of its own); or why the dir cannot be read.
Expected<std::vector<std::string>> NamesEndingIn(const std::string& dir, std::string_view suffix);
// The running executable's path, as /proc/self/exe named it the first time this was asked
// ("" when it could not be read). Kept: after the process enters a mount namespace of its own
// (jail/container_cgroups.h) the link names a mount outside it and reads as a bare "/execbox".
const std::string& ExecutablePath();

}  // namespace execbox
