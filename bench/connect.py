#!/usr/bin/env python3
"""The connect workload's benchmark: msgperf's connection rate against bench/connect_loop.c,
the same loop in plain C (connect, one exchange, close; an accepting thread on the other CPU),
taken back to back in one run, pinned the same way. Prints msgperf's connections/s, C's, and
their ratio (median of --repeat runs, with the range).
Usage: bench/connect.py [--duration 2] [--transports tcp,uds] [--size 64] [--repeat 3]
"""
import argparse, json, os, statistics, subprocess, tempfile

import sys

import benchlib

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)


def sh(args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def msgperf_rate(msgperf, t, a):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        sh([msgperf, "run", "connect", "-t", t, "--size", a.size, "--duration", f"{a.duration}s",
            "--pin", "0,1", "--json", out])
        role = json.load(open(out))["cases"][0]["roles"][0]
        return role["counters"]["messages_sent"] / (role["measured_ns"] / 1e9)


def c_rate(c_loop, t, a):
    line = sh([c_loop, t, a.size, a.duration, "0", "1"])
    return float(line.split()[0].split("=")[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", default="2")
    ap.add_argument("--transports", default="tcp,uds")
    ap.add_argument("--size", default="64")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    sh(["cargo", "build", "--release", "--quiet", "--manifest-path", os.path.join(root, "Cargo.toml")])
    msgperf = os.path.join(root, "target", "release", "msgperf")
    c_loop = os.path.join(tempfile.gettempdir(), "msgperf_connect_loop")
    sh(["gcc", "-O2", "-pthread", "-o", c_loop, os.path.join(here, "connect_loop.c")])
    print("| transport | msgperf [conn/s] | C loop [conn/s] | msgperf / C |")
    print("| --- | --- | --- | --- |")
    for t in a.transports.split(","):
        ours, theirs, ratios = [], [], []
        for _ in range(a.repeat):
            m, c = msgperf_rate(msgperf, t, a), c_rate(c_loop, t, a)
            ours.append(m)
            theirs.append(c)
            ratios.append(m / c)
        print(f"| {t} | {statistics.median(ours):.0f} | {statistics.median(theirs):.0f} | "
              f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) |")


if __name__ == "__main__":
    sys.exit(benchlib.recorded("connect", main))
