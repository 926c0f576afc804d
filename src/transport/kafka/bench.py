"""The Kafka adapter's benchmark part, run by bench/middlewares.py: Kafka's own tools from the
jars that src/transport/kafka/fetch-broker fetched (EndToEndLatency, ProducerPerformance with
ConsumerPerformance beside it), both tools and msgperf against one broker that this part
starts."""
import datetime, json, os, re, subprocess, sys, tempfile, time

from benchlib import CpuSampler, cpus_of, free_port, role_cpu_per_message, run_sampled, sh, stop

TABLES = [
    dict(workload="kafka-e2e",
         title="Kafka: half msgperf's mean round trip (--opt sync=true) against EndToEndLatency's mean once warm (one"
               " message sent, acknowledged and read back at a time; the second n of a 2n run), one broker for both:",
         head=("placement", "size [B]", "msgperf round trip / 2", "EndToEndLatency", "msgperf / EndToEndLatency"),
         fmt="{:.0f}", unit=" us"),
    dict(workload="kafka-producer",
         title="Kafka: msgperf's stream (delivered) against ProducerPerformance's last 5 s window (acknowledged; acks=all,"
               " linger.ms=0, batch.size=1000000, the OS's socket buffers), messages/s, one broker for both:",
         head=("placement", "size [B]", "msgperf msgs/s", "ProducerPerformance records/s",
               "msgperf / ProducerPerformance"),
         fmt="{:.0f}"),
    dict(workload="kafka-consumer",
         title="Kafka: msgperf's stream (delivered) against ConsumerPerformance, run beside that ProducerPerformance"
               " and pinned where msgperf's reader runs (its rate over the second half of the producer's run;"
               " --fetch-size 16 MiB, the OS's socket buffers), messages/s:",
         head=("placement", "size [B]", "msgperf msgs/s", "ConsumerPerformance records/s",
               "msgperf / ConsumerPerformance"),
         fmt="{:.0f}"),
    dict(cpu=("kafka-consumer",),
         title="Kafka: CPU a message (us) of msgperf's writer, reader and broker (--details) and of ProducerPerformance,"
               " ConsumerPerformance and their broker (over the second half of the producer's run):",
         tools=("ProducerPerformance", "ConsumerPerformance")),
]


def tools(ctx, placement):
    return kafka_tools(ctx["msgperf"], placement, ctx["args"].duration)


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
        sys.exit(f"Kafka's jars are not in {KAFKA_LIBS}: run src/transport/kafka/fetch-broker")
    cpus = cpus_of(placement)
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
                rows.append(dict(workload="kafka-e2e", size=size,
                                 ours=half, tool=tool, ratio=half / tool))
            for size in (64, 65536):
                # Messages delivered per second at msgperf's reader (its writer's own rate only
                # says how fast librdkafka queues them).
                with CpuSampler([broker.pid]) as broker_cpu:
                    case = ours("stream", size)
                mine = case["summary"]["msgs_per_s"]
                producer, consumer, cpu = kafka_producer_and_consumer(url, cpus, broker.pid, size, mine, duration)
                rows.append(dict(workload="kafka-producer", size=size,
                                 ours=mine, tool=producer, ratio=mine / producer))
                rows.append(dict(workload="kafka-consumer", size=size,
                                 ours=mine, tool=consumer, ratio=mine / consumer, cpu=cpu,
                                 ours_cpu=role_cpu_per_message(case, broker_cpu)))
        finally:
            stop(broker)
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
