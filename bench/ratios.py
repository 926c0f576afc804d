#!/usr/bin/env python3
"""msgperf's benchmark: ratios taken in one run, never absolute times.

For each OS transport and placement it runs, back to back:
  msgperf run pingpong (64 B) and stream (64 KiB writes; 60000 B for udp, whose datagrams stop
  at 65507 B), each with its own floor measured in the same invocation, then bench/plain_loop.c,
  the same loop written in plain C, pinned the same way.
It prints msgperf's median round trip / floor's and / C's, and msgperf's stream MB/s / floor's
and / C's. With --repeat N the whole sweep runs N times and each ratio is the median of the N
(with their range), since this shared VM moves single runs by several percent.
Usage: bench/ratios.py [--duration 2] [--placement cross-cpu,same-cpu] [--repeat 1]
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)

def sh(args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", default="2")
    ap.add_argument("--placement", default="cross-cpu,same-cpu")
    ap.add_argument("--transports", default="pipe,uds,tcp,udp")
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    sh(["cargo", "build", "--release", "--quiet", "--manifest-path", os.path.join(root, "Cargo.toml")])
    msgperf = os.path.join(root, "target", "release", "msgperf")
    c_loop = os.path.join(tempfile.gettempdir(), "msgperf_plain_loop")
    sh(["gcc", "-O2", "-o", c_loop, os.path.join(here, "plain_loop.c")])
    runs = [sweep(a, msgperf, c_loop) for _ in range(a.repeat)]
    head = ("transport", "placement", "p50 rtt [us]", "/ floor", "/ C", "stream [MB/s]", "/ floor", "/ C")
    print(" | ".join(head))
    print(" | ".join("---" for _ in head))

    def fig(values, fmt):
        mid = fmt.format(statistics.median(values))
        return mid if len(values) == 1 else f"{mid} ({fmt.format(min(values))}-{fmt.format(max(values))})"

    for i, r in enumerate(runs[0]):
        rs = [run[i] for run in runs]
        col = lambda f: [f(x) for x in rs]
        print(" | ".join([r["transport"], r["placement"], fig(col(lambda x: x["rtt_us"]), "{:.2f}"),
                          fig(col(lambda x: x["rtt_us"] / x["floor_rtt_us"]), "{:.2f}x"),
                          fig(col(lambda x: x["rtt_us"] / x["c_rtt_us"]), "{:.2f}x"),
                          fig(col(lambda x: x["mbs"]), "{:.0f}"),
                          fig(col(lambda x: x["mbs"] / x["floor_mbs"]), "{:.2f}x"),
                          fig(col(lambda x: x["mbs"] / x["c_mbs"]), "{:.2f}x")]))
    print("\nround trip: lower is better, 1.00x = the plain loop; stream: higher is better."
          + (f" Median of {a.repeat} runs (range)." if a.repeat > 1 else ""))


def sweep(a, msgperf, c_loop):
    rows = []
    for placement in a.placement.split(","):
        for t in a.transports.split(","):
            row = {"transport": t, "placement": placement}
            for workload, size in (("pingpong", 64), ("stream", 60000 if t == "udp" else 65536)):
                with tempfile.NamedTemporaryFile(suffix=".json") as f:
                    sh([msgperf, "run", workload, "-t", t, "--size", str(size), "--duration", a.duration + "s",
                        "--placement", placement, "--json", f.name])
                    case = json.load(open(f.name))["cases"][0]
                s = case["summary"]
                cpus = case["config"]["cpus"]
                c = dict(kv.split("=") for kv in sh([c_loop, workload, t, str(size), a.duration, str(cpus[0]), str(cpus[1])]).split())
                if workload == "pingpong":
                    p50 = s["latency"]["percentiles_ns"][0]
                    row.update(rtt_us=p50 / 1e3, floor_rtt_us=s["floor_p50_ns"] / 1e3, c_rtt_us=int(c["p50_ns"]) / 1e3)
                else:
                    row.update(mbs=s["mb_per_s"], floor_mbs=s["floor_mb_per_s"], c_mbs=float(c["mb_per_s"]))
            rows.append(row)
    return rows

if __name__ == "__main__":
    sys.exit(main())
