#!/usr/bin/env bash
# Installs what the fuzz build (make fuzz) needs beyond scripts/install-deps.sh, only when it
# is missing: clang 16, its runtime libraries (libFuzzer, ASan, UBSan) and llvm-16, whose
# llvm-symbolizer gives crash reports their file:line. See fuzz/clang.cmake for why clang 16.
# Run as root.
set -euo pipefail

wanted=(clang-16 libclang-rt-16-dev llvm-16)
missing=()
for pkg in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-fuzz-deps: missing packages (${missing[*]}); run as root to install them" >&2
  exit 1
fi
echo "install-fuzz-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
