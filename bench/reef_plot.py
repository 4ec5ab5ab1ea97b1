#!/usr/bin/env python3
"""Plots `shoal bench reef --timeline FILE` output: client throughput (MB/s of GET and PUT,
and total ops/s) over time, one panel per timeline file given (e.g. the erasure-coded run
and the replicated one), phases shaded and named, events marked. Rates are per second,
smoothed over 5 s. A file given as LABEL=TIMELINE.json adds LABEL to its panel's title.
Needs matplotlib. Usage: bench/reef_plot.py OUT.png [LABEL=]TIMELINE.json...
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SMOOTH = 5


def smooth(values):
    out = []
    for i in range(len(values)):
        window = values[max(0, i - SMOOTH + 1):i + 1]
        out.append(sum(window) / len(window))
    return out


def panel(axis, timeline, label):
    seconds = timeline["seconds"]
    t = [s["t"] for s in seconds]
    for op, colour in (("GET", "tab:blue"), ("PUT", "tab:orange")):
        axis.plot(t, smooth([s["mb"][op] for s in seconds]), label=f"{op} MB/s", color=colour)
    ops = axis.twinx()
    ops.plot(t, smooth([sum(s["ops"].values()) for s in seconds]), label="ops/s (all)", color="tab:green", lw=0.8)
    ops.set_ylabel("ops/s")
    for n, phase in enumerate(timeline["phases"]):
        if n % 2 == 0:
            axis.axvspan(phase["from"], phase["to"], color="0.92")
        axis.text((phase["from"] + phase["to"]) / 2, 1.0, phase["name"], rotation=90, va="top", ha="center",
                  fontsize=7, transform=axis.get_xaxis_transform())
    for event in timeline["events"]:
        axis.axvline(event["t"], color="tab:red", lw=0.6, ls="--")
    axis.set_title(f"{timeline['setup']}: {label}" if label else timeline["setup"])
    axis.set_ylabel("MB/s")
    axis.set_ylim(bottom=0)
    ops.set_ylim(bottom=0)
    lines = axis.get_legend_handles_labels()
    more = ops.get_legend_handles_labels()
    axis.legend(lines[0] + more[0], lines[1] + more[1], loc="lower left", fontsize=7)


def main():
    out, files = sys.argv[1], sys.argv[2:]
    figure, axes = plt.subplots(len(files), 1, figsize=(12, 4 * len(files)), squeeze=False)
    for axis, arg in zip(axes[:, 0], files):
        label, _, path = arg.rpartition("=")
        with open(path) as f:
            panel(axis, json.load(f), label)
    axes[-1, 0].set_xlabel("seconds")
    figure.tight_layout()
    figure.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
