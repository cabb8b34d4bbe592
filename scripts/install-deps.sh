#!/usr/bin/env bash
# Installs what execbox needs on Debian 12, only when something is missing. Run as root.
set -euo pipefail

build_packages=(g++ cmake make pkg-config libseccomp-dev libpython3-dev libcap-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libbenchmark-dev libboost-dev libssl-dev libtomlplusplus-dev)
# The interpreter inside the sandbox and its scientific stack: Debian's, never PyPI (the list is
# shared with the Debian package's Depends).
mapfile -t python_packages < <(grep -v -e '^#' -e '^$' "$(dirname "$0")/python-packages.txt")
# Test and benchmark tools.
tool_packages=(bubblewrap util-linux procps python3-jsonschema wrk curl)

# Boost is Debian's default 1.74 (libboost-dev): libboost1.81-dev conflicts with the 1.74 headers
# the scientific stack's packages pull in.
exec "$(dirname "$0")/apt-install-missing.sh" install-deps "${build_packages[@]}" "${python_packages[@]}" \
  "${tool_packages[@]}"
