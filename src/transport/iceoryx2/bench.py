"""The iceoryx2 adapter's benchmark part, run by bench/middlewares.py (`--transports
iceoryx2`): msgperf's shm against iceoryx2, its peer, as iceoryx2 has no floor loop of its own.
Same workload, wait strategy, placement and processes, both zero-copy, both writing and checking
every payload byte."""
from benchlib import msgperf_cases

TABLES = [
    dict(workload="shm-vs-iceoryx2-rtt",
         title="shm against iceoryx2, ping-pong p50 round trip (lower is better):",
         head=("placement", "case", "shm p50", "iceoryx2 p50", "shm / iceoryx2"),
         fmt="{:.2f}", unit=" us"),
    dict(workload="shm-vs-iceoryx2-rate",
         title="shm against iceoryx2, stream messages received/s (higher is better):",
         head=("placement", "case", "shm msgs/s", "iceoryx2 msgs/s", "shm / iceoryx2"),
         fmt="{:.0f}"),
]


def tools(ctx, placement):
    rows = []

    def one(transport, workload, size, opts):
        args = ["--size", str(size), "--duration", ctx["args"].duration + "s", "--placement", placement,
                "--no-floor"]
        for o in opts:
            args += ["--opt", o]
        return msgperf_cases(ctx["msgperf"], workload, transport, args)[0]["summary"]

    for wait in ("spin", "spin-yield", "block"):
        shm = one("shm", "pingpong", 64, ["wait=" + wait, "zero-copy=true"])
        iox = one(ctx["transport"], "pingpong", 64, ["wait=" + wait])
        ps, pi = shm["latency"]["p50_ns"] / 1e3, iox["latency"]["p50_ns"] / 1e3
        rows.append(dict(workload="shm-vs-iceoryx2-rtt", size=64, label=f"64 B wait={wait}", ours=ps, tool=pi,
                         ratio=ps / pi))
    for size in (64, 65536):
        shm = one("shm", "stream", size, ["zero-copy=true"])
        iox = one(ctx["transport"], "stream", size, [])
        rows.append(dict(workload="shm-vs-iceoryx2-rate", size=size, label=f"{size} B spin-yield",
                         ours=shm["msgs_per_s"], tool=iox["msgs_per_s"], ratio=shm["msgs_per_s"] / iox["msgs_per_s"]))
    return rows
