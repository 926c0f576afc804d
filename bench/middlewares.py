#!/usr/bin/env python3
"""msgperf's middleware benchmark: ratios taken in one run, never absolute times.

For each adapter built in (Cargo features), pinned the same way, back to back: msgperf's
ping-pong (64 B and 4 KiB), a 64 B ping-pong that times its calls in 1 round trip of
`--stamp-every` (`--time-calls-every`), stream (64 B and 64 KiB) and a 64 B stream that stamps 1
message in `--stamp-every`, each divided by the floor that msgperf measures in the same
invocation, the plainest loop written with the same client library and the same settings (so
`/ floor` is what the harness costs on that middleware). The brokered
middlewares run through the broker that msgperf starts per case.

Where a middleware has a tool of its own with the same work, its folder has a benchmark part
(`src/transport/NAME/bench.py`, read by bench/benchlib.py) that runs the tool beside msgperf
and prints tables of its own: what it compares and how is in its docstring. Where none does
(or the tool prints no distribution), the floor loop stands for it.
With --spin-pairs N each repetition also takes N pairs of msgperf's shm round trip (spinning, 64
B, two CPUs) against the hardware's cache-line ping-pong, as bench/ratios.py does: the adapters
at the low end of the table and shm's distance from the hardware, in one run.
With --repeat N the whole sweep runs N times and each ratio is the median of the N (range).

Usage: bench/middlewares.py [--transports NAME,...] [--duration 2] [--placement cross-cpu,same-cpu]
                            [--repeat 1] [--stamp-every 64] [--spin-pairs 0] [--msgperf PATH]
                            [and each benchmark part's options]
(the default transports: every adapter with a floor loop).
"""
import argparse, statistics, sys

import benchlib
from benchlib import adapters, bench_part, build_msgperf, has_floor, msgperf_run


def main():
    parts = {t: bench_part(t) for t in adapters()}
    ap = argparse.ArgumentParser()
    ap.add_argument("--transports", default=",".join(t for t in adapters() if has_floor(t)))
    ap.add_argument("--duration", default="2")
    ap.add_argument("--placement", default="cross-cpu,same-cpu")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--stamp-every", type=int, default=64,
                    help="the sampled 64 B stream stamps and times 1 message in this many; the "
                         "sampled 64 B ping-pong times the calls of 1 round trip in this many")
    ap.add_argument("--spin-pairs", type=int, default=0,
                    help="pairs of shm's spinning round trip against the cache line per repetition (0: none)")
    ap.add_argument("--msgperf", help="the msgperf binary (default: build this tree with every middleware)")
    for part in parts.values():
        if hasattr(part, "add_arguments"):
            part.add_arguments(ap)
    a = ap.parse_args()
    msgperf = a.msgperf or build_msgperf()
    chosen = a.transports.split(",")
    # Each chosen transport's benchmark part, with what it keeps between its calls.
    contexts = {}
    for t in chosen:
        part = parts.get(t) or bench_part(t)
        if part:
            ctx = dict(args=a, msgperf=msgperf, transport=t)
            if hasattr(part, "prepare"):
                part.prepare(ctx)
            contexts[t] = (part, ctx)
    runs, spins = [], []
    for _ in range(a.repeat):
        runs.append(sweep(a, msgperf, contexts))
        if a.spin_pairs:
            spins.append(benchlib.shm_spin_pairs(msgperf, a.spin_pairs))
    tables = [(t, table) for t, (part, _) in contexts.items() for table in getattr(part, "TABLES", [])]
    tool_rows = {table["workload"] for _, table in tables if "workload" in table}

    def fig(values, fmt):
        values = [v for v in values if v]
        if not values:
            return "-"
        mid = fmt.format(statistics.median(values))
        return mid if len(values) == 1 else f"{mid} ({fmt.format(min(values))}-{fmt.format(max(values))})"

    head = ("transport", "placement", "workload", "size [B]", "msgperf", "floor", "/ floor")
    print(" | ".join(head))
    print(" | ".join("---" for _ in head))
    for i, r in enumerate(runs[0]):
        if r["workload"] in tool_rows:
            continue
        rs = [run[i] for run in runs]
        unit = "us p50" if r["workload"].startswith("pingpong") else "MiB/s"
        print(" | ".join([r["transport"], r["placement"], r["workload"], str(r["size"]),
                          fig([x["ours"] for x in rs], "{:.2f}") + " " + unit,
                          fig([x["floor"] for x in rs], "{:.2f}") + " " + unit,
                          fig([x["ratio"] for x in rs], "{:.2f}x")]))
    print("\nping-pong: p50 / floor p50 (lower is better); stream: MiB/s / floor MiB/s (higher is better)."
          + (f" Median of {a.repeat} runs (range)." if a.repeat > 1 else ""))

    # Where a stream's time per message goes: the difference from the floor, measured, beside
    # what msgperf's measuring costs a role per message (from this run's clock calibration).
    small = [i for i, r in enumerate(runs[0]) if r["workload"].startswith("stream") and r["size"] == 64
             and r["transport"] not in tool_rows]
    if small:
        print("\n64 B streams, time per message: the floor sends and receives; msgperf also writes each "
              f"message's header (sequence number, send time), its writer reads the clock {WRITER_MEASURING[0]}x "
              f"and records {WRITER_MEASURING[1]} histogram samples, its reader {READER_MEASURING[0]}x and "
              f"{READER_MEASURING[1]}, for every message (`stream`) or 1 in {a.stamp_every} "
              f"(`stream 1/{a.stamp_every}`, --stamp-every); its reader checks every message's length as "
              "sent and as declared, its tail and its sequence number, and counts it (a floor takes each message and counts it; "
              "one that reads in place reads its first and last 8 bytes). "
              "Where a role's CPU is full (its own thread and the client's I/O thread), that measuring "
              "adds to each message's time.\n")
        head = ("transport", "placement", "workload", "floor [ns/msg]", "msgperf [ns/msg]", "more [ns/msg]",
                "writer measuring [ns/msg]", "reader measuring [ns/msg]")
        print(" | ".join(head))
        print(" | ".join("---" for _ in head))
        for i in small:
            rs = [run[i] for run in runs]
            more = [x["ours_ns"] - x["floor_ns"] for x in rs if x["ours_ns"] and x["floor_ns"]]
            print(" | ".join([rs[0]["transport"], rs[0]["placement"], rs[0]["workload"],
                              fig([x["floor_ns"] for x in rs], "{:.0f}"), fig([x["ours_ns"] for x in rs], "{:.0f}"),
                              fig(more, "{:.0f}") if more else "-",
                              fig([x["writer_ns"] for x in rs], "{:.0f}"), fig([x["reader_ns"] for x in rs], "{:.0f}")]))
        print("\nmeasuring = (clock reads x a stamp's cost + records x a record's cost) / messages a stamp, "
              "both costs measured by each run (a stamp from the TSC the roles share where msgperf used it) "
              f"(median {statistics.median(x['clock_ns'] for run in runs for x in run if 'clock_ns' in x):.1f} ns "
              f"and {statistics.median(x['record_ns'] for run in runs for x in run if 'record_ns' in x):.1f} ns).")

    def against(transport, workload, title, head, fmt, unit=""):
        """msgperf beside a middleware's own tool, row by row."""
        rows = [i for i, r in enumerate(runs[0]) if r["transport"] == transport and r["workload"] == workload]
        if not rows:
            return
        print(f"\n{title}\n")
        print(" | ".join(head))
        print(" | ".join("---" for _ in head))
        for i in rows:
            rs = [run[i] for run in runs]
            r = rs[0]
            print(" | ".join([r["placement"], str(r.get("label", r["size"])),
                              fig([x["ours"] for x in rs], fmt) + unit,
                              fig([x["tool"] for x in rs], fmt) + unit,
                              fig([x["ratio"] for x in rs], "{:.2f}x")]))

    def cpu(transport, workloads, title, tools):
        """msgperf's roles' CPU a message beside the tool's processes', from the same runs."""
        rows = [i for i, r in enumerate(runs[0]) if r["transport"] == transport and r["workload"] in workloads]
        if not rows:
            return
        print(f"\n{title}\n")
        head = ("placement", "work", "size [B]", "writer", "reader", "broker", *tools, "broker")
        print(" | ".join(head))
        print(" | ".join("---" for _ in head))
        for i in rows:
            rs = [run[i] for run in runs]
            print(" | ".join([rs[0]["placement"], rs[0]["workload"], str(rs[0]["size"])]
                             + [fig([x["ours_cpu"][k] for x in rs], "{:.2f}") for k in range(3)]
                             + [fig([x["cpu"][k] for x in rs], "{:.2f}") for k in range(3)]))

    for t, table in tables:
        title = table["title"]
        if callable(title):
            title = title(contexts[t][1])
        if "cpu" in table:
            cpu(t, table["cpu"], title, table["tools"])
        else:
            against(t, table["workload"], title, table["head"], table["fmt"], table.get("unit", ""))
    if spins:
        benchlib.print_shm_spin(spins)


# What msgperf's stream does per message beyond the floor's plain send and receive (see
# src/workload/oneway.rs): the writer reads the clock before and after its send and records
# the call's time (a histogram and its interval's); the reader reads the clock before and
# after its read and records the read call and the one-way latency (three histograms).
WRITER_MEASURING = (2, 2)
READER_MEASURING = (2, 3)


def per_message(size, ours_mib, floor_mib, clock, stamps, every):
    """A stream's time per message, msgperf's and the floor's (measured), and what msgperf's
    measuring costs each role per message (this run's stamp and histogram record costs; 1
    message in `every` is stamped)."""
    ns = lambda mib: size / (mib * 2**20) * 1e9 if mib else None
    stamp = clock.get("shared_tsc_stamp_cost_ns") if stamps == "tsc" else None
    stamp = stamp or clock["read_cost_ns"]
    cost = lambda reads, records: (reads * stamp + records * clock["record_cost_ns"]) / every
    return dict(ours_ns=ns(ours_mib), floor_ns=ns(floor_mib),
                writer_ns=cost(*WRITER_MEASURING), reader_ns=cost(*READER_MEASURING),
                clock_ns=stamp, record_ns=clock["record_cost_ns"])


def sweep(a, msgperf, contexts):
    rows = []
    for placement in a.placement.split(","):
        for t in a.transports.split(","):
            part, ctx = contexts.get(t, (None, None))

            def add(found):
                rows.extend(dict(r, transport=t, placement=placement) for r in found)

            every = a.stamp_every
            for label, workload, sizes, extra in (
                    ("pingpong", "pingpong", "64,4k", []),
                    (f"pingpong 1/{every}", "pingpong", "64", ["--time-calls-every", str(every)]),
                    ("stream", "stream", "64,64k", []),
                    (f"stream 1/{every}", "stream", "64", ["--stamp-every", str(every)])):
                run = msgperf_run(msgperf, workload, t, ["--size", sizes, "--duration", a.duration + "s",
                                                         "--placement", placement] + extra)
                clock = run["environment"]["clock"]
                for c in run["cases"]:
                    s = c["summary"]
                    size = c["config"]["size_bytes"]
                    # A floor that could not be measured is null (and shown as `-`).
                    if workload == "pingpong":
                        ours, floor = s["latency"]["p50_ns"] / 1e3, (s["floor_p50_ns"] or 0) / 1e3
                    else:
                        ours, floor = s["mib_per_s"], s["floor_mib_per_s"]
                    row = dict(workload=label, size=size, ours=ours, floor=floor,
                               ratio=ours / floor if floor else None)
                    if workload == "stream":
                        row.update(per_message(size, ours, floor, clock, c.get("stamps"),
                                               every if extra else 1))
                    add([row])
                    # A tool compares with the stream that times every message.
                    if part and hasattr(part, "after_case") and not extra:
                        add(part.after_case(ctx, workload, c, placement))
            if part and hasattr(part, "tools"):
                add(part.tools(ctx, placement))
    return rows


if __name__ == "__main__":
    sys.exit(benchlib.recorded("middlewares", main))
