#!/usr/bin/env bash
# Runs each fuzz target for SECONDS on a scratch copy of its committed corpus (the committed
# fuzz/corpus/ never grows), and fails on any crash, leak, timeout or out-of-memory, naming the
# input that caused it. Ends with one line per target and the runner's summary. FUZZ_JOBS [1]
# targets run at once.
#   fuzz/run.sh BUILD_DIR [SECONDS] [TARGET...]      (make fuzz: build-fuzz, FUZZ_SECONDS, FUZZ_JOBS)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: fuzz/run.sh BUILD_DIR [SECONDS] [TARGET...]}" && pwd)
seconds=${2:-60}
shift $(($# >= 2 ? 2 : 1))

# target and -max_len: a little above what a real input of that kind holds, small enough that
# libFuzzer's mutations stay fast. http_request reaches the server's 16 KiB header limit.
declare -A max_len=([http_request]=20000 [execute_request]=8192 [toml_config]=8192 [report]=16384
  [mcp_message]=8192 [e2b_upload]=8192 [proxy_protocol]=4096 [import_scan]=8192)
all=(http_request execute_request toml_config report mcp_message e2b_upload proxy_protocol import_scan)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")

# Reports name file:line through clang 16's own symbolizer (llvm-16, scripts/install-fuzz-deps.sh).
if [ -x /usr/lib/llvm-16/bin/llvm-symbolizer ]; then
  export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-16/bin/llvm-symbolizer
fi

stat() {  # stat NAME LOG: libFuzzer's -print_final_stats value
  sed -n "s/^stat::$1: *//p" "$2" | tail -1
}
cov() {  # cov WORD LOG: the "cov:" count on libFuzzer's INITED or DONE line
  sed -n "s/^#[0-9]*[[:space:]]*$1[[:space:]]*cov: \([0-9]*\).*/\1/p" "$2" | tail -1
}

# fuzz_one TARGET: runs one target; its report goes to stdout, its summary line to
# $build/fuzz-run/TARGET.summary (ending in FAILED when it failed).
fuzz_one() {
  local t=$1
  local bin=$build/fuzz/${t}_fuzzer
  local work=$build/fuzz-run/$t
  local summary_file=$build/fuzz-run/$t.summary
  rm -rf "$work" "$summary_file"
  mkdir -p "$work/corpus" "$work/artifacts"
  if [ ! -x "$bin" ]; then
    echo "fuzz: $t: no fuzzer at $bin"
    echo "$t: FAILED (not built)" >"$summary_file"
    return
  fi
  cp "$here/corpus/$t/"* "$work/corpus/"
  local seeds dict=()
  seeds=$(find "$work/corpus" -type f | wc -l)
  [ -f "$here/$t.dict" ] && dict=(-dict="$here/$t.dict")
  echo "fuzz: $t for ${seconds}s ($seeds seeds, log $work/log)"
  # libFuzzer stops an input after 10 s itself; the outer timeout is for a run that hangs anyway.
  (cd "$work" && timeout --kill-after=10 $((seconds + 120)) "$bin" -max_total_time="$seconds" \
    -max_len="${max_len[$t]:-4096}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" "${dict[@]}" "$work/corpus" >"$work/log" 2>&1)
  local rc=$?
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "fuzz: $t did not end $((seconds + 120)) s after it started; killed"
  local runs speed added cov0 cov1 crashes new=""
  runs=$(stat number_of_executed_units "$work/log")
  speed=$(stat average_exec_per_sec "$work/log")
  added=$(stat new_units_added "$work/log")
  cov0=$(cov INITED "$work/log")
  cov1=$(cov DONE "$work/log")
  crashes=$(find "$work/artifacts" -type f | wc -l)
  [ -n "$cov0" ] && [ -n "$cov1" ] && new=" (+$((cov1 - cov0)))"
  local line="$t: ${runs:-?} runs, ${speed:-?} exec/s, coverage ${cov0:-?} -> ${cov1:-?} edges$new, ${added:-?} new inputs, $crashes crashes"
  grep -h "^fuzz: .*assertion" "$work/log" | sort -u
  if [ $rc -ne 0 ] || [ "$crashes" -ne 0 ]; then
    echo "fuzz: $t FAILED (exit $rc); what it reported:"
    grep -E "^==[0-9]+== ?ERROR|^SUMMARY|^ALARM|Assertion .* failed|runtime error:|^    #[0-9]+ " "$work/log" | head -40
    for f in "$work/artifacts"/*; do
      [ -f "$f" ] && echo "fuzz: $t: input that failed: $f (reproduce: $bin $f)"
    done
    echo "$line  FAILED" >"$summary_file"
  else
    echo "$line" >"$summary_file"
  fi
}

# FUZZ_JOBS targets at once (each libFuzzer process uses one core); each one's report is printed
# whole when it ends.
jobs=${FUZZ_JOBS:-1}
mkdir -p "$build/fuzz-run"
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
  { fuzz_one "$t" >"$build/fuzz-run/$t.report" 2>&1; cat "$build/fuzz-run/$t.report"; } &
  running=$((running + 1))
done
wait

passed=0 failed=0
for t in "${targets[@]}"; do
  line=$(cat "$build/fuzz-run/$t.summary" 2>/dev/null || echo "$t: FAILED (no summary)")
  echo "$line"
  if [[ $line == *FAILED* ]]; then failed=$((failed + 1)); else passed=$((passed + 1)); fi
done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
