# Sourced by .ci/run: stages with their wall times, and the table of them printed at the end,
# on a failure too, with the total against CI's limit.
#   stage NAME CMD...        runs CMD in the foreground; a failure ends CI
#   stage_start NAME CMD...  runs CMD in the background, its output kept in .ci-logs/NAME.log
#   stage_wait NAME          waits for it, prints its output, and ends CI if it failed
# Stages that never ran are listed as such, so the table always names every stage.
ci_limit=${CI_LIMIT_SECONDS:-5400}
ci_start=$(date +%s)
ci_logs=$PWD/.ci-logs
mkdir -p "$ci_logs"
declare -A ci_seconds=() ci_result=() ci_pid=() ci_t0=()
ci_order=()

ci_record() {  # ci_record NAME SECONDS STATUS
  ci_seconds[$1]=$2
  if [ "$3" -eq 0 ]; then ci_result[$1]=passed; else ci_result[$1]="FAILED (exit $3)"; fi
}

stage() {
  local name=$1 t0 status=0
  shift
  ci_order+=("$name")
  echo "=== ci: $name ($*) at $(($(date +%s) - ci_start)) s"
  t0=$(date +%s)
  "$@" || status=$?
  ci_record "$name" $(($(date +%s) - t0)) "$status"
  [ "$status" -eq 0 ] || exit "$status"
}

stage_start() {
  local name=$1
  shift
  ci_order+=("$name")
  echo "=== ci: $name ($*) starts in the background at $(($(date +%s) - ci_start)) s"
  ci_t0[$name]=$(date +%s)
  # A session of its own, so that CI ending early stops its whole tree (qemu included).
  setsid "$@" >"$ci_logs/$name.log" 2>&1 </dev/null &
  ci_pid[$name]=$!
}

stage_wait() {
  local name=$1 status=0
  wait "${ci_pid[$name]}" || status=$?
  unset "ci_pid[$name]"
  ci_record "$name" $(($(date +%s) - ci_t0[$name])) "$status"
  echo "=== ci: $name (in the background) ended after ${ci_seconds[$name]} s; its output:"
  cat "$ci_logs/$name.log"
  [ "$status" -eq 0 ] || exit "$status"
}

# The table, and a runner summary line (stages passed and failed) as the very last line.
ci_report() {
  local status=$? name passed=0 failed=0
  for name in "${!ci_pid[@]}"; do  # a background stage still running when CI ended
    kill -- "-${ci_pid[$name]}" 2>/dev/null
    ci_seconds[$name]=$(($(date +%s) - ci_t0[$name]))
    ci_result[$name]="stopped (CI ended); its output so far: .ci-logs/$name.log"
    tail -n 40 "$ci_logs/$name.log"
  done
  echo
  echo "ci: stage                 seconds  result"
  for name in "${ci_order[@]}"; do
    printf 'ci: %-22s %7s  %s\n' "$name" "${ci_seconds[$name]:--}" "${ci_result[$name]:-did not end}"
    case "${ci_result[$name]:-}" in passed) passed=$((passed + 1)) ;; *) failed=$((failed + 1)) ;; esac
  done
  for name in "${ci_planned[@]}"; do
    [[ " ${ci_order[*]} " == *" $name "* ]] && continue
    printf 'ci: %-22s %7s  %s\n' "$name" - "not run"
    failed=$((failed + 1))
  done
  local total=$(($(date +%s) - ci_start))
  echo "ci: total $total s of the $ci_limit s limit ($((total * 100 / ci_limit))%)"
  echo "$passed passed, $failed failed"
  exit "$status"
}
trap ci_report EXIT
