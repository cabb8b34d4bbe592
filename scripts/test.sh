#!/usr/bin/env bash
# `make test` (and `make unit`, `make test-sanitize`): the tests of BUILD through ctest.
#   scripts/test.sh BUILD [CTEST-ARGS...]      (make unit: -L '^unit$')
set -u
build=${1:-build}
shift $(($# > 0 ? 1 : 0))
# Hostile end-to-end cases run a second time as this unprivileged user, when the host allows.
if [ "$(id -u)" -eq 0 ] && ! id execbox-test >/dev/null 2>&1; then
  useradd --system --no-create-home --shell /usr/sbin/nologin execbox-test
fi
cd "$build" || exit 1
# One test more than there are cores (CTEST_JOBS): many tests wait part of the time (servers
# starting, sleeps that hold a slot, npm), and the spare slot fills those gaps (measured on the
# 2-core build machine: 3 slots finish in about 0.8 of the time 2 take; 4 gain little more).
jobs=${CTEST_JOBS:-$(($(nproc) + 1))}
# ctest lists the tests it skipped after its summary: the summary is repeated last.
ctest --output-on-failure -j "$jobs" --timeout 600 "$@" 2>&1 | tee ctest-output.log
status=${PIPESTATUS[0]}
# A failure's own lines, gathered at the end: a long suite's output is read from its tail (CI
# shows the head and the tail of it), where the failing assertion would be cut off.
if [ "$status" -ne 0 ]; then
  echo "The failing checks (all of them are above, with their tests' whole output):"
  grep -E -A4 ': Failure$|^not ok - |^(FAIL|ERROR):? |^AssertionError|\*\*\*Timeout|Exception: ' ctest-output.log |
    cut -c1-300 | head -n 60
fi
grep -E '^[0-9]+% tests passed' ctest-output.log | tail -n 1
exit "$status"
