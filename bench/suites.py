#!/usr/bin/env python3
"""The source reports rerun: `msgperf suite NAME` for each suite named (all by default), its
whole output recorded with the date and the machine.
Usage: bench/suites.py [NAME ...] [--duration 1s]
"""
import argparse, subprocess, sys

import benchlib


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*")
    ap.add_argument("--duration", default="1s")
    a = ap.parse_args()
    msgperf = benchlib.build_msgperf()
    names = a.names or [l.split()[0] for l in benchlib.sh([msgperf, "suite", "--list"]).splitlines()]
    for name in names:
        r = subprocess.run([msgperf, "suite", name, "--duration", a.duration],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"msgperf suite {name} failed ({r.returncode}): {r.stderr[-2000:]}", file=sys.stderr)
            return r.returncode
        print(f"## `msgperf suite {name} --duration {a.duration}`\n\n```text\n{r.stdout.rstrip()}\n```\n")
    return 0


if __name__ == "__main__":
    sys.exit(benchlib.recorded("suites", main))
