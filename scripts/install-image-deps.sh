#!/usr/bin/env bash
# What `make image` and `make test-image` need: podman (with runc: crun refuses this build
# machine's hybrid cgroups) and mmdebstrap, which makes the Debian 12 base image from Debian's
# own mirror when no registry is reachable. Run as root.
set -euo pipefail
exec "$(dirname "$0")/apt-install-missing.sh" install-image-deps podman runc mmdebstrap
