#!/usr/bin/env bash
# install-deps.sh SET...: installs what execbox needs on Debian 12, only when something is
# missing. Run as root. The sets, by what needs them:
#   build  compilers, libraries, ccache (make build)
#   run    the interpreter inside the sandbox and its packages (make run)
#   test   the test and benchmark tools (make test)
set -euo pipefail
here=$(dirname "$0")

# python3 runs at build time too: src/runtime/embed_agent.py.
build_packages=(g++ cmake make pkg-config ccache python3 libseccomp-dev libpython3-dev libcap-dev nlohmann-json3-dev
  libcli11-dev libgtest-dev libboost-dev libssl-dev libtomlplusplus-dev zlib1g-dev)

# The interpreter inside the sandbox and its packages: Debian's, never PyPI (the list is
# shared with the Debian package's Depends).
# EXECBOX_PACKAGES=full adds the heavy ones (torch, opencv, ...: python-packages-full.txt);
# "standard", the default, is python-packages.txt alone (docs/packages.md "Packages").
lists=("$here/python-packages.txt")
case "${EXECBOX_PACKAGES:-standard}" in
  standard) ;;
  full) lists+=("$here/python-packages-full.txt") ;;
  *)
    echo "install-deps: EXECBOX_PACKAGES is standard or full, not '${EXECBOX_PACKAGES}'" >&2
    exit 2
    ;;
esac
mapfile -t run_packages < <(cat "${lists[@]}" | grep -v -e '^#' -e '^$')
# The kernels of E2B's bash and javascript code contexts (docs/e2b.md "Code contexts"), and the
# seed's linters the sandbox runs on request (docs/api.md "Linters").
run_packages+=(bash nodejs python3-pyflakes python3-flake8 python3-bandit)

# setuptools and wheel: the tests build wheels with pip wheel, offline; git: the E2B test runs it in a sandbox.
test_packages=(bubblewrap util-linux procps python3-jsonschema python3-setuptools python3-wheel wrk curl git)

[ $# -gt 0 ] || { echo "usage: install-deps.sh build|run|test..." >&2; exit 2; }
wanted=()
for set in "$@"; do
  case "$set" in
    build) wanted+=("${build_packages[@]}") ;;
    run) wanted+=("${run_packages[@]}") ;;
    test) wanted+=("${test_packages[@]}") ;;
    *) echo "install-deps: no set '$set' (build, run or test)" >&2; exit 2 ;;
  esac
done

# Boost is Debian's default 1.74 (libboost-dev): libboost1.81-dev conflicts with the 1.74 headers
# the scientific stack's packages pull in.
exec "$here/apt-install-missing.sh" "install-deps $*" "${wanted[@]}"
