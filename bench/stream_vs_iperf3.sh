#!/usr/bin/env bash
# stream_vs_iperf3.sh - cross-check sockbench's TCP stream numbers against iperf3,
# and put the local transports next to the single-thread memcpy limit.
#
# What it does:
#   1. Installs iperf3 (apt-get) if it is missing; needs python3 and gcc.
#   2. Builds sockbench in release mode (cargo decides whether it is stale).
#   3. Over loopback (127.0.0.1 only), at 128 KiB and 1 MiB messages, runs
#      `sockbench stream -t tcp` and `iperf3 -c` alternately for ROUNDS rounds of
#      DURATION seconds each (the order is swapped every round), then prints the
#      median throughput and the median sender CPU seconds per GB (10^9 bytes) of
#      each tool and the sockbench/iperf3 ratios.
#   4. "Copy limit": compiles bench/memcpy.c and prints memcpy GB/s at 64 KiB and
#      1 MiB next to sockbench's unix, pipe and shm stream throughput at the same
#      sizes, with each one's ratio to memcpy.
#   5. Kills the iperf3 server and removes its temp dir on exit, however it exits.
#
# How to run (from any directory):
#   bench/stream_vs_iperf3.sh
#   ROUNDS=3 DURATION=2 PORT=5299 bench/stream_vs_iperf3.sh
#
# Environment:
#   ROUNDS          rounds per size in the iperf3 comparison (default 5)
#   DURATION        seconds per run, whole number since iperf3 -t takes an integer (default 3)
#   PORT            iperf3 server port on 127.0.0.1 (default 5299; a free one is
#                   picked if it is taken)
#   MEMCPY_SECONDS  seconds per memcpy measurement (default 2)
#   NO_BUILD        1 = skip `cargo build` and use target/release/sockbench as it is
#   RAW_DIR         if set, every raw JSON report (sockbench and iperf3) is copied there on exit
#
# Run it on an otherwise idle machine: any other load (a compile, a test run)
# shows up in both tools' throughput and CPU figures.
#
# With the defaults it takes about 2 minutes (2m06s measured) on a 2-core machine
# (iperf3 comparison: 2 sizes x 5 rounds x 2 tools x ~3.3 s; copy limit:
# 3 transports x 2 sizes x 3 runs x ~3.3 s, plus memcpy).
set -euo pipefail

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-3}
PORT=${PORT:-5299}
MEMCPY_SECONDS=${MEMCPY_SECONDS:-2}

die() { echo "stream_vs_iperf3: $*" >&2; exit 1; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer (got '$ROUNDS')"
[[ $DURATION =~ ^[1-9][0-9]*$ ]] || die "DURATION must be a positive whole number of seconds (got '$DURATION')"
[[ $PORT =~ ^[1-9][0-9]*$ ]] || die "PORT must be a port number (got '$PORT')"
[[ $MEMCPY_SECONDS =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "MEMCPY_SECONDS must be a number (got '$MEMCPY_SECONDS')"

cd "$(dirname "$0")/.."
REPO=$(pwd)
BIN="$REPO/target/release/sockbench"

# Hard upper bound on any single tool invocation (seconds).
RUN_TIMEOUT=$((DURATION * 4 + 30))

# ---------------------------------------------------------------- cleanup
TMP=$(mktemp -d "${TMPDIR:-/tmp}/stream_vs_iperf3.XXXXXX")
SERVER_PID=""
cleanup() {
    if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 1 20); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    if [[ -n ${RAW_DIR:-} ]]; then
        mkdir -p "$RAW_DIR" && cp "$TMP"/*.json "$RAW_DIR"/ 2>/dev/null || true
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- prerequisites
command -v python3 >/dev/null || die "python3 is required"
command -v gcc >/dev/null || die "gcc is required"
if ! command -v iperf3 >/dev/null; then
    echo "installing iperf3..." >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3 >/dev/null
    command -v iperf3 >/dev/null || die "iperf3 installation failed"
fi

if [[ ${NO_BUILD:-0} == 1 ]]; then
    echo "NO_BUILD=1: using $BIN as it is" >&2
else
    echo "building sockbench (release)..." >&2
    if ! cargo build --release --locked -q >"$TMP/build.log" 2>&1; then
        cat "$TMP/build.log" >&2
        die "cargo build --release --locked failed (NO_BUILD=1 uses the existing binary)"
    fi
fi
[[ -x $BIN ]] || die "$BIN not found after build"

# ---------------------------------------------------------------- iperf3 server
# port_free PORT: exit 0 if nothing listens on 127.0.0.1:PORT (tries to bind it).
port_free() {
    python3 - "$1" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
# SO_REUSEADDR so connections in TIME_WAIT don't count; a listener still does.
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
finally:
    s.close()
EOF
}
if ! port_free "$PORT"; then
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
fi
iperf3 -s -B 127.0.0.1 -p "$PORT" >"$TMP/iperf3-server.log" 2>&1 &
SERVER_PID=$!
# Wait (at most 5 s) until the server is listening: the port can no longer be bound.
for _ in $(seq 1 50); do
    port_free "$PORT" || break
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$TMP/iperf3-server.log" >&2; die "iperf3 server exited"; }
    sleep 0.1
done
port_free "$PORT" && die "iperf3 server did not start listening on 127.0.0.1:$PORT"

# ---------------------------------------------------------------- runners
run_sockbench() { # SIZE OUTFILE
    local rc=0
    timeout -k 5 "$RUN_TIMEOUT" "$BIN" stream --transport tcp --size "$1" --duration "$DURATION" \
        --warmup 0.25 --format json -q >"$2" 2>"$2.err" || rc=$?
    if ((rc)); then cat "$2.err" >&2; die "sockbench stream at $1 failed (exit $rc)"; fi
}
run_iperf3() { # SIZE OUTFILE
    local rc=0
    timeout -k 5 "$RUN_TIMEOUT" iperf3 -c 127.0.0.1 -p "$PORT" -l "$1" -t "$DURATION" -J \
        >"$2" 2>"$2.err" || rc=$?
    if ((rc)); then cat "$2" "$2.err" >&2; die "iperf3 client at $1 failed (exit $rc)"; fi
}

SIZES=(128K 1M)
echo "sockbench vs iperf3: TCP over 127.0.0.1:$PORT, ${ROUNDS} rounds x ${DURATION} s per tool and size" >&2
for size in "${SIZES[@]}"; do
    for round in $(seq 1 "$ROUNDS"); do
        echo "  $size round $round/$ROUNDS" >&2
        # Alternate which tool goes first so drift (thermal, page cache, ...) hits both.
        if ((round % 2)); then
            run_sockbench "$size" "$TMP/sb-$size-$round.json"
            run_iperf3 "$size" "$TMP/ip-$size-$round.json"
        else
            run_iperf3 "$size" "$TMP/ip-$size-$round.json"
            run_sockbench "$size" "$TMP/sb-$size-$round.json"
        fi
    done
done

python3 - "$TMP" "$ROUNDS" "${SIZES[@]}" <<'EOF'
import json, statistics, sys

tmp, rounds, sizes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def load(path):
    with open(path) as f:
        return json.load(f)

def sockbench(path):
    d = load(path)
    if d.get("error"):
        sys.exit(f"{path}: sockbench error: {d['error']}")
    r = d.get("body", d)["results"][0]
    if r.get("error"):
        sys.exit(f"{path}: sockbench result error: {r['error']}")
    return r["bits_per_second"], r["sender_cpu_seconds_per_gb"]

def iperf3(path):
    d = load(path)
    if d.get("error"):
        sys.exit(f"{path}: iperf3 error: {d['error']}")
    end = d["end"]
    bps = end["sum_received"]["bits_per_second"]
    sent = end["sum_sent"]
    # host_total is the CPU of the whole iperf3 client process (percent of one CPU),
    # which is the sender; sockbench's figure is the sender thread only.
    cpu_s = end["cpu_utilization_percent"]["host_total"] * sent["seconds"] / 100
    return bps, cpu_s / (sent["bytes"] / 1e9)

def ratio(a, b):
    return f"{a / b:.2f}" if b else "n/a"

rows = []
for size in sizes:
    sb = [sockbench(f"{tmp}/sb-{size}-{i}.json") for i in range(1, rounds + 1)]
    ip = [iperf3(f"{tmp}/ip-{size}-{i}.json") for i in range(1, rounds + 1)]
    sb_g = statistics.median(x[0] for x in sb) / 1e9
    ip_g = statistics.median(x[0] for x in ip) / 1e9
    sb_c = statistics.median(x[1] for x in sb)
    ip_c = statistics.median(x[1] for x in ip)
    rows.append([size, f"{sb_g:.2f}", f"{ip_g:.2f}", ratio(sb_g, ip_g),
                 f"{sb_c:.3f}", f"{ip_c:.3f}", ratio(sb_c, ip_c)])

head = ["size", "sockbench Gbit/s", "iperf3 Gbit/s", "ratio",
        "sockbench CPU s/GB", "iperf3 CPU s/GB", "ratio"]
w = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
print(f"TCP loopback, medians of {rounds} rounds (sender CPU: sockbench = sender thread, "
      "iperf3 = whole client process)")
for r in [head] + rows:
    print("  ".join(c.rjust(w[i]) if i else c.ljust(w[i]) for i, c in enumerate(r)))
EOF

# ---------------------------------------------------------------- copy limit
echo >&2
echo "copy limit: memcpy and sockbench unix,pipe,shm at 64K and 1M" >&2
gcc -O2 -o "$TMP/memcpy" "$REPO/bench/memcpy.c"
MC_64K=$(timeout -k 5 60 "$TMP/memcpy" 65536 "$MEMCPY_SECONDS")
MC_1M=$(timeout -k 5 60 "$TMP/memcpy" 1048576 "$MEMCPY_SECONDS")
# 3 transports x 2 sizes x 3 runs, each DURATION s plus a 0.25 s warm-up.
timeout -k 5 $((18 * (DURATION + 2) + 60)) "$BIN" stream -t unix,pipe,shm -s 64K,1M \
    -d "$DURATION" --runs 3 --format json -q >"$TMP/copy.json" 2>"$TMP/copy.err" \
    || { cat "$TMP/copy.err" >&2; die "sockbench stream -t unix,pipe,shm failed"; }

echo
python3 - "$TMP/copy.json" "$MC_64K" "$MC_1M" <<'EOF'
import json, sys

d = json.load(open(sys.argv[1]))
memcpy = {65536: float(sys.argv[2]), 1048576: float(sys.argv[3])}
label = {65536: "64K", 1048576: "1M"}
transports = ["unix", "pipe", "shm"]
got = {}
for r in d.get("body", d)["results"]:
    if r.get("error"):
        print(f"warning: {r['transport']} at {r['size_bytes']} B failed: {r['error']}", file=sys.stderr)
        continue
    got[(r["transport"], r["size_bytes"])] = r["bytes_per_second"]
for s in d.get("body", d).get("skipped", []):
    print(f"warning: skipped: {s}", file=sys.stderr)

head = ["size", "memcpy GB/s"] + [f"{t} GB/s (x memcpy)" for t in transports]
rows = []
for size in (65536, 1048576):
    mc = memcpy[size]
    row = [label[size], f"{mc / 1e9:.2f}"]
    for t in transports:
        v = got.get((t, size))
        row.append("missing" if v is None else f"{v / 1e9:.2f} ({v / mc:.2f})")
    rows.append(row)
w = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
print("Copy limit: single-thread memcpy vs one-way stream throughput (GB = 10^9 bytes; "
      "stream figures are medians of 3 runs)")
for r in [head] + rows:
    print("  ".join(c.rjust(w[i]) if i else c.ljust(w[i]) for i, c in enumerate(r)))
EOF
