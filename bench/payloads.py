#!/usr/bin/env python3
"""Typed payloads: what each format costs alone (`msgperf run codec`, batch means with no clock
cost, as a ratio to a memcpy of the same bytes on the same CPU), then what marshalling adds to a
round trip over transports (`msgperf run pingpong --payload`), beside each transport's plain
loop at the same message size, taken in the same run.
Usage: bench/payloads.py [--duration 1] [--transports tcp,shm,zenoh] [--types ...]
"""
import argparse, statistics, sys

import benchlib

TYPES = "struct16,struct256,struct4k,array:1000,seq:100,string:256,pointcloud:1000,nml"


def ns(v):
    return "-" if v is None else (f"{v:.0f}" if v >= 100 else f"{v:.1f}")


def figure(case, name):
    for r in case["roles"]:
        for f in r["figures"]:
            if f["name"] == name:
                return f["value"]
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", default="1")
    ap.add_argument("--transports", default="tcp,shm,zenoh")
    ap.add_argument("--types", default=TYPES)
    a = ap.parse_args()
    msgperf = benchlib.build_msgperf()

    print("## Formats alone (`msgperf run codec`, pinned to CPU 0; medians of 9 batch means of 200)\n")
    print("Each format's figures divide by a memcpy of its own mean encoded size, timed the same "
          "way on the same CPU. `in place`: rkyv's validated read of the fields where they lie.\n")
    print("| type | format | encoded [B] | memcpy [ns] | encode [ns] | x memcpy | decode [ns] "
          "| x memcpy | in place [ns] |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for ty in a.types.split(","):
        cases = benchlib.msgperf_cases(msgperf, "codec", "none", [
            "--payload", f"{ty}:*", "--duration", f"{a.duration}s", "--pin", "0,0"])
        for c in cases:
            fmt = c["config"]["effective_params"]["payload"].rsplit(":", 1)[1]
            enc, dec = figure(c, "encode, batch mean"), figure(c, "decode, batch mean")
            copy = figure(c, "memcpy, batch mean")
            access = figure(c, "in place, batch mean")
            print(f"| {ty} | {fmt} | {figure(c, 'encoded size'):.0f} | {ns(copy)} | {ns(enc)} | "
                  f"{enc / copy:.1f}x | {ns(dec)} | {dec / copy:.1f}x | {ns(access)} |")

    print("\n## Round trips with typed bodies (`msgperf run pingpong --payload`, cpus 0/1)\n")
    print("Each round trip encodes and decodes a body at both ends. `floor` is the transport's "
          "plain loop at the same message size, in the same run.\n")
    print("| transport | payload | size [B] | round trip p50 [us] | floor p50 [us] | vs floor "
          "| encode + decode p50, both ends [us] |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    payloads = "struct256:raw,struct256:postcard,struct256:protobuf,struct256:cdr,struct256:rkyv"
    for t in a.transports.split(","):
        cases = benchlib.msgperf_cases(msgperf, "pingpong", t, [
            "--payload", payloads, "--duration", f"{a.duration}s", "--pin", "0,1"])
        for c in cases:
            s = c["summary"]
            m = s["marshalling"]
            coding = 2 * ((m["encode"] or {}).get("p50_ns", 0) + (m["decode"] or {}).get("p50_ns", 0))
            lat = s["latency"]["p50_ns"]
            floor = s.get("floor_p50_ns")
            vs = f"{lat / floor:.2f}x" if floor else "-"
            print(f"| {t} | {m['payload']} | {c['config']['size_bytes']} | {lat / 1e3:.2f} | "
                  f"{'-' if not floor else f'{floor / 1e3:.2f}'} | {vs} | {coding / 1e3:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(benchlib.recorded("payloads", main))
