"""The DDS adapter's benchmark part, run by bench/middlewares.py: Cyclone's own ddsperf, built
from the very Cyclone source that the adapter links (cyclors' bundled copy, with cmake: about 3
minutes once, kept in target/ddsperf), or with --ddsperf PATH any other (Debian's
cyclonedds-tools ships 0.10). ddsperf ping/pong prints half the round trip; it is doubled here.
Both run pinned like msgperf's roles (taskset), with the same loopback-only configuration
(CYCLONEDDS_URI), a waitset on each side and ddsperf's QoS (RELIABLE, KEEP_LAST 1: msgperf with
--opt history=keep-last-1)."""
import glob, json, os, re, statistics, subprocess, sys, time

from benchlib import cpus_of, msgperf_cases, root, sh

TABLES = [
    dict(workload="ddsperf",
         title=lambda ctx: f"DDS ping-pong against Cyclone's own tool ({ddsperf_version(ctx['ddsperf'])}):",
         head=("placement", "size [B]", "msgperf p50 round trip", "ddsperf p50 round trip (2 x its half)",
               "msgperf / ddsperf"),
         fmt="{:.2f}", unit=" us"),
    dict(workload="ddsperf-rate",
         title="DDS stream (msgperf) against ddsperf pub and sub, messages received/s:",
         head=("placement", "size [B]", "msgperf msgs/s", "ddsperf sub samples/s", "msgperf / ddsperf"),
         fmt="{:.0f}"),
    dict(workload="ddsperf-rate-batching",
         title="The same with msgperf's writer batching as ddsperf's (--opt batching=true), messages received/s:",
         head=("placement", "size [B]", "msgperf msgs/s", "ddsperf sub samples/s", "msgperf / ddsperf"),
         fmt="{:.0f}"),
]


def add_arguments(ap):
    ap.add_argument("--ddsperf", help="Cyclone's ddsperf (default: build it from the source the adapter links)")


def prepare(ctx):
    ctx["ddsperf"] = ctx["args"].ddsperf or build_ddsperf()
    # ddsperf's rate by (placement, size), for msgperf's batching stream to be set beside.
    ctx["rates"] = {}


def after_case(ctx, workload, case, placement):
    if workload != "stream":
        return []
    # ddsperf pub/sub: RELIABLE, KEEP_ALL (its default), as msgperf's stream.
    s, size = case["summary"], case["config"]["size_bytes"]
    tool = ddsperf_rate(ctx["ddsperf"], placement, size, ctx["args"].duration)
    ctx["rates"][(placement, size)] = tool
    return [dict(workload="ddsperf-rate", size=size, ours=s["msgs_per_s"], tool=tool, ratio=s["msgs_per_s"] / tool)]


def tools(ctx, placement):
    rows, duration, ddsperf = [], ctx["args"].duration, ctx["ddsperf"]
    run = ["--duration", duration + "s", "--placement", placement]
    # ddsperf's ping and pong are RELIABLE with KEEP_LAST 1: msgperf runs the same QoS.
    for c in msgperf_cases(ctx["msgperf"], "pingpong", ctx["transport"],
                           ["--size", "64,4k", *run, "--opt", "history=keep-last-1", "--no-floor"]):
        size = c["config"]["size_bytes"]
        ours = c["summary"]["latency"]["p50_ns"] / 1e3
        tool = ddsperf_rtt(ddsperf, placement, size, duration)
        rows.append(dict(workload="ddsperf", size=size, ours=ours, tool=tool, ratio=ours / tool))
    # ddsperf's data writer batches: msgperf's stream with the same QoS, and its floor.
    for c in msgperf_cases(ctx["msgperf"], "stream", ctx["transport"],
                           ["--size", "64,64k", *run, "--opt", "batching=true"]):
        s, size = c["summary"], c["config"]["size_bytes"]
        ours, floor = s["mib_per_s"], s["floor_mib_per_s"]
        rows.append(dict(workload="stream, batching", size=size, ours=ours, floor=floor,
                         ratio=ours / floor if floor else None))
        tool = ctx["rates"].get((placement, size))
        if tool:
            rows.append(dict(workload="ddsperf-rate-batching", size=size, ours=s["msgs_per_s"], tool=tool,
                             ratio=s["msgs_per_s"] / tool))
    return rows


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
    cpus = cpus_of(placement)
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
    cpus = cpus_of(placement)
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
