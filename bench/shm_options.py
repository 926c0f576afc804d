#!/usr/bin/env python3
"""msgperf's shm benchmark: what each option costs, measured in one run.

Ping-pong of 64 B messages for every wait strategy and buffer mode (roles on two CPUs, and on
one), then streams of 64 B and 64 KiB, copying and zero-copy, and a 64 B stream stamped from
the TSC the roles share against one stamped from CLOCK_MONOTONIC. Prints a Markdown table with the
median and p99 round trip, the CPU each round trip costs both roles, and the ratios to the
floors: the hardware's (`msgperf floor`: cache-line ping-pong for round trips, one CPU's memcpy
bandwidth for streams) and shm's floor: its own rings with the same wait strategy and capacity,
a copy in and out and none of msgperf's work (no header, timestamp, check or histogram).
shm against its peer among the adapters is `bench/middlewares.py --transports` with that
adapter's name, which runs the adapter's own benchmark part.
The "vs hardware" column of round trips divides by one cache line measured at the start, while a
VM's vCPUs move between sitting near each other and apart every few seconds: shm's ratio to the
cache line measured just before and after it, in pairs, is bench/ratios.py's.
Usage: bench/shm_options.py [--duration 1]
"""
import argparse, json, os, re, subprocess, sys, tempfile

import benchlib

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

def sh(args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout

def run(msgperf, workload, size, placement, opts, duration, transport="shm", stamps=""):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        args = [msgperf, "run", workload, "-t", transport, "--size", str(size), "--duration", duration + "s",
                "--placement", placement, "--json", f.name]
        for o in opts:
            args += ["--opt", o]
        subprocess.run(args, check=True, capture_output=True, text=True,
                       env=dict(os.environ, MSGPERF_STAMPS=stamps))
        return json.load(open(f.name))["cases"]

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", default="1")
    a = ap.parse_args()
    sh(["cargo", "build", "--release", "--quiet", "--manifest-path", os.path.join(root, "Cargo.toml")])
    msgperf = os.path.join(root, "target", "release", "msgperf")
    floor = sh([msgperf, "floor", "-t", "shm", "--placement", "cross-cpu", "--duration", a.duration + "s"])
    cache_line_us = float(re.search(r"cache-line ping-pong\s+8 B\s+\S+\s+\S+\s+\d+\s+\S+\s+(\S+)", floor).group(1))
    memcpy_mb = float(re.search(r"memcpy\s+64 KiB\s+.*?(\d+\.\d)\s*$", floor, re.M).group(1))
    print(f"hardware floor: cache-line ping-pong p50 {cache_line_us:.2f} us (cross-cpu), memcpy {memcpy_mb:.0f} MB/s (one CPU)\n")
    print("| case | cpus | p50 [us] | p99 [us] | msgs/s | MiB/s | CPU [us/msg, both roles] | vs shm floor | vs hardware |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for placement in ("cross-cpu", "same-cpu"):
        waits = "spin,spin-yield,block" if placement == "cross-cpu" else "spin-yield,block"
        for c in run(msgperf, "pingpong", 64, placement, ["buffer=queue,latest", "wait=" + waits], a.duration):
            row(c, cache_line_us, memcpy_mb)
    for size in (64, 65536):
        for c in run(msgperf, "stream", size, "cross-cpu", ["zero-copy=false,true"], a.duration):
            row(c, None, memcpy_mb)
    # A 64 B stream's one-way stamps, from the TSC the roles share and from CLOCK_MONOTONIC
    # (what two clock reads a message at each end cost it), alternated run by run: one run's
    # placement noise is larger than the difference.
    rates = {"tsc": [], "CLOCK_MONOTONIC": []}
    for _ in range(5):
        for stamps in ("", "monotonic"):
            c = run(msgperf, "stream", 64, "cross-cpu", [], a.duration, stamps=stamps)[0]
            rates[c["stamps"]].append(c["summary"]["msgs_per_s"] / 1e6)
    med = {k: sorted(v)[len(v) // 2] for k, v in rates.items()}
    print("\n64 B stream, copying, 5 runs each alternated: "
          + ", ".join(f"stamped from {k} {med[k]:.2f} ({min(v):.2f}-{max(v):.2f}) M msgs/s" for k, v in rates.items())
          + f"; the shared TSC's median is {med['tsc'] / med['CLOCK_MONOTONIC']:.2f}x CLOCK_MONOTONIC's")
    print("\nround trips: p50 / floor p50 (lower is better), the hardware's being the cache-line ping-pong"
          " measured once, at the start (the vCPUs may have moved since: bench/ratios.py pairs them);"
          " streams: MB/s / floor MB/s (higher is better), the hardware's being one CPU's memcpy.")

def row(c, cache_line_us, memcpy_mb):
    s = c["summary"]
    d = s["latency"]
    cpu = sum(r["cpu_user_ns_per_msg"] + r["cpu_sys_ns_per_msg"] for r in s["roles"]) / 1e3
    p = [d["p50_ns"], d["p90_ns"], d["p99_ns"]]
    rtt = s["latency_kind"] == "round trip"
    name = f'{c["config"]["workload"]} {s["size_bytes"]} B {s["options"]}'
    if rtt:
        vs_cl = f'{p[0] / 1e3 / cache_line_us:.2f}x' if cache_line_us and s["cpus"] != "0/0" else "-"
    else:
        vs_cl = f'{s["mib_per_s"] * 1.048576 / memcpy_mb:.2f}x' 
    print(f'| {name} | {s["cpus"]} | {p[0] / 1e3:.2f} | {(p[2] or 0) / 1e3:.2f} | {s["msgs_per_s"]:.0f} | {s["mib_per_s"]:.0f} | '
          f'{cpu:.2f} | {"-" if s["vs_floor"] is None else format(s["vs_floor"], ".2f") + "x"} | {vs_cl} |')

if __name__ == "__main__":
    sys.exit(benchlib.recorded("shm_options", main))
