#!/usr/bin/env python3
"""shm's ring modelled in plain C (bench/ring_model.c) against the cache line: the median round
trip of each kind (line, two lines, a ring of cells as shm lays it out, with its reader's
position stored, with a 60 B copy in and out, and that ring clearing 32 cells ahead in batches
as shm's did before), each round of six kinds run in turn in short
slices, grouped by the placement the round's cache line shows (near host cores under 250 ns,
far ones above). Beside bench/ratios.py's shm against the cache line, it says how much of shm's
gap the ring's shape explains (the model) and how much msgperf's ring code does (its floor).
Usage: bench/ring_model.py [--rounds 150] [--slice-ms 20]
"""
import argparse, os, statistics, subprocess, sys, tempfile

import benchlib

here = os.path.dirname(os.path.abspath(__file__))
KINDS = ["line", "twoline", "ring", "ringseq", "ringcopy", "ringbatch"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=150)
    ap.add_argument("--slice-ms", type=float, default=20)
    a = ap.parse_args()
    exe = os.path.join(tempfile.gettempdir(), "msgperf_ring_model")
    subprocess.run(["gcc", "-O2", "-pthread", "-o", exe, os.path.join(here, "ring_model.c")], check=True)
    out = subprocess.run([exe, str(a.rounds), str(a.slice_ms)], check=True, capture_output=True,
                         text=True, timeout=60 + a.rounds * len(KINDS) * a.slice_ms / 1000 * 3).stdout
    rows = [list(map(int, l.split()[1:])) for l in out.splitlines()[1:]]
    print("placement | rounds | " + " | ".join(f"{k} [ns]" for k in KINDS)
          + " | ringcopy / line | ringbatch / line")
    print(" | ".join(["---"] * (len(KINDS) + 4)))
    for name, keep in (("near", lambda r: r[0] < 250), ("far", lambda r: r[0] >= 250)):
        group = [r for r in rows if keep(r)]
        if not group:
            continue
        med = [statistics.median(r[i] for r in group) for i in range(len(KINDS))]
        print(f"{name} | {len(group)} | " + " | ".join(f"{m:.0f}" for m in med) +
              f" | {med[4] / med[0]:.2f}x | {med[5] / med[0]:.2f}x")
    print(f"\nmedian of each slice's median round trip (two pinned threads, CPUs 0 and 1, "
          f"{a.slice_ms:g} ms slices, the first tenth of each slice left out), each kind's "
          "median over the rounds whose line fell in that placement")
    return 0


if __name__ == "__main__":
    sys.exit(benchlib.recorded("ring_model", main))
