#!/usr/bin/env python3
"""Hostile clients against `shoal server`: IDLE idle connections and SLOW clients that
trickle a request header, from two attacker processes (each process has its own
open-file limit), while `shoal bench s3` runs 4 KiB PUT then GET at 8 clients. Prints the
bench rows (JSON) and what the attackers saw; the server must still answer afterwards.

Usage: bench/dos.py [--idle 20000] [--slow 200] [--seconds 20]
"""

import argparse
import json
import multiprocessing
import os
import resource
import socket
import subprocess
import tempfile
import time

SHOAL = os.environ.get("SHOAL") or os.path.join(
    os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/shoal/target")), "release", "shoal")


def attacker(port, idle, slow, seconds, out):
    """Opens IDLE silent connections and SLOW trickling ones; reports how many connected and
    how many of each the server had closed at the end."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    conns, failed = [], 0
    for _ in range(idle):
        s = socket.socket()
        s.settimeout(3)
        try:
            s.connect(("127.0.0.1", port))
            conns.append(s)
        except OSError:
            failed += 1
            s.close()
    trickling = []
    for _ in range(slow):
        s = socket.socket()
        s.settimeout(3)
        try:
            s.connect(("127.0.0.1", port))
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
            trickling.append(s)
        except OSError:
            failed += 1
            s.close()
    deadline = time.time() + seconds
    while time.time() < deadline:
        time.sleep(1)
        for s in trickling:
            try:
                s.sendall(b"X")
            except OSError:
                pass

    def closed(s):
        s.settimeout(0.2)
        try:
            return s.recv(1) == b""
        except socket.timeout:
            return False
        except OSError:
            return True

    out.put({"idle_connected": len(conns), "idle_closed": sum(map(closed, conns)),
             "slow_connected": len(trickling), "slow_closed": sum(map(closed, trickling)), "failed": failed})


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--idle", type=int, default=20000)
    parser.add_argument("--slow", type=int, default=200)
    parser.add_argument("--seconds", type=int, default=20)
    args = parser.parse_args()
    work = tempfile.mkdtemp()
    data = os.path.join(work, "data")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([SHOAL, "server", "--data", data, "--port", str(port), "--bind", "127.0.0.1"],
                              stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "server.log"), "w"))
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            break
        except OSError:
            time.sleep(0.1)
    base = [SHOAL, "bench", "s3", "--endpoint", f"http://127.0.0.1:{port}", "--keys-file",
            os.path.join(data, "admin.json"), "--obj-size", "4KiB", "--no-progress", "--json"]
    bench = base + ["--server-pid", str(server.pid), "--concurrent", "8", "--duration", f"{args.seconds // 2}s",
                    "--objects", "500"]
    results = multiprocessing.Queue()
    halves = [(args.idle // 2, args.slow // 2), (args.idle - args.idle // 2, args.slow - args.slow // 2)]
    attackers = [multiprocessing.Process(target=attacker, args=(port, i, s, args.seconds + 10, results))
                 for i, s in halves]
    for a in attackers:
        a.start()
    time.sleep(5)  # the floods are in place
    for workload in ("put", "get"):
        out = subprocess.run(bench + ["--workload", workload], capture_output=True, text=True)
        rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        print(json.dumps({"workload": workload, "rows": rows, "stderr": out.stderr[-300:]}), flush=True)
    seen = [results.get(timeout=120) for _ in attackers]
    for a in attackers:
        a.join()
    total = {k: sum(s[k] for s in seen) for k in seen[0]}
    up = server.poll() is None
    check = subprocess.run(base + ["--workload", "get", "--duration", "2s", "--objects", "10", "--concurrent", "1"],
                           capture_output=True, text=True)
    print(json.dumps({"attackers": total, "server_up": up, "answers_after": check.returncode == 0}))
    server.terminate()
    server.wait()


if __name__ == "__main__":
    main()
