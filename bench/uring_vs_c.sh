#!/usr/bin/env bash
# uring_vs_c.sh - what an io_uring round trip costs on this kernel, with and without
# sockbench: `pingpong -e io-uring` and `-e blocking` against bare C loops doing the same
# calls (bench/uring_pingpong.c: blocking send/recv; the io_uring loop sockbench's engine
# follows; the same with one multishot receive into provided buffers).
#
# What it does:
#   1. Builds bench/uring_pingpong.c (needs liburing-dev; installs it with apt-get if the
#      header is missing) and sockbench in release mode (NO_BUILD=1 skips it).
#   2. For each placement in PLACEMENTS (default "0,0 0,1": client and server on one CPU,
#      then on two) and each transport (tcp on 127.0.0.1, unix), ROUNDS rounds; in each
#      round the five runs take turns, the order rotated every round:
#        sockbench pingpong -t T -e blocking|io-uring -s SIZE -d DURATION -w 0.2 --cpus A,B
#        uring_pingpong blocking|io-uring|multishot T SIZE DURATION 0.2 A B
#      and the p50 round trip of each (sockbench: .body.results[0].latencies.round_trip.p50_ns).
#   3. Prints the medians and three ratios per placement and transport:
#        sockbench io-uring / sockbench blocking   (what the engine costs over blocking)
#        C io-uring / C blocking                   (what io_uring itself costs here)
#        sockbench io-uring / C io-uring           (what sockbench adds to a bare ring)
#      and the multishot loop's ratio to C blocking.
#
# Pinned by default, since an unpinned round trip lands on one CPU or two by chance
# (14 or 60 us on a 2-vCPU VM) and the ratio would compare placements, not engines.
#
# How to run (from any directory):
#   bench/uring_vs_c.sh
#   ROUNDS=5 DURATION=1 PLACEMENTS=0,1 NO_BUILD=1 bench/uring_vs_c.sh
#
# Environment:
#   ROUNDS      rounds (default 3)
#   DURATION    seconds per run (default 1)
#   SIZE        message size in bytes, 1..65536 (default 64)
#   PLACEMENTS  space-separated CLIENT,SERVER CPU pairs (default "0,0 0,1")
#   NO_BUILD    1 = use target/release/sockbench as it is
#
# About 5 x 2 x 2 x ROUNDS runs of DURATION + 0.3 s: a minute with the defaults. Run it
# on an otherwise idle machine.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-1}
SIZE=${SIZE:-64}
PLACEMENTS=${PLACEMENTS:-"0,0 0,1"}

die() { echo "uring_vs_c: $*" >&2; exit 1; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer (got '$ROUNDS')"
[[ $DURATION =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "DURATION must be a number of seconds (got '$DURATION')"
[[ $SIZE =~ ^[1-9][0-9]*$ ]] && ((SIZE <= 65536)) || die "SIZE must be 1..65536 (got '$SIZE')"
for p in $PLACEMENTS; do
    [[ $p =~ ^[0-9]+,[0-9]+$ ]] || die "PLACEMENTS must be CLIENT,SERVER pairs (got '$p')"
done

cd "$(dirname "$0")/.."
BIN="$PWD/target/release/sockbench"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/uring_vs_c.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

command -v python3 >/dev/null || die "python3 is required"
command -v cc >/dev/null || die "a C compiler (cc) is required"
if ! echo '#include <liburing.h>' | cc -E - >/dev/null 2>&1; then
    echo "installing liburing-dev..." >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq liburing-dev >/dev/null \
        || die "liburing-dev is needed to build bench/uring_pingpong.c"
fi
cc -O2 -o "$TMP/uring_pingpong" bench/uring_pingpong.c -luring || die "cannot build bench/uring_pingpong.c"
if [[ ${NO_BUILD:-0} != 1 ]]; then
    cargo build --release --locked -q || die "cargo build failed"
fi
[[ -x $BIN ]] || die "no $BIN: build it, or drop NO_BUILD"

RUNNERS=(sb:blocking sb:io-uring c:blocking c:io-uring c:multishot)
run() { # runner transport client_cpu server_cpu -> p50 in µs on stdout
    local who=${1%%:*} method=${1#*:} t=$2 a=$3 b=$4
    if [[ $who == sb ]]; then
        timeout 120 "$BIN" pingpong -t "$t" -e "$method" -s "$SIZE" -d "$DURATION" -w 0.2 \
            --cpus "$a,$b" --format json -q \
            | python3 -c 'import json,sys; d = json.load(sys.stdin); print(d.get("body", d)["results"][0]["latencies"]["round_trip"]["p50_ns"] / 1e3)'
    else
        timeout 120 "$TMP/uring_pingpong" "$method" "$t" "$SIZE" "$DURATION" 0.2 "$a" "$b" \
            | sed -n 's/.* p50_us=\([0-9.]*\) .*/\1/p'
    fi
}

: > "$TMP/results"
for r in $(seq "$ROUNDS"); do
    echo "  round $r/$ROUNDS" >&2
    for p in $PLACEMENTS; do
        for t in tcp unix; do
            n=${#RUNNERS[@]}
            for i in $(seq 0 $((n - 1))); do
                who=${RUNNERS[$(((i + r - 1) % n))]}
                v=$(run "$who" "$t" "${p%,*}" "${p#*,}")
                [[ -n $v ]] || die "no figure from $who over $t at $p"
                echo "$p $t $who $v" >> "$TMP/results"
            done
        done
    done
done

python3 - "$TMP/results" "$ROUNDS" <<'PY'
import collections, statistics, sys
path, rounds = sys.argv[1], int(sys.argv[2])
runs = collections.defaultdict(list)
for line in open(path):
    p, t, who, v = line.split()
    runs[(p, t, who)].append(float(v))
med = {k: statistics.median(v) for k, v in runs.items()}
print(f"Round-trip p50 in us, medians of {rounds} rounds (64 B unless SIZE says otherwise)")
print(f"{'cpus':<5} {'transp':<6} {'sb block':>9} {'sb uring':>9} {'C block':>9} {'C uring':>9} {'C multi':>9}"
      f" {'sb u/b':>7} {'C u/b':>7} {'sb/C u':>7} {'C m/b':>7}")
for (p, t) in sorted({(p, t) for p, t, _ in med}):
    g = lambda who: med[(p, t, who)]
    sbb, sbu, cb, cu, cm = g("sb:blocking"), g("sb:io-uring"), g("c:blocking"), g("c:io-uring"), g("c:multishot")
    print(f"{p:<5} {t:<6} {sbb:9.2f} {sbu:9.2f} {cb:9.2f} {cu:9.2f} {cm:9.2f}"
          f" {sbu / sbb:6.2f}x {cu / cb:6.2f}x {sbu / cu:6.2f}x {cm / cb:6.2f}x")
print("sb u/b: sockbench io-uring over blocking; C u/b: the bare io_uring loop over the bare")
print("blocking loop (what io_uring costs on this kernel); sb/C u: sockbench's io-uring over the")
print("bare io_uring loop; C m/b: the multishot loop over the bare blocking loop.")
PY
