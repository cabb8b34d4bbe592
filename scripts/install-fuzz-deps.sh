#!/usr/bin/env bash
# Installs what the fuzz build (make fuzz) needs beyond scripts/install-deps.sh, only when it
# is missing: clang 16, its runtime libraries (libFuzzer, ASan, UBSan) and llvm-16, whose
# llvm-symbolizer gives crash reports their file:line. See fuzz/clang.cmake for why clang 16.
# Run as root.
set -euo pipefail

wanted=(clang-16 libclang-rt-16-dev llvm-16)
exec "$(dirname "$0")/apt-install-missing.sh" install-fuzz-deps "${wanted[@]}"
