#!/usr/bin/env python3
"""msgperf's benchmark: ratios taken in one run, never absolute times.

For each OS transport and placement it runs, back to back:
  msgperf run pingpong (64 B) and stream (64 KiB writes; 60000 B for udp, whose datagrams stop
  at 65507 B), each with its own floor measured in the same invocation, then bench/plain_loop.c,
  the same loop written in plain C, pinned the same way.
It prints msgperf's median round trip / floor's and / C's, and msgperf's stream MB/s / floor's
and / C's. Then shm's round trip with spinning waits between two CPUs against the hardware's
cache-line ping-pong (`msgperf floor`) measured just before and after it, in several short
pairs (--spin-pairs), keeping the pairs during which the vCPUs stayed put.
With --repeat N the whole sweep runs N times and each ratio is the median of the N (with their
range), since this shared VM moves single runs by several percent.
With --compare OTHER_BINARY, every msgperf run is also taken with that msgperf (an older build,
say), alternating with this one, each run's JSON kept in a directory per build; `msgperf compare
OTHER_DIR THIS_DIR` then gives each figure's change, its interval and a verdict over the
repetitions (it needs --repeat 5 for a verdict), and the ratios table is printed for each build.
A build old enough to write another JSON layout is refused by `compare`; its ratios to the floor
are then compared here, with the same rules (noise band, an exact Mann-Whitney test).
Usage: bench/ratios.py [--duration 2] [--placement cross-cpu,same-cpu] [--repeat 1] [--spin-pairs 7]
                       [--msgperf PATH] [--compare PATH]
"""
import argparse, itertools, json, os, statistics, subprocess, sys, tempfile

import benchlib
from benchlib import median_range as fig

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
    ap.add_argument("--spin-pairs", type=int, default=7,
                    help="shm-against-cache-line pairs per repetition (the median of the kept ones)")
    ap.add_argument("--msgperf", help="the msgperf binary (default: build this tree)")
    ap.add_argument("--compare", help="another msgperf binary measured in the same sweep")
    a = ap.parse_args()
    loops = ("pipe", "uds", "tcp", "udp")
    other = [t for t in a.transports.split(",") if t not in loops]
    if other:
        ap.error(f"--transports {','.join(other)}: the plain C loop has {', '.join(loops)} only "
                 "(shm is always measured, against the cache line: --spin-pairs)")
    msgperf = a.msgperf
    if not msgperf:
        sh(["cargo", "build", "--release", "--quiet", "--manifest-path", os.path.join(root, "Cargo.toml")])
        msgperf = os.path.join(root, "target", "release", "msgperf")
    binaries = [("this msgperf", msgperf)] + ([("compared", a.compare)] if a.compare else [])
    c_loop = os.path.join(tempfile.gettempdir(), "msgperf_plain_loop")
    sh(["gcc", "-O2", "-o", c_loop, os.path.join(here, "plain_loop.c")])
    with tempfile.TemporaryDirectory() as kept:
        dirs = {name: os.path.join(kept, str(i)) for i, (name, _) in enumerate(binaries)}
        for d in dirs.values():
            os.mkdir(d)
        runs = [sweep(a, binaries, c_loop, rep, dirs) for rep in range(a.repeat)]
        for name, path in binaries:
            print(f"\n{name}: {path}\n")
            table(a, [r[name] for r in runs])
        if a.compare:
            print(f"\n`msgperf compare` of the compared build (BASE) and this one (NEW), "
                  f"{a.repeat} alternated runs each:\n")
            r = subprocess.run([msgperf, "compare", dirs["compared"], dirs["this msgperf"],
                                "--allow-different"], capture_output=True, text=True,
                               env=dict(os.environ, COLUMNS="200"))
            print("```text\n" + (r.stdout + r.stderr).strip() + "\n```")
            if r.returncode != 0:
                # An older build writes an older JSON layout, which `compare` refuses: the
                # ratios to the floor, which both builds' runs above give, are compared here.
                print("\nSo the two builds' ratios to their floors (measured in the same runs) "
                      "are compared here instead:\n")
                compare_ratios([r["compared"] for r in runs], [r["this msgperf"] for r in runs])


def mann_whitney_p(xs, ys):
    """Two-sided exact Mann-Whitney p-value (small samples: every split of the pooled ranks)."""
    pooled = sorted(xs + ys)
    rank = {v: statistics.mean(i + 1 for i, w in enumerate(pooled) if w == v) for v in pooled}
    ranks = [rank[v] for v in pooled]
    u = lambda rs: sum(rs) - len(xs) * (len(xs) + 1) / 2
    observed = u([rank[v] for v in xs])
    centre = len(xs) * len(ys) / 2
    splits = list(itertools.combinations(ranks, len(xs)))
    extreme = sum(1 for c in splits if abs(u(c) - centre) >= abs(observed - centre) - 1e-9)
    return extreme / len(splits)


def compare_ratios(base_runs, new_runs, noise=0.03):
    """Per row and figure: each build's median ratio to its floor, the change, and a verdict as
    `msgperf compare` gives one: slower/faster when the change is beyond the noise band and an
    exact Mann-Whitney test over the repetitions agrees (p < 0.05), same inside the band."""
    print("transport | placement | figure | compared build | this build | change | verdict")
    print(" | ".join("---" for _ in range(7)))
    for i, row in enumerate(base_runs[0]["rows"]):
        for figure, key, floor, lower_better in (("round trip / floor", "rtt_us", "floor_rtt_us", True),
                                                 ("stream / floor", "mbs", "floor_mbs", False)):
            xs = [run["rows"][i][key] / run["rows"][i][floor] for run in base_runs]
            ys = [run["rows"][i][key] / run["rows"][i][floor] for run in new_runs]
            change = statistics.median(ys) / statistics.median(xs) - 1
            p = mann_whitney_p(xs, ys) if len(xs) >= 5 and len(ys) >= 5 else 1.0
            if abs(change) <= noise:
                verdict = "same"
            elif p < 0.05:
                verdict = "slower" if (change > 0) == lower_better else "faster"
            else:
                verdict = "inconclusive"
            print(f"{row['transport']} | {row['placement']} | {figure} | {fig(xs, '{:.2f}x')} | "
                  f"{fig(ys, '{:.2f}x')} | {change:+.1%} | {verdict}")


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
    benchlib.print_shm_spin([run["spin"] for run in runs])
    print("\nround trip: lower is better, 1.00x = the plain loop; stream: higher is better."
          + (f" Median of {a.repeat} runs (range)." if a.repeat > 1 else ""))


def sweep(a, binaries, c_loop, rep, dirs):
    out = {name: {"rows": []} for name, _ in binaries}
    for placement in a.placement.split(","):
        for t in a.transports.split(","):
            rows = {name: {"transport": t, "placement": placement} for name, _ in binaries}
            for workload, size in (("pingpong", 64), ("stream", 60000 if t == "udp" else 65536)):
                cpus = None
                for name, path in binaries:
                    out_file = os.path.join(dirs[name], f"{rep:03}-{placement}-{t}-{workload}.json")
                    sh([path, "run", workload, "-t", t, "--size", str(size), "--duration", a.duration + "s",
                        "--placement", placement, "--json", out_file])
                    case = json.load(open(out_file))["cases"][0]
                    s = case["summary"]
                    cpus = case["config"]["cpus"]
                    if workload == "pingpong":
                        rows[name].update(rtt_us=benchlib.p50(s) / 1e3, floor_rtt_us=s["floor_p50_ns"] / 1e3)
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
        out[name]["spin"] = benchlib.shm_spin_pairs(path, a.spin_pairs)
    return out


if __name__ == "__main__":
    sys.exit(benchlib.recorded("ratios", main))
