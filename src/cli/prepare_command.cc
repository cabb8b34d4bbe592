#include "cli/prepare_command.h"

#include <iostream>

#include "runtime/font_cache.h"

namespace execbox::cli {

void AddPrepareCommand(CLI::App& app, int& exit_status) {
  CLI::App* prepare = app.add_subcommand("prepare", "Build matplotlib's font list into the cache now");
  prepare->footer(
      "The font list is built in a jail and kept in /var/cache/execbox/matplotlib as root, in\n"
      "$EXECBOX_CACHE_DIR or $CACHE_DIRECTORY (systemd's CacheDirectory=) when set, else in\n"
      "~/.cache/execbox/matplotlib; every run that plots then starts from it (about 300 ms sooner).\n"
      "Exit 0 when the cache holds the list, 1 when it could not be built or kept.");
  prepare->callback([&exit_status] {
    const std::string dir = runtime::MatplotlibCacheDir();
    const auto& files = runtime::MatplotlibSeedFiles();
    if (dir.empty() || files.empty()) {
      std::cerr << "execbox prepare: matplotlib's font list could not be built or kept"
                << (dir.empty() ? std::string(" (no cache dir: set EXECBOX_CACHE_DIR or HOME)")
                                : " in " + dir + " (is it writable?)")
                << "\n";
      exit_status = 1;
      return;
    }
    std::cout << "execbox prepare: matplotlib's font list in " << dir << " (" << files.size() << " file"
              << (files.size() == 1 ? "" : "s") << ")\n";
  });
}

}  // namespace execbox::cli
