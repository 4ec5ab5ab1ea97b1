#!/usr/bin/env python3
"""The RGW threads / handles / cache study of the seed article, on Shoal's Swift front.

For every point of the grid rgw_thread_pool_size x rgw_num_rados_handles x
rgw_cache_enabled, starts the target with those options, runs the article's command
(`swift-bench -c 64 -s 4096 -n N -g N`, v1.0 auth) from CLIENTS concurrent processes, and
samples every second the gateway's request counters (rgw_put, rgw_get, rgw_delete,
rgw_failed_req on its metrics port) and its CPU and memory (/proc). Prints a table and,
with --json FILE, one JSON row per point.

Targets: `server` (`shoal server`, storage in the same process: its CPU and memory include
the OSD's) and `vstart` (3 OSDs on 3 hosts, pools of size 3, one gateway process).

Rates per operation: `final` is the sum of the clients' FINAL rates (each client's count
over its own phase time), `peak` the best second, `sustained` the mean over the second
half of the seconds the phase ran. Usage (the venv holding swift-bench):
  ~/.cache/shoal/venv/bin/python bench/swift.py --targets server --n 1000 --json out.jsonl
"""
import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

SHOAL = os.environ.get("SHOAL") or os.path.join(
    os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/shoal/target")), "release", "shoal")
SWIFT_BENCH = os.path.join(os.path.dirname(sys.executable), "swift-bench")
FINAL = re.compile(r"(\d+) (PUTS|GETS|DEL) \*\*FINAL\*\* \[(\d+) failures\], (\d+\.\d+)/s")
PHASES = {"PUTS": "rgw_put", "GETS": "rgw_get", "DEL": "rgw_delete"}
TICKS = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port}")


def admin(conf, *args):
    out = subprocess.run([SHOAL, "admin", "-c", conf, *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout) if out.stdout.strip() else None


def make_subuser(conf, workdir):
    """The bench user with a full-access subuser `bench:swift`; returns (subuser, Swift
    key, a file holding the user's S3 keys for `shoal bench s3`)."""
    info = admin(conf, "user", "create", "--uid", "bench", "--display-name", "Bench")
    keys_file = os.path.join(workdir, "bench-keys.json")
    with open(keys_file, "w") as f:
        json.dump(info["keys"][0], f)
    admin(conf, "subuser", "create", "--uid", "bench", "--subuser", "bench:swift", "--access", "full")
    admin(conf, "key", "create", "--subuser", "bench:swift", "--key-type", "swift", "--secret-key", "benchkey")
    return "bench:swift", "benchkey", keys_file


def counters(metrics_port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    found = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        for counter in ("rgw_put", "rgw_get", "rgw_delete", "rgw_failed_req"):
            if name in (f"shoal_{counter}_total", f"{counter}_total"):
                found[counter] = float(value)
    return found


def cpu_and_rss(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICKS
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) * 1024
    return cpu, rss


class Sampler(threading.Thread):
    """Every second: the gateway's counters, CPU seconds and RSS."""

    def __init__(self, metrics_port, pid):
        super().__init__(daemon=True)
        self.metrics_port, self.pid = metrics_port, pid
        self.samples = []
        self.stopped = threading.Event()

    def run(self):
        while not self.stopped.is_set():
            try:
                cpu, rss = cpu_and_rss(self.pid)
                self.samples.append((time.time(), counters(self.metrics_port), cpu, rss))
            except (OSError, ValueError):
                pass
            self.stopped.wait(1.0)


def per_second(samples, counter, window=None):
    """Rates of `counter` between consecutive samples (inside `window`, (from, to) times)."""
    if window:
        samples = [x for x in samples if window[0] - 1 <= x[0] <= window[1] + 1]
    return [(b[1].get(counter, 0) - a[1].get(counter, 0)) / max(b[0] - a[0], 1e-6) for a, b in zip(samples, samples[1:])]


def phase_rates(rates):
    """(peak, sustained) of one phase: the best second, and the mean of the second half of
    the seconds it ran (rates above 5 % of the peak)."""
    active = [r for r in rates if r > 0.05 * max(rates, default=0)] if rates else []
    if not active:
        return 0.0, 0.0
    tail = active[len(active) // 2:]
    return max(active), sum(tail) / len(tail)


def swift_clients(port, subuser, n, clients, label, workdir):
    """The article's swift-bench command from `clients` processes at once; returns, per
    phase, the clients' FINAL lines (count, kind, failures, rate) and no time windows."""
    bench_conf = os.path.join(workdir, "swift.conf")
    with open(bench_conf, "w") as f:
        f.write(f"[bench]\nauth = http://127.0.0.1:{port}/auth/v1.0\nuser = {subuser[0]}\nkey = {subuser[1]}\n"
                "auth_version = 1.0\n")
    benches = [subprocess.Popen([SWIFT_BENCH, "-c", "64", "-s", "4096", "-n", str(n), "-g", str(n),
                                 "--container-name", f"sb{i}-{label}", bench_conf],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for i in range(clients)]
    outputs = [b.communicate(timeout=7200)[0] for b in benches]
    finals = {kind: [m for out in outputs for m in FINAL.findall(out) if m[1] == kind] for kind in PHASES}
    errors = [out[-400:] for out in outputs if len(FINAL.findall(out)) < 3]
    return finals, {}, errors


def s3_clients(port, keys_file, pid, clients, seconds, label):
    """`shoal bench s3` PUT then GET of 4 KiB objects at clients x 64 connections; returns
    per phase one FINAL-like line (ops, kind, failures, rate) and its time window."""
    finals, windows = {}, {}
    for workload, kind in (("put", "PUTS"), ("get", "GETS")):
        args = [SHOAL, "bench", "s3", "--endpoint", f"http://127.0.0.1:{port}", "--keys-file", keys_file,
                "--server-pid", str(pid), "--workload", workload, "--obj-size", "4KiB", "--concurrent",
                str(64 * clients), "--duration", f"{seconds}s", "--objects", "1000", "--rounds", "1",
                "--bucket", f"s3-{workload}-{label}".lower()[:60], "--json"]
        out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
        rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        row = next(r for r in rows if r["op"] in ("PUT", "GET"))
        finals[kind] = [(str(row["ops"]), kind, str(row["slowdowns"] + row["lost_connections"]),
                         str(row["ops_per_sec"]))]
        # The measurement is the last `seconds` of the run (the GET run first writes its objects).
        windows[kind] = (time.time() - seconds, time.time())
    return finals, windows, []


def run_point(target, options, n, clients, workdir, label, front="swift", s3_seconds=8):
    """Starts the target with `options`, runs the clients, stops it; returns the row."""
    metrics_port, port = free_port(), free_port()
    opts = [f"{k}={v}" for k, v in options.items()] + [f"rgw_metrics_port={metrics_port}"]
    flags = [x for o in opts for x in ("-o", o)]
    log = open(os.path.join(workdir, f"{label}.log"), "w")
    if target["kind"] == "server":
        data = os.path.join(workdir, "server")
        shutil.rmtree(data, ignore_errors=True)
        proc = subprocess.Popen([SHOAL, "server", "--data", data, "--port", str(port), "--bind", "127.0.0.1", *flags],
                                stdout=log, stderr=log)
        wait_port(port)
        conf = os.path.join(data, "shoal.conf")
        subuser = make_subuser(conf, workdir)
    else:
        conf = target["conf"]
        proc = subprocess.Popen([SHOAL, "gateway", "-c", conf, "--port", str(port), "--bind", "127.0.0.1", *flags],
                                stdout=log, stderr=log)
        wait_port(port)
        subuser = target["subuser"]
    wait_port(metrics_port)
    sampler = Sampler(metrics_port, proc.pid)
    sampler.start()
    time.sleep(1.2)
    started = time.time()
    if front == "swift":
        finals, windows, errors = swift_clients(port, subuser, n, clients, label, workdir)
    else:
        finals, windows, errors = s3_clients(port, subuser[2], proc.pid, clients, s3_seconds, label)
    wall = time.time() - started
    time.sleep(1.2)
    sampler.stopped.set()
    sampler.join()
    proc.terminate()
    proc.wait(timeout=60)
    row = {"front": front, "target": target["kind"], **options, "n_per_client": n, "clients": clients,
           "wall_s": round(wall, 1)}
    failures = 0
    for kind, counter in PHASES.items():
        done = finals.get(kind, [])
        failures += sum(int(m[2]) for m in done)
        peak, sustained = phase_rates(per_second(sampler.samples, counter, windows.get(kind)))
        key = kind.lower().rstrip("s")
        row[f"{key}_final"] = round(sum(float(m[3]) for m in done), 1)
        row[f"{key}_peak"] = round(peak, 1)
        row[f"{key}_sustained"] = round(sustained, 1)
        row[f"{key}_clients_done"] = len(done)
    s = sampler.samples
    row["failures"] = failures
    row["failed_req"] = int(s[-1][1].get("rgw_failed_req", 0)) if s else None
    ops = sum(s[-1][1].get(c, 0) - s[0][1].get(c, 0) for c in PHASES.values()) if len(s) > 1 else 0
    cpu = s[-1][2] - s[0][2] if len(s) > 1 else 0
    row["cpu_pct"] = round(100 * cpu / max(s[-1][0] - s[0][0], 1e-6), 1) if len(s) > 1 else None
    row["cpu_ms_per_op"] = round(1000 * cpu / ops, 3) if ops else None
    row["max_rss_mib"] = round(max(x[3] for x in s) / (1 << 20), 1) if s else None
    row["per_second"] = {c: [round(r) for r in per_second(s, c)] for c in PHASES.values()}
    if errors:
        row["client_errors"] = errors
    return row


def pool_values(spec):
    named = {"small": 8, "default": None}
    return [(v, named[v]) if v in named else (v, int(v)) for v in spec.split(",")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--targets", default="server,vstart")
    parser.add_argument("--n", type=int, default=1000, help="objects (and GETs) per client")
    parser.add_argument("--clients", type=int, default=5)
    parser.add_argument("--pools", default="small,default,512,1024,2048",
                        help="rgw_thread_pool_size values; small = 8, default = the option's default")
    parser.add_argument("--handles", default="1,8,32,64,128")
    parser.add_argument("--caches", default="true,false")
    parser.add_argument("--front", choices=["swift", "s3"], default="swift",
                        help="swift: the article's swift-bench; s3: `shoal bench s3` PUT and GET at clients x 64")
    parser.add_argument("--s3-seconds", type=int, default=8, help="seconds of each `shoal bench s3` run")
    parser.add_argument("--json", help="append one JSON row per point to this file")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="swift-study-")
    rows = []
    header = f"{'front':5} {'target':7} {'pool':>7} {'handles':>7} {'cache':>5} {'PUT/s final':>11} {'peak':>6} {'sust':>6} " \
             f"{'GET/s final':>11} {'peak':>6} {'sust':>6} {'fail':>4} {'cpu%':>5} {'ms/op':>6} {'RSS MiB':>7}"
    print(header, flush=True)
    try:
        for kind in args.targets.split(","):
            target = {"kind": kind}
            if kind == "vstart":
                cluster = os.path.join(workdir, "cluster")
                subprocess.run([SHOAL, "vstart", "--dir", cluster, "--osds", "3", "--hosts", "3"], check=True,
                               stdout=subprocess.DEVNULL)
                target["conf"] = os.path.join(cluster, "shoal.conf")
                target["subuser"] = make_subuser(target["conf"], workdir)
            try:
                for cache in args.caches.split(","):
                    for pool_name, pool in pool_values(args.pools):
                        for handles in args.handles.split(","):
                            options = {"rgw_num_rados_handles": int(handles), "rgw_cache_enabled": cache}
                            if pool is not None:
                                options["rgw_thread_pool_size"] = pool
                            label = f"{kind}-p{pool_name}-h{handles}-c{cache}"
                            row = run_point(target, options, args.n, args.clients, workdir, label, args.front,
                                            args.s3_seconds)
                            row["pool"] = pool_name
                            rows.append(row)
                            print(f"{args.front:5} {kind:7} {pool_name:>7} {handles:>7} {cache:>5} {row['put_final']:>11} "
                                  f"{row['put_peak']:>6} {row['put_sustained']:>6} {row['get_final']:>11} "
                                  f"{row['get_peak']:>6} {row['get_sustained']:>6} {row['failures']:>4} "
                                  f"{row['cpu_pct']:>5} {row['cpu_ms_per_op']:>6} {row['max_rss_mib']:>7}", flush=True)
                            if args.json:
                                with open(args.json, "a") as f:
                                    f.write(json.dumps(row) + "\n")
            finally:
                if kind == "vstart":
                    subprocess.run([SHOAL, "vstart", "--dir", target["conf"].rsplit("/", 1)[0], "--stop"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
