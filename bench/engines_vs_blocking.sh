#!/usr/bin/env bash
# engines_vs_blocking.sh - what each I/O engine costs against the blocking engine on the
# same transport, in one run: one-way stream throughput at 64 KiB and pingpong round-trip
# p50 at 64 B, for every engine over unix and tcp. The engines take turns within each
# round (ROUNDS rounds, default 3), and the medians are printed as ratios to blocking:
# throughput ratio above 1 and latency ratio below 1 mean the engine beats blocking.
#
# Run from anywhere:  bash bench/engines_vs_blocking.sh     (ROUNDS=3 DURATION=1 by
# default; about 2 minutes on 2 cores). NO_BUILD=1 uses target/release/sockbench as is.
# URING_BATCH=N (default 8; 0: none) adds a row "io-uring/bN": the stream with N writes in
# flight (--batch N), taking its turn after the others in each round.
# Run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-1}
ENGINES=${ENGINES:-blocking,nonblocking,poll,epoll,io-uring,async}
URING_BATCH=${URING_BATCH:-8}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ "${NO_BUILD:-0}" = 1 ] || cargo build --release --locked -q
sb=target/release/sockbench
for r in $(seq "$ROUNDS"); do
  echo "  round $r/$ROUNDS" >&2
  timeout 300 "$sb" stream -t unix,tcp -e "$ENGINES" -s 64K -d "$DURATION" -w 0.2 --format json -q > "$tmp/stream-$r.json"
  if [ "$URING_BATCH" != 0 ]; then
    timeout 300 "$sb" stream -t unix,tcp -e io-uring --batch "$URING_BATCH" -s 64K -d "$DURATION" -w 0.2 --format json -q > "$tmp/batch-$r.json"
  fi
  timeout 300 "$sb" pingpong -t unix,tcp -e "$ENGINES" -s 64 -d "$DURATION" -w 0.2 --format json -q > "$tmp/pingpong-$r.json"
done
python3 - "$tmp" "$ROUNDS" <<'PY'
import json, os, statistics, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
def load(kind):
    out = {}
    for r in range(1, rounds + 1):
        files = [(f"{tmp}/{kind}-{r}.json", "")]
        if kind == "stream" and os.path.exists(f"{tmp}/batch-{r}.json"):
            files.append((f"{tmp}/batch-{r}.json", "/b"))
        results = [(res, tag) for path, tag in files for res in (lambda d: d.get("body", d))(json.load(open(path)))["results"]]
        for res, tag in results:
            if res["error"]:
                continue
            batch = res["options"].get("batch") or 1
            key = (res["transport"], res["engine"] + (f"{tag}{batch}" if tag else ""))
            v = res["bits_per_second"] / 1e9 if kind == "stream" else res["latencies"]["round_trip"]["p50_ns"] / 1e3
            out.setdefault(key, []).append(v)
    return {k: statistics.median(v) for k, v in out.items()}
stream, ping = load("stream"), load("pingpong")
engines = []
for (_, e) in list(stream) + list(ping):
    if e not in engines:
        engines.append(e)
print("Engines against blocking, medians of %d rounds (64 KiB stream, 64 B pingpong)" % rounds)
print("%-10s %-6s %12s %8s %12s %8s" % ("engine", "transp", "stream Gb/s", "x block", "p50 us", "x block"))
for t in ("unix", "tcp"):
    for e in engines:
        s, p = stream.get((t, e)), ping.get((t, e))
        sb, pb = stream.get((t, "blocking")), ping.get((t, "blocking"))
        fmt = lambda v: "%.2f" % v if v is not None else "-"
        ratio = lambda a, b: "%.2f" % (a / b) if a and b else "-"
        print("%-10s %-6s %12s %8s %12s %8s" % (e, t, fmt(s), ratio(s, sb), fmt(p), ratio(p, pb)))
PY
