# Sourced by the stage scripts that assert one thing per line (tests/package/deb_test.sh,
# tests/image/image_test.sh): `check NAME COMMAND...` runs COMMAND, prints "ok    NAME" or
# "FAIL  NAME" with the end of its output, and counts; `summary` prints the runner line
# "N passed, M failed" and returns non-zero when one failed. $work must name a scratch dir.
passed=0
failed=0

check() {
  local name=$1
  shift
  if "$@" >"$work/out" 2>&1; then
    passed=$((passed + 1))
    echo "ok    $name"
  else
    failed=$((failed + 1))
    echo "FAIL  $name"
    sed 's/^/      /' "$work/out" | tail -n 25
  fi
}

summary() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
