#!/usr/bin/env bash
# Mutation testing (cargo-mutants) over the measuring code: workloads, measurement,
# engines, transports and the runner. Each mutant is one deliberate fault; the test suite
# must fail for it. Survivors that are equivalent or harmless are listed, one line each
# with the reason, in mutants-survivors.txt; any other survivor fails this script.
#
#   bench/mutants.sh --shard random/20    one random twentieth of the measuring code
#   bench/mutants.sh --shard 3/20         the 3rd twentieth
#   bench/mutants.sh --all                all of it (hours on 2 cores)
#   bench/mutants.sh --in-diff REF [--max N]
#                                         the mutants in code changed since REF (any
#                                         file), at most N of them (a shard that fits)
#
# Results: mutants.out/ (cargo-mutants' own files) and a summary line on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

scope=(-f 'src/workload/**' -f 'src/measure/**' -f 'src/engine/**' -f 'src/transport/**' -f 'src/diagnose/**'
       -f 'src/placement/**' -f 'src/plan/**' -f src/runner.rs)
args=()
max=0
case "${1:-}" in
  --shard)
    shard=${2:?--shard K/N}
    if [[ $shard == random/* ]]; then
      n=${shard#random/}
      shard="$(( (RANDOM % n) + 1 ))/$n"
    fi
    # cargo-mutants counts shards from 0.
    k=${shard%/*}; n=${shard#*/}
    args=("${scope[@]}" --shard "$((k - 1))/$n")
    echo "mutants: shard $k of $n of the measuring code" >&2
    ;;
  --all) args=("${scope[@]}") ;;
  --in-diff)
    ref=${2:?--in-diff REF}
    mkdir -p target
    git diff "$ref" -- src > target/mutants.diff
    args=(--in-diff target/mutants.diff)
    [ "${3:-}" = --max ] && max=${4:?--max N}
    ;;
  *) sed -n '2,16p' "$0" >&2; exit 2 ;;
esac

command -v cargo-mutants >/dev/null || {
  echo "mutants: cargo-mutants is not installed: cargo install cargo-mutants --locked" >&2
  exit 2
}
mkdir -p target

# A survivor already explained in mutants-survivors.txt runs the whole suite again (about
# 400 s on 2 CPUs) to learn what the list says: leave it out (cargo-mutants' --exclude-re,
# one exact name each), count it, and say so. Only an entry without a note counts: a
# note in parentheses tells apart mutants of one name (two `|` on different lines of one
# function), which a name without its line cannot, so those run. cargo-mutants 27 applies
# name filters to every mutant but the "delete field" kind, so an explained one of those
# still runs.
explained_in() {
  # stdin: mutant names as --list prints them; prints those the list explains, as
  # "FILE: DESCRIPTION | reason".
  awk 'NR == FNR { if ($0 !~ /^#/ && $0 != "") entry[++n] = $0; next }
       { key = $0; sub(/:[0-9]+:[0-9]+: /, ": ", key)
         for (i = 1; i <= n; i++) {
           if (substr(entry[i], 1, length(key) + 3) == key " | ") { print; break }
         } }' mutants-survivors.txt -
}
cargo mutants --list "${args[@]}" 2>/dev/null | explained_in > target/mutants.explained || true
skipped=$(grep -c . target/mutants.explained || true)
if [ "$skipped" -gt 0 ]; then
  args+=(--exclude-re "^($(sed -E 's/[][\\.+*?(){}|^$]/\\&/g' target/mutants.explained | paste -sd '|'))\$")
  echo "mutants: $skipped explained survivors left out (mutants-survivors.txt)" >&2
fi

if [ "$max" -gt 0 ]; then
  count=$(cargo mutants --list "${args[@]}" 2>/dev/null | wc -l)
  if [ "$count" -eq 0 ]; then
    echo "mutants: no mutants in the changed code"
    exit 0
  fi
  if [ "$count" -gt "$max" ]; then
    shards=$(( (count + max - 1) / max ))
    pick=$(( RANDOM % shards ))
    echo "mutants: $count mutants in the diff, testing shard $((pick + 1)) of $shards" >&2
    args+=(--shard "$pick/$shards")
  fi
fi

# A mutant no test catches runs the whole suite (about 400 s on 2 CPUs), so the timeout
# must be longer than that, or a survivor would count as a "timeout", which the score
# takes for caught; cargo-mutants' own default (5 times the baseline) lets a mutant that
# hangs a test hold the run for half an hour. 900 s is both. On CI (a few mutants of the
# last commit, inside CI's time limit) the suite has just passed: no baseline, and 180 s,
# so a timeout there is only "not known to be caught" (listed below).
if [ -n "${MUTANTS_CI:-}" ]; then
  args+=(--baseline skip --timeout 180 --build-timeout 600)
else
  args+=(--timeout 900 --build-timeout 600)
fi

start=$(date +%s)
status=0
cargo mutants --no-shuffle -j 1 "${args[@]}" || status=$?
# 0: all caught; 2: some missed; 3: some timed out; 4: the tests fail without a mutant.
if [ "$status" = 1 ] || [ "$status" = 4 ]; then
  echo "mutants: cargo-mutants could not run (status $status)" >&2
  exit 1
fi

out=mutants.out
count() { if [ -s "$out/$1.txt" ]; then grep -c . "$out/$1.txt"; else echo 0; fi; }
caught=$(count caught); missed=$(count missed); timeout=$(count timeout); unviable=$(count unviable)
viable=$((caught + missed + timeout))
score=$(awk -v c="$caught" -v t="$timeout" -v v="$viable" 'BEGIN { printf "%.1f", v ? 100 * (c + t) / v : 100 }')
echo "mutants: caught $caught, missed $missed, timeouts $timeout, unviable $unviable; score $score% in $(( $(date +%s) - start )) s; $skipped explained survivors not run"
if [ -n "${MUTANTS_CI:-}" ] && [ -s "$out/timeout.txt" ]; then
  echo "mutants: timed out at 180 s (a hang, or a survivor of the whole suite: run bench/mutants.sh --in-diff to tell):" >&2
  sed 's/^/  /' "$out/timeout.txt" >&2
fi

# Survivors not explained in mutants-survivors.txt fail the check. cargo-mutants names a
# mutant "FILE:LINE:COL: DESCRIPTION"; the list names it "FILE: DESCRIPTION", optionally
# followed by a note in parentheses, then " | " and the reason.
unexplained=0
if [ -f "$out/missed.txt" ]; then
  while IFS= read -r m; do
    key="$(echo "$m" | sed -E 's/^([^:]+):[0-9]+:[0-9]+: /\1: /')"
    if ! grep -v '^#' mutants-survivors.txt | grep -Fq -- "$key"; then
      echo "mutants: survivor not explained in mutants-survivors.txt: $key" >&2
      unexplained=$((unexplained + 1))
    fi
  done < "$out/missed.txt"
fi
[ "$unexplained" = 0 ]
