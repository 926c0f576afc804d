//! Brokers that msgperf starts for a case: the installed program on a free loopback port, in a
//! private data directory, pinned where the case's placement puts its non-driving roles, up
//! once it answers on its port (bounded), and stopped with its directory removed when the case
//! ends (also after a failure; it dies with msgperf's case thread if msgperf is killed). The
//! runner measures its CPU and watches it like a role, as a [`Service`] of the case's set-up.

use super::FloorRoles;
use super::{
    fresh_name, private_dir, Capabilities, ChannelSpec, DirGuard, Endpoint, Exchange, Opening,
    Place, Rendezvous, Service, ServiceHost, Setup, SetupPlan, Side, TransportError,
};
use crate::sys;
use crate::transport::EndpointResult;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What a brokered adapter can do, besides what its options decide: clients of one broker reach
/// it from any process or host, its own fan-out serves every subscriber, and each message is a
/// client's allocation that the reader reads in place.
pub fn capabilities(reliable: bool, max_message_bytes: usize) -> Capabilities {
    Capabilities {
        reliable,
        max_message_bytes,
        cross_process: true,
        cross_host: true,
        native_fan_out: 1024,
        needs_server: true,
        allocates_per_message: true,
        reads_in_place: true,
        exchange: Exchange::Both,
        ..Capabilities::default()
    }
}

/// A broker program and how to start it.
pub struct Program {
    /// The executable, looked for in `PATH` and the sbin directories.
    pub name: &'static str,
    /// The Debian package that has it (and its helper).
    pub package: &'static str,
    /// Its command line, run in its data directory (which holds its `config`).
    pub args: fn(&Bind) -> Vec<String>,
    /// The configuration file it reads at start, written into its directory.
    pub config: Option<Config>,
    /// Prepares what else it needs in its directory (files, a formatted store), after `config`.
    pub configure: Option<fn(&Bind) -> std::io::Result<()>>,
    /// Its environment.
    pub env: Option<fn(&Bind) -> Env>,
    /// A daemon it needs, started first on a port of its own and stopped after it.
    pub helper: Option<Helper>,
    /// How long it may take to answer after it starts, where that is longer than a case's
    /// --timeout (an Erlang VM boots in seconds).
    pub boots_within: Duration,
    /// Bytes it answers once it serves clients, where an open port says less (RabbitMQ
    /// listens before it has booted, and closes what connects too early): it is up when a
    /// connection that sends them gets an answer.
    pub greeting: Option<&'static [u8]>,
    /// What it needs besides its executable (Kafka's jars), checked before it starts: the
    /// error names what is missing and how to get it.
    pub needs: Option<fn() -> Result<(), String>>,
}

/// A configuration file: its name in the broker's directory, and its text for where the broker
/// listens.
pub struct Config {
    pub file: &'static str,
    pub text: fn(&Bind) -> String,
}

/// Environment variables, by name.
pub type Env = Vec<(&'static str, String)>;

/// Where a broker listens, and what it owns: the address (loopback, or a namespace host's),
/// its port, its helper's port, its data directory.
pub struct Bind<'a> {
    pub host: &'a str,
    pub port: u16,
    #[allow(dead_code)] // Only a broker with a helper (AMQP's port mapper) reads it.
    pub helper: Option<u16>,
    /// One more port for a broker that needs two (RabbitMQ's distribution, Kafka's
    /// controller), picked with the others: picked after them, it could be one of theirs.
    #[allow(dead_code)]
    pub spare: u16,
    pub dir: &'a Path,
}

/// A daemon a broker needs (Erlang's port mapper, epmd, for RabbitMQ): started by msgperf in
/// the foreground so that it dies with the case, not left behind as a daemon of its own.
pub struct Helper {
    pub name: &'static str,
    /// Its command line for its port and address.
    pub args: fn(port: u16, host: &str) -> Vec<String>,
}

/// A running broker, stopped and removed when dropped.
pub struct Broker {
    pub port: u16,
    /// The address it listens on.
    pub host: String,
    pub pid: u32,
    program: &'static str,
    child: Option<Child>,
    /// Its helper daemon, stopped after it.
    helper: Option<Child>,
    // Dropped after the processes are gone.
    _dir: DirGuard,
}

impl Broker {
    /// Starts `p` and waits, at most `timeout`, until it accepts a connection on its port.
    pub fn start(
        p: &Program,
        cpu: Option<usize>,
        timeout: Duration,
        at: Option<&ServiceHost>,
    ) -> Result<Broker, TransportError> {
        // A port is free when msgperf picks it, not always when the broker binds it seconds
        // later (a JVM's start): any program's outgoing connection may take it meanwhile, as
        // it did once in a loaded test run. Such a broker starts again, on other ports.
        let mut left = 2;
        loop {
            match Self::start_once(p, cpu, timeout, at) {
                Err(TransportError::Broker { what, .. })
                    if left > 0 && what.to_ascii_lowercase().contains("address already in use") =>
                {
                    left -= 1
                }
                r => return r,
            }
        }
    }

    fn start_once(
        p: &Program,
        cpu: Option<usize>,
        timeout: Duration,
        at: Option<&ServiceHost>,
    ) -> Result<Broker, TransportError> {
        let exe = find(p.name).ok_or_else(|| {
            TransportError::broker(p.name, format!(
                "the broker `{}` is not installed (looked in PATH and /usr/sbin): install it with `apt-get install {}`",
                p.name, p.package
            ))
        })?;
        if let Some(needs) = p.needs {
            needs().map_err(|why| TransportError::broker(p.name, why))?;
        }
        let dir = DirGuard(private_dir()?);
        // Every port held at once while they are picked: picks one after the other can give
        // the same port, and the broker then finds its port taken by its own helper.
        let [port, helper_port, spare] = free_ports::<3>()?;
        let helper_port = p.helper.as_ref().map(|_| helper_port);
        let host = at.map_or("127.0.0.1", |a| a.address.as_str());
        // In its host: the prefix that enters it runs the program (`ip netns exec` execs it).
        let command = |exe: &Path| {
            let mut cmd = match at {
                Some(a) if !a.prefix.is_empty() => {
                    let mut c = Command::new(&a.prefix[0]);
                    c.args(&a.prefix[1..]).arg(exe);
                    c
                }
                _ => Command::new(exe),
            };
            cmd.current_dir(&dir.0).stdin(Stdio::null());
            cmd
        };
        let log = std::fs::File::create(dir.0.join("broker.log"))?;
        let bind = Bind {
            host,
            port,
            helper: helper_port,
            spare,
            dir: &dir.0,
        };
        if let Some(c) = &p.config {
            std::fs::write(bind.dir.join(c.file), (c.text)(&bind))?;
        }
        if let Some(configure) = p.configure {
            configure(&bind)?;
        }
        let helper = match &p.helper {
            Some(h) => {
                let hport = helper_port.expect("a helper has its port");
                let exe = find(h.name).ok_or_else(|| {
                    TransportError::broker(p.name, format!(
                        "`{}`, which the broker `{}` needs, is not installed: install it with `apt-get install {}`",
                        h.name, p.name, p.package
                    ))
                })?;
                let mut cmd = command(&exe);
                cmd.args((h.args)(hport, host))
                    .stdout(log.try_clone()?)
                    .stderr(log.try_clone()?);
                sys::service_command(&mut cmd, cpu);
                let child = cmd.spawn().map_err(|e| {
                    TransportError::broker(
                        p.name,
                        format!("could not start `{}`: {e}", exe.display()),
                    )
                })?;
                Some((hport, child))
            }
            None => None,
        };
        let mut cmd = command(&exe);
        cmd.args((p.args)(&bind))
            .envs(p.env.map_or(vec![], |env| env(&bind)))
            .stdout(log.try_clone()?)
            .stderr(log);
        sys::service_command(&mut cmd, cpu);
        let spawned = cmd.spawn();
        let mut b = Broker {
            port,
            host: host.to_string(),
            pid: 0,
            program: p.name,
            child: None,
            helper: helper.map(|h| h.1),
            _dir: dir,
        };
        let child = spawned.map_err(|e| {
            TransportError::broker(p.name, format!("could not start `{}`: {e}", exe.display()))
        })?;
        b.pid = child.id();
        b.child = Some(child);
        b.wait_up(timeout, p.boots_within, p.greeting)?;
        Ok(b)
    }

    /// What the runner watches and measures.
    pub fn service(&self) -> Service {
        Service {
            label: "broker".into(),
            program: self.program.into(),
            pid: self.pid,
            log: Some(self._dir.0.join("broker.log")),
        }
    }

    /// Waits for the broker to answer: the case's `timeout`, or longer if it `boots_within`
    /// longer; but one stopped (SIGSTOP, a debugger) for the timeout is named then.
    fn wait_up(
        &mut self,
        timeout: Duration,
        boots_within: Duration,
        greeting: Option<&[u8]>,
    ) -> Result<(), TransportError> {
        let start = Instant::now();
        let mut stopped_since: Option<Instant> = None;
        let ip: Ipv4Addr = self.host.parse().unwrap_or(Ipv4Addr::LOCALHOST);
        let at = SocketAddr::from((ip, self.port));
        let answers = |mut c: TcpStream, hello: &[u8]| -> bool {
            let mut b = [0u8; 1];
            c.set_read_timeout(Some(Duration::from_secs(1))).is_ok()
                && c.write_all(hello).is_ok()
                && c.read(&mut b).is_ok_and(|n| n == 1)
        };
        loop {
            if let Ok(c) = TcpStream::connect_timeout(&at, Duration::from_millis(200)) {
                if greeting.is_none_or(|g| answers(c, g)) {
                    return Ok(());
                }
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                self.child = None;
                return Err(broker_says(
                    self.program,
                    format!("exited at start ({status}): {}", self.last_words()),
                ));
            }
            if matches!(sys::process_state(self.pid), Some('T' | 't')) {
                let since = *stopped_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= timeout {
                    return Err(broker_says(
                        self.program,
                        format!(
                            "(pid {}) was stopped for {:.1} s as it started (SIGSTOP or a debugger)",
                            self.pid,
                            since.elapsed().as_secs_f64()
                        ),
                    ));
                }
            } else {
                stopped_since = None;
            }
            let bound = timeout.max(boots_within);
            if start.elapsed() >= bound {
                return Err(broker_says(
                    self.program,
                    format!(
                        "did not answer on {at} within {bound:?} of its start (its log says: {}): raise --timeout if it is only slow",
                        self.last_words()
                    ),
                ));
            }
            // Ctrl-C acts now, not once a JVM has booted (its process goes with `self`).
            if crate::deadline::stop_requested() {
                return Err(TransportError::broker(
                    self.program,
                    format!("stopped while the broker `{}` started", self.program),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What the broker logged as it failed (see [`super::said`]).
    fn last_words(&self) -> String {
        self.service()
            .last_words()
            .unwrap_or_else(|| "it said nothing".into())
    }
}

/// The error of a broker that failed to start: `the broker `PROGRAM` WHAT`.
fn broker_says(program: &'static str, what: String) -> TransportError {
    TransportError::broker(program, format!("the broker `{program}` {what}"))
}

impl Drop for Broker {
    fn drop(&mut self) {
        if self.child.take().is_some() {
            sys::stop_child(self.pid, Duration::from_secs(3));
        }
        if let Some(h) = self.helper.take() {
            sys::kill(h.id(), libc::SIGTERM);
            sys::reap(h.id(), Duration::from_secs(1));
        }
    }
}

/// A brokered transport's set-up: `--opt broker=URL` names a running broker, where the case
/// uses names of its own (`msgperf-PID-N...`) and `cleanup(url, name)` removes what they left
/// when the case ends; without it (`start`), `program` is started for the case and its URL is
/// `scheme://127.0.0.1:PORT`.
pub fn setup(
    transport: &str,
    program: &Program,
    scheme: &str,
    plan: &SetupPlan,
    spec: &ChannelSpec,
    remove: Option<Remove>,
) -> Result<Setup, TransportError> {
    let name = fresh_name();
    match spec.options.get("broker").map(String::as_str) {
        Some(url) if url != "start" => {
            let place = Place::Broker {
                url: url.into(),
                name: name.clone(),
            };
            let rendezvous = Rendezvous::new(transport, place);
            let Some(remove) = remove else {
                return Ok(Setup::new(rendezvous, ()));
            };
            let dir = ledger_dir();
            sweep(&dir, transport, url, remove, spec.timeout);
            let made = Made {
                transport: transport.into(),
                url: url.into(),
                name,
                plan: plan.clone(),
            };
            let noted = note(&dir, &made);
            Ok(Setup::new(
                rendezvous,
                Cleanup {
                    made,
                    remove,
                    noted,
                    timeout: spec.timeout,
                },
            ))
        }
        _ => {
            let broker = Broker::start(program, plan.cpu, spec.timeout, plan.service_at.as_ref())?;
            let url = format!("{scheme}://{}:{}", broker.host, broker.port);
            let service = broker.service();
            let place = Place::Broker { url, name };
            Ok(Setup::new(Rendezvous::new(transport, place), broker).with_service(service))
        }
    }
}

/// A floor's broker: the one `--opt broker` names, or `program` started here, where a case's
/// broker runs ([`FloorRoles::service_cpu`]). Its URL, and the broker to keep until the floor
/// is over.
pub fn for_floor(
    program: &Program,
    scheme: &str,
    roles: &FloorRoles,
    timeout: Duration,
) -> std::io::Result<(String, Option<Broker>)> {
    match roles.options.get("broker").filter(|b| *b != "start") {
        Some(url) => Ok((url.clone(), None)),
        None => {
            let b = Broker::start(program, roles.service_cpu(), timeout, None)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            Ok((format!("{scheme}://127.0.0.1:{}", b.port), Some(b)))
        }
    }
}

/// A brokered end's meeting place: the broker's URL and the case's name there.
pub fn meeting(at: &Rendezvous) -> Result<(&str, &str), TransportError> {
    match &at.place {
        Place::Broker { url, name } => Ok((url, name)),
        other => Err(TransportError::Unsupported(format!(
            "{} meets at a broker, not {other:?}",
            at.transport
        ))),
    }
}

/// No broker answers at `url` (`why`, as the client said): names the `program` looked for.
pub fn not_there(url: &str, why: impl std::fmt::Display, program: &str) -> TransportError {
    TransportError::NoBroker(format!(
        "no broker answers at {url} ({why}): is {program} running there? (without --opt broker, msgperf starts one)"
    ))
}

/// Checks `--opt broker`: `start`, or a URL of the transport's scheme.
pub fn check_url(v: &str, scheme: &str) -> Result<(), String> {
    if v == "start" || v.starts_with(&format!("{scheme}://")) {
        Ok(())
    } else {
        Err(format!(
            "`start`, or a running broker's URL: {scheme}://HOST:PORT"
        ))
    }
}

/// A hello both ends of a channel trade through the broker before it counts as open (shorter
/// than any message): a connecting end whose peer never comes fails within the timeout
/// instead of publishing to no one.
const HELLO: &[u8] = b"hi";

/// Trades the hello on a brokered channel's end (topics need none: every reader subscribed
/// before any end was told to open).
pub fn greet(end: &mut dyn Endpoint, side: Side) -> Result<(), TransportError> {
    let mut buf = [0u8; 16];
    let mut hear = |end: &mut dyn Endpoint| match end.recv(&mut buf) {
        Ok(n) if buf[..n] == *HELLO => Ok(()),
        Ok(_) => Err(TransportError::Corrupt(
            "the peer's first message was not its hello".into(),
        )),
        Err(e) => Err(e),
    };
    match side {
        Side::Accept(_) => {
            hear(end)?;
            end.send(HELLO)
        }
        Side::Connect(_) => {
            end.send(HELLO)?;
            hear(end)
        }
        Side::Publish { .. } | Side::Subscribe { .. } => Ok(()),
    }
}

/// A brokered end that is made and only has to trade the hello with its peer ([`greet`])
/// when finished.
pub struct Greeting<E>(pub E, pub Side);

impl<E: Endpoint + 'static> Opening for Greeting<E> {
    fn finish(self: Box<Self>, _: &Rendezvous, _: &ChannelSpec) -> EndpointResult {
        let Greeting(mut end, side) = *self;
        greet(&mut end, side)?;
        Ok(Box::new(end))
    }
}

/// Removes what a case made on a broker that msgperf did not start (streams, keys, topics),
/// given the broker's URL, the case's name there and its plan; what is not there is no error.
/// Called when the case ends, or by a later case for a run killed before it could; each call
/// to the broker waits at most `timeout` (the case's), as every wait of a case does.
pub type Remove = fn(url: &str, name: &str, plan: &SetupPlan, timeout: Duration);

/// What a case made on a broker msgperf did not start, as its note in the ledger keeps it.
#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct Made {
    transport: String,
    url: String,
    name: String,
    plan: SetupPlan,
}

/// Removes a case's names from a broker msgperf did not start, then its note.
struct Cleanup {
    made: Made,
    remove: Remove,
    noted: Option<PathBuf>,
    timeout: Duration,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let m = &self.made;
        (self.remove)(&m.url, &m.name, &m.plan, self.timeout);
        if let Some(note) = &self.noted {
            let _ = std::fs::remove_file(note);
        }
    }
}

/// The ledger of what runs made on brokers that msgperf did not start: a note per case
/// (`msgperf-PID-N.json`), written before anything is made and removed after it is. A run
/// killed before it could remove its names (SIGKILL, a power cut) leaves its note, which
/// outlives a reboot as the names on the broker do: `$XDG_STATE_HOME/msgperf/left-on-brokers`,
/// or `~/.local/state/...`.
fn ledger_dir() -> PathBuf {
    std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(std::env::temp_dir)
        .join("msgperf")
        .join("left-on-brokers")
}

/// Notes what a case is about to make; None (and a warning) where the ledger cannot be written.
fn note(dir: &Path, made: &Made) -> Option<PathBuf> {
    let path = dir.join(format!("{}.json", made.name));
    let written = std::fs::create_dir_all(dir).and_then(|()| {
        std::fs::write(
            &path,
            serde_json::to_vec(made).map_err(std::io::Error::other)?,
        )
    });
    match written {
        Ok(()) => Some(path),
        Err(e) => {
            eprintln!(
                "msgperf: warning: cannot note in {} what this case makes on {} ({e}): if msgperf is killed, remove `{}*` there yourself",
                dir.display(),
                made.url,
                made.name
            );
            None
        }
    }
}

/// Removes what runs that are gone left on `transport`'s broker at `url`, and their notes;
/// says so on stderr. The names of runs still alive, and those on other brokers, stay.
fn sweep(dir: &Path, transport: &str, url: &str, remove: Remove, timeout: Duration) {
    let Ok(notes) = std::fs::read_dir(dir) else {
        return;
    };
    for n in notes.flatten() {
        let file = n.file_name().to_string_lossy().to_string();
        let pid = file
            .strip_prefix("msgperf-")
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok());
        let Some(pid) = pid else { continue };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let made: Option<Made> = std::fs::read(n.path())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        match made {
            Some(m) if m.transport == transport && m.url == url => {
                remove(url, &m.name, &m.plan, timeout);
                let _ = std::fs::remove_file(n.path());
                eprintln!(
                    "msgperf: removed from {url} what run {pid} made there and, killed, left ({}*)",
                    m.name
                );
            }
            Some(_) => {}
            // A note that cannot be read names nothing to remove.
            None => {
                let _ = std::fs::remove_file(n.path());
            }
        }
    }
}

/// A program at its path, or in `PATH` or the sbin directories (where Debian puts mosquitto).
fn find(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(PathBuf::from(name)).filter(|p| p.is_file());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

impl Program {
    /// A program that needs only its command line and, if given, its configuration file: no
    /// environment, no helper, up once its port answers.
    pub const fn plain(
        name: &'static str,
        package: &'static str,
        args: fn(&Bind) -> Vec<String>,
        config: Option<Config>,
    ) -> Program {
        Program {
            name,
            package,
            args,
            config,
            configure: None,
            env: None,
            helper: None,
            boots_within: Duration::ZERO,
            greeting: None,
            needs: None,
        }
    }

    /// What it needs on the machine: its program, from its package.
    pub fn needs(&self) -> super::Need {
        program_need(self.name, self.package)
    }
}

/// A program msgperf runs (found in `PATH` or the sbin directories), from a Debian package.
pub fn program_need(name: &str, package: &'static str) -> super::Need {
    super::Need {
        what: name.to_string(),
        present: find(name).is_some(),
        to_run: true,
        get: super::Get::Debian(package),
    }
}

/// `N` distinct loopback ports no one listens on now.
pub fn free_ports<const N: usize>() -> Result<[u16; N], TransportError> {
    let held = (0..N)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut ports = [0; N];
    for (p, l) in ports.iter_mut().zip(&held) {
        *p = l.local_addr()?.port();
    }
    Ok(ports)
}

/// What an end writes to and reads from at a broker, under the case's `name`, in the broker's
/// own separator (`.` for NATS subjects, `:` for Redis keys, `/` for MQTT topics): a channel's
/// two directions, or a topic.
pub fn names(name: &str, sep: char, side: Side) -> (Option<String>, Option<String>) {
    let channel = |n: u32, way: &str| format!("{name}{sep}c{n}{sep}{way}");
    let topic = |t: u32| format!("{name}{sep}t{t}");
    match side {
        Side::Accept(n) => (Some(channel(n, "back")), Some(channel(n, "forth"))),
        Side::Connect(n) => (Some(channel(n, "forth")), Some(channel(n, "back"))),
        Side::Publish { topic: t, .. } => (Some(topic(t)), None),
        Side::Subscribe { topic: t, .. } => (None, Some(topic(t))),
    }
}

/// Every name a case's `plan` uses at a broker, once each: both directions of each channel,
/// and each topic (`plan.topics` holds each topic's number of readers, in topic order). For
/// the brokers whose set-up makes them (Kafka's topics, RabbitMQ's streams).
#[allow(dead_code)] // Only the brokers whose set-up makes its names call it.
pub fn plan_names(name: &str, sep: char, plan: &SetupPlan) -> Vec<String> {
    let channels = (0..plan.channels).flat_map(|c| {
        let (a, b) = names(name, sep, Side::Accept(c));
        [a, b].into_iter().flatten()
    });
    let topics = (0u32..)
        .zip(&plan.topics)
        .filter_map(|(topic, &readers)| names(name, sep, Side::Publish { topic, readers }).0);
    let mut all: Vec<String> = channels.chain(topics).collect();
    all.sort();
    all.dedup();
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::said;

    #[test]
    fn a_plan_names_each_channel_both_ways_and_each_topic_by_its_number() {
        let plan = SetupPlan {
            channels: 1,
            // One topic with five readers, one with one.
            topics: vec![5, 1],
            ..SetupPlan::default()
        };
        assert_eq!(
            plan_names("m", '.', &plan),
            ["m.c0.back", "m.c0.forth", "m.t0", "m.t1"]
        );
    }

    /// The cases that the ledger's test's `remove` was asked to remove, as `url name channels`.
    static REMOVED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

    fn removed(url: &str, name: &str, plan: &SetupPlan, _: Duration) {
        REMOVED
            .lock()
            .unwrap()
            .push(format!("{url} {name} {}", plan.channels));
    }

    #[test]
    fn the_ledger_keeps_a_case_until_it_removed_its_names_and_a_killed_runs_are_removed_later() {
        let dir = tempfile::tempdir().unwrap();
        let made = |pid: u32, case: u32, transport: &str, url: &str| Made {
            transport: transport.into(),
            url: url.into(),
            name: format!("msgperf-{pid}-{case}"),
            plan: SetupPlan {
                channels: 2,
                ..SetupPlan::default()
            },
        };
        // A case that ends removes its names, then its note.
        let me = std::process::id();
        let mine = made(me, 7, "t", "u://a");
        let noted = note(dir.path(), &mine).expect("noted");
        let on_disk: Made = serde_json::from_slice(&std::fs::read(&noted).unwrap()).unwrap();
        assert_eq!(on_disk, mine);
        drop(Cleanup {
            made: mine,
            remove: removed,
            noted: Some(noted.clone()),
            timeout: Duration::from_secs(1),
        });
        assert!(!noted.exists());
        assert_eq!(
            *REMOVED.lock().unwrap(),
            [format!("u://a msgperf-{me}-7 2")]
        );
        REMOVED.lock().unwrap().clear();

        // A run that is gone (a child that has exited and been reaped), its cases on two
        // brokers and of two transports; and a run alive.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let killed = note(dir.path(), &made(gone, 7, "t", "u://a")).unwrap();
        let elsewhere = note(dir.path(), &made(gone, 8, "t", "u://b")).unwrap();
        let other = note(dir.path(), &made(gone, 9, "other", "u://a")).unwrap();
        let alive = note(dir.path(), &made(me, 10, "t", "u://a")).unwrap();
        sweep(dir.path(), "t", "u://a", removed, Duration::from_secs(1));
        assert_eq!(
            *REMOVED.lock().unwrap(),
            [format!("u://a msgperf-{gone}-7 2")]
        );
        assert!(!killed.exists());
        // Another broker's, another transport's and a live run's names stay for later.
        assert!(elsewhere.exists());
        assert!(other.exists());
        assert!(alive.exists());
    }

    static MISSING: Program = Program::plain(
        "msgperf-no-such-broker",
        "msgperf-no-such-broker",
        |_| vec![],
        None,
    );

    // `false` exits at once: what it logged and its status are the error.
    static FAILS: Program = Program::plain("false", "coreutils", |_| vec![], None);

    #[test]
    fn a_missing_broker_says_how_to_install_it() {
        let e = Broker::start(&MISSING, None, Duration::from_secs(1), None)
            .err()
            .expect("refused")
            .to_string();
        assert!(e.contains("is not installed"), "{e}");
        assert!(e.contains("apt-get install msgperf-no-such-broker"), "{e}");
    }

    #[test]
    fn a_broker_that_exits_at_start_is_named_and_leaves_no_directory() {
        let _alone = STARTS.lock().unwrap_or_else(|p| p.into_inner());
        let before = leftovers();
        let e = Broker::start(&FAILS, None, Duration::from_secs(10), None)
            .err()
            .expect("refused")
            .to_string();
        assert!(e.contains("`false` exited at start"), "{e}");
        assert_eq!(leftovers(), before);
    }

    /// A broker that stops itself as it starts (as SIGSTOP or a debugger would), and one that
    /// never answers: each is named within the case's timeout though it could boot for longer,
    /// and leaves no process or directory.
    #[test]
    fn a_broker_stopped_or_silent_at_start_is_named_within_the_timeout() {
        static STOPS: Program = Program {
            boots_within: Duration::from_secs(60),
            ..Program::plain(
                "sh",
                "dash",
                |_| vec!["-c".into(), "kill -STOP $$".into()],
                None,
            )
        };
        static SILENT: Program = Program::plain("sleep", "coreutils", |_| vec!["30".into()], None);
        let _alone = STARTS.lock().unwrap_or_else(|p| p.into_inner());
        let before = leftovers();
        let start = Instant::now();
        let e = Broker::start(&STOPS, None, Duration::from_secs(1), None)
            .err()
            .expect("refused")
            .to_string();
        assert!(e.contains("`sh` (pid"), "{e}");
        assert!(e.contains("was stopped for"), "{e}");
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{:?}",
            start.elapsed()
        );
        let pid: u32 = e
            .split("(pid ")
            .nth(1)
            .and_then(|r| r.split(')').next())
            .and_then(|p| p.parse().ok())
            .expect("its pid");
        assert!(!sys::process_alive(pid), "{pid} was left");
        let e = Broker::start(&SILENT, None, Duration::from_secs(1), None)
            .err()
            .expect("refused")
            .to_string();
        assert!(e.contains("`sleep` did not answer on 127.0.0.1:"), "{e}");
        assert!(e.contains("raise --timeout"), "{e}");
        assert_eq!(leftovers(), before);
    }

    /// Held by the tests that compare this process's directories before and after a start.
    static STARTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Where [`TAKEN`] counts its starts.
    fn tally() -> PathBuf {
        std::env::temp_dir().join(format!("msgperf-tally-{}", std::process::id()))
    }

    /// A broker whose port is always taken by the time it binds it.
    static TAKEN: Program = Program::plain(
        "sh",
        "dash",
        |_| {
            let say = "echo 'listen tcp 127.0.0.1:1: bind: address already in use' >&2; exit 1";
            vec![
                "-c".into(),
                format!("echo start >> {}; {say}", tally().display()),
            ]
        },
        None,
    );

    #[test]
    fn a_broker_whose_port_was_taken_starts_again_on_another_twice_at_most() {
        let _alone = STARTS.lock().unwrap_or_else(|p| p.into_inner());
        let _ = std::fs::remove_file(tally());
        let before = leftovers();
        let e = Broker::start(&TAKEN, None, Duration::from_secs(10), None)
            .err()
            .expect("refused")
            .to_string();
        let starts = std::fs::read_to_string(tally()).unwrap_or_default();
        let _ = std::fs::remove_file(tally());
        assert!(e.contains("address already in use"), "{e}");
        assert_eq!(starts.lines().count(), 3, "{starts}");
        assert_eq!(leftovers(), before);
    }

    #[test]
    fn a_failure_is_told_by_its_exception_and_cause_not_by_the_trace_s_end() {
        let log = "[x] INFO starting\nException in thread \"main\" java.lang.RuntimeException: bad dir\n\tat a.B.c(B.java:1)\nCaused by: java.net.BindException: Address already in use\n\tat d.E.f(E.java:2)\n\t... 18 more\n";
        assert_eq!(
            said(log),
            "Exception in thread \"main\" java.lang.RuntimeException: bad dir (Caused by: java.net.BindException: Address already in use)"
        );
        // Without a trace, the last line, whatever came before it.
        assert_eq!(
            said("Error: a warning\nformatting\ndone badly\n"),
            "done badly"
        );
        assert_eq!(said(""), "it said nothing");
    }

    fn leftovers() -> Vec<String> {
        let mine = format!("msgperf-{}-", std::process::id());
        let mut v: Vec<String> = std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().to_string())
            .filter(|n| n.starts_with(&mine))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn each_direction_of_a_channel_is_one_ends_out_and_the_others_in() {
        let (a_out, a_in) = names("run", '.', Side::Accept(3));
        let (c_out, c_in) = names("run", '.', Side::Connect(3));
        assert_eq!(
            (a_out, c_in),
            (Some("run.c3.back".into()), Some("run.c3.back".into()))
        );
        assert_eq!(
            (c_out, a_in),
            (Some("run.c3.forth".into()), Some("run.c3.forth".into()))
        );
        let p = names(
            "run",
            '/',
            Side::Publish {
                topic: 1,
                readers: 2,
            },
        );
        let s = names(
            "run",
            '/',
            Side::Subscribe {
                topic: 1,
                reader: 0,
            },
        );
        assert_eq!(
            (p, s),
            ((Some("run/t1".into()), None), (None, Some("run/t1".into())))
        );
    }
}
