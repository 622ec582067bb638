#!/usr/bin/env bash
# The flaky-test soak: the README's test command, RUNS times in a row in each of three
# modes, on a fresh clone of HEAD (its own target directory, so work in this checkout
# cannot change the binaries under test):
#   idle    nothing else running
#   hog     one busy loop per CPU beside the tests (another job on a shared machine)
#   pinned  the whole command under `taskset -c 0` (every test, and sockbench, on one CPU)
# A test that depends on a scheduling accident fails in one of them.
#
# Usage: bench/soak-tests.sh            (RUNS=5, MODES=idle,hog,pinned)
#        RUNS=2 MODES=hog bench/soak-tests.sh
# Prints one line per run (mode, run, status, seconds, the tests that failed) and a
# summary; exits 1 if any run failed. KEEP=1 keeps the clone and each run's log.
set -uo pipefail

RUNS=${RUNS:-5}
MODES=${MODES:-idle,hog,pinned}
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
work=$(mktemp -d "${TMPDIR:-/tmp}/sockbench-soak.XXXXXX")
hogs=()

cleanup() {
  for p in "${hogs[@]}"; do kill "$p" 2>/dev/null; done
  if [ "${KEEP:-0}" = 1 ]; then
    echo "soak: kept $work" >&2
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Some tests run the binary as another user (dropped privileges): let them reach it.
chmod 755 "$work"
git clone -q "$repo" "$work/src" || exit 1
cd "$work/src" || exit 1
export CARGO_TARGET_DIR="$work/target" CARGO_TERM_COLOR=never
# The command, verbatim from the README (the line that starts with `cargo fmt --check`).
command=$(grep -m1 '^cargo fmt --check && ' README.md)
[ -n "$command" ] || { echo "soak: no test command found in README.md" >&2; exit 1; }
# Every test binary runs even after one fails, so a run names every test that failed.
case $command in *--no-fail-fast*) ;; *) command="$command --no-fail-fast" ;; esac
echo "soak: $(git rev-parse --short HEAD), $RUNS run(s) each of $MODES" >&2
echo "soak: building once first" >&2
cargo test --locked --features test-hooks --no-run -q >/dev/null 2>&1 \
  || { echo "soak: the build failed" >&2; exit 1; }

start_hogs() {
  for _ in $(seq "$(nproc)"); do
    sh -c 'while :; do :; done' &
    hogs+=("$!")
  done
}

stop_hogs() {
  for p in "${hogs[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  hogs=()
}

failed_runs=0
summary=()
IFS=, read -r -a modes <<<"$MODES"
for mode in "${modes[@]}"; do
  case "$mode" in
    idle | pinned) ;;
    hog) start_hogs ;;
    *) echo "soak: unknown mode '$mode' (idle, hog, pinned)" >&2; exit 2 ;;
  esac
  green=0
  for run in $(seq "$RUNS"); do
    log="$work/$mode-$run.log"
    t0=$(date +%s)
    if [ "$mode" = pinned ]; then
      timeout 3600 taskset -c 0 bash -c "$command" >"$log" 2>&1
    else
      timeout 3600 bash -c "$command" >"$log" 2>&1
    fi
    rc=$?
    secs=$(($(date +%s) - t0))
    if [ "$rc" = 0 ]; then
      green=$((green + 1))
      echo "$mode run $run: ok (${secs} s)"
    else
      failed_runs=$((failed_runs + 1))
      # The failing tests, as cargo test names them (`    name` under `failures:`).
      names=$(awk '/^failures:$/ {f = 1; next} f && /^    [^ ]/ {print $1} /^test result/ {f = 0}' "$log" \
        | sort -u | tr '\n' ' ')
      echo "$mode run $run: FAILED, status $rc (${secs} s): ${names:-see the log}"
      [ "${KEEP:-0}" = 1 ] || tail -n 40 "$log" | sed 's/^/  | /'
    fi
  done
  [ "$mode" = hog ] && stop_hogs
  summary+=("$mode: $green of $RUNS green")
done

echo "soak summary ($(git rev-parse --short HEAD), $(nproc) CPUs):"
printf '  %s\n' "${summary[@]}"
[ "$failed_runs" = 0 ]
