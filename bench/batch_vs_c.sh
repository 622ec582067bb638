#!/usr/bin/env bash
# batch_vs_c.sh - `sockbench rate --batch` against the bare C loop it stands for
# (bench/mmsg.c: sendmmsg sender, recvmmsg receiver) and against `sockperf throughput`.
#
# What it does:
#   1. Builds bench/mmsg.c (cc -O2) into a temp dir and sockbench in release mode
#      (cargo decides whether it is stale; NO_BUILD=1 skips it). Installs sockperf with
#      apt-get if it is missing (as bench/latency_vs_sockperf.sh does).
#   2. For udp (127.0.0.1) and unix-dgram, ROUNDS rounds, the order swapped every round:
#        sockbench rate -t T -s SIZE --batch BATCH -d DURATION -w 0.25 --format json -q
#        mmsg udp|unix BATCH SIZE DURATION 0.25
#      Both count messages RECEIVED per second (sockbench: .body.results[0].messages_per_second,
#      the receiver's distinct messages over its interval; mmsg: its receiver's count
#      over DURATION after a 0.25 s warm-up). Each round prints the ratio sockbench/C.
#   3. UDP only (sockperf 3.7 has no Unix sockets): ROUNDS rounds of
#        sockperf server -i 127.0.0.1 -p PORT        (a fresh one each round)
#        sockperf throughput -i 127.0.0.1 -p PORT -m SIZE -t DURATION
#      against the same sockbench run. sockperf's client reports only what it SENT;
#      what arrived is the server's "Total N messages received" (printed when it is
#      stopped with SIGINT), divided by the client's own "messages sent in T sec". That
#      received rate is the figure compared: a sender alone can outrun any receiver on
#      UDP, and the excess is simply dropped. sockperf sends one datagram per sendto
#      and receives one per recvfrom: the point of the comparison is what batching buys.
#   4. Prints each round's figures and ratio, then per comparison the median of each
#      tool and the ratio of the medians.
#
# Pinning: unpinned by default, like sockbench's roles and mmsg's threads. CPUS=A,B
# pins the sender to A and the receiver to B in all three tools (sockbench --cpus A,B;
# mmsg's arguments; taskset for sockperf's client and server).
#
# How to run (from any directory):
#   bench/batch_vs_c.sh
#   ROUNDS=3 DURATION=2 CPUS=0,1 NO_BUILD=1 bench/batch_vs_c.sh
#
# Environment:
#   ROUNDS    rounds per comparison (default 5)
#   DURATION  seconds per run, whole seconds (sockperf -t takes an integer; default 3)
#   BATCH     messages per call (default 32)
#   SIZE      message size in bytes (default 64)
#   CPUS      A,B: pin senders to CPU A and receivers to CPU B (default: unpinned)
#   PORT      sockperf's UDP port on 127.0.0.1 (default 11511)
#   NO_BUILD  1 = use target/release/sockbench as it is
#
# Run it on an idle machine: on 2 CPUs any other load lands in every figure. With the
# defaults it takes about 2 x 5 x 2 x 3.5 s + 5 x (3.5 + 3.5) s, under two minutes.
set -euo pipefail

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-3}
BATCH=${BATCH:-32}
SIZE=${SIZE:-64}
PORT=${PORT:-11511}
CPUS=${CPUS:-}

die() { echo "batch_vs_c: $*" >&2; exit 1; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer (got '$ROUNDS')"
[[ $DURATION =~ ^[1-9][0-9]*$ ]] || die "DURATION must be a positive whole number of seconds (got '$DURATION')"
[[ $BATCH =~ ^[1-9][0-9]*$ ]] && ((BATCH <= 1024)) || die "BATCH must be 1..1024 (got '$BATCH')"
[[ $SIZE =~ ^[1-9][0-9]*$ ]] || die "SIZE must be a positive integer (got '$SIZE')"
[[ -z $CPUS || $CPUS =~ ^[0-9]+,[0-9]+$ ]] || die "CPUS must be A,B (got '$CPUS')"

cd "$(dirname "$0")/.."
BIN="$PWD/target/release/sockbench"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/batch_vs_c.XXXXXX")
SERVER=
cleanup() {
    if [[ -n $SERVER ]] && kill -0 "$SERVER" 2>/dev/null; then kill -9 "$SERVER" 2>/dev/null || true; fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

command -v python3 >/dev/null || die "python3 is required"
command -v cc >/dev/null || die "a C compiler (cc) is required"
cc -O2 -pthread -o "$TMP/mmsg" bench/mmsg.c || die "cannot build bench/mmsg.c"
if ! command -v sockperf >/dev/null; then
    echo "installing sockperf..." >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sockperf >/dev/null \
        || echo "note: sockperf could not be installed; skipping the sockperf comparison" >&2
fi
if [[ ${NO_BUILD:-0} != 1 ]]; then
    echo "building sockbench (release)..." >&2
    cargo build --release --locked -q >"$TMP/build.log" 2>&1 || { cat "$TMP/build.log" >&2; die "build failed"; }
fi
[[ -x $BIN ]] || die "$BIN not found"

SB_PIN=() C_PIN=() SND=() RCV=()
if [[ -n $CPUS ]]; then
    SB_PIN=(--cpus "$CPUS")
    C_PIN=("${CPUS%,*}" "${CPUS#*,}")
    SND=(taskset -c "${CPUS%,*}") RCV=(taskset -c "${CPUS#*,}")
fi
TIMEOUT=$((DURATION * 4 + 30))

sockbench() { # TRANSPORT -> received messages per second
    local out="$TMP/sb.json"
    timeout -k 5 "$TIMEOUT" "$BIN" rate -t "$1" -s "$SIZE" --batch "$BATCH" -d "$DURATION" -w 0.25 \
        "${SB_PIN[@]}" --format json -q >"$out" || die "sockbench rate -t $1 failed"
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r=d.get("body", d)["results"][0]; print(round(r["messages_per_second"]))' "$out"
}
c_loop() { # udp|unix -> received messages per second
    local line
    line=$(timeout -k 5 "$TIMEOUT" "$TMP/mmsg" "$1" "$BATCH" "$SIZE" "$DURATION" 0.25 ${C_PIN[@]+"${C_PIN[@]}"}) \
        || die "mmsg $1 failed"
    sed -E 's/.*per_second=([0-9]+).*/\1/' <<<"$line"
}
sockperf_tp() { # -> received messages per second (the server's count / the client's time)
    "${RCV[@]}" sockperf server -i 127.0.0.1 -p "$PORT" >"$TMP/server.txt" 2>&1 &
    SERVER=$!
    sleep 0.3
    "${SND[@]}" timeout -k 5 "$TIMEOUT" sockperf throughput -i 127.0.0.1 -p "$PORT" -m "$SIZE" \
        -t "$DURATION" >"$TMP/client.txt" 2>&1 || { cat "$TMP/client.txt" >&2; die "sockperf throughput failed"; }
    kill -INT "$SERVER"
    wait "$SERVER" 2>/dev/null || true
    SERVER=
    local got secs
    got=$(sed -nE 's/.*Total ([0-9]+) messages received.*/\1/p' "$TMP/server.txt")
    secs=$(sed -nE 's/.*messages sent in ([0-9.]+) sec.*/\1/p' "$TMP/client.txt")
    [[ -n $got && -n $secs ]] || { cat "$TMP/server.txt" "$TMP/client.txt" >&2; die "cannot read sockperf's counts"; }
    python3 -c "print(round($got / $secs))"
}

RESULTS="$TMP/results.txt"
: >"$RESULTS"
compare() { # NAME SOCKBENCH_TRANSPORT OTHER_COMMAND...
    local name=$1 t=$2 round a b
    shift 2
    echo "$name: sockbench rate -t $t -s $SIZE --batch $BATCH vs $*, ${ROUNDS} x ${DURATION} s${CPUS:+, pinned $CPUS}"
    for round in $(seq 1 "$ROUNDS"); do
        if ((round % 2)); then a=$(sockbench "$t"); b=$("$@"); else b=$("$@"); a=$(sockbench "$t"); fi
        python3 -c "print(f'  round $round: sockbench {$a:>11,} msg/s  other {$b:>11,} msg/s  ratio {$a/$b:.2f}x')"
        echo "$name $a $b" >>"$RESULTS"
    done
}

compare "udp-vs-C" udp c_loop udp
compare "unix-dgram-vs-C" unix-dgram c_loop unix
if command -v sockperf >/dev/null; then
    compare "udp-vs-sockperf" udp sockperf_tp
fi

echo
python3 - "$RESULTS" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, a, b = line.split()
    rows.setdefault(name, ([], []))
    rows[name][0].append(float(a)); rows[name][1].append(float(b))
print(f"{'comparison':<18} {'sockbench (median)':>19} {'other (median)':>15} {'ratio':>6}  per-round ratios")
for name, (a, b) in rows.items():
    ma, mb = statistics.median(a), statistics.median(b)
    each = " ".join(f"{x / y:.2f}" for x, y in zip(a, b))
    print(f"{name:<18} {ma:>19,.0f} {mb:>15,.0f} {ma / mb:>5.2f}x  {each}")
print("(messages RECEIVED per second; other = bench/mmsg.c or sockperf's server count)")
EOF
