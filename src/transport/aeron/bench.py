"""The Aeron adapter's benchmark part, run by bench/middlewares.py (`--transports aeron`):
msgperf's ping-pong against Aeron's own C ping/pong sample (aeron-samples/src/main/c/cping.c
and cpong.c, from the Aeron sources that rusteron vendors and builds), compiled here with gcc
against the same libaeron that msgperf links. Both on aeron:ipc, through a media driver of
the same build and settings (`msgperf service aeron`: shared threading, backoff idle, 4 MiB
terms) pinned where msgperf pins its own, ping and pong pinned like msgperf's initiator and
responder, both spinning while they wait. The sample times each round trip with Aeron's
clock; it needs HdrHistogram_c, which Debian does not package, so bench/aeron_ping/hdr holds
the four calls it makes, keeping every value for exact percentiles."""
import atexit, glob, os, re, shutil, subprocess, sys, tempfile, time

from benchlib import cpus_of, msgperf_cases, sh, stop

TABLES = [
    dict(workload="aeron-vs-cping",
         title="Aeron: msgperf's ping-pong (--opt channel=ipc --opt wait=spin) against Aeron's own C sample,"
               " cping/cpong on aeron:ipc, p50 round trip (lower is better; across two CPUs only, as the"
               " sample only busy-spins):",
         head=("placement", "size [B]", "msgperf p50", "cping p50", "msgperf / cping"),
         fmt="{:.2f}", unit=" us"),
]

# Round trips the sample measures (after as many again to warm up).
MESSAGES = 300_000

# The media driver's settings, as msgperf's aeron adapter sets them by default
# (src/transport/aeron/driver.rs).
DRIVER_ENV = {
    "AERON_THREADING_MODE": "SHARED",
    "AERON_DIR_DELETE_ON_START": "true",
    "AERON_DIR_DELETE_ON_SHUTDOWN": "true",
    "AERON_TERM_BUFFER_LENGTH": str(4 << 20),
    "AERON_IPC_TERM_BUFFER_LENGTH": str(4 << 20),
    **{k: "backoff" for k in ("AERON_CONDUCTOR_IDLE_STRATEGY", "AERON_SENDER_IDLE_STRATEGY",
                              "AERON_RECEIVER_IDLE_STRATEGY", "AERON_SHAREDNETWORK_IDLE_STRATEGY",
                              "AERON_SHARED_IDLE_STRATEGY")},
}


def prepare(ctx):
    """Builds cping and cpong from the Aeron sources cargo fetched for rusteron, against the
    libaeron_static.a that cargo built beside this msgperf."""
    sources = sorted(glob.glob(os.path.expanduser("~/.cargo/registry/src/*/rusteron-client-*/aeron")))
    target = os.path.dirname(os.path.abspath(ctx["msgperf"]))
    libs = sorted(glob.glob(os.path.join(target, "build", "rusteron-client-*", "out", "build", "lib",
                                         "libaeron_static.a")), key=os.path.getmtime)
    if not sources or not libs:
        sys.exit("Aeron's samples need rusteron's sources and build: build msgperf with --features aeron first")
    aeron = sources[-1]
    samples = os.path.join(aeron, "aeron-samples", "src", "main", "c")
    shim = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench", "aeron_ping")
    ctx["tmp"] = tempfile.mkdtemp(prefix="msgperf-cping-")
    atexit.register(shutil.rmtree, ctx["tmp"], True)
    for name in ("cping", "cpong"):
        sh(["gcc", "-O2", "-o", os.path.join(ctx["tmp"], name), "-I", shim,
            "-I", os.path.join(aeron, "aeron-client", "src", "main", "c"), "-I", samples,
            os.path.join(samples, name + ".c"), os.path.join(samples, "sample_util.c"), libs[-1],
            "-lpthread", "-ldl", "-lm", "-lbsd", "-luuid"])


def cping_p50_us(ctx, placement, size):
    """Aeron's cping/cpong round trip p50 (us) at `size` bytes, through a driver of their own."""
    ping_cpu, pong_cpu = cpus_of(placement)
    directory = os.path.join(ctx["tmp"], f"driver-{placement}-{size}")
    driver = subprocess.Popen(["taskset", "-c", pong_cpu, ctx["msgperf"], "service", "aeron", directory],
                              env=dict(os.environ, AERON_DIR=directory, **DRIVER_ENV),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    pong = None
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(os.path.join(directory, "cnc.dat")):
            if driver.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"the media driver for cping did not start: {driver.stderr.read()[-2000:]}")
            time.sleep(0.05)
        ipc = ["-p", directory, "-c", "aeron:ipc", "-C", "aeron:ipc"]
        pong = subprocess.Popen(["taskset", "-c", pong_cpu, os.path.join(ctx["tmp"], "cpong"), *ipc],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out = subprocess.run(["taskset", "-c", ping_cpu, os.path.join(ctx["tmp"], "cping"), *ipc,
                              "-L", str(size), "-m", str(MESSAGES), "-w", str(MESSAGES)],
                             capture_output=True, text=True, timeout=300)
        found = re.search(r"p50_ns=(\d+)", out.stdout)
        if not found:
            sys.exit(f"cping printed no percentiles ({out.returncode}):\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
        return int(found.group(1)) / 1e3
    finally:
        for p in (pong, driver):
            if p:
                stop(p)
        shutil.rmtree(directory, ignore_errors=True)


def tools(ctx, placement):
    # cping and cpong only busy-spin: on one CPU each round trip would wait for the scheduler
    # to take the CPU from the other (milliseconds), so the sample is run across two CPUs only.
    if placement == "same-cpu":
        return []
    rows = []
    for size in (64, 4096):
        ours = msgperf_cases(ctx["msgperf"], "pingpong", ctx["transport"],
                             ["--size", str(size), "--duration", ctx["args"].duration + "s", "--placement",
                              placement, "--no-floor", "--opt", "channel=ipc", "--opt", "wait=spin"])
        p50 = ours[0]["summary"]["latency"]["p50_ns"] / 1e3
        theirs = cping_p50_us(ctx, placement, size)
        rows.append(dict(workload="aeron-vs-cping", size=size, ours=p50, tool=theirs, ratio=p50 / theirs))
    return rows
