#!/usr/bin/env python3
"""Plots `shoal bench reef --steady --timeline FILE` output: operations completed in each
whole second of the steady phase (not smoothed), the median second, 0.7 of it, and the
seconds below that line marked. Needs matplotlib.
Usage: bench/steady_plot.py OUT.png TIMELINE.json
"""
import json
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    out, path = sys.argv[1], sys.argv[2]
    with open(path) as f:
        timeline = json.load(f)
    phase = next(p for p in timeline["phases"] if p["name"] == "steady")
    first = math.ceil(phase["from"])
    seconds = timeline["seconds"][first:int(phase["to"])]
    t = [first + i for i in range(len(seconds))]
    ops = [sum(s["ops"].values()) for s in seconds]
    median = sorted(ops)[len(ops) // 2]
    below = [(x, o) for x, o in zip(t, ops) if o < 0.7 * median]
    figure, axis = plt.subplots(figsize=(12, 4))
    axis.plot(t, ops, color="tab:green", lw=0.7, label="ops/s (all operations)")
    axis.axhline(median, color="0.4", lw=0.8, label=f"median {median}")
    axis.axhline(0.7 * median, color="tab:red", lw=0.8, ls="--", label=f"0.7 × median {0.7 * median:.0f}")
    if below:
        axis.scatter([x for x, _ in below], [o for _, o in below], color="tab:red", s=12,
                     label=f"{len(below)} seconds below")
    axis.set_title(f"{timeline['setup']}: each second of the steady load, {len(ops)} s")
    axis.set_xlabel("seconds")
    axis.set_ylabel("ops/s")
    axis.set_ylim(bottom=0)
    axis.legend(loc="lower left", fontsize=8)
    figure.tight_layout()
    figure.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
