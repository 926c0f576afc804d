#!/usr/bin/env python3
"""msgperf's publish/subscribe benchmark (issue 5's "done when"), measured in one run.

1. 1 publisher to 5 subscribers and 5 to 1, 1 kHz per publisher, 200 B, reliable, on uds, tcp,
   udp and shm (wait=block: five subscribers share one CPU), publishers on CPU 0 and subscribers
   on CPU 1, each role a process: deliveries, losses, each subscriber's latency and every role's
   CPU per message.
2. A sweep of 6 sizes x 4 rates (uds): the time its points ask for (warm-up + duration each)
   against the wall time the whole sweep took.
3. Rate error on shm at 1 kHz and 20 kHz.
4. What shm's native fan-out buys: 1 publisher to 5 subscribers as fast as they go (200 B and
   64 KiB, reliable, wait=block), one shared ring against a copy per subscriber
   (`--opt fan-out=copy`): deliveries/s and the publisher's CPU per message.
Usage: bench/pubsub.py [--duration 3]
"""
import argparse, json, os, subprocess, sys, tempfile, time

import benchlib

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(msgperf, args):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        p = subprocess.run([msgperf, "run", *args, "--json", f.name], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"msgperf {' '.join(args)} failed: {p.stderr.strip()}")
        return json.load(open(f.name))["cases"]


def us(ns):
    return "-" if ns is None else f"{ns / 1e3:.1f}"


def fan(msgperf, duration):
    print("| transport | pubs x subs | deliveries | lost | p50 [us] | p99 [us] | max [us] | per subscriber p50 / p99 [us] | publisher CPU [us/msg] | subscriber CPU [us/msg] |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for pubs, subs in ((1, 5), (5, 1)):
        for t, opts in (("uds", []), ("tcp", []), ("udp", []), ("shm", ["wait=block"]),
                        ("shm", ["wait=block", "fan-out=copy"])):
            args = ["pubsub", "-t", t, "--pubs", str(pubs), "--subs", str(subs), "--size", "200",
                    "--rate", "1khz", "--duration", f"{duration}s", "--delivery", "reliable", "--checksum"]
            for o in opts:
                args += ["--opt", o]
            s = run(msgperf, args)[0]["summary"]
            d = s["latency"]
            roles = s["roles"]
            cpu = lambda r: (r["cpu_user_ns_per_msg"] + r["cpu_sys_ns_per_msg"]) / 1e3
            pub = [cpu(r) for r in roles if r["role"].startswith("publisher")]
            sub = [r for r in roles if r["role"].startswith("subscriber")]
            each = ", ".join(f'{us(r["latency"]["percentiles_ns"][0])}/{us(r["latency"]["percentiles_ns"][2])}' for r in sub)
            delivered = sum(r["received"] for r in sub)
            lost = sum(r["lost"] for r in sub)
            name = " ".join([t, *opts])
            print(f'| {name} | {pubs} x {subs} | {delivered} | {lost} | {us(d["percentiles_ns"][0])} | {us(d["percentiles_ns"][2])} | {us(d["max_ns"])} | {each} | '
                  f'{"/".join(f"{c:.1f}" for c in pub)} | {"/".join(f"{cpu(r):.1f}" for r in sub)} |')


def sweep(msgperf, duration):
    sizes, rates, warmup = "200..6400*2", "10hz,100hz,1khz,2khz", 0.2
    start = time.monotonic()
    cases = run(msgperf, ["pubsub", "-t", "uds", "--size", sizes, "--rate", rates, "--duration", f"{duration}s",
                          "--warmup", f"{int(warmup * 1000)}ms"])
    wall = time.monotonic() - start
    asked = len(cases) * (duration + warmup)
    print(f"\nsweep: {len(cases)} points (6 sizes x 4 rates, uds, 1 x 1), asked {asked:.1f} s, took {wall:.1f} s: "
          f"overhead {100 * (wall / asked - 1):.1f}% (target under 20%)")


def rate_error(msgperf, duration):
    print()
    for c in run(msgperf, ["pubsub", "-t", "shm", "--size", "200", "--rate", "1khz,20khz", "--duration", f"{duration}s"]):
        s = c["summary"]
        print(f'shm rate {s["rate_hz"]:.0f} Hz: error {s["rate_error_pct"]:+.3f}% (target under {1 if s["rate_hz"] < 2000 else 5}%), '
              f'sender lag p99 {us(s["send_lag"]["percentiles_ns"][2])} us')


def shared_vs_copy(msgperf, duration):
    print("\n| 1 x 5, as fast as they go | size [B] | deliveries/s | MB/s delivered | publisher CPU [us/msg] |")
    print("| --- | --- | --- | --- | --- |")
    for size in (200, 65536):
        for f in ("shared", "copy"):
            s = run(msgperf, ["pubsub", "-t", "shm", "--subs", "5", "--size", str(size), "--duration", f"{duration}s",
                              "--delivery", "reliable", "--opt", "wait=block", "--opt", f"fan-out={f}", "--no-floor"])[0]["summary"]
            p = next(r for r in s["roles"] if r["role"] == "publisher 1")
            cpu = (p["cpu_user_ns_per_msg"] + p["cpu_sys_ns_per_msg"]) / 1e3
            print(f'| shm fan-out={f} | {size} | {s["msgs_per_s"]:.0f} | {s["mb_per_s"]:.0f} | {cpu:.2f} |')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=3)
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet", "--manifest-path", os.path.join(root, "Cargo.toml")], check=True)
    msgperf = os.path.join(root, "target", "release", "msgperf")
    fan(msgperf, a.duration)
    sweep(msgperf, 1)
    rate_error(msgperf, a.duration)
    shared_vs_copy(msgperf, a.duration)


if __name__ == "__main__":
    sys.exit(benchlib.recorded("pubsub", main))
