// The server's TOML configuration (LoadConfigFile, cli/server_config.h), read from a file as
// `execbox serve --config` reads it. The input goes to a memfd, loaded through
// /proc/self/fd/N: nothing is written to disk. An accepted file must leave a config within
// the bounds docs/api.md documents; a refused one must leave the config as it was.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "cli/server_config.h"

namespace {

namespace cli = execbox::cli;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// One memfd for the whole run, rewritten for each input.
const std::string& ConfigPath(const uint8_t* data, size_t size) {
  static const int fd = memfd_create("execbox-fuzz.toml", MFD_CLOEXEC);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  Check(fd >= 0 && ftruncate(fd, 0) == 0);
  for (size_t done = 0; done < size;) {
    ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    Check(n > 0);
    done += static_cast<size_t>(n);
  }
  return path;
}

bool Lower64Hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// The calls under test, in one place: adapt here when their signatures change.
void Run(const std::string& path) {
  cli::ServerConfig config = cli::DefaultConfig();
  auto loaded = cli::LoadConfigFile(path, config);
  if (!loaded) {
    Check(!loaded.error().message.empty());
    Check(config.keys.empty() && config.listen == cli::DefaultConfig().listen);
    return;
  }
  Check(config.max_header_bytes >= 1024 && config.max_header_bytes <= (1u << 24));
  Check(config.io_threads >= 1 && config.io_threads <= 256);
  Check(config.shutdown_grace.count() >= 0 && config.shutdown_grace.count() <= 3600);
  std::set<std::string> ids, hashes;
  for (const auto& key : config.keys) {
    Check(!key.id.empty() && key.id.size() <= 64 && Lower64Hex(key.sha256_hex));
    Check(ids.insert(key.id).second && hashes.insert(key.sha256_hex).second);
    Check(key.max_concurrent >= 1 && key.rate_per_second > 0 && key.burst >= 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Run(ConfigPath(data, size));
  return 0;
}
