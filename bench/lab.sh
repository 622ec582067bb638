#!/usr/bin/env bash
# lab.sh - sockbench across processes and across two "hosts" (network namespaces joined
# by a veth pair), side by side with iperf3 and sockperf on the same link.
#
# What it does (root; installs iperf3 and sockperf with apt-get if they are missing):
#   1. --placement processes against threads, on this host: TCP stream, 1 MiB writes,
#        sockbench stream -t tcp -s 1M -d DURATION [--placement processes]
#      alternately for ROUNDS rounds; prints the median of each and processes/threads.
#   2. Two namespaces sblab-a (client, 10.99.0.1) and sblab-b (server, 10.99.0.2) and a
#      veth pair; `sockbench server` and `iperf3 -s` in sblab-b. For ROUNDS rounds,
#      alternately:
#        sockbench stream --server 10.99.0.2 -t tcp -s 128K -d DURATION
#        iperf3 -c 10.99.0.2 -l 128K -t DURATION -J
#      prints both medians (received bits/s) and sockbench/iperf3.
#   3. Round trip between the namespaces, 64 B UDP, alternately:
#        sockbench pingpong --server 10.99.0.2 -t udp -s 64 -d DURATION
#        sockperf ping-pong -i 10.99.0.2 -p 11111 -m 64 -t DURATION --full-rtt
#      prints both medians of p50 (µs) and sockbench/sockperf (lower is better).
#   4. Removes the namespaces and stops the servers however it exits.
#
# How to run:
#   sudo bench/lab.sh
#   ROUNDS=3 DURATION=2 NO_BUILD=1 bench/lab.sh
#
# Environment: ROUNDS (default 5), DURATION whole seconds (default 3), NO_BUILD=1 to use
# target/release/sockbench as it is. Run it on an idle machine: on 2 cores any other
# load lands in every figure. About 3 minutes with the defaults.
set -euo pipefail

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-3}
die() { echo "lab: $*" >&2; exit 1; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer"
[[ $DURATION =~ ^[1-9][0-9]*$ ]] || die "DURATION must be a whole number of seconds"
[ "$(id -u)" = 0 ] || die "needs root (network namespaces)"

cd "$(dirname "$0")/.."
BIN="$PWD/target/release/sockbench"
if [ "${NO_BUILD:-0}" != 1 ]; then cargo build --release --quiet; fi
[ -x "$BIN" ] || die "no $BIN: build it or unset NO_BUILD"
for t in iperf3 sockperf; do
  command -v "$t" >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$t" >/dev/null
done

A=sblab-a B=sblab-b
TMP=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  ip netns del $A 2>/dev/null || true
  ip netns del $B 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
jq_py() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
ratio() { python3 -c "print(f'{$1 / $2:.3f}')"; }

echo "== 1. --placement processes vs threads: tcp stream, 1 MiB writes, $ROUNDS x ${DURATION}s"
for r in $(seq "$ROUNDS"); do
  for p in threads processes; do
    if [ $((r % 2)) = 0 ]; then p=$([ $p = threads ] && echo processes || echo threads); fi
    "$BIN" stream -t tcp -s 1M -d "$DURATION" --placement $p --format json -q \
      | jq_py "d.get('body', d)['results'][0]['bits_per_second']" >> "$TMP/place-$p"
  done
done
thr=$(median < "$TMP/place-threads"); pro=$(median < "$TMP/place-processes")
printf 'threads %.3g bit/s, processes %.3g bit/s: processes/threads %s\n' "$thr" "$pro" "$(ratio "$pro" "$thr")"

echo "== 2. two namespaces over a veth pair"
ip netns add $A; ip netns add $B
ip link add sblab-va type veth peer name sblab-vb
ip link set sblab-va netns $A; ip link set sblab-vb netns $B
ip -n $A addr add 10.99.0.1/24 dev sblab-va; ip -n $B addr add 10.99.0.2/24 dev sblab-vb
for n in $A $B; do ip -n $n link set lo up; done
ip -n $A link set sblab-va up; ip -n $B link set sblab-vb up
ip netns exec $B "$BIN" server --listen 10.99.0.2 2>"$TMP/server.log" & PIDS+=($!)
ip netns exec $B iperf3 -s -B 10.99.0.2 >/dev/null 2>&1 & PIDS+=($!)
ip netns exec $B sockperf server -i 10.99.0.2 -p 11111 >/dev/null 2>&1 & PIDS+=($!)
sleep 1

echo "   stream, 128 KiB writes, $ROUNDS x ${DURATION}s, alternating"
for r in $(seq "$ROUNDS"); do
  for tool in sockbench iperf3; do
    if [ $((r % 2)) = 0 ]; then tool=$([ $tool = sockbench ] && echo iperf3 || echo sockbench); fi
    if [ $tool = sockbench ]; then
      ip netns exec $A "$BIN" stream --server 10.99.0.2 -t tcp -s 128K -d "$DURATION" --format json -q \
        | jq_py "d.get('body', d)['results'][0]['bits_per_second']" >> "$TMP/stream-sockbench"
    else
      ip netns exec $A iperf3 -c 10.99.0.2 -l 128K -t "$DURATION" -J \
        | jq_py "d['end']['sum_received']['bits_per_second']" >> "$TMP/stream-iperf3"
    fi
  done
done
sbs=$(median < "$TMP/stream-sockbench"); ips=$(median < "$TMP/stream-iperf3")
printf '   sockbench %.4g bit/s, iperf3 %.4g bit/s: sockbench/iperf3 %s\n' "$sbs" "$ips" "$(ratio "$sbs" "$ips")"

echo "   pingpong, 64 B UDP, $ROUNDS x ${DURATION}s, alternating (p50 round trip)"
for r in $(seq "$ROUNDS"); do
  for tool in sockbench sockperf; do
    if [ $((r % 2)) = 0 ]; then tool=$([ $tool = sockbench ] && echo sockperf || echo sockbench); fi
    if [ $tool = sockbench ]; then
      ip netns exec $A "$BIN" pingpong --server 10.99.0.2 -t udp -s 64 -d "$DURATION" --format json -q \
        | jq_py "d.get('body', d)['results'][0]['latencies']['round_trip']['p50_ns'] / 1000" >> "$TMP/rtt-sockbench"
    else
      out=$(ip netns exec $A sockperf ping-pong -i 10.99.0.2 -p 11111 -m 64 -t "$DURATION" --full-rtt 2>&1)
      grep -q "Round trip" <<<"$out" || die "sockperf did not report round trips: $out"
      awk '/percentile 50.000/ { print $NF }' <<<"$out" >> "$TMP/rtt-sockperf"
    fi
  done
done
sbl=$(median < "$TMP/rtt-sockbench"); spl=$(median < "$TMP/rtt-sockperf")
printf '   sockbench p50 %.2f us, sockperf p50 %.2f us: sockbench/sockperf %s\n' "$sbl" "$spl" "$(ratio "$sbl" "$spl")"
