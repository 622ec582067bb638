#!/usr/bin/env bash
# latency_vs_sockperf.sh - cross-check sockbench's round-trip latency and message
# rate against sockperf over loopback.
#
# What it does:
#   1. Installs sockperf (apt-get) if it is missing; needs python3.
#   2. Builds sockbench in release mode (cargo decides whether it is stale).
#   3. Ping-pong latency at 64 B and 1 KiB over UDP and TCP (127.0.0.1 only), and
#      over Unix stream sockets if the installed sockperf can use them (probed by
#      starting `sockperf server --tcp -i /PATH`; sockperf 3.7, Debian 12's, can't,
#      and the script then prints a note and skips unix). For ROUNDS rounds it runs
#        sockperf ping-pong -i 127.0.0.1 -p PORT [--tcp] -m SIZE -t DURATION --full-rtt
#        sockbench pingpong -t udp|tcp|unix -s SIZE -d DURATION -w 0.25 --format json -q
#      alternately (the order is swapped every round) and prints, per transport and
#      size, the median p50 and p99 round trip of each tool in µs and the
#      sockbench/sockperf ratios. --full-rtt makes sockperf report whole round
#      trips (without it it prints RTT/2 as "latency"); the script checks that its
#      summary says "Round trip" before using the figures.
#   4. Message rate, 64 B UDP: `sockperf throughput` (tp) vs `sockbench rate`,
#      alternately for ROUNDS rounds; prints both senders' median rate (messages
#      sent per second), the ratio, and sockbench's median received rate and loss.
#      Skipped with a note if this sockbench has no `rate` command.
#   5. Kills the sockperf servers and removes the temp dir on exit, however it exits.
#
# How sockperf's text output is read (its client prints these on stdout):
#   "sockperf: Summary: Round trip is 27.126 usec"         (must say "Round trip")
#   "sockperf: ---> percentile 50.000 =   24.437"          p50, µs
#   "sockperf: ---> percentile 99.000 =   65.588"          p99, µs
#   "sockperf: Summary: Message Rate is 421808 [msg/sec]"  tp sender rate
# sockbench's JSON: .body.results[0].latencies.round_trip.{p50_ns,p99_ns}; for rate
# .body.results[0].runs[0].sender.messages_per_second (or messages_sent / sender
# duration_seconds if that key is absent), .body.results[0].messages_per_second
# (received) and .results[0].messages_lost.
#
# How to run (from any directory):
#   bench/latency_vs_sockperf.sh
#   ROUNDS=3 DURATION=2 PORT=11311 NO_BUILD=1 bench/latency_vs_sockperf.sh
#
# Environment:
#   ROUNDS    rounds per transport and size, and for the rate test (default 5)
#   DURATION  seconds per run, whole number since sockperf -t takes an integer (default 3)
#   PORT      sockperf server port on 127.0.0.1, used for both its UDP and TCP server
#             (default 11111; a free one is picked if it is taken)
#   NO_BUILD  1 = skip `cargo build` and use target/release/sockbench as it is
#   RAW_DIR   if set, every raw output (sockbench JSON, sockperf text) is copied there on exit
#
# Run it on an otherwise idle machine: with 2 cores, any other load lands right in
# the latency figures of both tools. The script measures how busy the CPUs are for
# one second before and after the runs and prints a note if either is over 15%.
#
# With the defaults it takes about 3m45s on a 2-core machine, plus the build if
# cargo has anything to rebuild. Each round is one sockbench run (DURATION + ~0.3 s)
# and one sockperf run (DURATION + ~2.3 s: its client always sleeps 2 s after its
# warm-up), so ~8.6 s; ping-pong is 2 transports x 2 sizes x 5 rounds, rate 5
# rounds: 25 rounds, ~215 s. A sockperf that can use Unix sockets adds 10 rounds
# (~85 s, about 5 minutes in all).
set -euo pipefail

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-3}
PORT=${PORT:-11111}

die() { echo "latency_vs_sockperf: $*" >&2; exit 1; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer (got '$ROUNDS')"
[[ $DURATION =~ ^[1-9][0-9]*$ ]] || die "DURATION must be a positive whole number of seconds (got '$DURATION')"
[[ $PORT =~ ^[1-9][0-9]*$ ]] || die "PORT must be a port number (got '$PORT')"

cd "$(dirname "$0")/.."
REPO=$(pwd)
BIN="$REPO/target/release/sockbench"

# Hard upper bound on any single tool invocation (seconds).
RUN_TIMEOUT=$((DURATION * 4 + 30))

# ---------------------------------------------------------------- cleanup
TMP=$(mktemp -d "${TMPDIR:-/tmp}/latency_vs_sockperf.XXXXXX")
SERVER_PIDS=()
stop_server() { # PID
    local pid=$1
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}
cleanup() {
    local pid
    for pid in "${SERVER_PIDS[@]}"; do stop_server "$pid"; done
    if [[ -n ${RAW_DIR:-} ]]; then
        # (a pattern that matches nothing makes cp complain about it; the rest still copy)
        if mkdir -p "$RAW_DIR"; then cp "$TMP"/*.json "$TMP"/*.txt "$RAW_DIR"/ 2>/dev/null || true; fi
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- prerequisites
command -v python3 >/dev/null || die "python3 is required"
if ! command -v sockperf >/dev/null; then
    echo "installing sockperf..." >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sockperf >/dev/null
    command -v sockperf >/dev/null || die "sockperf installation failed"
fi
# --full-rtt is what makes the figures comparable; refuse a sockperf without it.
# (Read the help whole first: with pipefail, `grep -q` closing the pipe early would make
# sockperf die of SIGPIPE and the check fail on a sockperf that has the option.)
sockperf_help=$(sockperf ping-pong --help 2>&1 || true)
grep -q -- '--full-rtt' <<<"$sockperf_help" \
    || die "this sockperf has no --full-rtt option; its latency would be RTT/2"

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

# ---------------------------------------------------------------- sockperf servers
# port_free PROTO PORT: exit 0 if PORT on 127.0.0.1 can be bound for PROTO (tcp|udp).
# A TCP listener or a bound UDP socket makes it fail.
port_free() {
    python3 - "$1" "$2" <<'EOF'
import socket, sys
proto, port = sys.argv[1], int(sys.argv[2])
if proto == "tcp":
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # SO_REUSEADDR so connections in TIME_WAIT don't count; a listener still does.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
else:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    s.bind(("127.0.0.1", port))
except OSError:
    sys.exit(1)
finally:
    s.close()
EOF
}
if ! port_free tcp "$PORT" || ! port_free udp "$PORT"; then
    # A port the kernel hands out for TCP that is free for UDP too (a few tries).
    PORT=$(python3 - <<'EOF'
import socket, sys
for _ in range(50):
    t = socket.socket(); t.bind(("127.0.0.1", 0)); port = t.getsockname()[1]
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        u.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        u.close(); t.close()
    print(port); sys.exit(0)
sys.exit("no free port")
EOF
)
fi

# start_server NAME PROTO ARGS...: start `sockperf server ARGS` in the background and
# wait (at most 5 s) until it is bound, checked by READY_CHECK (a command).
start_server() {
    local name=$1 check=$2; shift 2
    sockperf server "$@" >"$TMP/server-$name.txt" 2>&1 &
    local pid=$!
    SERVER_PIDS+=("$pid")
    for _ in $(seq 1 50); do
        $check && return 0
        kill -0 "$pid" 2>/dev/null || { cat "$TMP/server-$name.txt" >&2; return 1; }
        sleep 0.1
    done
    $check || { cat "$TMP/server-$name.txt" >&2; return 1; }
}
udp_ready() { ! port_free udp "$PORT"; }
tcp_ready() { ! port_free tcp "$PORT"; }
UDS_PATH="$TMP/sockperf.sock"
uds_ready() { [[ -S $UDS_PATH ]]; }

start_server udp udp_ready -i 127.0.0.1 -p "$PORT" || die "sockperf UDP server did not start on 127.0.0.1:$PORT"
start_server tcp tcp_ready --tcp -i 127.0.0.1 -p "$PORT" || die "sockperf TCP server did not start on 127.0.0.1:$PORT"

# Unix stream sockets: sockperf >= 3.9 takes `-i /PATH` (an absolute path) for a
# Unix domain socket; older ones reject it ("Invalid address"). Probe by trying.
TRANSPORTS=(udp tcp)
SOCKPERF_VERSION=$(sockperf --version 2>&1 | sed -n 's/^sockperf, version //p' | head -1)
if start_server unix uds_ready --tcp -i "$UDS_PATH" 2>/dev/null; then
    TRANSPORTS+=(unix)
else
    echo "note: sockperf ${SOCKPERF_VERSION:-?} has no Unix domain socket support" \
        "($(grep -m1 -o 'Invalid address.*' "$TMP/server-unix.txt" 2>/dev/null || echo 'server did not start')); skipping unix" >&2
    UNIX_NOTE="unix skipped: sockperf ${SOCKPERF_VERSION:-?} cannot use Unix domain sockets (sockperf server --tcp -i $UDS_PATH fails)"
fi

# ---------------------------------------------------------------- runners
# sockperf client options that select the transport.
sp_target() { # TRANSPORT
    case $1 in
        udp) echo "-i 127.0.0.1 -p $PORT" ;;
        tcp) echo "--tcp -i 127.0.0.1 -p $PORT" ;;
        unix) echo "--tcp -i $UDS_PATH" ;;
    esac
}
run_sockperf_pp() { # TRANSPORT SIZE OUTFILE
    local rc=0
    # shellcheck disable=SC2046
    timeout -k 5 "$RUN_TIMEOUT" sockperf ping-pong $(sp_target "$1") -m "$2" -t "$DURATION" \
        --full-rtt >"$3" 2>&1 || rc=$?
    if ((rc)); then cat "$3" >&2; die "sockperf ping-pong $1 at $2 B failed (exit $rc)"; fi
}
run_sockbench() { # OUTFILE ARGS...
    local out=$1 rc=0; shift
    timeout -k 5 "$RUN_TIMEOUT" "$BIN" "$@" -d "$DURATION" -w 0.25 --format json -q \
        >"$out" 2>"$out.err" || rc=$?
    if ((rc)); then cat "$out" "$out.err" >&2; die "sockbench $* failed (exit $rc)"; fi
}

# ---------------------------------------------------------------- idle check
# cpu_busy: percent of all CPUs busy over one second (the servers idle meanwhile).
# Measured before and after the runs: other load (a compile, a test run) lands
# right in the latency figures of both tools.
cpu_busy() {
    python3 - <<'EOF'
import time
def snap():
    v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(v), v[3] + v[4]  # total, idle + iowait
t0, i0 = snap(); time.sleep(1); t1, i1 = snap()
print(round(100 * (1 - (i1 - i0) / max(t1 - t0, 1))))
EOF
}
BUSY=$(cpu_busy)
if ((BUSY > 15)); then
    echo "warning: the CPUs were ${BUSY}% busy before the runs started; the figures will be noisy" >&2
fi

# ---------------------------------------------------------------- ping-pong
SIZES=(64 1024)
echo "ping-pong: sockbench vs sockperf $SOCKPERF_VERSION over ${TRANSPORTS[*]}" \
    "(127.0.0.1:$PORT), ${ROUNDS} rounds x ${DURATION} s per tool, transport and size" >&2
for t in "${TRANSPORTS[@]}"; do
    for size in "${SIZES[@]}"; do
        for round in $(seq 1 "$ROUNDS"); do
            echo "  $t $size B round $round/$ROUNDS" >&2
            # Alternate which tool goes first so drift hits both.
            if ((round % 2)); then
                run_sockbench "$TMP/pp-sb-$t-$size-$round.json" pingpong -t "$t" -s "$size"
                run_sockperf_pp "$t" "$size" "$TMP/pp-sp-$t-$size-$round.txt"
            else
                run_sockperf_pp "$t" "$size" "$TMP/pp-sp-$t-$size-$round.txt"
                run_sockbench "$TMP/pp-sb-$t-$size-$round.json" pingpong -t "$t" -s "$size"
            fi
        done
    done
done

# ---------------------------------------------------------------- message rate
RATE=0
if "$BIN" rate --help >/dev/null 2>&1; then
    RATE=1
    echo "message rate: sockbench rate vs sockperf tp, UDP 64 B, ${ROUNDS} rounds x ${DURATION} s" >&2
    run_sockperf_tp() { # OUTFILE
        local rc=0
        timeout -k 5 "$RUN_TIMEOUT" sockperf throughput -i 127.0.0.1 -p "$PORT" -m 64 \
            -t "$DURATION" >"$1" 2>&1 || rc=$?
        if ((rc)); then cat "$1" >&2; die "sockperf throughput failed (exit $rc)"; fi
    }
    for round in $(seq 1 "$ROUNDS"); do
        echo "  rate round $round/$ROUNDS" >&2
        if ((round % 2)); then
            run_sockbench "$TMP/rate-sb-$round.json" rate -t udp -s 64
            run_sockperf_tp "$TMP/rate-sp-$round.txt"
        else
            run_sockperf_tp "$TMP/rate-sp-$round.txt"
            run_sockbench "$TMP/rate-sb-$round.json" rate -t udp -s 64
        fi
    done
else
    echo "note: sockbench has no rate command; skipping the message-rate comparison" >&2
fi

# ---------------------------------------------------------------- report
BUSY_AFTER=$(cpu_busy)
echo
python3 - "$TMP" "$ROUNDS" "$RATE" "${UNIX_NOTE:-}" "$BUSY" "$BUSY_AFTER" "${TRANSPORTS[@]}" <<'EOF'
import json, re, statistics, sys

tmp, rounds, rate, unix_note, busy, busy_after, transports = (
    sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4], int(sys.argv[5]),
    int(sys.argv[6]), sys.argv[7:])
sizes = [64, 1024]
ansi = re.compile(r"\x1b\[[0-9;]*m")
notes = {}  # warning text -> count, printed once below the tables

def fail(msg):
    sys.exit(f"latency_vs_sockperf: {msg}")

def sockbench(path):
    d = json.load(open(path))
    if d.get("error"):
        fail(f"{path}: sockbench error: {d['error']}")
    b = d.get("body", d)  # the document's body (before schema 9: the top level)
    if not b.get("results"):
        fail(f"{path}: sockbench reported no results (skipped: {b.get('skipped')})")
    r = b["results"][0]
    if "error" not in r:
        fail(f"{path}: .results[0] has no 'error' key")
    if r["error"] is not None:
        fail(f"{path}: sockbench result error: {r['error']}")
    for w in r.get("warnings") or []:
        # One note per scenario and kind: the first message, and how many runs had it.
        key = f"sockbench {r['workload']} {r['transport']} {r['size_bytes']} B: {w.get('kind')}"
        first, n = notes.get(key, (w.get("message"), 0))
        notes[key] = (first, n + 1)
    return r

def sockperf_text(path):
    with open(path) as f:
        return ansi.sub("", f.read())

def sockperf_pp(path):
    text = sockperf_text(path)
    if not re.search(r"^sockperf: Summary: Round trip is [0-9.]+ usec", text, re.M):
        fail(f"{path}: sockperf did not report round trips (no 'Summary: Round trip is'; "
             f"--full-rtt ignored?):\n{text}")
    def pct(p):
        m = re.search(rf"^sockperf: ---> percentile {p} =\s*([0-9.]+)\s*$", text, re.M)
        if not m:
            fail(f"{path}: no 'percentile {p}' line in sockperf output:\n{text}")
        return float(m.group(1))
    m = re.search(r"# dropped messages = (\d+)", text)
    if m and int(m.group(1)):
        notes[f"sockperf {path.rsplit('/', 1)[-1]}: dropped messages"] = (m.group(1), 1)
    return pct("50.000"), pct("99.000")

def table(title, head, rows):
    w = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    print(title)
    for r in [head] + rows:
        print("  ".join(c.rjust(w[i]) if i else c.ljust(w[i]) for i, c in enumerate(r)))

def ratio(a, b):
    return f"{a / b:.2f}" if b else "n/a"

size_label = {64: "64 B", 1024: "1 KiB"}
rows = []
for t in transports:
    for size in sizes:
        sb = []
        for i in range(1, rounds + 1):
            rt = sockbench(f"{tmp}/pp-sb-{t}-{size}-{i}.json")["latencies"].get("round_trip")
            if not rt or "p50_ns" not in rt or "p99_ns" not in rt:
                fail(f"pp-sb-{t}-{size}-{i}.json: no latencies.round_trip.p50_ns/p99_ns")
            sb.append((rt["p50_ns"] / 1000, rt["p99_ns"] / 1000))
        sp = [sockperf_pp(f"{tmp}/pp-sp-{t}-{size}-{i}.txt") for i in range(1, rounds + 1)]
        sb50 = statistics.median(x[0] for x in sb)
        sp50 = statistics.median(x[0] for x in sp)
        sb99 = statistics.median(x[1] for x in sb)
        sp99 = statistics.median(x[1] for x in sp)
        rows.append([t, size_label[size], f"{sb50:.2f}", f"{sp50:.2f}", ratio(sb50, sp50),
                     f"{sb99:.2f}", f"{sp99:.2f}", ratio(sb99, sp99)])
table(f"Ping-pong round trip over loopback, medians of {rounds} rounds (µs; "
      "sockperf with --full-rtt)",
      ["transport", "size", "sockbench p50", "sockperf p50", "ratio",
       "sockbench p99", "sockperf p99", "ratio"], rows)
if unix_note:
    print(unix_note)

print()
if not rate:
    print("Message rate: skipped: sockbench has no rate command")
else:
    sb_sent, sb_recv, sb_lost, sb_lost_pct, sp_sent = [], [], [], [], []
    fallback = 0
    for i in range(1, rounds + 1):
        path = f"{tmp}/rate-sb-{i}.json"
        r = sockbench(path)
        sender = r["runs"][0]["sender"]
        if "messages_per_second" in sender:
            sb_sent.append(sender["messages_per_second"])
        else:
            fallback += 1
            sb_sent.append(r["messages_sent"] / sender["duration_seconds"])
        sb_recv.append(r["messages_per_second"])
        if r.get("messages_lost") is None:
            fail(f"{path}: .results[0].messages_lost missing or null")
        sb_lost.append(r["messages_lost"])
        sb_lost_pct.append(100 * r["messages_lost"] / r["messages_sent"] if r["messages_sent"] else 0)
        text = sockperf_text(f"{tmp}/rate-sp-{i}.txt")
        m = re.search(r"^sockperf: Summary: Message Rate is (\d+) \[msg/sec\]", text, re.M)
        if not m:
            fail(f"rate-sp-{i}.txt: no 'Summary: Message Rate is' line:\n{text}")
        sp_sent.append(float(m.group(1)))
    s_sb, s_sp = statistics.median(sb_sent), statistics.median(sp_sent)
    table(f"Message rate, UDP 64 B over loopback, medians of {rounds} rounds (messages/s)",
          ["sockbench sent", "sockperf sent", "ratio", "sockbench received",
           "sockbench lost (%)"],
          [[f"{s_sb:,.0f}", f"{s_sp:,.0f}", ratio(s_sb, s_sp),
            f"{statistics.median(sb_recv):,.0f}",
            f"{statistics.median(sb_lost):,.0f} ({statistics.median(sb_lost_pct):.2f}%)"]])
    if fallback:
        print(f"(sockbench sent rate: .runs[0].sender.messages_per_second missing in {fallback} "
              "of the runs; used messages_sent / sender duration_seconds)")
    print("(sent = the sender's own rate, which for UDP is not what arrives: sockperf tp "
          "reports only its sender; sockbench's received rate and loss count the receiver)")

loaded = max(busy, busy_after) > 15
if notes or loaded:
    print()
if loaded:
    print(f"note: other processes kept the CPUs {busy}% busy just before the runs and "
          f"{busy_after}% just after: expect noisy figures")
for key, (first, n) in notes.items():
    print(f"note: {key} in {n} run{'s' if n > 1 else ''}"
          f"{', first' if n > 1 else ''}: {first}")
EOF
