// matplotlib's font list, built once in a jail and kept in a disk cache, so that a run that
// plots does not rebuild it (≈200-300 ms) on every first import.
#pragma once

#include <string>
#include <vector>

#include "jail/policy.h"

namespace execbox::runtime {

// Synthetic files for /opt/execbox/matplotlib/, which the agent copies into MPLCONFIGDIR.
// Empty when no cache dir is writable (the code then builds the list itself, as before).
const std::vector<jail::SyntheticFile>& MatplotlibSeedFiles();

// execbox's cache directory: $EXECBOX_CACHE_DIR, else $CACHE_DIRECTORY (systemd's
// CacheDirectory=); else /var/cache/execbox as root, and $XDG_CACHE_HOME/execbox or
// ~/.cache/execbox for a user. "" when none.
std::string ExecboxCacheDir();

// Where the cache is: $EXECBOX_CACHE_DIR, else $CACHE_DIRECTORY (systemd's CacheDirectory=),
// each + "/matplotlib"; else /var/cache/execbox/matplotlib as root, and
// $XDG_CACHE_HOME/execbox/matplotlib or ~/.cache/execbox/matplotlib for a user. "" when none.
std::string MatplotlibCacheDir();

}  // namespace execbox::runtime
