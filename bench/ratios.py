#!/usr/bin/env python3
"""msgperf's benchmark: ratios taken in one run, never absolute times.

For each OS transport and placement it runs, back to back:
  msgperf run pingpong (64 B) and stream (64 KiB writes; 60000 B for udp, whose datagrams stop
  at 65507 B), each with its own floor measured in the same invocation, then bench/plain_loop.c,
  the same loop written in plain C, pinned the same way.
It prints msgperf's median round trip / floor's and / C's, and msgperf's stream MB/s / floor's
and / C's. Then shm's round trip with spinning waits between two CPUs against the hardware's
cache-line ping-pong (`msgperf floor`).
With --repeat N the whole sweep runs N times and each ratio is the median of the N (with their
range), since this shared VM moves single runs by several percent.
With --compare OTHER_BINARY, every figure is also taken with that msgperf (an older build, say)
in the same sweep, alternating with this one, and a table is printed for each.
Usage: bench/ratios.py [--duration 2] [--placement cross-cpu,same-cpu] [--repeat 1]
                       [--msgperf PATH] [--compare PATH]
"""
import argparse, json, os, re, statistics, subprocess, sys, tempfile

import benchlib

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)


def sh(args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def p50(summary):
    """A summary's median round trip, in both result layouts (labelled or in a list)."""
    lat = summary["latency"]
    return lat["p50_ns"] if "p50_ns" in lat else lat["percentiles_ns"][0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", default="2")
    ap.add_argument("--placement", default="cross-cpu,same-cpu")
    ap.add_argument("--transports", default="pipe,uds,tcp,udp")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--msgperf", help="the msgperf binary (default: build this tree)")
    ap.add_argument("--compare", help="another msgperf binary measured in the same sweep")
    a = ap.parse_args()
    msgperf = a.msgperf
    if not msgperf:
        sh(["cargo", "build", "--release", "--quiet", "--manifest-path", os.path.join(root, "Cargo.toml")])
        msgperf = os.path.join(root, "target", "release", "msgperf")
    binaries = [("this msgperf", msgperf)] + ([("compared", a.compare)] if a.compare else [])
    c_loop = os.path.join(tempfile.gettempdir(), "msgperf_plain_loop")
    sh(["gcc", "-O2", "-o", c_loop, os.path.join(here, "plain_loop.c")])
    runs = [sweep(a, binaries, c_loop) for _ in range(a.repeat)]
    for name, path in binaries:
        print(f"\n{name}: {path}\n")
        table(a, [r[name] for r in runs])


def fig(values, fmt):
    mid = fmt.format(statistics.median(values))
    return mid if len(values) == 1 else f"{mid} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def table(a, runs):
    head = ("transport", "placement", "p50 rtt [us]", "/ floor", "/ C", "stream [MB/s]", "/ floor", "/ C")
    print(" | ".join(head))
    print(" | ".join("---" for _ in head))
    for i, r in enumerate(runs[0]["rows"]):
        rs = [run["rows"][i] for run in runs]
        col = lambda f: [f(x) for x in rs]
        print(" | ".join([r["transport"], r["placement"], fig(col(lambda x: x["rtt_us"]), "{:.2f}"),
                          fig(col(lambda x: x["rtt_us"] / x["floor_rtt_us"]), "{:.2f}x"),
                          fig(col(lambda x: x["rtt_us"] / x["c_rtt_us"]), "{:.2f}x"),
                          fig(col(lambda x: x["mbs"]), "{:.0f}"),
                          fig(col(lambda x: x["mbs"] / x["floor_mbs"]), "{:.2f}x"),
                          fig(col(lambda x: x["mbs"] / x["c_mbs"]), "{:.2f}x")]))
    spin = [run["spin"] for run in runs]
    print(f"\nshm wait=spin, 64 B, cross-cpu: p50 {fig([s['rtt_us'] for s in spin], '{:.2f}')} us, "
          f"{fig([s['rtt_us'] / s['line_us'] for s in spin], '{:.2f}x')} of the cache-line ping-pong "
          f"({fig([s['line_us'] for s in spin], '{:.2f}')} us)")
    print("\nround trip: lower is better, 1.00x = the plain loop; stream: higher is better."
          + (f" Median of {a.repeat} runs (range)." if a.repeat > 1 else ""))


def sweep(a, binaries, c_loop):
    out = {name: {"rows": []} for name, _ in binaries}
    for placement in a.placement.split(","):
        for t in a.transports.split(","):
            rows = {name: {"transport": t, "placement": placement} for name, _ in binaries}
            for workload, size in (("pingpong", 64), ("stream", 60000 if t == "udp" else 65536)):
                cpus = None
                for name, path in binaries:
                    with tempfile.NamedTemporaryFile(suffix=".json") as f:
                        sh([path, "run", workload, "-t", t, "--size", str(size), "--duration", a.duration + "s",
                            "--placement", placement, "--json", f.name])
                        case = json.load(open(f.name))["cases"][0]
                    s = case["summary"]
                    cpus = case["config"]["cpus"]
                    if workload == "pingpong":
                        rows[name].update(rtt_us=p50(s) / 1e3, floor_rtt_us=s["floor_p50_ns"] / 1e3)
                    else:
                        # msgperf reports MiB/s, the C loop MB/s (10^6 B/s): both as MB/s.
                        mb = 1.048576
                        rows[name].update(mbs=s["mib_per_s"] * mb, floor_mbs=s["floor_mib_per_s"] * mb)
                c = dict(kv.split("=") for kv in sh([c_loop, workload, t, str(size), a.duration, str(cpus[0]), str(cpus[1])]).split())
                for name, _ in binaries:
                    if workload == "pingpong":
                        rows[name].update(c_rtt_us=int(c["p50_ns"]) / 1e3)
                    else:
                        rows[name].update(c_mbs=float(c["mb_per_s"]))
            for name, _ in binaries:
                out[name]["rows"].append(rows[name])
    for name, path in binaries:
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            sh([path, "run", "pingpong", "-t", "shm", "--opt", "wait=spin", "--size", "64", "--duration",
                a.duration + "s", "--placement", "cross-cpu", "--no-floor", "--json", f.name])
            rtt = p50(json.load(open(f.name))["cases"][0]["summary"]) / 1e3
        text = sh([path, "floor", "-t", "shm", "--size", "64", "--stream-size", "64", "--duration",
                   a.duration + "s", "--placement", "cross-cpu"])
        line = next(l for l in text.splitlines() if "cache-line ping-pong" in l)
        # floor | loop | size | cpus | peer | samples | min | p50 | ...
        cells = re.split(r"\s{2,}", line.strip())
        out[name]["spin"] = {"rtt_us": rtt, "line_us": float(cells[7])}
    return out


if __name__ == "__main__":
    sys.exit(benchlib.recorded("ratios", main))
