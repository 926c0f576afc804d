"""The NATS adapter's benchmark part, run by bench/middlewares.py: `nats bench` (natscli:
`go install github.com/nats-io/natscli/nats@v0.5.0`), its request/reply, core pub/sub and
JetStream async publish to a consumer, beside msgperf's ping-pong, stream and stream with
`--opt jetstream=memory --opt acks-in-flight=500`, against one nats-server that this part
starts."""
import json, os, re, shutil, subprocess, sys, tempfile, time

from benchlib import cpus_of, free_port, sh, wait_port

TABLES = [
    dict(workload="nats-request",
         title="NATS: msgperf's ping-pong p50 round trip against `nats bench service request`'s P50 (its server answers"
               " every request with 2 bytes, msgperf's echo with the whole message), one server for both:",
         head=("placement", "size [B]", "msgperf p50", "nats bench P50", "msgperf / nats bench"),
         fmt="{:.1f}", unit=" us"),
    dict(workload="nats-sub",
         title="NATS: msgperf's core stream (messages received/s) against `nats bench pub` to `nats bench sub`"
               " (the subscriber's rate), one server for both (higher is better):",
         head=("placement", "size [B]", "msgperf msgs/s", "nats bench sub msgs/s", "msgperf / nats bench"),
         fmt="{:.0f}"),
    dict(workload="nats-js",
         title="NATS JetStream (memory storage), 500 publish acknowledgements in flight, every message acknowledged by"
               " its reader: msgperf's stream against `nats bench js pub async --batch 500` to `nats bench js consume"
               " --acks explicit` (the consumer's rate), messages/s:",
         head=("placement", "size [B]", "msgperf msgs/s", "nats bench js consume msgs/s", "msgperf / nats bench"),
         fmt="{:.0f}"),
]


def tools(ctx, placement):
    return nats_tools(ctx["msgperf"], placement, ctx["args"].duration)


def nats_cli():
    exe = shutil.which("nats") or os.path.join(os.path.expanduser("~/go/bin"), "nats")
    if not os.access(exe, os.X_OK):
        sys.exit("natscli is not installed: go install github.com/nats-io/natscli/nats@v0.5.0")
    return exe


def nats_tools(msgperf, placement, duration):
    """`nats bench` and msgperf against one nats-server (JetStream on) that this script starts,
    pinned where msgperf puts its broker: the requester and publishers where msgperf puts its
    writer, the server, the service and the subscriber where its reader goes."""
    nats = nats_cli()
    cpus = cpus_of(placement)
    port = free_port()
    url = f"nats://127.0.0.1:{port}"
    cli = [nats, "-s", url, "--no-context"]
    rows = []
    with tempfile.TemporaryDirectory() as d:
        server = subprocess.Popen(["taskset", "-c", cpus[1], "nats-server", "-a", "127.0.0.1", "-p", str(port),
                                   "-js", "-sd", os.path.join(d, "js")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_port(port)

            def ours(workload, size, extra=()):
                with tempfile.NamedTemporaryFile(suffix=".json") as f:
                    sh([msgperf, "run", workload, "-t", "nats", "--size", str(size), "--duration", duration + "s",
                        "--placement", placement, "--no-floor", "--opt", f"broker={url}", "--json", f.name, *extra])
                    return json.load(open(f.name))["cases"][0]["summary"]

            def stats(out, role):
                line = next((l for l in out.splitlines() if role + " stats:" in l), None)
                if not line:
                    sys.exit(f"nats bench printed no {role} stats:\n{out}")
                rate = re.search(r"([0-9,]+) msgs/sec", line).group(1)
                p50 = re.search(r"P50: ([0-9,.]+)us", line)
                return float(rate.replace(",", "")), p50 and float(p50.group(1).replace(",", ""))

            def bench(*args, on=cpus[0], timeout=120):
                return subprocess.run(["taskset", "-c", on] + cli + ["bench", *args, "--no-progress"],
                                      capture_output=True, text=True, timeout=timeout, check=True).stdout

            # nats bench's subjects have the shape and length of msgperf's (`msgperf-PID-N.c0.forth`):
            # the server's work per message grows with the subject (64 B through a one-letter
            # subject moved at 1.33x-1.35x the rate of 64 B through one of msgperf's length here).
            names = iter(range(1000))

            def subject():
                return f"msgperf-{os.getpid()}-{next(names)}.c0.forth"

            for size in (64, 4096):
                s = ours("pingpong", size)
                req = subject()
                n = str(max(2000, int(s["msgs_per_s"] * float(duration))))
                serve = subprocess.Popen(["taskset", "-c", cpus[1]] + cli + ["bench", "service", "serve", req],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                try:
                    time.sleep(1)  # the service's subscription is in place
                    _, p50 = stats(bench("service", "request", req, "--msgs", n, "--size", f"{size}B"),
                                   "requester")
                finally:
                    serve.kill()
                    serve.wait()
                mine = s["latency"]["p50_ns"] / 1e3
                rows.append(dict(workload="nats-request", size=size,
                                 ours=mine, tool=p50, ratio=mine / p50))
            def received(reader, writer, role):
                """The rate `nats bench` READER reports once `nats bench` WRITER is done; none if the
                reader never got them all (a core subscriber the server dropped messages for)."""
                r = subprocess.Popen(["taskset", "-c", cpus[1]] + cli + ["bench", *reader, "--no-progress"],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                try:
                    time.sleep(1)  # the subscription or consumer is in place
                    bench(*writer)
                    return stats(r.communicate(timeout=60)[0], role)[0]
                except subprocess.TimeoutExpired:
                    return None
                finally:
                    r.kill()
                    r.wait()

            for size in (64, 65536):
                mine = ours("stream", size)["msgs_per_s"]
                work = ["--msgs", str(max(10000, int(mine * float(duration)))), "--size", f"{size}B"]
                sub = subject()
                tool = received(["sub", sub, *work], ["pub", sub, *work], "subscriber")
                rows.append(dict(workload="nats-sub", size=size,
                                 ours=mine, tool=tool, ratio=mine / tool if tool else None))
            for size in (64, 65536):
                mine = ours("stream", size, ["--opt", "jetstream=memory", "--opt", "acks-in-flight=500"])["msgs_per_s"]
                work = ["--msgs", str(max(10000, int(mine * float(duration)))), "--size", f"{size}B"]
                # A stream named as msgperf names a case's, holding its subjects.
                pub = subject()
                stream = pub.split(".")[0]
                sh(cli + ["stream", "add", stream, "--subjects", stream + ".>", "--storage", "memory", "--defaults"])
                tool = received(["js", "consume", "--stream", stream, "--acks", "explicit", *work],
                                ["js", "pub", "async", pub, "--stream", stream, "--batch", "500", *work],
                                "consumer (callback)")
                rows.append(dict(workload="nats-js", size=size,
                                 ours=mine, tool=tool, ratio=mine / tool if tool else None))
        finally:
            server.terminate()
            server.wait()
    return rows
