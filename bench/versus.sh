#!/usr/bin/env bash
# versus.sh - two sockbench binaries side by side: did a change make sockbench slower?
#
# What it does: for each workload (stream, pingpong, rate, relay, load, swarm), ROUNDS
# rounds, each running OLD and NEW once with the same arguments, in alternating order (OLD
# first in odd rounds, NEW first in even ones, so a drift of the machine falls on both).
# NEW's `compare` reads each round's pair of documents (it reads the documents of older
# sockbench versions too) and gives each row's headline figure. Printed per row: the
# median of each binary over the rounds, NEW/OLD of the medians (above 1: NEW is faster
# for a figure where higher is better; for a latency, OLD/NEW, so above 1 is still
# "NEW is better"), a 95% interval for that ratio (the rounds resampled), whether the
# ratio is at least FLOOR beyond the noise ("yes", "no", or "can't tell": more rounds;
# with fewer than 5 rounds it does not say),
# and every round's ratio.
#
#   bench/versus.sh OLD NEW                      e.g. a release build of main and of a branch
#   ROUNDS=7 DURATION=2 WORKLOADS="stream relay" bench/versus.sh OLD NEW
#
# Environment: ROUNDS (default 5), DURATION seconds per measured run (default 1),
# WORKLOADS (default all six), FLOOR (default 0.97: slower is a regression). `load` drives NEW's
# `serve --model epoll`, so only the generator differs. Run it on an idle machine: the
# ratios of one run are what it is for; figures of different runs are not comparable.
# About ROUNDS x 2 x (DURATION + 1) seconds per workload (relay runs every copy method).
set -euo pipefail

OLD=${1:?usage: bench/versus.sh OLD-BINARY NEW-BINARY}
NEW=${2:?usage: bench/versus.sh OLD-BINARY NEW-BINARY}
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-1}
WORKLOADS=${WORKLOADS:-stream pingpong rate relay load swarm}
FLOOR=${FLOOR:-0.97}
die() { echo "versus.sh: $*" >&2; exit 1; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer"
[[ $DURATION =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "DURATION must be seconds"
for b in "$OLD" "$NEW"; do [ -x "$b" ] || die "$b is not an executable"; done
command -v python3 >/dev/null || die "needs python3"

WORK=$(mktemp -d)
server=
cleanup() {
  if [ -n "$server" ]; then
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Each workload's arguments, the same for both binaries (flags both versions take).
args_of() {
  case $1 in
    stream) echo "stream -t unix,tcp -s 64K -d $DURATION -w 0.2" ;;
    pingpong) echo "pingpong -t unix,tcp -s 64 -d $DURATION -w 0.2" ;;
    rate) echo "rate -t udp,unix-dgram -s 64 -d $DURATION -w 0.2" ;;
    relay) echo "relay -t tcp -d $DURATION" ;;
    load) echo "load -c 20 -k -d ${DURATION}s $URL" ;;
    swarm) echo "swarm -n 100 -t tcp -d $DURATION" ;;
    *) die "unknown workload $1 (stream, pingpong, rate, relay, load, swarm)" ;;
  esac
}

URL=
if [[ " $WORKLOADS " == *" load "* ]]; then
  "$NEW" serve --model epoll --port 0 --backlog 1024 -v 0 > /dev/null 2> "$WORK/serve.err" &
  server=$!
  for _ in $(seq 50); do
    URL=$(grep -o 'http://[^ ]*' "$WORK/serve.err" | head -1 || true)
    [ -n "$URL" ] && break
    sleep 0.1
  done
  [ -n "$URL" ] || die "sockbench serve did not start: $(cat "$WORK/serve.err")"
fi

run() { # binary workload out
  # shellcheck disable=SC2046 # the arguments are words on purpose
  "$1" $(args_of "$2") --format json -q > "$3" 2> "$3.err" || die "$1 $(args_of "$2") failed: $(tail -3 "$3.err")"
}

for w in $WORKLOADS; do
  args_of "$w" > /dev/null
  echo "versus: $w: $ROUNDS rounds of '$(args_of "$w")'" >&2
  for r in $(seq "$ROUNDS"); do
    if (( r % 2 )); then
      run "$OLD" "$w" "$WORK/$w-$r-old.json"; run "$NEW" "$w" "$WORK/$w-$r-new.json"
    else
      run "$NEW" "$w" "$WORK/$w-$r-new.json"; run "$OLD" "$w" "$WORK/$w-$r-old.json"
    fi
    "$NEW" compare "$WORK/$w-$r-old.json" "$WORK/$w-$r-new.json" --format json > "$WORK/$w-$r-cmp.json" 2> /dev/null ||
      [ -s "$WORK/$w-$r-cmp.json" ] || die "compare could not read round $r of $w"
  done
done

python3 - "$WORK" "$ROUNDS" "$FLOOR" $WORKLOADS <<'EOF'
import json, random, statistics, sys
work, rounds, floor, workloads = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4:]
random.seed(1)  # the same interval for the same figures
print(f"{'row':<40} {'figure':<20} {'OLD median':>11} {'NEW median':>11} {'ratio':>6} {'95% interval':>13}  {'>= ' + str(floor):<10} per round")
for w in workloads:
    rows = {}
    for r in range(1, rounds + 1):
        doc = json.load(open(f"{work}/{w}-{r}-cmp.json"))
        for c in doc["body"]["comparisons"]:
            if c["base"]["median"] is None or c["new"]["median"] is None:
                continue
            key = (c["scenario"], c["figure"], c["higher_is_better"])
            rows.setdefault(key, []).append((c["base"]["median"], c["new"]["median"]))
    for (scenario, figure, higher), pairs in rows.items():
        pairs = [(o, n) for o, n in pairs if o and n]
        if not pairs:
            continue
        better = (lambda o, n: n / o) if higher else (lambda o, n: o / n)
        def ratio(sample):
            return better(statistics.median(p[0] for p in sample), statistics.median(p[1] for p in sample))
        # The rounds resampled (each round's pair kept together): how far the ratio of
        # the medians moves with which rounds happened to be measured.
        boot = sorted(ratio(random.choices(pairs, k=len(pairs))) for _ in range(2000))
        lo, hi = boot[50], boot[1949]
        verdict = "yes" if lo >= floor else ("no" if hi < floor else "can't tell")
        if len(pairs) < 5:
            verdict = "5+ rounds"  # too few for the interval to mean anything
        each = " ".join(f"{better(o, n):.2f}" for o, n in pairs)
        print(f"{scenario[:40]:<40} {figure[:20]:<20} {statistics.median(p[0] for p in pairs):>11.4g} "
              f"{statistics.median(p[1] for p in pairs):>11.4g} {ratio(pairs):>6.3f} {lo:>6.3f}-{hi:<6.3f}  {verdict:<10} {each}")
EOF
