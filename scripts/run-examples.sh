#!/usr/bin/env bash
# `make run`: runs every program in examples/ through the sandbox and prints its result.
set -u
execbox=${1:-build/execbox}
cd "$(dirname "$0")/.."
keep=$(mktemp -d)
trap 'rm -rf "$keep"' EXIT
for file in examples/*.py; do
  args=(--timeout 30)
  case "$file" in
    *infinite_loop.py) args=(--timeout 5) ;;
    *plot.py) args+=(--keep-files "$keep") ;;
  esac
  echo "=== $file (execbox run ${args[*]} $file)"
  "$execbox" run "${args[@]}" "$file"
  echo "=== exit status $?"
  echo
done
if [ -f "$keep/plot.png" ]; then
  echo "plot.png came back with --keep-files: $(stat -c %s "$keep/plot.png") bytes"
fi
echo
echo "=== the same median example as a JSON result (execbox run --json)"
"$execbox" run --json examples/median.py
