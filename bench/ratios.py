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
import argparse, itertools, json, math, os, re, statistics, subprocess, sys, tempfile

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
    spin = [run["spin"] for run in runs if run["spin"]["kept"]]
    if spin:
        clock = spin[0]["clock"]
        print(f"\nshm wait=spin, 64 B, cross-cpu: p50 {fig([s['rtt_us'] for s in spin], '{:.2f}')} us, "
              f"{fig([s['ratio'] for s in spin], '{:.2f}x')} of the cache-line ping-pong measured just "
              f"before and after it ({fig([s['line_us'] for s in spin], '{:.2f}')} us; "
              f"{sum(s['kept'] for s in spin)} pairs kept, {sum(r['spin']['dropped'] for r in runs)} dropped "
              f"as the vCPUs moved between them)")
        every = [k for run in runs for k in run["spin"].get("pairs", [])]
        for name, group in (("near", [k for k in every if k["line_us"] < 0.2]),
                            ("far", [k for k in every if k["line_us"] >= 0.2])):
            if group:
                print(f"  vCPUs on {name} host cores (cache line {fig([k['line_us'] for k in group], '{:.2f}')} us): "
                      f"shm {fig([k['rtt_us'] for k in group], '{:.2f}')} us, "
                      f"{fig([k['ratio'] for k in group], '{:.2f}x')}; its ring alone "
                      f"{fig([k['ring_us'] for k in group], '{:.2f}')} us, "
                      f"{fig([k['ring_ratio'] for k in group], '{:.2f}x')}; {len(group)} pairs")
        print(f"the gap in two steps, each measured in the same pair: the ring alone (shm's floor: its "
              f"rings and spin, a 64 B copy in and out, timed as the cache line is) against the cache "
              f"line is what shm's ring costs (a new cache line a message, whose head is cleared "
              f"ahead); msgperf against the ring is what measuring adds: per round trip 5 TSC reads "
              f"({clock.get('interval_read_cost_ns', 0):.0f} ns each here), 7 histogram records "
              f"({clock['record_cost_ns']:.0f} ns each), a header, the checks of length, sequence "
              f"and tail, and the endpoint's calls; the responder's read, TSC read and check lie on "
              f"the round trip, the records after each send mostly overlap the flight")
    else:
        print("\nshm wait=spin: no pair kept (the vCPUs moved during every one)")
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
        out[name]["spin"] = spin_pairs(path, a.spin_pairs)
    return out


def cache_line_us(path):
    """The hardware's cache-line ping-pong between the two CPUs, p50 in us (0.3 s)."""
    text = sh([path, "floor", "-t", "none", "--stream-size", "64", "--duration", "0.3s",
               "--placement", "cross-cpu"])
    line = next(l for l in text.splitlines() if "cache-line ping-pong" in l)
    # floor | loop | size | cpus | peer | samples | min | p50 | ...
    p50 = re.split(r"\s{2,}", line.strip())[7]
    # `-`: no round trip completed (both vCPUs taken): the pair is dropped as unsteady.
    return float(p50) if p50 != "-" else float("nan")


def spin_pairs(path, pairs):
    """shm's spinning round trip (64 B, two CPUs) against the cache-line ping-pong measured just
    before and just after it. This VM's two vCPUs move between host cores every few hundred
    milliseconds, and the cache line's round trip with them (0.05, 0.11-0.14 or 0.33-0.5 us
    here): a ratio only means something when both figures come from the same placement. A pair
    is kept when its two cache-line figures agree within 25% and shm's round trip stayed put
    too (its 100 ms means within 25% of each other); the kept pairs' median is the figure."""
    kept, dropped, clock = [], 0, {}
    for _ in range(pairs):
        before = cache_line_us(path)
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            sh([path, "run", "pingpong", "-t", "shm", "--opt", "wait=spin", "--size", "64", "--duration",
                "0.3s", "--warmup", "0.1s", "--placement", "cross-cpu", "--json", f.name])
            result = json.load(open(f.name))
        case = result["cases"][0]
        rtt = (p50(case["summary"]) or float("nan")) / 1e3
        # The case's floor: shm's ring alone, with none of msgperf's work.
        ring = (case["summary"].get("floor_p50_ns") or float("nan")) / 1e3
        means = next(r["interval_means_ns"] for r in case["roles"] if r["role"]["kind"] == "initiator")
        clock = result["environment"]["clock"]
        after = cache_line_us(path)
        steady = lambda xs: bool(xs) and max(xs) <= 1.25 * min(xs)
        if not (steady([before, after]) and steady(means)) or math.isnan(ring) or math.isnan(rtt):
            dropped += 1
            continue
        line = (before + after) / 2
        kept.append({"rtt_us": rtt, "line_us": line, "ratio": rtt / line, "ring_us": ring,
                     "ring_ratio": ring / line})
    if not kept:
        return {"rtt_us": float("nan"), "line_us": float("nan"), "ratio": float("nan"), "kept": 0,
                "ring_us": float("nan"), "ring_ratio": float("nan"), "dropped": dropped, "clock": clock}
    mid = sorted(kept, key=lambda k: k["ratio"])[len(kept) // 2]
    return dict(mid, kept=len(kept), dropped=dropped, clock=clock, pairs=kept)


if __name__ == "__main__":
    sys.exit(benchlib.recorded("ratios", main))
