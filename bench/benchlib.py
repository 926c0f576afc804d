"""What the benchmark scripts share: running msgperf and other commands, free ports, CPU
sampling, and the adapters' own benchmark parts (`src/transport/NAME/bench.py`), found by their
folders so that no script here names an adapter."""
import csv, glob, importlib.util, io, json, math, os, re, statistics, subprocess, sys, tempfile, threading, time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)


def sh(args, **kw):
    r = subprocess.run(args, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r.stdout


def build_msgperf(features="all-middlewares"):
    """This tree's msgperf, built in release with `features`."""
    sh(["cargo", "build", "--release", "--quiet", "--features", features,
        "--manifest-path", os.path.join(root, "Cargo.toml")])
    return os.path.join(root, "target", "release", "msgperf")


def cpus_of(placement):
    """The CPUs of the driving roles and of the others, as msgperf pins them."""
    return ("0", "0") if placement == "same-cpu" else ("0", "1")


def msgperf_run(msgperf, workload, transport, args):
    """The JSON of `msgperf run WORKLOAD -t TRANSPORT ARGS...`: its cases and environment."""
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        sh([msgperf, "run", workload, "-t", transport, "--json", f.name, *args])
        return json.load(open(f.name))


def msgperf_cases(msgperf, workload, transport, args):
    """msgperf's cases for `msgperf run WORKLOAD -t TRANSPORT ARGS...`, from its JSON."""
    return msgperf_run(msgperf, workload, transport, args)["cases"]


def adapters():
    """The adapters: transports with a folder and a Cargo feature of their name, as the house
    rule (tests/house.rs) has it, in name order."""
    text = open(os.path.join(root, "Cargo.toml")).read().split("[features]")[1]
    features = set(re.findall(r"^([\w-]+) = ", text, re.M))
    return sorted(f.replace("_", "-") for f in features
                  if os.path.isdir(os.path.join(root, "src", "transport", f)))


def has_floor(transport):
    return os.path.isfile(os.path.join(root, "src", "transport", transport.replace("-", "_"), "floor.rs"))


def bench_part(transport):
    """A transport's own benchmark part (`src/transport/NAME/bench.py`), or None."""
    path = os.path.join(root, "src", "transport", transport.replace("-", "_"), "bench.py")
    if not os.path.isfile(path):
        return None
    spec = importlib.util.spec_from_file_location(f"bench_{transport.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def free_port():
    import socket
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


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


def stop(process, grace=10):
    """Stops a process this script started: SIGTERM, then SIGKILL after `grace` seconds."""
    process.terminate()
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def csv_rows(text):
    return csv.DictReader(io.StringIO(text))


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


def p50(summary):
    """A summary's median round trip, in both result layouts (labelled or in a list)."""
    lat = summary["latency"]
    return lat["p50_ns"] if "p50_ns" in lat else lat["percentiles_ns"][0]


def cache_line_us(path):
    """The hardware's cache-line ping-pong between the two CPUs, (p50, mean) in us (0.3 s)."""
    text = sh([path, "floor", "-t", "none", "--stream-size", "64", "--duration", "0.3s",
               "--placement", "cross-cpu"])
    line = next(l for l in text.splitlines() if "cache-line ping-pong" in l)
    # floor | loop | size | cpus | peer | samples | min | p50 | mean | ...
    # `-`: no round trip completed (both vCPUs taken): the pair is dropped as unsteady.
    num = lambda f: float(f) if f != "-" else float("nan")
    fields = re.split(r"\s{2,}", line.strip())
    return num(fields[7]), num(fields[8])


def shm_spin_pairs(path, pairs):
    """shm's spinning round trip (64 B, two CPUs) against the cache-line ping-pong measured just
    before and just after it. This VM's two vCPUs move between host cores every few hundred
    milliseconds, and the cache line's round trip with them (0.05, 0.11-0.14 or 0.33-0.5 us
    here): a ratio only means something when both figures come from the same placement. A pair
    is kept when its two cache-line figures agree within 25% and shm's round trip stayed put
    too (its 100 ms means within 25% of each other); the kept pairs' median is the figure."""
    kept, dropped, clock = [], 0, {}
    for _ in range(pairs):
        before, before_mean = cache_line_us(path)
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            sh([path, "run", "pingpong", "-t", "shm", "--opt", "wait=spin", "--size", "64", "--duration",
                "0.3s", "--warmup", "0.1s", "--placement", "cross-cpu", "--json", f.name])
            result = json.load(open(f.name))
        case = result["cases"][0]
        rtt = (p50(case["summary"]) or float("nan")) / 1e3
        # The case's floor: shm's ring alone, with none of msgperf's work.
        ring = (case["summary"].get("floor_p50_ns") or float("nan")) / 1e3
        means = {"rtt": case["summary"]["latency"].get("mean_ns"),
                 "ring": (case.get("floor") or {}).get("rtt_mean_ns")}
        intervals = next(r["interval_means_ns"] for r in case["roles"] if r["role"]["kind"] == "initiator")
        clock = result["environment"]["clock"]
        after, after_mean = cache_line_us(path)
        steady = lambda xs: bool(xs) and max(xs) <= 1.25 * min(xs)
        if not (steady([before, after]) and steady(intervals)) or math.isnan(ring) or math.isnan(rtt):
            dropped += 1
            continue
        line = (before + after) / 2
        line_mean = (before_mean + after_mean) / 2 * 1e3
        kept.append({"rtt_us": rtt, "line_us": line, "ratio": rtt / line, "ring_us": ring,
                     "ring_ratio": ring / line,
                     "mean_ratio": (means["rtt"] or float("nan")) / line_mean,
                     "ring_mean_ratio": (means["ring"] or float("nan")) / line_mean})
    if not kept:
        return {"rtt_us": float("nan"), "line_us": float("nan"), "ratio": float("nan"), "kept": 0,
                "ring_us": float("nan"), "ring_ratio": float("nan"), "dropped": dropped, "clock": clock}
    mid = sorted(kept, key=lambda k: k["ratio"])[len(kept) // 2]
    return dict(mid, kept=len(kept), dropped=dropped, clock=clock, pairs=kept)


def print_shm_spin(spins):
    """What shm_spin_pairs found in each repetition: the median of their kept pairs (range), by
    how near the host cores under the vCPUs were, and what the gap is made of."""
    spin = [s for s in spins if s["kept"]]
    if spin:
        clock = spin[0]["clock"]
        print(f"\nshm wait=spin, 64 B, cross-cpu: p50 {median_range([s['rtt_us'] for s in spin], '{:.2f}')} us, "
              f"{median_range([s['ratio'] for s in spin], '{:.2f}x')} of the cache-line ping-pong measured just "
              f"before and after it ({median_range([s['line_us'] for s in spin], '{:.2f}')} us; "
              f"{sum(s['kept'] for s in spin)} pairs kept, {sum(s['dropped'] for s in spins)} dropped "
              f"as the vCPUs moved between them)")
        every = [k for s in spins for k in s.get("pairs", [])]
        # How near two vCPUs' host cores are shows in the cache line's round trip: pairs within
        # 1.5x of the fastest one seen are on the nearest cores (which figures a host has varies).
        near = 1.5 * min(k["line_us"] for k in every)
        for name, group in (("near", [k for k in every if k["line_us"] < near]),
                            ("far", [k for k in every if k["line_us"] >= near])):
            if group:
                print(f"  vCPUs on {name} host cores (cache line {median_range([k['line_us'] for k in group], '{:.2f}')} us): "
                      f"shm {median_range([k['rtt_us'] for k in group], '{:.2f}')} us, "
                      f"{median_range([k['ratio'] for k in group], '{:.2f}x')}; its ring alone "
                      f"{median_range([k['ring_us'] for k in group], '{:.2f}')} us, "
                      f"{median_range([k['ring_ratio'] for k in group], '{:.2f}x')}; {len(group)} pairs")
        print(f"by means, which no clock step rounds (a p50 of a round trip this short can move by "
              f"a whole TSC step, 10 ns on some VMs) but every stall is in: shm "
              f"{median_range([k['mean_ratio'] for k in every], '{:.2f}x')}, its ring alone "
              f"{median_range([k['ring_mean_ratio'] for k in every], '{:.2f}x')} of the cache line's "
              f"mean, over the same pairs")
        print(f"the gap in two steps, each measured in the same pair: the ring alone (shm's floor: its "
              f"rings and spin, a 64 B copy in and out, timed as the cache line is) against the cache "
              f"line is what shm's ring costs (a new cache line a message, whose head is cleared "
              f"ahead); msgperf against the ring is what measuring adds: per round trip 5 TSC reads "
              f"({clock.get('interval_read_cost_ns', 0):.0f} ns each here), 7 histogram records "
              f"({clock['record_cost_ns']:.0f} ns each), a header, the checks of length, sequence "
              f"and tail, and the endpoint's calls; the responder's read, TSC read and check lie on "
              f"the round trip, the records after each send mostly overlap the flight")
    else:
        print("\nshm wait=spin: no pair kept (the vCPUs moved during every one)")


def median_range(values, fmt):
    """The median of `values` as `fmt` gives it, with their range where there are several."""
    mid = fmt.format(statistics.median(values))
    return mid if len(values) == 1 else f"{mid} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def glob_one(pattern):
    found = glob.glob(pattern, recursive=True)
    return found[0] if found else None


class Tee(io.TextIOBase):
    """Standard output, copied as it is written."""

    def __init__(self, out):
        self.out, self.copy = out, io.StringIO()

    def write(self, s):
        self.copy.write(s)
        return self.out.write(s)

    def flush(self):
        self.out.flush()


def machine():
    """This machine, in a line: host, kernel, CPU model, CPUs, and a VM's hypervisor if any."""
    import platform
    model = "?"
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "?":
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags") and not flags:
                    flags = line
    except OSError:
        pass
    vm = ", a virtual machine" if " hypervisor" in flags else ""
    return f"{platform.node()}, Linux {platform.release()}, {model}, {os.cpu_count()} CPUs{vm}"


def recorded(name, main):
    """Runs `main`, then writes what it printed to docs/results/NAME.md with the date, the
    machine, the command and this tree's commit, unless --no-write is given (or --out FILE
    names another file). Returns main's exit code."""
    import datetime, shlex
    argv = sys.argv[1:]
    out = os.path.join(root, "docs", "results", f"{name}.md")
    if "--no-write" in argv:
        argv.remove("--no-write")
        out = None
    if "--out" in argv:
        i = argv.index("--out")
        out = argv[i + 1]
        del argv[i:i + 2]
    sys.argv[1:] = argv
    tee = Tee(sys.stdout)
    sys.stdout = tee
    try:
        code = main()
    finally:
        sys.stdout = tee.out
    if out and not code:
        commit = subprocess.run(["git", "-C", root, "describe", "--always", "--dirty"],
                                capture_output=True, text=True).stdout.strip()
        started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        command = " ".join(shlex.quote(a) for a in ["python3", f"bench/{name}.py", *argv])
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "w") as f:
            f.write(f"# bench/{name}.py\n\n- date: {started}\n- machine: {machine()}\n"
                    f"- command: `{command}`\n- msgperf: {commit}\n\n{tee.copy.getvalue()}")
        print(f"\nwritten to {os.path.relpath(out, os.getcwd())}", file=sys.stderr)
    return code
