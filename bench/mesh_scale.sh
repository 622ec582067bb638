#!/usr/bin/env bash
# mesh_scale.sh - how long a mesh of N agents takes, measured with N agents on this
# machine, and what that says of a real mesh at the default durations.
#
# What it does:
#   1. Starts AGENTS `sockbench server` agents on 127.0.0.1 (ports BASE..BASE+AGENTS-1).
#   2. Runs `sockbench mesh` over them with short tests (TESTS, -d DURATION, -w 0) and
#      times it. Every agent shares these CPUs, and a round runs AGENTS/2 tests at once,
#      so the time per test is an upper bound on what a test costs beyond its own
#      duration on real hosts (set-up: the coordinator's control connection and
#      handshake, the agent's child, the child's connection and handshake to the other
#      agent, the report back).
#   3. Checks the report: every ordered pair measured once per test, the rounds the
#      schedule promises (N-1 for even N, N for odd), no host in two tests at once.
#   4. Prints the overhead per test and the time of a mesh of PROJECT hosts (default 100)
#      at the default settings (3 tests, -d 5s, -w 0.5s):
#        rounds x 2 directions x tests x (warm-up + duration + overhead)
#      where the warm-up is a run of its own and costs a set-up too.
#
# How to run (from any directory):
#   bench/mesh_scale.sh
#   AGENTS=20 TESTS=tcp-pingpong DURATION=0.1 NO_BUILD=1 bench/mesh_scale.sh
#
# Environment:
#   AGENTS    agents to start (default 16, at least 2)
#   TESTS     --tests for the measured mesh (default tcp-pingpong)
#   DURATION  seconds per test in the measured mesh (default 0.1)
#   PROJECT   hosts of the mesh to project to (default 100)
#   BASE      first agent port (default 17300)
#   NO_BUILD  1 = use target/release/sockbench as it is
set -euo pipefail

AGENTS=${AGENTS:-16}
TESTS=${TESTS:-tcp-pingpong}
DURATION=${DURATION:-0.1}
PROJECT=${PROJECT:-100}
BASE=${BASE:-17300}

die() { echo "mesh_scale: $*" >&2; exit 1; }
[[ $AGENTS =~ ^[0-9]+$ ]] && ((AGENTS >= 2 && AGENTS <= 400)) || die "AGENTS must be 2..400 (got '$AGENTS')"
[[ $PROJECT =~ ^[0-9]+$ ]] && ((PROJECT >= 2)) || die "PROJECT must be 2 or more (got '$PROJECT')"
[[ $DURATION =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "DURATION must be seconds (got '$DURATION')"
[[ $BASE =~ ^[0-9]+$ ]] && ((BASE + AGENTS < 65536)) || die "BASE + AGENTS must fit in a port"

cd "$(dirname "$0")/.."
BIN="$PWD/target/release/sockbench"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/mesh_scale.XXXXXX")
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

command -v python3 >/dev/null || die "python3 is required"
if [[ ${NO_BUILD:-0} != 1 ]]; then
    cargo build --release --locked -q || die "cargo build failed"
fi
[[ -x $BIN ]] || die "no $BIN: build it, or drop NO_BUILD"

hosts=()
for i in $(seq 0 $((AGENTS - 1))); do
    port=$((BASE + i))
    "$BIN" server --listen 127.0.0.1 --port "$port" --max-clients 4 2>"$TMP/agent$i.log" &
    PIDS+=($!)
    hosts+=("127.0.0.1:$port")
done
for i in $(seq 0 $((AGENTS - 1))); do
    for _ in $(seq 200); do grep -q listening "$TMP/agent$i.log" 2>/dev/null && break; sleep 0.05; done
    grep -q listening "$TMP/agent$i.log" || die "agent $i did not start: $(cat "$TMP/agent$i.log")"
done
list=$(IFS=,; echo "${hosts[*]}")
echo "mesh of $AGENTS agents on this machine: --tests $TESTS -d ${DURATION}s -w 0s" >&2
start=$(date +%s.%N)
"$BIN" mesh --hosts "$list" --tests "$TESTS" -d "${DURATION}s" -w 0s --format json -q > "$TMP/mesh.json" \
    || die "the mesh failed (exit $?)"
end=$(date +%s.%N)

python3 - "$TMP/mesh.json" "$start" "$end" "$AGENTS" "$DURATION" "$PROJECT" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
doc = doc.get("body", doc)
start, end, n, d, project = float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
tests = doc["tests"]
names = doc["settings"]["tests"]
rounds = doc["settings"]["rounds"]
want_rounds = n - 1 if n % 2 == 0 else n
assert rounds == want_rounds, f"{rounds} rounds, expected {want_rounds}"
seen = {}
for t in tests:
    k = (t["source"], t["destination"], t["test"])
    seen[k] = seen.get(k, 0) + 1
assert len(tests) == n * (n - 1) * len(names) and all(v == 1 for v in seen.values()), "a pair missing or twice"
failed = [t for t in tests if t["outcome"]["status"] != "measured"]
for h in range(n):
    spans = sorted((t["started_unix_ns"], t["ended_unix_ns"]) for t in tests if h in (t["source"], t["destination"]))
    for a, b in zip(spans, spans[1:]):
        assert a[1] <= b[0], f"host {h} in two tests at once"
wall = end - start
slots = rounds * 2 * len(names)          # tests one after another
per_test = wall / slots
overhead = max(per_test - d, 0.0)
print(f"{n} agents: {len(tests)} tests ({len(failed)} failed) in {rounds} rounds, {wall:.1f} s")
print(f"  {slots} tests one after another: {per_test * 1000:.0f} ms each, {overhead * 1000:.0f} ms beyond the {d * 1000:.0f} ms measured")
p_rounds = project - 1 if project % 2 == 0 else project
p_tests, w, dd = 3, 0.5, 5.0
p_slots = p_rounds * 2 * p_tests
total = p_slots * (w + dd + 2 * overhead)
print(f"a mesh of {project} hosts at the defaults (3 tests, -d 5s, -w 0.5s): {p_rounds} rounds x 2 directions x 3 tests"
      f" = {p_slots} tests in turn, each 5.5 s + 2 x {overhead * 1000:.0f} ms set-up: {total / 60:.0f} minutes"
      f" ({project * (project - 1) * p_tests} tests in all)")
PY
