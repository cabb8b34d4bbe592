#!/usr/bin/env bash
# scripts/build-image.sh BUILD: builds the container image localhost/execbox:VERSION from
# deploy/container/Containerfile and BUILD's Debian package (make deb), with podman.
# The base is $IMAGE_BASE when set (e.g. docker.io/library/debian:bookworm-slim, pulled from a
# registry); otherwise it is made here, with no registry at all: mmdebstrap builds a minimal
# Debian 12 root from Debian's mirror (kept in EXECBOX_IMAGE_CACHE [~/.cache/execbox-image],
# outside any checkout, and reused for a week) and `podman import` makes it the image
# localhost/execbox-base:bookworm.
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
deb=$(ls "$build"/execbox_*_amd64.deb | tail -n 1)
version=$(basename "$deb" | sed 's/^execbox_\(.*\)_amd64\.deb$/\1/')
image=localhost/execbox:$version
podman=(podman)
# runc where it is installed: crun refuses hosts that mix cgroup v1 and v2 (this build machine).
command -v runc >/dev/null && podman=(podman --runtime "$(command -v runc)")

base=${IMAGE_BASE:-}
pull=missing
if [ -z "$base" ]; then
  pull=never
  base=localhost/execbox-base:bookworm
  cache=${EXECBOX_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/execbox-image}
  mkdir -p "$cache"
  rootfs=$cache/bookworm-minbase.tar
  if [ -z "$(find "$rootfs" -mtime -7 2>/dev/null)" ]; then
    echo "build-image: a Debian 12 base from the mirror (mmdebstrap --variant=minbase)" >&2
    # The name ends in .tar: mmdebstrap picks its output format from it.
    mmdebstrap --quiet --variant=minbase bookworm "${rootfs%.tar}.part.tar"
    mv "${rootfs%.tar}.part.tar" "$rootfs"
    "${podman[@]}" rmi -f "$base" >/dev/null 2>&1 || true
  fi
  if ! "${podman[@]}" image exists "$base"; then
    "${podman[@]}" import --quiet "$rootfs" "$base" >/dev/null
  fi
fi

context=$build/image-context
rm -rf "$context"
mkdir -p "$context"
cp "$deb" "$context/"
# The package's Depends as names, one a line, for the Containerfile's layer of dependencies
# ("a (>= 1) | b" installs a).
dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed -E 's/\|.*//; s/\(.*\)//; s/[[:space:]]//g' | grep -v '^$' \
  >"$context/depends.txt"
echo "build-image: $image from $base" >&2
"${podman[@]}" build --quiet --network host --pull="$pull" --build-arg "BASE=$base" \
  -f "$here/deploy/container/Containerfile" -t "$image" "$context" >/dev/null
echo "$image"
