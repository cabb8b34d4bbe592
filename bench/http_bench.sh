#!/usr/bin/env bash
# `make bench-http`: `execbox serve` measured over HTTP, next to plain `python3 -c` measured in
# the same run (the engine-level rows are `make bench`).
#
#   bench/http_bench.sh [EXECBOX] [--quick] [--seconds S] [--prints N] [--plots N] [--levels "1 8 64"]
#                       [--no-key-row]
#
# Starts its own server on a free port (--listen 127.0.0.1:0, default admission: max_running 2
# per worker, max_queue 64), waits for /readyz, then:
#   1. sequential latency on one keep-alive connection (bench/http_latency.py): python3 -c
#      'print(1)' (the baseline), GET /livez, POST /v1/execute print(1), and a numpy +
#      matplotlib plot over HTTP against the same plot in plain python3 saving a PNG;
#   2. a load run of print(1) with wrk (bench/http_load.lua) at each concurrency of --levels,
#      S seconds each: throughput, p50/p99 latency, counts of 200, 429 and anything else.
#      These use a key from a config file with the per-key limits lifted, so what is measured
#      is the server's admission; one more run at the highest level uses the EXECBOX_API_KEYS
#      key, whose per-key defaults (8 concurrent, 20/s, burst 40) apply (--no-key-row: skip);
#   3. SIGTERM, and a check that the server stops cleanly.
# Exit status 1 when any load request got a status other than 200 or 429, a socket error or
# timeout, or a 200 whose Result is not ok with stdout "1\n"; or when the server fails or does
# not stop cleanly.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
execbox=build/execbox
seconds=20
prints=30
plots=10
levels="1 8 64"
key_row=1
python=/usr/bin/python3

die() {
  echo "http_bench: $*" >&2
  exit 1
}

while (($#)); do
  case $1 in
    --quick) seconds=3 prints=6 plots=3 ;;
    --seconds) seconds=${2:?}; shift ;;
    --prints) prints=${2:?}; shift ;;
    --plots) plots=${2:?}; shift ;;
    --levels) levels=${2:?}; shift ;;
    --no-key-row) key_row=0 ;;
    -h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --*) die "unknown option $1 (see --help)" ;;
    *) execbox=$1 ;;
  esac
  shift
done
[[ -x $execbox ]] || die "$execbox: not an executable (build it, or pass the build dir's execbox)"
command -v wrk >/dev/null || die "wrk is not installed (apt-get install wrk)"
command -v curl >/dev/null || die "curl is not installed"
[[ -x $python ]] || die "$python is missing"

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
busy_ms() { # the machine's busy CPU time so far, all cores (as bench/execbox_bench.cc)
  awk -v hz="$(getconf CLK_TCK)" '/^cpu /{print ($2+$3+$4+$7+$8+$9) * 1000 / hz; exit}' /proc/stat
}
server_cpu_ms() { # utime + stime of the serve process itself (its threads; not the sandboxes)
  awk -v hz="$(getconf CLK_TCK)" '{sub(/^.*\) /, ""); print ($12 + $13) * 1000 / hz}' "/proc/$server_pid/stat"
}
now() { date +%s.%N; }
calc() { awk "BEGIN { printf \"$1\", ${*:2} }"; }
token() { od -An -N24 -tx1 /dev/urandom | tr -d ' \n'; }

tmp=$(mktemp -d /tmp/execbox-http-bench.XXXXXX)
server_pid=
stop_server() { # SIGTERM, then up to 90 s; sets stop_rc and stop_s
  local t0 i
  t0=$(now)
  kill -TERM "$server_pid" 2>/dev/null || true
  stop_rc=timeout
  for ((i = 0; i < 900; i++)); do
    if ! kill -0 "$server_pid" 2>/dev/null; then
      stop_rc=0
      wait "$server_pid" || stop_rc=$?
      break
    fi
    sleep 0.1
  done
  if [[ $stop_rc == timeout ]]; then
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  stop_s=$(calc %.1f "$(now) - $t0")
  server_pid=
}
# Clients run in the background and are waited for, so that a signal to this script is handled at
# once (bash runs a trap only after a foreground command ends) and ends them too.
child=
run() {
  local rc=0
  "$@" &
  child=$!
  wait "$child" || rc=$?
  child=
  return "$rc"
}
cleanup() {
  if [[ -n $child ]]; then
    kill -TERM "$child" 2>/dev/null || true
    wait "$child" 2>/dev/null || true
  fi
  if [[ -n $server_pid ]]; then stop_server; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Two keys: the EXECBOX_API_KEYS one (id env-1, per-key defaults), and one from a config file with
# the per-key limits lifted, for the load columns.
env_token=$(token)
bench_token=$(token)
cat >"$tmp/serve.toml" <<EOF
[[keys]]
id = "bench-unlimited"
sha256 = "$(printf %s "$bench_token" | sha256sum | cut -d' ' -f1)"
max_concurrent = 1048576
max_queued = 1048576
rate_per_second = 1000000000
burst = 1000000000
EOF

load_start=$(loadavg)
total_start=$(now)
EXECBOX_API_KEYS=$env_token "$execbox" serve --listen 127.0.0.1:0 --config "$tmp/serve.toml" \
  2>"$tmp/server.log" &
server_pid=$!
server_fail() {
  echo "http_bench: $*; the server's log ends:" >&2
  tail -n 30 "$tmp/server.log" >&2 || true
  exit 1
}

url=
for ((i = 0; i < 1800; i++)); do
  kill -0 "$server_pid" 2>/dev/null || server_fail "the server exited at start"
  if line=$(grep -m1 -o 'listening on http://127\.0\.0\.1:[0-9]*' "$tmp/server.log"); then
    url=${line#listening on }
    break
  fi
  sleep 0.1
done
[[ -n $url ]] || server_fail "no 'listening on' line after 180 s"
for ((i = 0; i < 1800; i++)); do
  kill -0 "$server_pid" 2>/dev/null || server_fail "the server exited before /readyz"
  [[ $(curl -s -o /dev/null -w '%{http_code}' "$url/readyz" || true) == 200 ]] && break
  sleep 0.1
done
[[ $(curl -s -o /dev/null -w '%{http_code}' "$url/readyz" || true) == 200 ]] || server_fail "/readyz not 200 after 180 s"
ready_s=$(calc %.1f "$(now) - $total_start")
admission=$(grep -m1 -o 'warm pool, .*\|cold jails, .*' "$tmp/server.log" || echo '?')

metric() { # metric NAME [TOKEN]: one unlabelled value from /metrics
  # awk reads to the end: exiting at the match would fail curl's write (23) once /metrics outgrows a pipe
  curl -s -H "Authorization: Bearer ${2:-$bench_token}" "$url/metrics" | awk -v n="$1" '$1 == n && !found {print $2; found = 1}'
}
workers=$(metric execbox_warm_workers)
pool_ready() { # whether each sort of prepared child is at what the pool aims for now (/metrics)
  curl -s -H "Authorization: Bearer $bench_token" "$url/metrics" | awk '
    $1 == "execbox_prepared_children" { have["full"] = $2 }
    $1 == "execbox_lean_prepared_children" { have["lean"] = $2 }
    $1 == "execbox_prepared_session_children" { have["session"] = $2 }
    $1 ~ /^execbox_prepared_children_target\{/ { s = $1; sub(/^[^"]*"/, "", s); sub(/".*/, "", s); want[s] = $2 }
    END { for (s in want) if (have[s] + 0 < want[s] + 0) exit 1 }'
}
wait_pool() { # until the pool holds its prepared children again (30 s at most), then 75 ms
  local i
  for ((i = 0; i < 3000; i++)); do
    pool_ready && break
    sleep 0.01
  done
  sleep 0.075
}

echo "execbox http bench: $execbox serve at $url; $(nproc) CPUs; load average $load_start at start"
echo "server: $admission (default admission), $workers warm worker(s), ready $ready_s s after start"
echo

# 1. Sequential latency.
wait_pool
run env EXECBOX_BENCH_TOKEN="$env_token" "$python" "$here/http_latency.py" --url "$url" --prints "$prints" \
  --plots "$plots" || server_fail "the latency run failed"
load_after_latency=$(loadavg)

# 2. Load.
warm_cpu() { # the pool's counters (/metrics): children ended, then CPU ms of zygote setup execution exit
  curl -s -H "Authorization: Bearer $bench_token" "$url/metrics" | awk '
    $1 == "execbox_warm_children_ended_total" { n = $2 }
    $1 ~ /^execbox_warm_cpu_seconds_total\{phase="/ { p = $1; sub(/^[^"]*"/, "", p); sub(/".*/, "", p); ms[p] = $2 * 1000 }
    END { printf "%d %.3f %.3f %.3f %.3f\n", n, ms["zygote"], ms["setup"], ms["execution"], ms["exit"] }'
}
declare -A R
cols=()
run_load() { # run_load COLUMN CONCURRENCY SECONDS TOKEN
  local col=$1 c=$2 s=$3 tok=$4 threads=2 out cpu0 cpu1 srv0 srv1 line kv w0 w1 ended i k
  ((c < 2)) && threads=1
  wait_pool
  out=$tmp/wrk-$col.txt
  read -ra w0 <<<"$(warm_cpu)"
  cpu0=$(busy_ms)
  srv0=$(server_cpu_ms)
  run env EXECBOX_BENCH_TOKEN="$tok" wrk -t"$threads" -c"$c" -d"${s}s" --timeout 60s -s "$here/http_load.lua" "$url" \
    >"$out" 2>&1 || { cat "$out" >&2; server_fail "wrk failed at c=$c"; }
  cpu1=$(busy_ms)
  srv1=$(server_cpu_ms)
  line=$(grep -m1 '^HTTP_LOAD ' "$out") || { cat "$out" >&2; die "no HTTP_LOAD line from wrk"; }
  for kv in ${line#HTTP_LOAD }; do R[$col,${kv%%=*}]=${kv#*=}; done
  R[$col,first_bad]=$(grep -m1 '^HTTP_LOAD_FIRST_BAD ' "$out" | cut -d' ' -f2- || true)
  R[$col,cpu_ms]=$(calc %.1f "($cpu1 - $cpu0) / (${R[$col,s200]} + ${R[$col,bad200]} > 0 ? ${R[$col,s200]} + ${R[$col,bad200]} : 1)")
  R[$col,srv_pct]=$(calc %.1f "($srv1 - $srv0) / (${R[$col,duration_us]} / 1000) * 100")
  R[$col,srv_ms]=$(calc %.1f "($srv1 - $srv0) / (${R[$col,s200]} + ${R[$col,bad200]} > 0 ? ${R[$col,s200]} + ${R[$col,bad200]} : 1)")
  # By phase, per child ended in the run (the used ones are ended once the pool is full again).
  wait_pool
  read -ra w1 <<<"$(warm_cpu)"
  ended=$((w1[0] - w0[0] > 0 ? w1[0] - w0[0] : 1))
  i=1
  for k in ph_zygote ph_setup ph_exec ph_exit; do
    R[$col,$k]=$(calc %.1f "(${w1[i]} - ${w0[i]}) / $ended")
    i=$((i + 1))
  done
  R[$col,load]=$(loadavg)
  kill -0 "$server_pid" 2>/dev/null || server_fail "the server died during the load at c=$c"
  cols+=("$col")
}
max_level=1
for c in $levels; do
  run_load "c=$c" "$c" "$seconds" "$bench_token"
  ((c > max_level)) && max_level=$c
done
if ((key_row)); then
  run_load "c=$max_level key*" "$max_level" "$(((seconds + 1) / 2))" "$env_token"
fi

# What the server counted, before it stops.
metrics=$(curl -s -H "Authorization: Bearer $bench_token" "$url/metrics")
labelled() { # labelled NAME: "label:value,..." of one labelled counter
  awk -v n="$1" 'index($1, n "{") == 1 { sub(/^[^"]*"/, "", $1); sub(/".*/, "", $1); printf "%s%s:%s", sep, $1, $2; sep = "," }
    END { if (sep == "") printf "none" }' <<<"$metrics"
}
ready_after=$(curl -s -o /dev/null -w '%{http_code}' "$url/readyz" || true)

# 3. Stop.
stop_server
load_end=$(loadavg)

num() { calc "%9.${2:-1}f" "$1"; }
echo
printf '%-38s' "load print(1), wrk, keep-alive"
for col in "${cols[@]}"; do printf ' %11s' "$col"; done
echo
row() { # row LABEL EXPR-with-@ (@ is the column's key prefix) FORMAT
  local label=$1 expr=$2 fmt=$3 col e k
  printf '  %-36s' "$label"
  for col in "${cols[@]}"; do
    e=$expr
    for k in requests duration_us p50_us p99_us mean_us max_us s200 s429 bad200 other connect read write timeout \
      cpu_ms srv_pct srv_ms ph_zygote ph_setup ph_exec ph_exit; do
      e=${e//@$k/${R[$col,$k]}}
    done
    printf ' %11s' "$(calc "$fmt" "$e")"
  done
  echo
}
row "seconds" "@duration_us / 1e6" "%.1f"
row "answers/s (200 + 429)" "@requests / (@duration_us / 1e6)" "%.1f"
row "executions/s (200 ok)" "@s200 / (@duration_us / 1e6)" "%.1f"
row "p50 ms (all answers)" "@p50_us / 1000" "%.1f"
row "p99 ms (all answers)" "@p99_us / 1000" "%.1f"
row "max ms" "@max_us / 1000" "%.1f"
row "200, Result ok and stdout 1" "@s200" "%d"
row "429" "@s429" "%d"
row "other status, socket error, bad 200" "@other + @connect + @read + @write + @timeout + @bad200" "%d"
row "CPU ms/execution (machine)" "@cpu_ms" "%.1f"
row "  of which the serve process" "@srv_ms" "%.1f"
row "  the zygote (fork), per child" "@ph_zygote" "%.1f"
row "  child: isolate + warm-up" "@ph_setup" "%.1f"
row "  child: the code (request)" "@ph_exec" "%.1f"
row "  child: exit" "@ph_exit" "%.1f"
row "serve process CPU, % of a core" "@srv_pct" "%.0f"
printf '  %-36s' "load average after (1 min)"
for col in "${cols[@]}"; do printf ' %11s' "${R[$col,load]%% *}"; done
echo

echo
bad=0
for col in "${cols[@]}"; do
  n=$((R[$col,other] + R[$col,connect] + R[$col,read] + R[$col,write] + R[$col,timeout] + R[$col,bad200]))
  notes="429 by type: ${R[$col,reasons]}"
  if ((n > 0)); then
    bad=1
    notes+="; FAILED: other statuses ${R[$col,other_codes]}, socket errors connect ${R[$col,connect]} read"
    notes+=" ${R[$col,read]} write ${R[$col,write]} timeout ${R[$col,timeout]}, bad 200s ${R[$col,bad200]}"
    [[ -n ${R[$col,first_bad]} ]] && notes+="; first: ${R[$col,first_bad]:0:300}"
  fi
  echo "$col: $notes"
done
if ((key_row)); then
  echo "key*: the EXECBOX_API_KEYS key, per-key defaults (max_concurrent 8, 20/s, burst 40); the other"
  echo "  columns use a config key with those lifted, so only max_running/max_queue admit or refuse."
fi
echo "latency in the load rows is wrk's, over every answer (a 429 comes back at once). CPU ms/execution"
echo "  is the whole machine's busy time (wrk, the server, the sandboxes, and anyone else's work); the"
echo "  rows under it are the serve process's own, and the warm pool's by phase from its cgroups"
echo "  (execbox_warm_cpu_seconds_total) per child ended in the run."
echo "the server's counts: responses $(labelled execbox_http_responses_total); rejected" \
  "$(labelled execbox_rejected_requests_total); dropped connections" \
  "$(labelled execbox_connections_dropped_total); /readyz after the load: $ready_after"
cancelled=$(awk '$1 == "execbox_rejected_requests_total{reason=\"cancelled\"}" {print $2}' <<<"$metrics")
if [[ -n $cancelled ]]; then
  echo "  (cancelled: requests still queued when wrk closed its connections at the end of a run; their 503"
  echo "  went to a closed socket, which is why wrk did not see them)"
fi
stop_note="SIGTERM: exit status $stop_rc after $stop_s s"
if [[ $stop_rc != 0 ]]; then
  bad=1
  stop_note+=" (NOT a clean stop)"
fi
echo "$stop_note; last log line: $(tail -n1 "$tmp/server.log")"
echo "load average: $load_start at start, $load_after_latency after the latency rows, $load_end at end" \
  "($(nproc) CPUs, shared: wrk and the client run on the same machine)"
echo "(bench took $(calc %.0f "$(now) - $total_start") s)"
if ((bad)); then
  echo "http_bench: FAILED (see above)" >&2
  exit 1
fi
