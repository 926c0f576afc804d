#!/usr/bin/env python3
"""Roles on other hosts, measured on this machine with hosts made of namespaces:

1. The clock: a reader in a time namespace whose monotonic clock is set N seconds off (through
   `ip netns exec NS unshare --time --monotonic N`): the offset msgperf measures, its error
   against N, and the error as a share of the bound msgperf reports (at most 1 if honest).
2. The link: one-way latency (stream, 1 kHz) and round trips (pingpong), the far role on a
   namespace host (`--host b=netns`: veth and bridge) against the same case on loopback, in
   one run each, as a ratio.

    python3 bench/hosts.py [--no-write]   (as root: it makes namespaces)
"""
import json, os, subprocess, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import build_msgperf, recorded, sh

NS = f"mpbench{os.getpid()}"


def ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True)


def run(msgperf, args):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        sh([msgperf, "run", *args, "--json", f.name])
        return json.load(open(f.name))["cases"]


def clock(msgperf):
    print("| offset set (s) | measured (s) | error (us) | bound (us) | error / bound | probes |")
    print("| --- | --- | --- | --- | --- | --- |")
    for n in [0, 5, -3, 3600]:
        launcher = f"b=ip netns exec {NS} unshare --time --fork --kill-child --monotonic {n} --"
        c = run(msgperf, ["stream", "-t", "tcp", "--rate", "1khz", "--duration", "2s",
                          "--host", launcher, "--place", "reader=b"])[0]
        fit = c["roles"][1]["host"]["clock"]
        err = abs(fit["offset_ns"] - n * 1e9)
        print(f"| {n:+d} | {fit['offset_ns'] / 1e9:+.6f} | {err / 1e3:.1f} | "
              f"{fit['bound_ns'] / 1e3:.1f} | {err / fit['bound_ns']:.2f} | {fit['probes']} |")


def link(msgperf):
    print("\n| case | loopback p50 (us) | namespace host p50 (us) | ratio |")
    print("| --- | --- | --- | --- |")
    for workload, t, far, extra in [
        ("pingpong", "tcp", "responder", ["--duration", "2s"]),
        ("pingpong", "udp", "responder", ["--duration", "2s"]),
        ("stream", "tcp", "reader", ["--rate", "1khz", "--duration", "2s"]),
        ("stream", "udp", "reader", ["--rate", "1khz", "--duration", "2s"]),
    ]:
        args = [workload, "-t", t, "--no-floor", *extra]
        here = run(msgperf, args)[0]
        there = run(msgperf, [*args, "--host", "b=netns", "--place", f"{far}=b"])[0]
        a, b = summary_p50(here), summary_p50(there)
        print(f"| {workload} {t} 64 B | {a:.1f} | {b:.1f} | {b / a:.2f}x |")


def summary_p50(case):
    """p50 of the case's latency (its workload's metric, every role's histogram added), us."""
    from hdrh.histogram import HdrHistogram
    metric = case["latency_metric"]
    merged = None
    for r in case["roles"]:
        enc = r["histograms"].get(metric)
        if enc:
            h = HdrHistogram.decode(enc)
            merged = h if merged is None else (merged.add(h) or merged)
    return merged.get_value_at_percentile(50) / 1e3


def main():
    msgperf = build_msgperf("")
    ip("netns", "add", NS)
    try:
        ip("link", "add", f"{NS}a", "type", "veth", "peer", "name", f"{NS}b")
        ip("link", "set", f"{NS}b", "netns", NS)
        ip("addr", "add", "10.252.9.1/24", "dev", f"{NS}a")
        ip("link", "set", f"{NS}a", "up")
        ip("-n", NS, "addr", "add", "10.252.9.2/24", "dev", f"{NS}b")
        ip("-n", NS, "link", "set", f"{NS}b", "up")
        ip("-n", NS, "link", "set", "lo", "up")
        print("A far clock set off by a time namespace (stream tcp 1 kHz, 2 s, the reader "
              "there):\n")
        clock(msgperf)
    finally:
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    print("\nThe far role on a namespace host against loopback, one run each (64 B, cross-cpu):\n")
    link(msgperf)
    return 0


if __name__ == "__main__":
    sys.exit(recorded("hosts", main))
