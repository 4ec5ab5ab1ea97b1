#!/usr/bin/env python3
"""Plots bench/swift.py rows. `grid OUT.png ROWS.jsonl`: one panel per (front, target, cache),
PUT/s and GET/s (the clients' FINAL rates) against rgw_num_rados_handles, one line per
rgw_thread_pool_size. `timeline OUT.png ROWS.jsonl`: the per-second PUT, GET and DELETE
rates of each row (a long run: the peak, then the plateau). Needs matplotlib.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

POOLS = ["small", "default", "512", "1024", "2048"]
COLOURS = dict(zip(POOLS, ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]))


def grid(out, rows):
    slices = sorted({(r.get("front", "swift"), r["target"], r["rgw_cache_enabled"]) for r in rows},
                    key=lambda s: (s[0], s[1], s[2] != "true"))
    fig, axes = plt.subplots(2, len(slices), figsize=(4.2 * len(slices), 7), squeeze=False, sharex=True)
    for col, (front, target, cache) in enumerate(slices):
        for row, (op, key) in enumerate((("PUT", "put_final"), ("GET", "get_final"))):
            axis = axes[row][col]
            for pool in POOLS:
                points = sorted((r["rgw_num_rados_handles"], r[key]) for r in rows
                                if (r.get("front", "swift"), r["target"], r["rgw_cache_enabled"]) == (front, target, cache)
                                and str(r["pool"]) == pool)
                if points:
                    axis.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=f"pool {pool}",
                              color=COLOURS[pool])
            axis.set_xscale("log", base=2)
            axis.set_title(f"{front} {target}, cache {'on' if cache == 'true' else 'off'}: {op}/s", fontsize=9)
            axis.set_ylim(bottom=0)
            axis.grid(alpha=0.3)
            if row == 1:
                axis.set_xlabel("rgw_num_rados_handles")
            if col == 0:
                axis.set_ylabel(f"{op}/s (4 KiB)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def timeline(out, rows):
    fig, axes = plt.subplots(len(rows), 1, figsize=(10, 3.2 * len(rows)), squeeze=False)
    for axis, r in zip(axes[:, 0], rows):
        for counter, label in (("rgw_put", "PUT/s"), ("rgw_get", "GET/s"), ("rgw_delete", "DELETE/s")):
            series = r["per_second"][counter]
            axis.plot(range(len(series)), series, label=label, linewidth=0.8)
        axis.set_title(f"{r.get('front', 'swift')} on {r['target']}: {r['clients']} clients x "
                       f"{r['n_per_client']:,} objects, pool {r['pool']}, {r['rgw_num_rados_handles']} handles, "
                       f"cache {r['rgw_cache_enabled']}", fontsize=9)
        axis.set_xlabel("seconds")
        axis.set_ylabel("requests/s")
        axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    kind, out, path = sys.argv[1:4]
    loaded = [json.loads(line) for line in open(path) if line.strip()]
    {"grid": grid, "timeline": timeline}[kind](out, loaded)
