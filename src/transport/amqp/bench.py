"""The AMQP adapter's benchmark part, run by bench/middlewares.py: RabbitMQ's PerfTest (from
Maven Central) and msgperf against one rabbitmq-server that this part starts."""
import json, os, re, shutil, statistics, subprocess, sys, tempfile, time

from benchlib import CpuSampler, cpus_of, free_port, role_cpu_per_message, run_sampled, sh, stop, wait_port

TABLES = [
    dict(workload="perftest-rate",
         title="RabbitMQ: msgperf's stream (ack=auto, no confirms) against PerfTest's producer (-x 1 -y 0) and consumer"
               " (-x 0 -y 1 -a), a JVM each, pinned like msgperf's writer and reader (the consumer's mean rate past"
               " its first six seconds, its JVMs' warm-up), messages/s, one broker for both:",
         head=("placement", "size [B]", "msgperf msgs/s", "PerfTest received msgs/s", "msgperf / PerfTest"),
         fmt="{:.0f}"),
    dict(workload="perftest-confirm",
         title="RabbitMQ, each publish confirmed before the next: msgperf's stream with --opt confirm=true against"
               " the same PerfTest pair with -c 1 (one publish unconfirmed at most), messages/s:",
         head=("placement", "size [B]", "msgperf msgs/s", "PerfTest received msgs/s", "msgperf / PerfTest"),
         fmt="{:.0f}"),
    dict(cpu=("perftest-rate", "perftest-confirm"),
         title="RabbitMQ: CPU a message received (us) of msgperf's writer, reader and broker (--details) and of"
               " PerfTest's producer and consumer JVMs and their broker (past their warm-up):",
         tools=("PerfTest producer", "PerfTest consumer")),
    dict(workload="perftest-latency",
         title="RabbitMQ at 1000 messages/s: msgperf's one-way p50 (from the intended send time) against PerfTest"
               " -x 1 -y 1 -a -r 1000's consumer latency (one JVM on the CPUs msgperf's roles use; the median of its"
               " per-second medians past the first):",
         head=("placement", "size [B]", "msgperf p50", "PerfTest median", "msgperf / PerfTest"),
         fmt="{:.0f}", unit=" us"),
]


def tools(ctx, placement):
    return amqp_tools(ctx["msgperf"], placement, ctx["args"].duration)


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
            stop(p, 20)
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
    cpus = cpus_of(placement)
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
                rows.append(dict(workload=workload, size=size,
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
            rows.append(dict(workload="perftest-latency", size=size,
                             ours=mine, tool=tool, ratio=mine / tool))
    finally:
        broker.stop()
    return rows
