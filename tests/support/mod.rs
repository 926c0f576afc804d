//! Shared by the integration tests: the msgperf binary, temporary files, bounded child waits.
#![allow(dead_code)]

use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

pub const MSGPERF: &str = env!("CARGO_BIN_EXE_msgperf");

/// The transports of a build without features: what `cargo run --release` surveys. A survey
/// of them all would start every middleware's broker, which their own tests do.
pub const BUILT_IN: &str = "inproc,mpsc,flume,tokio-mpsc,pipe,uds,uds-dgram,tcp,udp,shm";

/// msgperf with arguments; its peers are this binary too.
pub fn msgperf(args: &[&str]) -> Command {
    let mut c = Command::new(MSGPERF);
    c.args(args).env("MSGPERF_EXE", MSGPERF);
    c
}

/// Runs msgperf to completion, killing it if it takes longer than `limit` (then panics).
/// Runs msgperf with `args` and its JSON, which must succeed; its cases.
pub fn cases_of(args: &[&str]) -> Vec<msgperf::result::CaseResult> {
    let dir = temp_dir();
    let json = dir.path().join("r.json");
    let mut all = args.to_vec();
    all.extend(["--json", json.to_str().unwrap()]);
    let out = run(&all, Duration::from_secs(120));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        text(&out.stderr)
    );
    let run: msgperf::result::RunResult =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    run.cases
}

pub fn run(args: &[&str], limit: Duration) -> Output {
    run_command(msgperf(args), limit)
}

/// `run` for a command set up further (its environment, say).
pub fn run_command(mut command: Command, limit: Duration) -> Output {
    let child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_output(child, limit)
}

/// Waits for `child`, at most `limit` (then kills it and panics), reading its output as it
/// comes: a child that prints more than a pipe holds (a table of 600 subscribers) would
/// otherwise wait for a reader that waits for it to exit.
pub fn wait_output(mut child: Child, limit: Duration) -> Output {
    let (out, err) = (
        Drain::of(child.stdout.take()),
        Drain::of(child.stderr.take()),
    );
    let end = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "msgperf did not finish within {limit:?}\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&out.take()),
                String::from_utf8_lossy(&err.take())
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.take(),
        stderr: err.take(),
    }
}

/// A pipe read into memory by a thread of its own.
struct Drain {
    bytes: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    done: std::sync::mpsc::Receiver<()>,
}

impl Drain {
    fn of<R: std::io::Read + Send + 'static>(r: Option<R>) -> Drain {
        let bytes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (tx, done) = std::sync::mpsc::channel();
        let into = bytes.clone();
        std::thread::spawn(move || {
            if let Some(mut r) = r {
                let mut buf = [0u8; 65536];
                while let Ok(n @ 1..) = r.read(&mut buf) {
                    into.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            }
            let _ = tx.send(());
        });
        Drain { bytes, done }
    }

    /// What was read: all of it once the pipe closes, or what came within 5 s (a process
    /// left holding the pipe is the test's to find, not a reason to hang).
    fn take(&self) -> Vec<u8> {
        let _ = self.done.recv_timeout(Duration::from_secs(5));
        std::mem::take(&mut *self.bytes.lock().unwrap())
    }
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// msgperf's private directories in the temp dir that belong to `pid`.
pub fn leftovers_of(pid: u32) -> Vec<String> {
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with(&format!("msgperf-{pid}-")))
        .collect()
}

/// The processes msgperf started: its peers.
pub fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Every process under `pid`, itself first.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut all = vec![pid];
    let mut i = 0;
    while i < all.len() {
        all.extend(children(all[i]));
        i += 1;
    }
    all
}

/// The first process msgperf `child` started, once there is one.
pub fn wait_for_child(child: &mut Child) -> u32 {
    wait_for(child, "its peer", |pid| children(pid).first().copied())
}

pub fn alive(pid: u32) -> bool {
    // A zombie is dead for our purpose, and so is a killed process that the kernel is still
    // tearing down (it runs none of its own code again).
    msgperf::sys::process_alive(pid)
}

pub fn signal(pid: u32, sig: i32) {
    unsafe { libc::kill(pid as i32, sig) };
}

pub fn spawn(args: &[&str]) -> std::process::Child {
    msgperf(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// A server a test started: killed when the test ends, even by a panic, so no test leaves a
/// process behind.
pub struct Server(pub Option<Child>);

impl Server {
    pub fn start(args: &[&str]) -> Self {
        Server(Some(spawn(args)))
    }
    pub fn id(&self) -> u32 {
        self.0.as_ref().expect("running").id()
    }
    /// The process, still guarded.
    pub fn process(&mut self) -> &mut Child {
        self.0.as_mut().expect("running")
    }
    /// Hands the process over (to wait for its output); the guard no longer kills it.
    pub fn take(mut self) -> Child {
        self.0.take().expect("running")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Role processes that the library starts in this test process run the msgperf binary (not
/// the test binary, which `current_exe` would name).
pub fn roles_run_msgperf() {
    // Every test of a binary sets the same value, so the race of two setting it is harmless.
    std::env::set_var("MSGPERF_EXE", MSGPERF);
}

/// A short, threaded, unpinned run of `workload` on `transport` with exact counts; tests
/// change the fields they care about.
pub fn short_request(workload: &str, transport: &str) -> msgperf::plan::RunOptions {
    // A run in this process may still start msgperf processes (a transport's service, as a
    // media driver): they run the binary, not this test.
    roles_run_msgperf();
    msgperf::plan::RunOptions {
        workload: Some(workload.into()),
        transports: vec![transport.into()],
        size: Some("64,4k".into()),
        count: Some(300),
        warmup: Some("20ms".into()),
        checksum: Some(true),
        timeout: Some("5s".into()),
        placement: Some(msgperf::plan::PlacementArg::Any),
        threads: Some(true),
        ..Default::default()
    }
}

/// How long a test waits for msgperf to start a role or a broker: longer than msgperf's own
/// bounds on getting a case ready (a Kafka broker's storage format, its boot, its first message
/// and the case's topics, up to 60 s each), so that a slow start is named by msgperf's error,
/// not by this bound. In a soak run a Kafka case's responder had not appeared after 60 s.
pub const STARTS_WITHIN: Duration = Duration::from_secs(300);

/// The role process that msgperf `child` started whose command line names `role`
/// (`responder`, `subscriber 2`), once there is one. Fails with msgperf's own error when it
/// ends first.
pub fn wait_for_role(child: &mut Child, role: &str) -> u32 {
    wait_for(child, &format!("its {role}"), |pid| {
        children(pid).into_iter().find(|c| {
            std::fs::read_to_string(format!("/proc/{c}/cmdline"))
                .unwrap_or_default()
                .replace('\0', " ")
                .contains(&format!("role {role} "))
        })
    })
}

/// What `find` finds among msgperf `child`'s processes, once it does (`what` names it). Fails
/// with msgperf's output when msgperf ends first or `STARTS_WITHIN` passes.
pub fn wait_for(child: &mut Child, what: &str, find: impl Fn(u32) -> Option<u32>) -> u32 {
    let end = Instant::now() + STARTS_WITHIN;
    loop {
        if let Some(found) = find(child.id()) {
            return found;
        }
        if let Ok(Some(status)) = child.try_wait() {
            fail_with_output(
                child,
                &format!("msgperf ended ({status}) before it started {what}"),
            );
        }
        if Instant::now() > end {
            fail_with_output(
                child,
                &format!("msgperf did not start {what} within {STARTS_WITHIN:?}"),
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Fails the test with `why` and what msgperf `child` printed. A msgperf still running is
/// interrupted first, as Ctrl-C would, so that it removes what it made, and killed if it has
/// not ended 30 s later.
pub fn fail_with_output(child: &mut Child, why: &str) -> ! {
    use std::io::Read;
    if !matches!(child.try_wait(), Ok(Some(_))) {
        signal(child.id(), libc::SIGINT);
        let end = Instant::now() + Duration::from_secs(30);
        while !matches!(child.try_wait(), Ok(Some(_))) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    let (mut said, mut out) = (String::new(), String::new());
    if let Some(mut err) = child.stderr.take() {
        let _ = err.read_to_string(&mut said);
    }
    // Its tables too: a failed case's error was found there with nothing on stderr.
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    panic!("{why}\nmsgperf's stderr: {said}\nmsgperf's stdout: {out}");
}

/// A 60-second run in processes, to be killed or interrupted by the test; `json` collects
/// what it measured before that.
pub fn long_run(workload: &str, transport: &str, json: Option<&std::path::Path>) -> Child {
    let mut args = vec![
        "run",
        workload,
        "-t",
        transport,
        "--duration",
        "60s",
        "--warmup",
        "0s",
        "--no-floor",
        "--placement",
        "any",
    ];
    if let Some(j) = json {
        args.extend(["--json", j.to_str().unwrap()]);
    }
    spawn(&args)
}

/// Lets a running msgperf measure for a moment, sends it Ctrl-C and checks that it stopped
/// cleanly: exit 130, the JSON marked interrupted and its first case free of errors. Returns
/// the output and that case.
pub fn interrupt(
    child: Child,
    json: &std::path::Path,
    limit: Duration,
) -> (Output, serde_json::Value) {
    std::thread::sleep(Duration::from_millis(800));
    signal(child.id(), libc::SIGINT);
    let out = wait_output(child, limit);
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap();
    assert_eq!(v["interrupted"], true);
    let case = v["cases"][0].clone();
    assert_eq!(
        case["error"],
        serde_json::Value::Null,
        "a clean stop: {}",
        case["error"]
    );
    (out, case)
}

/// Tests of one binary run in parallel; one that checks a time bound (an end within
/// `--timeout` + 1 s) runs alone, so that its siblings' role processes do not stand in for load
/// the bound was not set for. Every other test of such a binary shares.
static PACE: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Runs beside the binary's other tests (not beside one that runs alone).
pub fn sharing() -> std::sync::RwLockReadGuard<'static, ()> {
    PACE.read().unwrap_or_else(|e| e.into_inner())
}

/// Runs alone among the binary's tests.
pub fn alone() -> std::sync::RwLockWriteGuard<'static, ()> {
    PACE.write().unwrap_or_else(|e| e.into_inner())
}

/// Whether namespaces can be made here (root, iproute2, unshare); CI must be able to.
pub fn namespaces_work() -> bool {
    let ok = std::process::Command::new("unshare")
        .args(["--time", "--fork", "--monotonic", "1", "--", "true"])
        .status()
        .is_ok_and(|s| s.success())
        && std::process::Command::new("ip")
            .args(["netns", "list"])
            .status()
            .is_ok_and(|s| s.success())
        && unsafe { libc::geteuid() } == 0;
    if !ok {
        assert!(
            std::env::var_os("MSGPERF_CI").is_none(),
            "network and time namespaces are needed here: run as root with iproute2 (.ci/run installs it)"
        );
        eprintln!("skipped: network or time namespaces cannot be made here (root, iproute2)");
    }
    ok
}

/// What msgperf made for run `pid` and left: namespaces and bridges.
pub fn beds_of(pid: u32) -> Vec<String> {
    let list = |args: &[&str]| {
        text(
            &std::process::Command::new("ip")
                .args(args)
                .output()
                .map(|o| o.stdout)
                .unwrap_or_default(),
        )
    };
    let mut left: Vec<String> = list(&["netns", "list"])
        .lines()
        .filter(|l| l.starts_with(&format!("msgperf-{pid}-")))
        .map(String::from)
        .collect();
    left.extend(
        list(&["-o", "link", "show", "type", "bridge"])
            .lines()
            .filter(|l| l.contains(&format!("mpb{pid}:")))
            .map(String::from),
    );
    left
}

/// Waits, at most 60 s (a bound only a hang reaches), until process `pid` has been woken `times`
/// more times (context switches of either kind) than when the wait began.
pub fn wait_until_woken(pid: u32, times: u64, what: &str) {
    if let Err(e) = wait_until_busy(pid, times, u64::MAX) {
        panic!("{what}: {e}");
    }
}

/// Waits, at most 60 s, until process `pid` has been switched in `times` more times than when
/// the wait began, or has used `cpu_ticks` more of CPU time (1/100 s each): a reader that spins
/// alone on its CPU is never switched out. Says why it gave up: the process ended
/// (the case ended before it ran) or stayed idle.
pub fn wait_until_busy(pid: u32, times: u64, cpu_ticks: u64) -> Result<(), String> {
    // Switches of both kinds: a reader that polls and yields between polls is switched out
    // without blocking, and where a busy loop shares its CPU that is nearly all it does (it
    // then gets a sliver of the CPU: its ticks grow slowly).
    wait_for_switches(pid, times, cpu_ticks, true, None)
}

/// [`wait_until_busy`], or `enough` time with the process alive, whichever comes first: a role
/// of a slow middleware on a loaded machine (a Kafka round trip takes 25 ms or more beside two
/// busy loops) is woken its `times` only after a minute, though it exchanges long before.
pub fn wait_until_busy_or_after(
    pid: u32,
    times: u64,
    cpu_ticks: u64,
    enough: Duration,
) -> Result<(), String> {
    wait_for_switches(pid, times, cpu_ticks, true, Some(enough))
}

/// Waits, at most 60 s, until process `pid` has blocked `times` more times than when the wait
/// began (voluntary switches alone: on a loaded machine a process is also switched out while
/// it still starts, and those would count before it waits for its first message).
pub fn wait_until_blocked(pid: u32, times: u64, what: &str) {
    if let Err(e) = wait_for_switches(pid, times, u64::MAX, false, None) {
        panic!("{what}: {e}");
    }
}

fn wait_for_switches(
    pid: u32,
    times: u64,
    cpu_ticks: u64,
    involuntary: bool,
    enough: Option<Duration>,
) -> Result<(), String> {
    let switches = || -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                l.strip_prefix("voluntary_ctxt_switches:").or_else(|| {
                    l.strip_prefix("nonvoluntary_ctxt_switches:")
                        .filter(|_| involuntary)
                })
            })
            .filter_map(|v| v.trim().parse::<u64>().ok())
            .sum()
    };
    let ticks = || -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // utime and stime: fields 14 and 15, counted after the command's closing parenthesis.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let f: Vec<u64> = after
            .split_whitespace()
            .map(|v| v.parse().unwrap_or(0))
            .collect();
        f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)
    };
    let (first, first_ticks) = (switches(), ticks());
    let began = std::time::Instant::now();
    let end = began + Duration::from_secs(60);
    while switches() < first + times
        && ticks() < first_ticks.saturating_add(cpu_ticks)
        && enough.is_none_or(|d| began.elapsed() < d)
    {
        // A peer gone before it ran says so at once, rather than after the whole wait.
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return Err(format!(
                "the peer (pid {pid}) ended before it was woken {times} times: the case ended before it ran"
            ));
        }
        if std::time::Instant::now() > end {
            // Where it waits, for the one who reads this.
            let state = |file: &str| {
                std::fs::read_to_string(format!("/proc/{pid}/{file}")).unwrap_or_default()
            };
            let status = state("status");
            let run_state = status.lines().find(|l| l.starts_with("State:"));
            return Err(format!(
                "the peer (pid {pid}) was not woken {times} times within 60 s: did the case start? ({}, in {}, {} threads)",
                run_state.unwrap_or("State: ?"),
                state("wchan"),
                status.lines().find(|l| l.starts_with("Threads:")).unwrap_or("Threads: ?")
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// A namespace of the test's own, on a veth pair with the root namespace; removed on drop.
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn make(tag: &str, net: u8) -> Netns {
        let name = format!("mpt{}{tag}", std::process::id());
        let (outer, inner) = (format!("{name}a"), format!("{name}b"));
        let n = Netns { name: name.clone() };
        for args in [
            vec!["netns", "add", &name],
            vec![
                "link", "add", &outer, "type", "veth", "peer", "name", &inner,
            ],
            vec!["link", "set", &inner, "netns", &name],
            vec!["addr", "add", &format!("10.251.{net}.1/24"), "dev", &outer],
            vec!["link", "set", &outer, "up"],
            vec![
                "-n",
                &name,
                "addr",
                "add",
                &format!("10.251.{net}.2/24"),
                "dev",
                &inner,
            ],
            vec!["-n", &name, "link", "set", &inner, "up"],
            vec!["-n", &name, "link", "set", "lo", "up"],
        ] {
            let out = Command::new("ip").args(&args).output().unwrap();
            assert!(out.status.success(), "ip {args:?}: {}", text(&out.stderr));
        }
        n
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // `ip netns del` leaves a process inside running (an sshd's session child, say), an
        // orphan in a namespace no one can name: every process in it goes first.
        if let Ok(out) = Command::new("ip")
            .args(["netns", "pids", &self.name])
            .output()
        {
            for pid in String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .filter_map(|pid| pid.parse::<u32>().ok())
            {
                signal(pid, libc::SIGKILL);
            }
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// An sshd of the test's own, in a namespace of its own, taking a key the test made.
pub struct Sshd {
    child: std::process::Child,
    net: u8,
    key: std::path::PathBuf,
    _dir: tempfile::TempDir,
    ns: Netns,
}

impl Sshd {
    pub fn start(net: u8) -> Option<Sshd> {
        let sshd = std::path::Path::new("/usr/sbin/sshd");
        if !sshd.exists() {
            assert!(
                std::env::var_os("MSGPERF_CI").is_none(),
                "sshd is needed here: .ci/run installs openssh-server"
            );
            eprintln!("skipped: no sshd (apt-get install openssh-server)");
            return None;
        }
        let ns = Netns::make(&format!("s{net}"), net);
        let dir = temp_dir();
        let d = dir.path();
        for (file, what) in [("host", "host key"), ("user", "user key")] {
            let ok = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(d.join(file))
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "ssh-keygen makes a {what}");
        }
        std::fs::copy(d.join("user.pub"), d.join("authorized_keys")).unwrap();
        std::fs::write(
            d.join("sshd_config"),
            format!(
                "ListenAddress 10.251.{net}.2:22\nHostKey {}\nAuthorizedKeysFile {}\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nStrictModes no\nUsePAM no\nPidFile none\n",
                d.join("host").display(),
                d.join("authorized_keys").display()
            ),
        )
        .unwrap();
        // Its privilege separation directory.
        std::fs::create_dir_all("/run/sshd").unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.name])
            .arg(sshd)
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Listening once a connection is taken (bounded: a hang fails the test).
        let at: std::net::SocketAddr = format!("10.251.{net}.2:22").parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect_timeout(&at, Duration::from_millis(200)).is_err() {
            assert!(Instant::now() < deadline, "sshd did not listen at {at}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(Sshd {
            child,
            net,
            key: d.join("user"),
            _dir: dir,
            ns,
        })
    }
}

impl Sshd {
    /// `--host b=...`: host b reached through ssh to this sshd, with the test's key.
    pub fn launcher(&self) -> String {
        format!(
            "b=ssh -T -i {} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR root@10.251.{}.2",
            self.key.display(),
            self.net
        )
    }

    /// The root namespace's end of its link.
    pub fn link(&self) -> String {
        format!("{}a", self.ns.name)
    }

    /// Every process under this sshd: what its logins started.
    pub fn descendants(&self) -> Vec<u32> {
        descendants(self.child.id())
    }

    /// Waits (bounded) until no far role (`msgperf role --stdio`) runs under this sshd.
    pub fn waits_for_its_roles_to_end(&self, what: &str) {
        let far_roles = || {
            self.descendants()
                .iter()
                .filter(|p| {
                    std::fs::read(format!("/proc/{p}/cmdline"))
                        .is_ok_and(|l| l.windows(7).any(|w| w == b"--stdio"))
                })
                .count()
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        while far_roles() > 0 {
            assert!(Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
