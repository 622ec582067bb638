#!/usr/bin/env bash
# shm_vs_cacheline.sh - how close sockbench's shared-memory ping-pong gets to the floor:
# a bare two-thread cache-line ping-pong (bench/cacheline_pingpong.c), both pinned to
# CPUs 0 and 1, alternating ROUNDS times in one run. Prints each median round trip and
# the ratio sockbench shm p50 / bare cache-line round trip.
#
# Run from anywhere:  bash bench/shm_vs_cacheline.sh      (ROUNDS=5 DURATION=1 by default;
# about 15 s). Needs gcc and at least 2 CPUs. Run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ "${NO_BUILD:-0}" = 1 ] || cargo build --release --locked -q
gcc -O2 -pthread -o "$tmp/clpp" bench/cacheline_pingpong.c
bare=() shm=()
for r in $(seq "$ROUNDS"); do
  echo "  round $r/$ROUNDS" >&2
  bare+=("$(timeout 30 "$tmp/clpp" "$DURATION")")
  shm+=("$(timeout 60 target/release/sockbench pingpong -t shm -s 64 -d "$DURATION" -w 0.1 --cpus 0,1 --format json -q |
    python3 -c 'import json,sys; d = json.load(sys.stdin); print(d.get("body", d)["results"][0]["latencies"]["round_trip"]["p50_ns"])')")
done
python3 - "${bare[*]}" "${shm[*]}" <<'PY'
import statistics, sys
bare = [float(x) for x in sys.argv[1].split()]
shm = [float(x) for x in sys.argv[2].split()]
b, s = statistics.median(bare), statistics.median(shm)
print("shared-memory round trip, 64 B, CPUs 0 and 1 (medians of %d rounds)" % len(bare))
print("bare cache-line ping-pong  %8.0f ns" % b)
print("sockbench shm pingpong p50 %8.0f ns" % s)
print("ratio sockbench/bare       %8.2f" % (s / b))
PY
