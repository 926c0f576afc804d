#!/usr/bin/env python3
"""msgperf's middleware benchmark: ratios taken in one run, never absolute times.

For each middleware built in (Cargo features), pinned the same way, back to back: msgperf's
ping-pong (64 B and 4 KiB) and stream (64 B and 64 KiB) each divided by the floor that msgperf
measures in the same invocation, the plainest loop written with the same client library and the
same settings (so `/ floor` is what the harness costs on that middleware). Where the middleware
has a tool of its own with the same work and a distribution (Cyclone's ddsperf), it is run too
and compared (its ping/pong round trip against msgperf's ping-pong, its pub/sub rate against
msgperf's stream); ZeroMQ's, Zenoh's and gRPC's own tools print no distribution (or need a server
of their own), so their floor loops stand for them. The brokered middlewares run through the broker that
msgperf starts per case. Redis is also compared with redis-benchmark (PUBLISH), and Kafka with
its own tools from the jars that tools/fetch-kafka fetched (EndToEndLatency, ProducerPerformance
with ConsumerPerformance beside it),
both tools and msgperf against one broker that this script starts; NATS with `nats bench`
(natscli: `go install github.com/nats-io/natscli/nats@v0.5.0`), its request/reply, core pub/sub
and JetStream async publish to a consumer beside msgperf's ping-pong, stream and stream with
`--opt jetstream=memory --opt acks-in-flight=500`, against one nats-server that this script starts.
RabbitMQ with its PerfTest (from Maven Central), against one rabbitmq-server that this script starts.
With --repeat N the whole sweep runs N times and each ratio is the median of the N (range).

DDS: Cyclone's own ddsperf, built from the very Cyclone source that the `dds` adapter links
(cyclors' bundled copy, with cmake: about 3 minutes once, kept in target/ddsperf), or with
--ddsperf PATH any other (Debian's cyclonedds-tools ships 0.10). ddsperf ping/pong prints half
the round trip; it is doubled here. Both run pinned like msgperf's roles (taskset), with the same
loopback-only configuration (CYCLONEDDS_URI), a waitset on each side and ddsperf's QoS (RELIABLE,
KEEP_LAST 1: msgperf with --opt history=keep-last-1).

Usage: bench/middlewares.py [--transports zmq,dds,zenoh,grpc,nats,redis,mqtt,amqp,kafka] [--duration 2] [--placement cross-cpu,same-cpu]
                            [--repeat 1] [--msgperf PATH] [--ddsperf PATH]
"""
import argparse, datetime, glob, json, os, re, shutil, statistics, subprocess, sys, tempfile, threading, time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)


def sh(args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--transports", default="zmq,dds,zenoh,grpc,nats,redis")
    ap.add_argument("--duration", default="2")
    ap.add_argument("--placement", default="cross-cpu,same-cpu")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--msgperf", help="the msgperf binary (default: build this tree with every middleware)")
    ap.add_argument("--ddsperf", help="Cyclone's ddsperf (default: build it from the source the adapter links)")
    a = ap.parse_args()
    msgperf = a.msgperf
    if not msgperf:
        sh(["cargo", "build", "--release", "--quiet", "--features", "all-middlewares",
            "--manifest-path", os.path.join(root, "Cargo.toml")])
        msgperf = os.path.join(root, "target", "release", "msgperf")
    ddsperf = None
    if "dds" in a.transports.split(","):
        ddsperf = a.ddsperf or build_ddsperf()
    runs = [sweep(a, msgperf, ddsperf) for _ in range(a.repeat)]

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
        if r["workload"].startswith("ddsperf") or r["workload"] in TOOL_ROWS:
            continue
        rs = [run[i] for run in runs]
        unit = "us p50" if r["workload"] == "pingpong" else "MiB/s"
        print(" | ".join([r["transport"], r["placement"], r["workload"], str(r["size"]),
                          fig([x["ours"] for x in rs], "{:.2f}") + " " + unit,
                          fig([x["floor"] for x in rs], "{:.2f}") + " " + unit,
                          fig([x["ratio"] for x in rs], "{:.2f}x")]))
    print("\nping-pong: p50 / floor p50 (lower is better); stream: MiB/s / floor MiB/s (higher is better)."
          + (f" Median of {a.repeat} runs (range)." if a.repeat > 1 else ""))
    def against(workload, title, head, fmt, unit=""):
        rows = [i for i, r in enumerate(runs[0]) if r["workload"] == workload]
        if not rows:
            return
        print(title)
        print(" | ".join(head))
        print(" | ".join("---" for _ in head))
        for i in rows:
            rs = [run[i] for run in runs]
            r = rs[0]
            print(" | ".join([r["placement"], str(r["size"]),
                              fig([x["ours"] for x in rs], fmt) + unit,
                              fig([x["tool"] for x in rs], fmt) + unit,
                              fig([x["ratio"] for x in rs], "{:.2f}x")]))

    against("redis-benchmark",
            "\nRedis stream (msgperf) against redis-benchmark PUBLISH, one client, no pipelining, to one subscriber"
            " (`-`: the server dropped it for falling behind), messages/s:\n",
            ("placement", "size [B]", "msgperf msgs/s", "redis-benchmark PUBLISH/s", "msgperf / redis-benchmark"),
            "{:.0f}")
    against("nats-request",
            "\nNATS: msgperf's ping-pong p50 round trip against `nats bench service request`'s P50 (its server answers"
            " every request with 2 bytes, msgperf's echo with the whole message), one server for both:\n",
            ("placement", "size [B]", "msgperf p50", "nats bench P50", "msgperf / nats bench"),
            "{:.1f}", " us")
    against("nats-sub",
            "\nNATS: msgperf's core stream (messages received/s) against `nats bench pub` to `nats bench sub`"
            " (the subscriber's rate), one server for both (higher is better):\n",
            ("placement", "size [B]", "msgperf msgs/s", "nats bench sub msgs/s", "msgperf / nats bench"),
            "{:.0f}")
    against("nats-js",
            "\nNATS JetStream (memory storage), 500 publish acknowledgements in flight, every message acknowledged by"
            " its reader: msgperf's stream against `nats bench js pub async --batch 500` to `nats bench js consume"
            " --acks explicit` (the consumer's rate), messages/s:\n",
            ("placement", "size [B]", "msgperf msgs/s", "nats bench js consume msgs/s", "msgperf / nats bench"),
            "{:.0f}")
    against("kafka-e2e",
            "\nKafka: half msgperf's mean round trip (--opt sync=true) against EndToEndLatency's mean once warm (one"
            " message sent, acknowledged and read back at a time; the second n of a 2n run), one broker for both:\n",
            ("placement", "size [B]", "msgperf round trip / 2", "EndToEndLatency", "msgperf / EndToEndLatency"),
            "{:.0f}", " us")
    against("kafka-producer",
            "\nKafka: msgperf's stream (delivered) against ProducerPerformance's last 5 s window (acknowledged; acks=all,"
            " linger.ms=0, batch.size=1000000, the OS's socket buffers), messages/s, one broker for both:\n",
            ("placement", "size [B]", "msgperf msgs/s", "ProducerPerformance records/s",
             "msgperf / ProducerPerformance"),
            "{:.0f}")
    against("kafka-consumer",
            "\nKafka: msgperf's stream (delivered) against ConsumerPerformance, run beside that ProducerPerformance"
            " and pinned where msgperf's reader runs (its rate over the second half of the producer's run;"
            " --fetch-size 16 MiB, the OS's socket buffers), messages/s:\n",
            ("placement", "size [B]", "msgperf msgs/s", "ConsumerPerformance records/s",
             "msgperf / ConsumerPerformance"),
            "{:.0f}")
    def cpu(workloads, title, tools):
        """msgperf's roles' CPU a message beside the tool's processes', from the same runs."""
        rows = [i for i, r in enumerate(runs[0]) if r["workload"] in workloads]
        if not rows:
            return
        print(title)
        head = ("placement", "work", "size [B]", "writer", "reader", "broker", *tools, "broker")
        print(" | ".join(head))
        print(" | ".join("---" for _ in head))
        for i in rows:
            rs = [run[i] for run in runs]
            print(" | ".join([rs[0]["placement"], rs[0]["workload"], str(rs[0]["size"])]
                             + [fig([x["ours_cpu"][k] for x in rs], "{:.2f}") for k in range(3)]
                             + [fig([x["cpu"][k] for x in rs], "{:.2f}") for k in range(3)]))

    cpu(("kafka-consumer",),
        "\nKafka: CPU a message (us) of msgperf's writer, reader and broker (--details) and of ProducerPerformance,"
        " ConsumerPerformance and their broker (over the second half of the producer's run):\n",
        ("ProducerPerformance", "ConsumerPerformance"))
    against("perftest-rate",
            "\nRabbitMQ: msgperf's stream (ack=auto, no confirms) against PerfTest's producer (-x 1 -y 0) and consumer"
            " (-x 0 -y 1 -a), a JVM each, pinned like msgperf's writer and reader (the consumer's mean rate past"
            " its first six seconds, its JVMs' warm-up), messages/s, one broker for both:\n",
            ("placement", "size [B]", "msgperf msgs/s", "PerfTest received msgs/s", "msgperf / PerfTest"),
            "{:.0f}")
    against("perftest-confirm",
            "\nRabbitMQ, each publish confirmed before the next: msgperf's stream with --opt confirm=true against"
            " the same PerfTest pair with -c 1 (one publish unconfirmed at most), messages/s:\n",
            ("placement", "size [B]", "msgperf msgs/s", "PerfTest received msgs/s", "msgperf / PerfTest"),
            "{:.0f}")
    cpu(("perftest-rate", "perftest-confirm"),
        "\nRabbitMQ: CPU a message received (us) of msgperf's writer, reader and broker (--details) and of"
        " PerfTest's producer and consumer JVMs and their broker (past their warm-up):\n",
        ("PerfTest producer", "PerfTest consumer"))
    against("perftest-latency",
            "\nRabbitMQ at 1000 messages/s: msgperf's one-way p50 (from the intended send time) against PerfTest"
            " -x 1 -y 1 -a -r 1000's consumer latency (one JVM on the CPUs msgperf's roles use; the median of its"
            " per-second medians past the first):\n",
            ("placement", "size [B]", "msgperf p50", "PerfTest median", "msgperf / PerfTest"),
            "{:.0f}", " us")
    if ddsperf:
        against("ddsperf",
                f"\nDDS ping-pong against Cyclone's own tool ({ddsperf_version(ddsperf)}):\n",
                ("placement", "size [B]", "msgperf p50 round trip", "ddsperf p50 round trip (2 x its half)",
                 "msgperf / ddsperf"),
                "{:.2f}", " us")
    against("ddsperf-rate",
            "\nDDS stream (msgperf) against ddsperf pub and sub, messages received/s:\n",
            ("placement", "size [B]", "msgperf msgs/s", "ddsperf sub samples/s", "msgperf / ddsperf"),
            "{:.0f}")
    against("ddsperf-rate-batching",
            "\nThe same with msgperf's writer batching as ddsperf's (--opt batching=true), messages received/s:\n",
            ("placement", "size [B]", "msgperf msgs/s", "ddsperf sub samples/s", "msgperf / ddsperf"),
            "{:.0f}")


def sweep(a, msgperf, ddsperf):
    rows = []
    # ddsperf's rate by (placement, size), for msgperf's batching stream to be set beside.
    ddsperf_rates = {}
    for placement in a.placement.split(","):
        for t in a.transports.split(","):
            for workload, sizes in (("pingpong", "64,4k"), ("stream", "64,64k")):
                for c in cases(msgperf, a, workload, t, sizes, placement):
                    s = c["summary"]
                    # A floor that could not be measured is null (and shown as `-`).
                    if workload == "pingpong":
                        ours, floor = s["latency"]["p50_ns"] / 1e3, (s["floor_p50_ns"] or 0) / 1e3
                    else:
                        ours, floor = s["mib_per_s"], s["floor_mib_per_s"]
                    rows.append(dict(transport=t, placement=placement, workload=workload,
                                     size=c["config"]["size_bytes"], ours=ours, floor=floor,
                                     ratio=ours / floor if floor else None))
                    if t == "redis" and workload == "stream":
                        size = c["config"]["size_bytes"]
                        tool = redis_benchmark_rate(placement, size, a.duration)
                        rows.append(dict(transport=t, placement=placement, workload="redis-benchmark",
                                         size=size, ours=s["msgs_per_s"], tool=tool,
                                         ratio=s["msgs_per_s"] / tool if tool else None))
                    if t == "dds" and workload == "stream" and ddsperf:
                        # ddsperf pub/sub: RELIABLE, KEEP_ALL (its default), as msgperf's stream.
                        size = c["config"]["size_bytes"]
                        tool = ddsperf_rate(ddsperf, placement, size, a.duration)
                        ddsperf_rates[(placement, size)] = tool
                        rows.append(dict(transport=t, placement=placement, workload="ddsperf-rate",
                                         size=size, ours=s["msgs_per_s"], tool=tool,
                                         ratio=s["msgs_per_s"] / tool))
            if t == "kafka":
                rows.extend(kafka_tools(msgperf, placement, a.duration))
            if t == "nats":
                rows.extend(nats_tools(msgperf, placement, a.duration))
            if t == "amqp":
                rows.extend(amqp_tools(msgperf, placement, a.duration))
            if t == "dds" and ddsperf:
                # ddsperf's ping and pong are RELIABLE with KEEP_LAST 1: msgperf runs the same QoS.
                for c in cases(msgperf, a, "pingpong", t, "64,4k", placement,
                               ["--opt", "history=keep-last-1", "--no-floor"]):
                    size = c["config"]["size_bytes"]
                    ours = c["summary"]["latency"]["p50_ns"] / 1e3
                    tool = ddsperf_rtt(ddsperf, placement, size, a.duration)
                    rows.append(dict(transport=t, placement=placement, workload="ddsperf",
                                     size=size, ours=ours, tool=tool, ratio=ours / tool))
                # ddsperf's data writer batches: msgperf's stream with the same QoS, and its floor.
                for c in cases(msgperf, a, "stream", t, "64,64k", placement, ["--opt", "batching=true"]):
                    s, size = c["summary"], c["config"]["size_bytes"]
                    ours, floor = s["mib_per_s"], s["floor_mib_per_s"]
                    rows.append(dict(transport=t, placement=placement, workload="stream, batching",
                                     size=size, ours=ours, floor=floor,
                                     ratio=ours / floor if floor else None))
                    tool = ddsperf_rates.get((placement, size))
                    if tool:
                        rows.append(dict(transport=t, placement=placement, workload="ddsperf-rate-batching",
                                         size=size, ours=s["msgs_per_s"], tool=tool,
                                         ratio=s["msgs_per_s"] / tool))
    return rows


def cases(msgperf, a, workload, t, sizes, placement, extra=()):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        sh([msgperf, "run", workload, "-t", t, "--size", sizes, "--duration", a.duration + "s",
            "--placement", placement, "--json", f.name, *extra])
        return json.load(open(f.name))["cases"]


def cyclone_source():
    meta = json.loads(sh(["cargo", "metadata", "--format-version", "1", "--features", "dds",
                          "--manifest-path", os.path.join(root, "Cargo.toml")]))
    for p in meta["packages"]:
        if p["name"] == "cyclors":
            return os.path.join(os.path.dirname(p["manifest_path"]), "cyclonedds")
    sys.exit("cyclors is not among the dependencies: is the `dds` feature in Cargo.toml?")


def build_ddsperf():
    out = os.path.join(root, "target", "ddsperf")
    exe = glob.glob(os.path.join(out, "**", "bin", "ddsperf"), recursive=True)
    if exe:
        return exe[0]
    src = cyclone_source()
    print(f"building ddsperf from {src} (once) ...", file=sys.stderr)
    sh(["cmake", "-S", src, "-B", out, "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_IDLC=ON",
        "-DBUILD_DDSPERF=ON", "-DBUILD_EXAMPLES=OFF", "-DBUILD_TESTING=OFF", "-DENABLE_SSL=NO",
        "-DENABLE_SECURITY=NO", "-DENABLE_ICEORYX=NO", "-DENABLE_SHM=NO"])
    sh(["cmake", "--build", out, "--target", "ddsperf", "-j", str(os.cpu_count() or 2)])
    exe = glob.glob(os.path.join(out, "**", "bin", "ddsperf"), recursive=True)
    if not exe:
        sys.exit(f"ddsperf did not build in {out}")
    return exe[0]


def ddsperf_version(ddsperf):
    if ddsperf.startswith(os.path.join(root, "target")):
        src = cyclone_source()
        v = re.search(r"<version>([^<]+)</version>", open(os.path.join(src, "package.xml")).read())
        return f"ddsperf built from cyclors' Cyclone DDS {v.group(1) if v else '?'}, the adapter's own"
    return f"{ddsperf}"


# The adapter's configuration: loopback only, no multicast, unicast discovery, a private tag.
CYCLONE_XML = ("<CycloneDDS><Domain id=\"any\"><General><Interfaces><NetworkInterface name=\"lo\"/>"
               "</Interfaces><AllowMulticast>false</AllowMulticast></General><Discovery><Tag>{tag}</Tag>"
               "<ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>60</MaxAutoParticipantIndex>"
               "<Peers><Peer address=\"127.0.0.1\"/></Peers></Discovery></Domain></CycloneDDS>")


def ddsperf_rtt(ddsperf, placement, size, duration):
    """ddsperf ping/pong's round trip p50 in us: twice the median of its per-second 50% lines."""
    cpus = ("0", "0") if placement == "same-cpu" else ("0", "1")
    env = dict(os.environ, CYCLONEDDS_URI=CYCLONE_XML.format(tag=f"ddsperf-{os.getpid()}-{time.time_ns()}"))
    secs = str(max(3, int(float(duration)) + 2))
    # KS (the default topic) carries seq, key and a sequence of octets, and its size counts all
    # 12 bytes of them; msgperf's type adds 20 bytes (seq, stamp, length) to a message. So the
    # same serialized size is msgperf's + 20.
    pong = subprocess.Popen(["taskset", "-c", cpus[1], ddsperf, "-D", str(int(secs) + 2), "pong", "waitset"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        out = subprocess.run(["taskset", "-c", cpus[0], ddsperf, "-D", secs, "ping", "size", str(size + 20), "waitset"],
                             env=env, capture_output=True, text=True, timeout=int(secs) + 30).stdout
    finally:
        pong.kill()
        pong.wait()
    halves = [float(m.group(1)) for m in re.finditer(r" 50% ([0-9.]+)us", out)]
    if len(halves) < 2:
        sys.exit(f"ddsperf printed no round trips:\n{out}")
    # The first second holds discovery and warm-up.
    return 2 * statistics.median(halves[1:])


def ddsperf_rate(ddsperf, placement, size, duration):
    """ddsperf pub (as fast as it can) to sub (waitset): the median of its per-second rates, in samples/s."""
    cpus = ("0", "0") if placement == "same-cpu" else ("0", "1")
    env = dict(os.environ, CYCLONEDDS_URI=CYCLONE_XML.format(tag=f"ddsperf-{os.getpid()}-{time.time_ns()}"))
    secs = str(max(3, int(float(duration)) + 2))
    # The same serialized size as msgperf's message (see ddsperf_rtt).
    pub = subprocess.Popen(["taskset", "-c", cpus[0], ddsperf, "-D", str(int(secs) + 2), "pub", "size", str(size + 20)],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        out = subprocess.run(["taskset", "-c", cpus[1], ddsperf, "-D", secs, "sub", "waitset"],
                             env=env, capture_output=True, text=True, timeout=int(secs) + 30).stdout
    finally:
        pub.kill()
        pub.wait()
    rates = [float(m.group(1)) * 1e3 for m in re.finditer(r" rate ([0-9.]+) kS/s", out)]
    if len(rates) < 2:
        sys.exit(f"ddsperf sub printed no rates:\n{out}")
    # The first second holds discovery and warm-up.
    return statistics.median(rates[1:])


def free_port():
    import socket
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def redis_benchmark_rate(placement, size, duration):
    """redis-benchmark's PUBLISH rate (one client, no pipelining) to a channel that one
    subscriber reads: the writer on CPU 0, the subscriber and the server where msgperf puts its
    reader and broker. None if the server dropped the subscriber for falling behind: PUBLISH
    then reached no one, which is not the same work (and is faster)."""
    cpus = ("0", "0") if placement == "same-cpu" else ("0", "1")
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


# Rows that compare msgperf with a middleware's own tool (shown in tables of their own).
TOOL_ROWS = ("redis-benchmark", "kafka-e2e", "kafka-producer", "kafka-consumer", "nats-request", "nats-sub", "nats-js",
             "perftest-rate", "perftest-confirm", "perftest-latency")


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
    cpus = ("0", "0") if placement == "same-cpu" else ("0", "1")
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
                rows.append(dict(transport="nats", placement=placement, workload="nats-request", size=size,
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
                rows.append(dict(transport="nats", placement=placement, workload="nats-sub", size=size,
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
                rows.append(dict(transport="nats", placement=placement, workload="nats-js", size=size,
                                 ours=mine, tool=tool, ratio=mine / tool if tool else None))
        finally:
            server.terminate()
            server.wait()
    return rows


def wait_port(port, bound=10):
    import socket
    end = time.time() + bound
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing answered on port {port} within {bound} s")


KAFKA_LIBS = os.path.join(os.environ.get("MSGPERF_KAFKA") or os.path.expanduser("~/.cache/msgperf/kafka-4.3.1"), "libs")
# What msgperf's Kafka reader fetches from a partition at most (fetch.message.max.bytes: twice
# its largest message through a broker it starts).
KAFKA_FETCH = 16 << 20
KAFKA_JVM = ["java", "-Xmx1G", "-Xms1G", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:-UsePerfData",
             "-cp", KAFKA_LIBS + "/*"]


def kafka_tools(msgperf, placement, duration):
    """Kafka's own tools and msgperf against one broker that this script starts (pinned where
    msgperf puts its broker, each topic's log held to about 1 GiB), warmed first:
    EndToEndLatency (sends one message, waits for the broker's acknowledgement, reads it back,
    repeats; mean in ms) beside half msgperf's mean
    round trip with each send acknowledged; ProducerPerformance's and ConsumerPerformance's
    rates, run together, beside the rate msgperf's stream delivers (kafka_producer_and_consumer),
    with each process's CPU a message."""
    if not os.path.isdir(KAFKA_LIBS):
        sys.exit(f"Kafka's jars are not in {KAFKA_LIBS}: run tools/fetch-kafka")
    cpus = ("0", "0") if placement == "same-cpu" else ("0", "1")
    port, controller = free_port(), free_port()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        props = os.path.join(d, "server.properties")
        with open(props, "w") as f:
            f.write(f"process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:{controller}\n"
                    f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}\n"
                    "controller.listener.names=CONTROLLER\n"
                    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
                    f"log.dirs={d}/data\nnum.partitions=1\noffsets.topic.replication.factor=1\n"
                    "transaction.state.log.replication.factor=1\ntransaction.state.log.min.isr=1\n"
                    "group.initial.rebalance.delay.ms=0\n"
                    # Each topic's log is held to about 1 GiB, old segments deleted at once, so
                    # that the Java pair (which writes four times msgperf's messages) and msgperf
                    # write into memory the broker has freed and reuses. This VM's host takes
                    # back the pages its guest frees (virtio-balloon free page reporting): a
                    # write into one it took back ran at about 410 MB/s here against 3 GB/s
                    # (dd into tmpfs, 2026-11-26), 160 us a 64 KiB record, and with the log
                    # growing to 4 GiB the Java pair's broker spent that in its log's writes.
                    "log.segment.bytes=268435456\nlog.retention.bytes=1073741824\n"
                    "log.retention.check.interval.ms=1000\nlog.segment.delete.delay.ms=0\n")
        uuid = subprocess.run(KAFKA_JVM + ["kafka.tools.StorageTool", "random-uuid"], capture_output=True,
                              text=True).stdout.split()[-1]
        sh(KAFKA_JVM + ["kafka.tools.StorageTool", "format", "-t", uuid, "-c", props])
        broker = subprocess.Popen(["taskset", "-c", cpus[1]] + KAFKA_JVM + ["kafka.Kafka", props],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"127.0.0.1:{port}"
        try:
            def ours(workload, size, extra=()):
                with tempfile.NamedTemporaryFile(suffix=".json") as f:
                    sh([msgperf, "run", workload, "-t", "kafka", "--size", str(size), "--duration", duration + "s",
                        "--warmup", "1s", "--placement", placement, "--no-floor", "--opt", f"broker=kafka://{url}",
                        "--json", f.name, *extra])
                    return json.load(open(f.name))["cases"][0]
            # msgperf's own cases wait until the broker answers; the first also warms it.
            ours("stream", 64, ["--timeout", "60s"])
            for size in (64, 4096):
                c = ours("pingpong", size, ["--opt", "sync=true"])
                half = c["summary"]["latency"]["mean_ns"] / 2e3
                n = max(500, int(float(duration) * 1e6 / max(half * 2, 1)))

                def e2e(count):
                    out = sh(["taskset", "-c", cpus[0]] + KAFKA_JVM + [
                        "org.apache.kafka.tools.EndToEndLatency", url, f"e2e-{size}", str(count), "all", str(size)])
                    return float(re.search(r"Avg latency: ([0-9.]+) ms", out).group(1)) * 1e3
                # EndToEndLatency's mean includes its own JVM's warm-up, which msgperf's warm-up
                # leaves out: a run of n and one of 2n (each a fresh JVM, alike for their first
                # n) give the mean of the second n, once warm.
                tool = 2 * e2e(2 * n) - e2e(n)
                rows.append(dict(transport="kafka", placement=placement, workload="kafka-e2e", size=size,
                                 ours=half, tool=tool, ratio=half / tool))
            for size in (64, 65536):
                # Messages delivered per second at msgperf's reader (its writer's own rate only
                # says how fast librdkafka queues them).
                with CpuSampler([broker.pid]) as broker_cpu:
                    case = ours("stream", size)
                mine = case["summary"]["msgs_per_s"]
                producer, consumer, cpu = kafka_producer_and_consumer(url, cpus, broker.pid, size, mine, duration)
                rows.append(dict(transport="kafka", placement=placement, workload="kafka-producer", size=size,
                                 ours=mine, tool=producer, ratio=mine / producer))
                rows.append(dict(transport="kafka", placement=placement, workload="kafka-consumer", size=size,
                                 ours=mine, tool=consumer, ratio=mine / consumer, cpu=cpu,
                                 ours_cpu=role_cpu_per_message(case, broker_cpu)))
        finally:
            broker.terminate()
            try:
                broker.wait(10)
            except subprocess.TimeoutExpired:
                broker.kill()
                broker.wait()
    return rows


def kafka_producer_and_consumer(url, cpus, broker_pid, size, mine, duration):
    """ProducerPerformance on msgperf's writer's CPU and ConsumerPerformance on its reader's, on one
    topic at once, as msgperf's stream runs its writer and reader: the producer's last 5 s window
    (records the broker acknowledged), and the rate the consumer read at over the second half of
    the producer's run (both past their JVMs' warm-up). Both clients get librdkafka's settings
    where Kafka's Java client differs: batches of up to 1 MB (Java: 16 KiB), the socket buffers
    the OS sizes (Java: SO_SNDBUF 128 KiB and SO_RCVBUF 32 KiB for a producer, 2 MiB for this
    tool's consumer, which at 64 KiB held the producer to about 2,900 records a second against
    3,500-5,800 with the OS's, 2026-11-25), and fetches of up to msgperf's reader's 16 MiB from
    the partition (Java: 1 MiB)."""
    topic = f"perf-{size}-{time.monotonic_ns()}"
    sh(KAFKA_JVM + ["org.apache.kafka.tools.TopicCommand", "--bootstrap-server", url, "--create", "--topic", topic,
                    "--partitions", "1", "--replication-factor", "1"])
    # Four times msgperf's length: the producer's last 5 s window is then past its own JVM's
    # warm-up (at 64 KiB between two CPUs its JVM filled its CPU for its first 8 s, 2026-11-25).
    n = str(max(10000, int(mine * 4 * float(duration))))
    with tempfile.TemporaryFile("w+") as log:
        consumer = subprocess.Popen(["taskset", "-c", cpus[1]] + KAFKA_JVM + [
            "org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", url, "--topic", topic,
            "--num-records", n, "--show-detailed-stats", "--reporting-interval", "1000", "--timeout", "30000",
            "--date-format", "yyyy-MM-dd'T'HH:mm:ss.SSS", "--command-property", "receive.buffer.bytes=-1",
            "--fetch-size", str(KAFKA_FETCH)],
            stdout=log, stderr=subprocess.STDOUT, text=True)
        try:
            out, start, end, cpu = run_sampled(["taskset", "-c", cpus[0]] + KAFKA_JVM + [
                "org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records", n,
                "--record-size", str(size), "--throughput", "-1", "--producer-props", f"bootstrap.servers={url}",
                "acks=all", "linger.ms=0", "batch.size=1000000", "send.buffer.bytes=-1",
                "receive.buffer.bytes=-1"], [consumer.pid, broker_pid])
            consumer.wait(60)
        finally:
            if consumer.poll() is None:
                consumer.kill()
                consumer.wait()
        log.seek(0)
        progress = []  # (time, records read so far), one a second
        for line in log:
            f = line.strip().split(",")
            if len(f) > 5 and re.match(r"\d{4}-\d\d-\d\dT", f[0]):
                t = datetime.datetime.strptime(f[0], "%Y-%m-%dT%H:%M:%S.%f").timestamp()
                progress.append((t, int(f[4].strip())))
    rates = [float(r) for r in re.findall(r"([0-9.]+) records/sec", out)]
    window = [p for p in progress if (start + end) / 2 <= p[0] <= end]
    if len(window) < 2:
        sys.exit(f"ConsumerPerformance reported {len(progress)} times, {len(window)} in the second half of"
                 f" the producer's run ({start:.1f}-{end:.1f})")
    read = (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])
    produced = rates[-2] if len(rates) > 1 else rates[-1]
    # CPU a record over the same half: the producer's per record acknowledged, the consumer's
    # and the broker's per record read.
    took = cpu.share((start + end) / 2, end)
    per_record = [took[0] / produced, took[1] / read, took[2] / read]
    return produced, read, [t * 1e6 for t in per_record]


def role_cpu_per_message(case, broker_cpu):
    """msgperf's writer's and reader's CPU a message (us; every thread of a role's process), as
    --details prints them, and the broker's (a bench's own, sampled by `broker_cpu` through the
    whole case) a message written, warm-up included."""
    roles = {r["role"]: r for r in case["summary"]["roles"]}
    written = sum(r["sent_total"] for r in case["roles"] if r["role"]["kind"] == "writer")
    return [(r["cpu_user_ns_per_msg"] + r["cpu_sys_ns_per_msg"] + (r["other_threads_ns_per_msg"] or 0)) / 1e3
            for r in (roles["writer"], roles["reader"])] + [broker_cpu.total()[0] / written * 1e6]


def run_sampled(args, others):
    """Runs `args` to its end while sampling its CPU and that of the processes `others`: its
    output, when it started and ended, and the sampler (the command's process first)."""
    with tempfile.TemporaryFile("w+") as out:
        start = time.time()
        p = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, text=True)
        with CpuSampler([p.pid, *others]) as cpu:
            p.wait()
        end = time.time()
        out.seek(0)
        text = out.read()
    if p.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({p.returncode}):\n{text[-3000:]}")
    return text, start, end, cpu


class CpuSampler:
    """The CPU time (user and system, every thread) of some processes, sampled four times a
    second while in its `with` block, so that a tool's CPU can be taken over the part of its run
    that is measured (past its JVM's warm-up)."""

    def __init__(self, pids):
        self.pids, self.samples, self.done = pids, [], threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *_):
        self.done.set()
        self.thread.join()

    def run(self):
        while True:
            self.samples.append((time.time(), [self.seconds(p) for p in self.pids]))
            if self.done.wait(0.25):
                return

    @staticmethod
    def seconds(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            return float("nan")
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def total(self):
        """Each process's CPU seconds from the first sample to the last."""
        return [y - x for x, y in zip(self.samples[0][1], self.samples[-1][1])]

    def share(self, start, end):
        """Each process's CPU seconds a second between the first and last samples in start..end."""
        span = [s for s in self.samples if start <= s[0] <= end]
        if len(span) < 2:
            sys.exit(f"{len(span)} CPU samples between {start:.1f} and {end:.1f}")
        (t0, a), (t1, b) = span[0], span[-1]
        return [(y - x) / (t1 - t0) for x, y in zip(a, b)]


PERFTEST = "2.22.1"


def perftest_classpath():
    """RabbitMQ's PerfTest and its dependencies from Maven Central (into ~/.m2, once), as a
    class path."""
    if not shutil.which("mvn"):
        sys.exit("RabbitMQ's PerfTest comes from Maven Central: apt-get install maven")
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "pom.xml"), "w") as f:
            f.write('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
                    '<groupId>msgperf</groupId><artifactId>perftest</artifactId><version>1</version>'
                    '<packaging>pom</packaging><dependencies><dependency><groupId>com.rabbitmq</groupId>'
                    f'<artifactId>perf-test</artifactId><version>{PERFTEST}</version></dependency>'
                    '</dependencies></project>')
        cp = os.path.join(d, "cp.txt")
        sh(["mvn", "-q", "-B", "-f", os.path.join(d, "pom.xml"), "dependency:build-classpath",
            "-DincludeScope=runtime", f"-Dmdep.outputFile={cp}"])
        return open(cp).read().strip()


class RabbitMQ:
    """A rabbitmq-server of this script's own, as msgperf starts one (src/transport/amqp): its
    node, ports, configuration, database and log in a temporary directory, its own Erlang port
    mapper, on loopback, pinned to `cpu`."""

    def __init__(self, cpu):
        self.dir = tempfile.TemporaryDirectory()
        d = self.dir.name
        self.port, epmd = free_port(), free_port()
        with open(os.path.join(d, "rabbitmq.conf"), "w") as f:
            f.write(f"listeners.tcp.1 = 127.0.0.1:{self.port}\ntcp_listen_options.nodelay = true\n"
                    "log.console = false\nlog.file = false\n")
        with open(os.path.join(d, "enabled_plugins"), "w") as f:
            f.write("[].\n")
        env = dict(os.environ, HOME=d, RABBITMQ_NODENAME=f"bench{self.port}@localhost",
                   RABBITMQ_NODE_IP_ADDRESS="127.0.0.1", RABBITMQ_NODE_PORT=str(self.port),
                   RABBITMQ_DIST_PORT=str(free_port()), RABBITMQ_CONFIG_FILE=os.path.join(d, "rabbitmq"),
                   RABBITMQ_ENABLED_PLUGINS_FILE=os.path.join(d, "enabled_plugins"),
                   RABBITMQ_MNESIA_BASE=os.path.join(d, "mnesia"), RABBITMQ_LOG_BASE=os.path.join(d, "log"),
                   RABBITMQ_PID_FILE=os.path.join(d, "pid"), RABBITMQ_LOGS="-", RUNNING_UNDER_SYSTEMD="true",
                   RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}",
                   ERL_EPMD_ADDRESS="127.0.0.1", ERL_EPMD_PORT=str(epmd))
        self.epmd = subprocess.Popen(["epmd", "-port", str(epmd), "-address", "127.0.0.1"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(epmd)
        self.server = subprocess.Popen(["taskset", "-c", cpu, "/usr/lib/rabbitmq/bin/rabbitmq-server"], env=env,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"amqp://127.0.0.1:{self.port}"
        wait_port(self.port, 60)

    @property
    def pid(self):
        """The Erlang VM's process (rabbitmq-server's script starts it), from its pid file."""
        with open(os.path.join(self.dir.name, "pid")) as f:
            return int(f.read().split()[0])

    def stop(self):
        for p in (self.server, self.epmd):
            p.terminate()
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.dir.cleanup()


# Seconds of PerfTest's rate left out as its JVMs' warm-up: with each 64 KiB publish confirmed
# on one CPU, its consumer received 80, 1,317, 2,096, 2,947, 3,386 and then 6,404-7,478 messages
# in its first nine seconds (2026-11-25); two seconds left out had taken the mean of a rising rate.
PERFTEST_WARMUP = 6


def amqp_tools(msgperf, placement, duration):
    """RabbitMQ's PerfTest and msgperf against one rabbitmq-server that this script starts
    (pinned where msgperf puts its broker), one publisher and one consumer on one classic
    queue each: the consumer's rate as fast as the publisher goes (PerfTest `-a`, msgperf's
    stream with ack=auto), the same with each publish confirmed before the next (PerfTest
    `-c 1`, msgperf `--opt confirm=true`), and the median latency at 1000 messages a second
    (PerfTest's consumer latency, msgperf's one-way p50 from the intended send time)."""
    cp = perftest_classpath()
    cpus = ("0", "0") if placement == "same-cpu" else ("0", "1")
    broker = RabbitMQ(cpus[1])
    rows = []
    try:
        def ours(size, extra):
            with tempfile.NamedTemporaryFile(suffix=".json") as f:
                sh([msgperf, "run", "stream", "-t", "amqp", "--size", str(size), "--duration", duration + "s",
                    "--placement", placement, "--no-floor", "--opt", f"broker={broker.url}", "--json", f.name,
                    *extra])
                return json.load(open(f.name))["cases"][0]

        java = ["java", "-Xmx1G", "-XX:-UsePerfData", "-cp", cp, "com.rabbitmq.perf.PerfTest", "--uri", broker.url]
        seconds = int(float(duration) * 2)

        def lines(out, skip):
            """PerfTest's second-by-second (received msgs/s, consumer latency median) once the
            consumer receives, past the first `skip` such seconds (its JVMs' warm-up, which
            msgperf's warm-up leaves out too: a fresh producer JVM took 2 s to reach its rate at
            64 B, 5 s at 64 KiB with confirms)."""
            got = re.findall(r"time [0-9.]+ s, .*?received: ([0-9.]+) msg/s"
                             r"(?:, min/median/75th/95th/99th consumer latency: [0-9.]+/([0-9.]+)/)?", out)
            got = [(float(r), m and float(m)) for r, m in got if float(r) > 0][skip:]
            if not got:
                sys.exit(f"PerfTest printed no rates:\n{out}")
            return got

        def rate(size, queue, extra):
            """The mean rate PerfTest's consumer receives, its consumer and its producer each a
            JVM of its own, pinned where msgperf puts its reader and its writer, the producer
            for PERFTEST_WARMUP seconds and twice msgperf's length; the consumer starts first and
            runs two seconds longer."""
            reader = subprocess.Popen(["taskset", "-c", cpus[1]] + java + [
                "-x", "0", "-y", "1", "-u", queue, "-k", queue, "-a", "-z", str(seconds + PERFTEST_WARMUP + 2)],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            try:
                time.sleep(1)  # its queue is declared and consumed
                _, start, end, cpu = run_sampled(["taskset", "-c", cpus[0]] + java + [
                    "-x", "1", "-y", "0", "-u", queue, "-k", queue, "-s", str(size),
                    "-z", str(seconds + PERFTEST_WARMUP), *extra], [reader.pid, broker.pid])
                got = statistics.mean(r for r, _ in lines(reader.communicate(timeout=60)[0], PERFTEST_WARMUP))
                # Each JVM's and the broker's CPU a message received, past the warm-up.
                took = cpu.share(start + PERFTEST_WARMUP + 1, end)
                return got, [t / got * 1e6 for t in took]
            finally:
                reader.kill()
                reader.wait()

        for size in (64, 65536):
            for workload, ours_args, tool_args in (("perftest-rate", [], []),
                                                   ("perftest-confirm", ["--opt", "confirm=true"], ["-c", "1"])):
                with CpuSampler([broker.pid]) as broker_cpu:
                    case = ours(size, ours_args)
                mine = case["summary"]["msgs_per_s"]
                tool, cpu = rate(size, f"{workload}-{size}", tool_args)
                rows.append(dict(transport="amqp", placement=placement, workload=workload, size=size,
                                 ours=mine, tool=tool, ratio=mine / tool, cpu=cpu,
                                 ours_cpu=role_cpu_per_message(case, broker_cpu)))
        for size in (64, 4096):
            mine = ours(size, ["--rate", "1khz"])["summary"]["latency"]["p50_ns"] / 1e3
            # Latency needs PerfTest's producer and consumer in one JVM (it compares their
            # nanoTime): that JVM runs on both CPUs, as the broker's reader-side CPU cannot
            # be given to its consumer thread alone.
            out = sh(["taskset", "-c", ",".join(sorted(set(cpus)))] + java + [
                "-x", "1", "-y", "1", "-a", "-s", str(size), "-r", "1000", "-z", str(seconds)])
            tool = statistics.median(m for _, m in lines(out, 1) if m)
            rows.append(dict(transport="amqp", placement=placement, workload="perftest-latency", size=size,
                             ours=mine, tool=tool, ratio=mine / tool))
    finally:
        broker.stop()
    return rows


def csv_rows(text):
    import csv, io
    return csv.DictReader(io.StringIO(text))


if __name__ == "__main__":
    sys.exit(main())
