"""The Redis adapter's benchmark part, run by bench/middlewares.py: msgperf's stream against
redis-benchmark's PUBLISH (one client, no pipelining) to one subscriber, on a server of this
part's own."""
import subprocess, tempfile, time

from benchlib import cpus_of, csv_rows, free_port, sh

TABLES = [
    dict(workload="redis-benchmark",
         title="Redis stream (msgperf) against redis-benchmark PUBLISH, one client, no pipelining, to one subscriber"
               " (`-`: the server dropped it for falling behind), messages/s:",
         head=("placement", "size [B]", "msgperf msgs/s", "redis-benchmark PUBLISH/s", "msgperf / redis-benchmark"),
         fmt="{:.0f}"),
]


def after_case(ctx, workload, case, placement):
    if workload != "stream":
        return []
    s, size = case["summary"], case["config"]["size_bytes"]
    tool = redis_benchmark_rate(placement, size, ctx["args"].duration)
    return [dict(workload="redis-benchmark", size=size, ours=s["msgs_per_s"], tool=tool,
                 ratio=s["msgs_per_s"] / tool if tool else None)]


def redis_benchmark_rate(placement, size, duration):
    """redis-benchmark's PUBLISH rate (one client, no pipelining) to a channel that one
    subscriber reads: the writer on CPU 0, the subscriber and the server where msgperf puts its
    reader and broker. None if the server dropped the subscriber for falling behind: PUBLISH
    then reached no one, which is not the same work (and is faster)."""
    cpus = cpus_of(placement)
    port = str(free_port())
    with tempfile.TemporaryDirectory() as d:
        # The subscriber's output buffer may grow as far as msgperf's broker lets its readers'
        # (src/transport/redis): Redis's default drops a subscriber 32 MB behind.
        server = subprocess.Popen(["taskset", "-c", cpus[1], "redis-server", "--port", port, "--bind", "127.0.0.1",
                                   "--save", "", "--appendonly", "no", "--dir", d,
                                   "--client-output-buffer-limit", "pubsub 256mb 256mb 0"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        sub = None
        try:
            cli = ["redis-cli", "-p", port]
            for _ in range(200):
                if subprocess.run(cli + ["ping"], capture_output=True, text=True).stdout.strip() == "PONG":
                    break
                time.sleep(0.05)
            def subscribed():
                n = subprocess.run(cli + ["pubsub", "numsub", "msgperf-bench"], capture_output=True, text=True).stdout.split()
                return n[-1:] == ["1"]

            sub = subprocess.Popen(["taskset", "-c", cpus[1]] + cli + ["subscribe", "msgperf-bench"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(200):
                if subscribed():
                    break
                time.sleep(0.05)

            # A first pass sizes the measured one to about `duration` seconds.
            def rate(n):
                out = sh(["taskset", "-c", cpus[0], "redis-benchmark", "-p", port, "-c", "1", "-P", "1", "-n", str(n),
                          "--csv", "PUBLISH", "msgperf-bench", "x" * size])
                return float(list(csv_rows(out))[-1]["rps"]) if subscribed() else None
            first = rate(2000)
            return first and rate(max(2000, int(first * float(duration))))
        finally:
            for p in (sub, server):
                if p:
                    p.kill()
                    p.wait()
