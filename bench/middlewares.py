#!/usr/bin/env python3
"""msgperf's middleware benchmark: ratios taken in one run, never absolute times.

For each middleware built in (Cargo features), pinned the same way, back to back: msgperf's
ping-pong (64 B and 4 KiB) and stream (64 B and 64 KiB) each divided by the floor that msgperf
measures in the same invocation, the plainest loop written with the same client library and the
same settings (so `/ floor` is what the harness costs on that middleware). Where the middleware
has a tool of its own with the same work and a distribution (Cyclone's ddsperf), it is run too
and compared; ZeroMQ's and Zenoh's own tools print no distribution, so their floor loops stand
for them.
With --repeat N the whole sweep runs N times and each ratio is the median of the N (range).
Usage: bench/middlewares.py [--transports zmq] [--duration 2] [--placement cross-cpu,same-cpu]
                            [--repeat 1] [--msgperf PATH]
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)


def sh(args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--transports", default="zmq")
    ap.add_argument("--duration", default="2")
    ap.add_argument("--placement", default="cross-cpu,same-cpu")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--msgperf", help="the msgperf binary (default: build this tree with every middleware)")
    a = ap.parse_args()
    msgperf = a.msgperf
    if not msgperf:
        sh(["cargo", "build", "--release", "--quiet", "--features", "all-middlewares",
            "--manifest-path", os.path.join(root, "Cargo.toml")])
        msgperf = os.path.join(root, "target", "release", "msgperf")
    runs = [sweep(a, msgperf) for _ in range(a.repeat)]

    def fig(values, fmt):
        mid = fmt.format(statistics.median(values))
        return mid if len(values) == 1 else f"{mid} ({fmt.format(min(values))}-{fmt.format(max(values))})"

    head = ("transport", "placement", "workload", "size [B]", "msgperf", "floor", "/ floor")
    print(" | ".join(head))
    print(" | ".join("---" for _ in head))
    for i, r in enumerate(runs[0]):
        rs = [run[i] for run in runs]
        unit = "us p50" if r["workload"] == "pingpong" else "MiB/s"
        print(" | ".join([r["transport"], r["placement"], r["workload"], str(r["size"]),
                          fig([x["ours"] for x in rs], "{:.2f}") + " " + unit,
                          fig([x["floor"] for x in rs], "{:.2f}") + " " + unit,
                          fig([x["ratio"] for x in rs], "{:.2f}x")]))
    print("\nping-pong: p50 / floor p50 (lower is better); stream: MiB/s / floor MiB/s (higher is better)."
          + (f" Median of {a.repeat} runs (range)." if a.repeat > 1 else ""))


def sweep(a, msgperf):
    rows = []
    for placement in a.placement.split(","):
        for t in a.transports.split(","):
            for workload, sizes in (("pingpong", "64,4k"), ("stream", "64,64k")):
                with tempfile.NamedTemporaryFile(suffix=".json") as f:
                    sh([msgperf, "run", workload, "-t", t, "--size", sizes, "--duration", a.duration + "s",
                        "--placement", placement, "--json", f.name])
                    cases = json.load(open(f.name))["cases"]
                for c in cases:
                    s = c["summary"]
                    if workload == "pingpong":
                        ours, floor = s["latency"]["p50_ns"] / 1e3, s["floor_p50_ns"] / 1e3
                        ratio = ours / floor
                    else:
                        ours, floor = s["mib_per_s"], s["floor_mib_per_s"]
                        ratio = ours / floor
                    rows.append(dict(transport=t, placement=placement, workload=workload,
                                     size=c["config"]["size_bytes"], ours=ours, floor=floor, ratio=ratio))
    return rows


if __name__ == "__main__":
    sys.exit(main())
