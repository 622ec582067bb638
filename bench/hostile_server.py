#!/usr/bin/env python3
"""What 1000 hostile connections of each kind cost a `sockbench server`, and how long a
real client then waits for its test.

Kinds: idle (connect, say nothing), dribbling (a hello one byte every 0.2 s),
oversized (a header announcing an 8 MiB agent report, then 64 KiB of it), wrong-state
(a valid hello, then a server's own frame), established-idle (a valid hello, then
nothing; without a key only). Each kind comes from 40 loopback addresses (127.0.1.x),
as from other hosts; the real client connects from 127.0.0.1.

Usage: bench/hostile_server.py [SOCKBENCH]   (default: target/release/sockbench)
Prints one line per kind and key setting: the server's RSS, threads and descriptors
after the 1000 connections (from /proc/PID/status and /proc/PID/fd), and the real
client's wall time for `stream -t tcp -n 1000`.
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

BIN = sys.argv[1] if len(sys.argv) > 1 else "target/release/sockbench"
N = 1000


def frame(kind, body):
    return bytes([kind]) + len(body).to_bytes(4, "big") + body


HELLO = frame(1, json.dumps({"version": 2, "tool": "x", "nonce": "00" * 32}).encode())


def resources(pid):
    status = open(f"/proc/{pid}/status").read()
    field = lambda k: int(next(l for l in status.splitlines() if l.startswith(k)).split()[1])
    return field("VmRSS:"), field("Threads:"), len(os.listdir(f"/proc/{pid}/fd"))


def attack(port, kind, stop):
    socks = []
    for i in range(N):
        s = socket.socket()
        s.bind((f"127.0.1.{1 + i % 40}", 0))
        try:
            s.connect(("127.0.0.1", port))
        except OSError:
            s.close()
            continue
        try:
            if kind == "oversized":
                s.sendall(frame(13, b"")[:1] + (8 << 20).to_bytes(4, "big") + b"x" * 65536)
            elif kind == "wrong-state":
                s.sendall(HELLO + frame(7, b"{}"))
            elif kind == "established-idle":
                s.sendall(HELLO)
        except OSError:
            pass
        socks.append(s)
    if kind == "dribbling":
        def dribble():
            for b in HELLO:
                if stop.is_set():
                    return
                for s in socks:
                    try:
                        s.send(bytes([b]))
                    except OSError:
                        pass
                time.sleep(0.2)
        threading.Thread(target=dribble, daemon=True).start()
    return socks


def main():
    tmp = tempfile.mkdtemp()
    key = os.path.join(tmp, "key")
    with open(key, "w") as f:
        f.write("0123456789abcdef0123456789abcdef\n")
    os.chmod(key, 0o600)
    print(f"{'kind':<17} {'key':<4} {'RSS MB':>7} {'threads':>8} {'fds':>5} {'client s':>9}")
    for keyed in (False, True):
        for kind in ("idle", "dribbling", "oversized", "wrong-state", "established-idle"):
            if keyed and kind == "established-idle":
                continue
            args = [BIN, "server", "--listen", "127.0.0.1", "--port", "0"]
            if keyed:
                args += ["--key-file", key]
            srv = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
            first = srv.stderr.readline()
            port = int(first.split("listening on ")[1].split()[0].rsplit(":", 1)[1])
            threading.Thread(target=lambda: [None for _ in srv.stderr], daemon=True).start()
            stop = threading.Event()
            socks = attack(port, kind, stop)
            time.sleep(1.0)
            rss, threads, fds = resources(srv.pid)
            cmd = [BIN, "stream", "-t", "tcp", "-n", "1000", "-w", "0", "-q",
                   "--server", f"127.0.0.1:{port}"]
            if keyed:
                cmd += ["--key-file", key]
            t = time.time()
            ok = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            took = time.time() - t
            verdict = f"{took:9.2f}" if ok.returncode == 0 else f"FAILED: {ok.stderr.strip()[:60]}"
            print(f"{kind:<17} {'yes' if keyed else 'no':<4} {rss / 1024:7.1f} {threads:8} {fds:5} {verdict}")
            stop.set()
            for s in socks:
                s.close()
            srv.kill()
            srv.wait()


if __name__ == "__main__":
    main()
