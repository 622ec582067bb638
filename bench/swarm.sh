#!/usr/bin/env bash
# swarm.sh - what the reactor costs: the aggregate stream throughput of many pairs at once
# against one pair, both driven by the same two epoll threads, in one run.
#
# What it does: for ROUNDS rounds, alternately
#     sockbench swarm -n 1     -t TRANSPORT -d DURATION --format json
#     sockbench swarm -n PAIRS -t TRANSPORT -d DURATION --format json
# and prints each round's aggregates, the medians, and PAIRS/1 (the issue asks >= 0.8:
# spreading the same two threads over a thousand descriptors may cost at most a fifth),
# with the median fairness index of the many.
#
# How to run:
#   bench/swarm.sh
#   ROUNDS=7 DURATION=2 PAIRS=1000 TRANSPORT=unix NO_BUILD=1 bench/swarm.sh
#
# Environment: ROUNDS (default 5), DURATION seconds (default 2), PAIRS (default 1000),
# TRANSPORT (default tcp), NO_BUILD=1 to use target/release/sockbench as it is. Run it on
# an idle machine. About ROUNDS x 2 x (DURATION + 1) seconds.
set -euo pipefail

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-2}
PAIRS=${PAIRS:-1000}
TRANSPORT=${TRANSPORT:-tcp}
die() { echo "swarm.sh: $*" >&2; exit 1; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer"
[[ $PAIRS =~ ^[1-9][0-9]*$ ]] || die "PAIRS must be a positive integer"

cd "$(dirname "$0")/.."
BIN="$PWD/target/release/sockbench"
if [ "${NO_BUILD:-0}" != 1 ]; then cargo build --release --quiet; fi
[ -x "$BIN" ] || die "no $BIN: build it or unset NO_BUILD"
command -v python3 >/dev/null || die "needs python3 to read the JSON"

one=(); many=(); fair=()
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(d.get('body', d)['$1'])"; }
for r in $(seq "$ROUNDS"); do
  a=$("$BIN" swarm -n 1 -t "$TRANSPORT" -d "$DURATION" --format json -q)
  b=$("$BIN" swarm -n "$PAIRS" -t "$TRANSPORT" -d "$DURATION" --format json -q)
  one+=("$(field bits_per_second <<<"$a")")
  many+=("$(field bits_per_second <<<"$b")")
  fair+=("$(field fairness_jain <<<"$b")")
  printf 'round %d: 1 pair %.3g bit/s, %d pairs %.3g bit/s\n' "$r" "${one[-1]}" "$PAIRS" "${many[-1]}"
done
python3 - "$PAIRS" "${one[*]}" "${many[*]}" "${fair[*]}" <<'PY'
import statistics, sys
pairs = sys.argv[1]
one, many, fair = ([float(x) for x in a.split()] for a in sys.argv[2:5])
m1, mn = statistics.median(one), statistics.median(many)
print(f"median: 1 pair {m1/1e9:.2f} Gbit/s, {pairs} pairs {mn/1e9:.2f} Gbit/s")
print(f"{pairs} pairs / 1 pair: {mn/m1:.3f}   (fairness of the {pairs}: median {statistics.median(fair):.4f})")
PY
