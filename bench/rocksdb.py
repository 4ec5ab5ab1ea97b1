#!/usr/bin/env python3
"""The RocksDB tuning study (the Ceph blog's "RocksDB tuning deep dive", on Shoal).

Each preset runs on a fresh `shoal server` (one OSD, embedded store) pinned to two cores,
under the same workloads: 4 KiB objects written then overwritten at random through
`shoal rados bench` (write, rand-write), then S3 4 KiB PUT, GET, LIST and DELETE through
`shoal bench s3`. Around each workload the OSD's `perf dump` gives what RocksDB wrote
(WAL, flushes, compactions), its flushes and compactions, stall time, and the size of its
files (SST and blob files) afterwards.

Prints one JSON object per workload and preset; with --table, the markdown tables for
bench/RESULTS.md; with --plot FILE, a PNG of throughput and write amplification per
preset (needs matplotlib). Usage: bench/rocksdb.py [--seconds N] [--presets a,b]
[--table] [--plot FILE] [--from FILE.jsonl].
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time

MIB = 1 << 20
GIB = 1 << 30
# Ceph's BlueStore default, and the article's "alternate" tuning without its Ceph-only
# keys (compaction_threads, flusher_threads: BlueStore reads those, RocksDB does not).
BLUESTORE = ("compression=kNoCompression,max_write_buffer_number=4,min_write_buffer_number_to_merge=1,"
             "recycle_log_file_num=4,write_buffer_size=268435456,writable_file_max_buffer_size=0,"
             "compaction_readahead_size=2097152,max_background_compactions=2,max_total_wal_size=1073741824")
ALTERNATE = ("compression=kNoCompression,max_write_buffer_number=32,min_write_buffer_number_to_merge=2,"
             "recycle_log_file_num=32,compaction_style=kCompactionStyleLevel,write_buffer_size=67108864,"
             "target_file_size_base=67108864,max_background_compactions=31,level0_file_num_compaction_trigger=8,"
             "level0_slowdown_writes_trigger=32,level0_stop_writes_trigger=64,max_bytes_for_level_base=536870912,"
             "max_bytes_for_level_multiplier=8,compaction_readahead_size=2MB")


def candidate(count, merge, size, compression="kNoCompression"):
    """The article's new tuning family: memtables of SIZE, COUNT of them, MERGE per flush."""
    return (f"compression={compression},max_write_buffer_number={count},min_write_buffer_number_to_merge={merge},"
            f"compaction_style=kCompactionStyleLevel,write_buffer_size={size},max_background_jobs=4,"
            "level0_file_num_compaction_trigger=8,max_bytes_for_level_base=1073741824,"
            "max_bytes_for_level_multiplier=8,compaction_readahead_size=2MB,max_total_wal_size=1073741824,"
            "writable_file_max_buffer_size=0")


# name -> (options, memtable size, count, merge)
PRESETS = {
    "rocksdb-default": ("", 64 * MIB, 2, 1),
    "shoal-default": (None, 64 * MIB, 4, 1),
    "bluestore-default": (BLUESTORE, 256 * MIB, 4, 1),
    "alternate": (ALTERNATE, 64 * MIB, 32, 2),
    "A": (candidate(16, 1, 64 * MIB), 64 * MIB, 16, 1),
    "B": (candidate(32, 2, 32 * MIB), 32 * MIB, 32, 2),
    "C": (candidate(64, 4, 16 * MIB), 16 * MIB, 64, 4),
    "D": (candidate(128, 16, 8 * MIB), 8 * MIB, 128, 16),
    "D-snappy": (candidate(128, 16, 8 * MIB, "kSnappyCompression"), 8 * MIB, 128, 16),
    "D-lz4": (candidate(128, 16, 8 * MIB, "kLZ4Compression"), 8 * MIB, 128, 16),
}

SHOAL = os.environ.get("SHOAL") or os.path.join(
    os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/shoal/target")), "release", "shoal")


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
    raise RuntimeError(f"nothing listens on {port}")


def run_json(args):
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {out.stderr.strip()}")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def store_stats(conf):
    dump = run_json([SHOAL, "tell", "-c", conf, "osd.0", "perf", "dump"])[0]
    return dump["store"]


def delta(after, before):
    keys = ("user_bytes_written", "wal_bytes", "flush_bytes", "flushes", "compaction_bytes", "compactions",
            "compaction_seconds", "stall_seconds")
    d = {k: after[k] - before[k] for k in keys}
    d["live_bytes"] = after["live_bytes"]
    user = d["user_bytes_written"]
    d["write_amp"] = round((d["wal_bytes"] + d["flush_bytes"] + d["compaction_bytes"]) / user, 3) if user else 0
    return d


def run_preset(name, options, seconds, work):
    data = os.path.join(work, "data")
    shutil.rmtree(data, ignore_errors=True)
    port = free_port()
    args = ["taskset", "-c", "0,1", SHOAL, "server", "--data", data, "--port", str(port), "--bind", "127.0.0.1"]
    if options is not None:
        args += ["-o", f"store_rocksdb_options={options}"]
    log = open(os.path.join(work, f"server-{name}.log"), "w")
    server = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    rows = []
    try:
        wait_port(port)
        conf = os.path.join(data, "shoal.conf")
        subprocess.run([SHOAL, "pool", "create", "-c", conf, "bench", "--size", "1"], check=True, capture_output=True)
        s3 = [SHOAL, "bench", "s3", "--endpoint", f"http://127.0.0.1:{port}", "--keys-file",
              os.path.join(data, "admin.json"), "--server-pid", str(server.pid), "--obj-size", "4KiB",
              "--concurrent", "16", "--duration", f"{seconds}s", "--objects", "10000", "--no-progress", "--json"]
        rados = [SHOAL, "rados", "-c", conf, "-p", "bench", "--json", "bench", str(seconds)]
        workloads = [
            ("rados write", rados + ["write", "-b", "4096", "-t", "16", "--no-cleanup"]),
            ("rados rand-write", rados + ["rand-write", "-t", "16"]),
            ("s3 put", s3 + ["--workload", "put"]),
            ("s3 get", s3 + ["--workload", "get"]),
            ("s3 list", s3 + ["--workload", "list"]),
            ("s3 delete", s3 + ["--workload", "delete"]),
        ]
        for workload, command in workloads:
            before, cpu_before = store_stats(conf), cpu_seconds(server.pid)
            row = run_json(command)[-1]
            cpu = cpu_seconds(server.pid) - cpu_before
            row.update(preset=name, workload=workload, kv=delta(store_stats(conf), before))
            row["server_cpu_us_per_op"] = round(cpu * 1e6 / max(row.get("ops", 0), 1), 1)
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        server.terminate()
        server.wait()
        log.close()
    return rows


def cpu_seconds(pid):
    """User + system CPU a process has used."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ops(row):
    return row.get("ops_per_sec") or 0


def table(rows):
    """Markdown: per preset and workload, ops/s, p99, CPU per op, write amplification."""
    presets = list(dict.fromkeys(r["preset"] for r in rows))
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    by = {(r["preset"], r["workload"]): r for r in rows}
    out = ["| preset | " + " | ".join(f"{w} ops/s" for w in workloads) + " |",
           "|---|" + "---:|" * len(workloads)]
    for p in presets:
        out.append(f"| {p} | " + " | ".join(f"{ops(by[(p, w)]):,.0f}" if (p, w) in by else "" for w in workloads) + " |")
    out += ["", "| preset | workload | p99 ms | CPU µs/op | WAL MiB | flush MiB (n) | compaction MiB (n, s) | stall s | write amp | RocksDB files MiB |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in presets:
        for w in workloads:
            r = by.get((p, w))
            if not r:
                continue
            kv = r["kv"]
            out.append(
                f"| {p} | {w} | {r.get('p99_ms', '')} | {r['server_cpu_us_per_op']} | "
                f"{kv['wal_bytes'] / MIB:.0f} | {kv['flush_bytes'] / MIB:.0f} ({kv['flushes']}) | "
                f"{kv['compaction_bytes'] / MIB:.0f} ({kv['compactions']}, {kv['compaction_seconds']:.1f}) | "
                f"{kv['stall_seconds']:.1f} | {kv['write_amp']} | {kv['live_bytes'] / MIB:.0f} |")
    out += ["", "| preset | memtable | count | merge | flush size | flushes (all workloads) | flushed MiB |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for p in presets:
        _, size, count, merge = PRESETS[p]
        flushes = sum(by[(p, w)]["kv"]["flushes"] for w in workloads if (p, w) in by)
        flushed = sum(by[(p, w)]["kv"]["flush_bytes"] for w in workloads if (p, w) in by)
        out.append(f"| {p} | {size // MIB} MiB | {count} | {merge} | {size * merge // MIB} MiB | {flushes} | {flushed / MIB:.0f} |")
    return "\n".join(out)


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    presets = list(dict.fromkeys(r["preset"] for r in rows))
    by = {(r["preset"], r["workload"]): r for r in rows}
    fig, (top, middle, bottom) = plt.subplots(3, 1, figsize=(11, 9), sharex=True)
    width = 0.2
    for i, w in enumerate(["rados rand-write", "s3 put", "s3 get"]):
        xs = [j + (i - 1) * width for j in range(len(presets))]
        top.bar(xs, [ops(by[(p, w)]) if (p, w) in by else 0 for p in presets], width, label=w)
    top.set_ylabel("ops/s (4 KiB)")
    top.legend(ncol=3, fontsize=8)
    top.set_title("Shoal RocksDB presets: one OSD (shoal server), 2 cores")
    middle.bar(range(len(presets)), [by[(p, "s3 list")]["keys_per_sec"] if (p, "s3 list") in by else 0
                                     for p in presets], 0.4, color="tab:red", label="s3 list")
    middle.set_ylabel("keys listed/s")
    middle.legend(fontsize=8)
    for i, w in enumerate(["rados rand-write", "s3 put"]):
        xs = [j + (i - 0.5) * width for j in range(len(presets))]
        bottom.bar(xs, [by[(p, w)]["kv"]["write_amp"] if (p, w) in by else 0 for p in presets], width, label=w)
    bottom.set_ylabel("RocksDB write amplification")
    bottom.legend(fontsize=8)
    bottom.set_xticks(range(len(presets)))
    bottom.set_xticklabels(presets, rotation=20)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--presets", default=",".join(PRESETS))
    parser.add_argument("--table", action="store_true")
    parser.add_argument("--plot")
    parser.add_argument("--from", dest="source", help="read rows from a JSONL file instead of running")
    args = parser.parse_args()
    if args.source:
        with open(args.source) as f:
            rows = [json.loads(line) for line in f if line.startswith("{")]
    else:
        rows = []
        work = tempfile.mkdtemp()
        try:
            for name in args.presets.split(","):
                options = PRESETS[name][0]
                if name == "shoal-default":
                    options = None  # the server's own default
                rows += run_preset(name, options, args.seconds, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    if args.table:
        print(table(rows))
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
