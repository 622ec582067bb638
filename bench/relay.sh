#!/usr/bin/env bash
# relay.sh - a relay's copy methods against a bare C relay and socat, in one run, with
# iperf3 as source and sink:
#
#   iperf3 -c 127.0.0.1 -p RELAY -l 128K -t T -J  ->  relay  ->  iperf3 -s -p SINK -1
#
# The relay in between is, row by row:
#   socat      socat -b 8192 TCP-LISTEN:RELAY,bind=127.0.0.1,reuseaddr,fork TCP:127.0.0.1:SINK
#              (8192 is socat's default block size, per its man page; given explicitly)
#   C          bench/relay.c (built here with gcc -O2), per method: read-write, vectored,
#              buffered, splice, io-uring, io-uring-splice, epoll (the C side of async)
#   sockbench  sockbench relay -m METHOD --listen 127.0.0.1:RELAY --to 127.0.0.1:SINK,
#              per method; if the binary or its relay-only mode is not usable, the script
#              says why and leaves these rows out
# at buffers 64K and 1M (for splice and io-uring-splice: pipe sizes 64K and 1M). Each
# run starts a fresh sink and relay on free ports. In every round the sides take turns
# (socat first and C before sockbench in odd rounds, the reverse in even ones).
#
# It prints per row the median over ROUNDS of the receiver's throughput (iperf3's
# end.sum_received.bits_per_second) and of the relay's CPU seconds per GB (10^9 bytes):
# the relay process's utime+stime (+cutime+cstime: socat's forked children) from
# /proc/PID/stat before and after the run, over the bytes iperf3 received. Then the
# ratios sockbench/C per method and buffer (the issue asks >= 0.95), and the best method
# at 1M over socat (the issue asks >= 2.5 for sockbench's). For the C relay also its
# system calls per MB relayed (from the line it prints on exit).
#
# How to run (from anywhere; as root it installs iperf3, socat, gcc, liburing-dev):
#   bench/relay.sh
#   ROUNDS=1 T=2 SIDES=socat,c bench/relay.sh
#   CPUS=1 METHODS=read-write,splice BUFFERS=1M bench/relay.sh
#
# Environment:
#   ROUNDS     rounds (default 3); T  seconds per iperf3 run, whole (default 3)
#   SIDES      which relays, comma-separated: socat, c, sockbench (default all three)
#   METHODS    sockbench's method names, comma-separated (default all but buffered; the
#              C relay runs epoll where sockbench runs async). buffered cannot carry
#              iperf3: its writer holds a short message until the buffer fills, and
#              iperf3's control connection waits for answers; sockbench refuses it in
#              the relay-only form, and `sockbench relay -m buffered,read-write`
#              compares it with read-write in its own benchmark form
#   BUFFERS    buffer (or pipe) sizes, comma-separated (default 64K,1M)
#   CPUS       a taskset CPU list to pin the relay to (default: not pinned)
#   SOCKBENCH  the sockbench binary to use as it is; by default target/release/sockbench,
#              built first with cargo build --release (NO_BUILD=1: use it as it is)
#   RAW_DIR    if set, every iperf3 JSON and relay output is copied there at the end
#
# Run it on an otherwise idle machine. Time: (1 + 2 x methods x buffers) runs a round,
# each about T + 1.1 s: ~2 minutes a round with the defaults (25 runs), plus a build.
set -euo pipefail

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
}
case ${1:-} in
    -h | --help) usage; exit 0 ;;
    "") ;;
    *) echo "usage: $0 [-h]   (settings come from the environment; -h tells them)" >&2; exit 2 ;;
esac

ROUNDS=${ROUNDS:-3}
T=${T:-3}
SIDES=${SIDES:-socat,c,sockbench}
METHODS=${METHODS:-read-write,vectored,splice,io-uring,io-uring-splice,async}
BUFFERS=${BUFFERS:-64K,1M}
CPUS=${CPUS:-}

die() { echo "relay.sh: $*" >&2; exit 1; }
note() { echo "relay.sh: $*" >&2; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer (got '$ROUNDS')"
[[ $T =~ ^[1-9][0-9]*$ ]] || die "T must be a positive whole number of seconds (got '$T')"
for s in ${SIDES//,/ }; do
    [[ $s =~ ^(socat|c|sockbench)$ ]] || die "unknown side '$s' in SIDES (socat, c, sockbench)"
done
for m in ${METHODS//,/ }; do
    [[ $m =~ ^(read-write|vectored|buffered|splice|io-uring|io-uring-splice|async)$ ]] ||
        die "unknown method '$m' in METHODS"
done
for b in ${BUFFERS//,/ }; do
    [[ $b =~ ^[1-9][0-9]*[KM]?$ ]] || die "bad size '$b' in BUFFERS (bytes, or with K or M)"
done
side_on() { [[ ,$SIDES, == *,$1,* ]]; }

cd "$(dirname "$0")/.."
REPO=$PWD
RUN_TIMEOUT=$((T + 20))  # bound on an iperf3 client
HZ=$(getconf CLK_TCK)

# ---------------------------------------------------------------- cleanup
# alive PID: whether the process runs (exited and not yet reaped counts as not).
alive() {
    local line
    read -r line 2>/dev/null <"/proc/$1/stat" || return 1
    line=${line##*) }
    [[ ${line:0:1} != Z ]]
}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/relay-bench.XXXXXX")
PIDS=()  # every background process started, each the leader of its own process group
cleanup() {
    local p
    for p in "${PIDS[@]}"; do
        kill -TERM -- "-$p" 2>/dev/null || true
    done
    for p in "${PIDS[@]}"; do
        for _ in $(seq 20); do alive "$p" || break; sleep 0.1; done
        kill -KILL -- "-$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    if [[ -n ${RAW_DIR:-} ]]; then
        mkdir -p "$RAW_DIR" && cp "$TMP"/run-* "$RAW_DIR"/ 2>/dev/null || true
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- prerequisites
need=()
command -v python3 >/dev/null || die "python3 is required"
command -v iperf3 >/dev/null || need+=(iperf3)
if side_on socat && ! command -v socat >/dev/null; then need+=(socat); fi
if side_on c && ! command -v gcc >/dev/null; then need+=(gcc); fi
if side_on c && [[ ! -e /usr/include/liburing.h ]]; then need+=(liburing-dev); fi
if ((${#need[@]})); then
    [[ $(id -u) == 0 ]] || die "install ${need[*]} (or run as root)"
    note "installing ${need[*]}..."
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"; } \
        >"$TMP/apt.log" 2>&1 || { cat "$TMP/apt.log" >&2; note "apt-get install ${need[*]} failed"; }
fi
command -v iperf3 >/dev/null || die "iperf3 is required"
if side_on socat && ! command -v socat >/dev/null; then
    die "socat is required for the socat rows (or leave socat out of SIDES)"
fi

# The C relay: with liburing if it is there, else without the io-uring methods.
C_RELAY=$TMP/relay
C_NO_URING=""
if side_on c; then
    command -v gcc >/dev/null || die "gcc is required for the C relay (or leave c out of SIDES)"
    if [[ -e /usr/include/liburing.h ]]; then
        gcc -O2 -Wall -pthread -o "$C_RELAY" bench/relay.c -luring
    else
        C_NO_URING="liburing-dev is not installed: the C relay is built without io-uring methods"
        note "$C_NO_URING"
        gcc -O2 -Wall -pthread -DNO_URING -o "$C_RELAY" bench/relay.c
    fi
fi

# ---------------------------------------------------------------- helpers
# listening PORT: whether a TCP socket listens on PORT (IPv4 or IPv6), from /proc/net.
listening() {
    local hex
    hex=$(printf ':%04X' "$1")
    awk -v p="$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' \
        /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
# free_port: a port in 20000-32767 (below the ephemeral range) no socket uses now.
free_port() {
    local p hex
    for _ in $(seq 200); do
        p=$((20000 + RANDOM % 12768))
        hex=$(printf ':%04X' "$p")
        if ! grep -q "$hex " /proc/net/tcp /proc/net/tcp6 2>/dev/null; then
            echo "$p"
            return
        fi
    done
    die "no free port found"
}
# cpu_ticks PID: utime+stime+cutime+cstime of the process (all its threads, and the
# children it has reaped), in clock ticks.
cpu_ticks() {
    local line
    read -r line <"/proc/$1/stat" || return 1
    set -- ${line##*) }
    echo $((${12} + ${13} + ${14} + ${15}))
}
# has_children PID: whether the process has a child (socat's forked relays).
has_children() {
    local f
    for f in /proc/"$1"/task/*/children; do
        [[ -s $f ]] && return 0
    done
    return 1
}
# start CMD...: run in the background as the leader of its own process group (so the
# cleanup can end it with all it forked), pinned with CPUS if given; sets STARTED.
start() {
    if [[ -n $CPUS ]]; then
        setsid taskset -c "$CPUS" "$@" &
    else
        setsid "$@" &
    fi
    STARTED=$!
    PIDS+=("$STARTED")
}
# finish PID SIGNAL: signal the process group, wait (at most 5 s, then SIGKILL) and reap
# the process; sets FINISHED to its exit status.
finish() {
    local pid=$1 p kept=()
    FINISHED=0
    kill "-$2" -- "-$pid" 2>/dev/null || true
    for _ in $(seq 50); do alive "$pid" || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || FINISHED=$?
    for p in "${PIDS[@]}"; do [[ $p == "$pid" ]] || kept+=("$p"); done
    PIDS=("${kept[@]}")
}

# ---------------------------------------------------------------- sockbench
SB=""
SB_SKIP=""
if side_on sockbench; then
    if [[ -n ${SOCKBENCH:-} ]]; then
        SB=$SOCKBENCH
        [[ -x $SB ]] || SB_SKIP="SOCKBENCH=$SB is not an executable"
    else
        SB=$REPO/target/release/sockbench
        if [[ ${NO_BUILD:-0} != 1 ]]; then
            note "building sockbench (cargo build --release)..."
            cargo build --release --locked -q >"$TMP/build.log" 2>&1 ||
                SB_SKIP="cargo build --release failed: $(tail -3 "$TMP/build.log" | tr '\n' ' ')"
        fi
        [[ -n $SB_SKIP || -x $SB ]] || SB_SKIP="no $SB"
    fi
    # The relay-only mode is usable if it comes up listening.
    if [[ -z $SB_SKIP ]]; then
        pl=$(free_port)
        start "$SB" relay -m read-write --listen "127.0.0.1:$pl" --to "127.0.0.1:$(free_port)" \
            -d 10 >"$TMP/probe.out" 2>"$TMP/probe.err"
        probe=$STARTED
        for _ in $(seq 50); do
            listening "$pl" && break
            alive "$probe" || break
            sleep 0.1
        done
        if ! listening "$pl"; then
            SB_SKIP="its relay-only mode is not usable yet: \`sockbench relay --listen --to\` said: $(
                cat "$TMP/probe.err" "$TMP/probe.out" | tr '\n' ' ' | cut -c1-300)"
        fi
        finish "$probe" INT
    fi
    [[ -z $SB_SKIP ]] || note "sockbench rows skipped: $SB_SKIP"
fi

# ---------------------------------------------------------------- one run
# run SIDE METHOD SIZE ROUND: one iperf3 run through one relay; appends to results:
#   SIDE METHOD SIZE ok BITS_PER_SECOND BYTES CPU_SECONDS CALLS   or
#   SIDE METHOD SIZE failed REASON...
# (SIDE is socat, c or sockbench; METHOD the sockbench name; CALLS is - unless C.)
run() {
    local side=$1 method=$2 size=$3 round=$4
    local tag=run-$side-$method-$size-$round
    local sink relay_port spid rpid buf=64K pipe=64K sig=INT cmd
    case $method in splice | io-uring-splice) pipe=$size ;; *) buf=$size ;; esac
    sink=$(free_port)
    relay_port=$(free_port)
    while [[ $relay_port == "$sink" ]]; do relay_port=$(free_port); done

    start timeout -k 2 $((T + 30)) iperf3 -s -B 127.0.0.1 -p "$sink" -1 >"$TMP/$tag.sink" 2>&1
    spid=$STARTED
    case $side in
        socat)
            sig=TERM
            cmd=(socat -b 8192 "TCP-LISTEN:$relay_port,bind=127.0.0.1,reuseaddr,fork"
                "TCP:127.0.0.1:$sink") ;;
        c)
            local cm=$method
            [[ $cm == async ]] && cm=epoll
            cmd=("$C_RELAY" "$cm" "$relay_port" "$sink" "$buf" "$pipe") ;;
        sockbench)
            cmd=("$SB" relay -m "$method" --listen "127.0.0.1:$relay_port"
                --to "127.0.0.1:$sink" --buffer "$buf" --pipe-size "$pipe"
                -d $((T + 30)) --format json) ;;
    esac
    start "${cmd[@]}" >"$TMP/$tag.relay" 2>"$TMP/$tag.relay-err"
    rpid=$STARTED

    local why=""
    for _ in $(seq 50); do
        listening "$sink" && listening "$relay_port" && break
        alive "$rpid" || break
        sleep 0.1
    done
    if ! listening "$relay_port"; then
        why="the relay did not come up: $(tr '\n' ' ' <"$TMP/$tag.relay-err" | cut -c1-200)"
    elif ! listening "$sink"; then
        why="the iperf3 server did not come up: $(tr '\n' ' ' <"$TMP/$tag.sink" | cut -c1-200)"
    fi

    local before=0 after=0 rc=0
    if [[ -z $why ]]; then
        before=$(cpu_ticks "$rpid")
        timeout -k 2 "$RUN_TIMEOUT" iperf3 -c 127.0.0.1 -p "$relay_port" -l 128K -t "$T" -J \
            >"$TMP/$tag.json" 2>"$TMP/$tag.client-err" || rc=$?
        # Let the sink end and the relay finish its connections (socat: reap its
        # children) and go idle, at most 3 s, before reading its CPU again.
        for _ in $(seq 30); do alive "$spid" || break; sleep 0.1; done
        local prev=-1 now
        for _ in $(seq 30); do
            alive "$rpid" && now=$(cpu_ticks "$rpid") || break
            [[ $now == "$prev" ]] && ! has_children "$rpid" && break
            prev=$now
            sleep 0.1
        done
        if ! alive "$rpid" || ! after=$(cpu_ticks "$rpid"); then
            why="the relay exited during the run: $(tr '\n' ' ' <"$TMP/$tag.relay-err" | cut -c1-200)"
        elif ((rc)); then
            why="iperf3 client exit $rc: $(python3 -c 'import json,sys
try: print(json.load(open(sys.argv[1])).get("error", ""))
except Exception: print("")' "$TMP/$tag.json" 2>/dev/null) $(tr '\n' ' ' <"$TMP/$tag.client-err" | cut -c1-200)"
        fi
    fi
    finish "$rpid" "$sig"
    local relay_rc=$FINISHED
    finish "$spid" TERM

    if [[ -z $why ]]; then
        # A C relay that did not exit cleanly on SIGINT printed no counts.
        if [[ $side == c && $relay_rc != 0 ]]; then
            why="the C relay exited with $relay_rc: $(tr '\n' ' ' <"$TMP/$tag.relay-err" | cut -c1-200)"
        fi
    fi
    if [[ -n $why ]]; then
        echo "$side $method $size failed $why" >>"$TMP/results"
        printf '  round %d %-9s %-15s %-4s failed: %s\n' "$round" "$side" "$method" "$size" "$why" >&2
        return
    fi
    local calls=-
    [[ $side == c ]] && calls=$(grep -o 'calls=[0-9]*' "$TMP/$tag.relay" | cut -d= -f2 || true)
    python3 - "$TMP/$tag.json" "$side" "$method" "$size" "$(((after - before)))" "$HZ" \
        "${calls:--}" "$round" >>"$TMP/results" <<'EOF'
import json, sys
path, side, method, size, ticks, hz, calls, rnd = sys.argv[1:]
d = json.load(open(path))
if d.get("error"):
    line = f"{side} {method} {size} failed iperf3: {d['error']}"
else:
    r = d["end"]["sum_received"]
    cpu = int(ticks) / int(hz)
    line = f"{side} {method} {size} ok {r['bits_per_second']} {r['bytes']} {cpu} {calls}"
    print(f"  round {rnd} {side:<9} {method:<15} {size:<4} {r['bits_per_second'] / 1e9:6.2f} Gbit/s"
          f" {cpu / (r['bytes'] / 1e9):7.3f} CPU s/GB", file=sys.stderr)
print(line)
EOF
}

# ---------------------------------------------------------------- the rounds
pairs=()  # "method size" in table order
for m in ${METHODS//,/ }; do
    for b in ${BUFFERS//,/ }; do pairs+=("$m $b"); done
done
c_sides=()
side_on c && c_sides+=(c)
side_on sockbench && [[ -z $SB_SKIP ]] && c_sides+=(sockbench)
: >"$TMP/results"
note "relay benchmark: iperf3 -l 128K -t $T through each relay, $ROUNDS round(s)${CPUS:+, relay on CPUs $CPUS}"
for round in $(seq "$ROUNDS"); do
    note "round $round/$ROUNDS"
    sides=("${c_sides[@]}")
    if ((round % 2 == 0)); then  # the other order: sockbench before C, socat last
        sides=()
        for ((i = ${#c_sides[@]} - 1; i >= 0; i--)); do sides+=("${c_sides[i]}"); done
    fi
    if ((round % 2)) && side_on socat; then run socat - 8K "$round"; fi
    for p in "${pairs[@]}"; do
        read -r m b <<<"$p"
        for s in "${sides[@]}"; do
            if [[ $s == c && -n $C_NO_URING && $m == io-uring* ]]; then
                continue
            fi
            run "$s" "$m" "$b" "$round"
        done
    done
    if ((round % 2 == 0)) && side_on socat; then run socat - 8K "$round"; fi
done

# ---------------------------------------------------------------- the table
echo
python3 - "$TMP/results" "$ROUNDS" "$T" "${SB_SKIP:-}" "${C_NO_URING:-}" "$SIDES" "${pairs[@]}" <<'EOF'
import statistics, sys

path, rounds, secs, sb_skip, c_no_uring, sides = sys.argv[1:7]
pairs = [tuple(p.split()) for p in sys.argv[7:]]
ok, failed = {}, {}
for line in open(path):
    f = line.split()
    key = tuple(f[:3])
    if f[3] == "ok":
        bps, nbytes, cpu, calls = float(f[4]), int(f[5]), float(f[6]), f[7]
        ok.setdefault(key, []).append(
            (bps, cpu / (nbytes / 1e9), int(calls) / (nbytes / 1e6) if calls != "-" else None))
    else:
        failed.setdefault(key, " ".join(f[4:]))

def med(key):
    """(Gbit/s, CPU s/GB, calls/MB) medians, or None."""
    runs = ok.get(key)
    if not runs:
        return None
    calls = [r[2] for r in runs if r[2] is not None]
    return (statistics.median(r[0] for r in runs) / 1e9,
            statistics.median(r[1] for r in runs),
            statistics.median(calls) if calls else None)

def missing(key, wanted):
    """What a row without a result shows: failed, not run (-), or n/a."""
    if key in failed:
        return "failed"
    return "n/a" if wanted else "-"

print(f"Relay throughput, iperf3 -l 128K -t {secs} through the relay on 127.0.0.1, "
      f"medians of {rounds} round(s).")
print("Gbit/s: iperf3's receiver; CPU s/GB: the relay's CPU seconds per GB (10^9 bytes) "
      "received; calls/MB: the C relay's data system calls per MB.")
head = ["method", "buffer", "C Gbit/s", "C CPU s/GB", "C calls/MB",
        "sockbench Gbit/s", "sb CPU s/GB", "sockbench/C"]
want_c = "c" in sides.split(",")
want_sb = "sockbench" in sides.split(",") and not sb_skip
rows, low = [], []
for m, b in pairs:
    c, s = med(("c", m, b)), med(("sockbench", m, b))
    row = [m if m != "async" else "async (C: epoll)",
           b + (" pipe" if m in ("splice", "io-uring-splice") else "")]
    if c:
        row += [f"{c[0]:.2f}", f"{c[1]:.3f}", f"{c[2]:.1f}" if c[2] is not None else "-"]
    else:
        row += [missing(("c", m, b), want_c), "-", "-"]
    row += [f"{s[0]:.2f}", f"{s[1]:.3f}"] if s else [missing(("sockbench", m, b), want_sb), "-"]
    ratio = "-"
    if c and s:
        r = s[0] / c[0]
        ratio = f"{r:.2f}" + (" <0.95" if r < 0.95 else "")
        if r < 0.95:
            low.append(f"{m} {b}")
    rows.append(row + [ratio])
so = med(("socat", "-", "8K"))
if "socat" in sides.split(","):
    rows.append(["socat (-b 8192)", "8K", f"{so[0]:.2f}" if so else missing(("socat", "-", "8K"), True),
                 f"{so[1]:.3f}" if so else "-", "-", "-", "-", "-"])
w = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
for r in [head] + rows:
    print("  ".join(c.ljust(w[i]) if i < 2 else c.rjust(w[i]) for i, c in enumerate(r)))

print()
def best(side, size="1M"):
    got = [(med((side, m, b))[0], m) for m, b in pairs if b == size and med((side, m, b))]
    return max(got) if got else None
for side, name in (("sockbench", "sockbench"), ("c", "C relay")):
    bst = best(side)
    if bst and so:
        mark = "" if side != "sockbench" else ("  (>= 2.5: yes)" if bst[0] / so[0] >= 2.5 else "  (>= 2.5: NO)")
        print(f"best {name} method at 1M / socat: {bst[1]} {bst[0]:.2f} / {so[0]:.2f} = "
              f"{bst[0] / so[0]:.2f}{mark}")
    elif side == "sockbench" and want_sb or side == "c" and want_c:
        print(f"best {name} method at 1M / socat: n/a (no 1M row or no socat row)")
if want_sb and want_c:
    print("sockbench/C below 0.95: " + (", ".join(low) if low else "none"))
if sb_skip:
    print(f"sockbench rows skipped: {sb_skip}")
if c_no_uring:
    print(f"note: {c_no_uring}")
for key, why in sorted(failed.items()):
    n = len(ok.get(key, []))
    print(f"failed: {' '.join(k for k in key if k != '-')}: {why}"
          + (f" (and {n} run(s) ok)" if n else ""))
EOF
