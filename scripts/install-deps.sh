#!/usr/bin/env bash
# Installs what execbox needs on Debian 12, only when something is missing. Run as root.
set -euo pipefail

build_packages=(g++ cmake make pkg-config libseccomp-dev libpython3-dev libcap-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libbenchmark-dev libboost-dev libssl-dev libtomlplusplus-dev)
# The interpreter inside the sandbox and its packages: Debian's, never PyPI (the list is
# shared with the Debian package's Depends).
# EXECBOX_PACKAGES=full adds the heavy ones (torch, opencv, ...: python-packages-full.txt);
# "standard", the default, is python-packages.txt alone (README "Packages").
lists=("$(dirname "$0")/python-packages.txt")
case "${EXECBOX_PACKAGES:-standard}" in
  standard) ;;
  full) lists+=("$(dirname "$0")/python-packages-full.txt") ;;
  *)
    echo "install-deps: EXECBOX_PACKAGES is standard or full, not '${EXECBOX_PACKAGES}'" >&2
    exit 2
    ;;
esac
mapfile -t python_packages < <(cat "${lists[@]}" | grep -v -e '^#' -e '^$')
# Test and benchmark tools.
# setuptools and wheel: the tests build wheels with pip wheel, offline.
tool_packages=(bubblewrap util-linux procps python3-jsonschema python3-setuptools python3-wheel wrk curl)

# Boost is Debian's default 1.74 (libboost-dev): libboost1.81-dev conflicts with the 1.74 headers
# the scientific stack's packages pull in.
exec "$(dirname "$0")/apt-install-missing.sh" install-deps "${build_packages[@]}" "${python_packages[@]}" \
  "${tool_packages[@]}"
