#!/usr/bin/env bash
# What `make deb` and `make test-deb` need beyond the build: dpkg-shlibdeps (the package's
# library dependencies) and systemd-analyze (the units are verified). Run as root.
set -euo pipefail
exec "$(dirname "$0")/apt-install-missing.sh" install-package-deps dpkg-dev binutils systemd curl
