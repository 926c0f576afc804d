//! Hosts other than the runner's. A host is a name and a launcher: a command prefix that runs
//! a program there with its stdin and stdout piped back (`ssh -T user@host`, `kubectl exec -i
//! pod --`, `docker exec -i box`, `ip netns exec ns`, `srun -w node`): authentication and
//! encryption are the launcher's, and msgperf runs no daemon of its own. Or `netns`: a network
//! namespace msgperf makes on this machine for the run, on a bridge with the runner, and
//! removes afterwards (the test bed).

use super::ExecError;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

pub use crate::result::place::{Launcher, Link, LOCAL};

/// A host, ready for roles.
#[derive(Clone, Debug)]
pub struct Host {
    pub name: String,
    /// The words that run a program there, before the program.
    pub prefix: Vec<String>,
    /// As the run records it.
    pub launcher: String,
    /// Where its roles bind, where known before they start (a namespace msgperf made); else
    /// the far side says (`FarHello::addresses`).
    pub address: Option<String>,
    /// The runner's address as this host reaches it, where known (the bed's bridge).
    pub local_address: Option<String>,
    /// A namespace of this run's bed (`NAME=netns`), whose link msgperf made and reads.
    pub in_bed: bool,
}

impl Host {
    /// The runner's address on the link to this host, whose far side is at `address`.
    pub fn local_end(&self, address: &str) -> Option<String> {
        self.local_address
            .clone()
            .or_else(|| local_address_towards(address))
    }
}

/// The run's hosts; the namespaces made for it go when this drops.
pub struct Hosts {
    hosts: BTreeMap<String, Host>,
    _bed: Option<Bed>,
}

impl Hosts {
    pub fn none() -> Hosts {
        Hosts {
            hosts: BTreeMap::new(),
            _bed: None,
        }
    }

    /// Sets up `given` (name → launcher as written): makes the namespaces of `netns` hosts.
    pub fn set_up(given: &BTreeMap<String, String>) -> Result<Hosts, ExecError> {
        let mut hosts = BTreeMap::new();
        let mut netns = Vec::new();
        for (name, value) in given {
            match Launcher::parse(name, value).map_err(ExecError::Refused)? {
                Launcher::Command(words) => {
                    hosts.insert(
                        name.clone(),
                        Host {
                            name: name.clone(),
                            prefix: words,
                            launcher: value.clone(),
                            address: None,
                            local_address: None,
                            in_bed: false,
                        },
                    );
                }
                Launcher::Netns(link) => netns.push((name.clone(), link)),
            }
        }
        let bed = if netns.is_empty() {
            None
        } else {
            let bed = Bed::make(&netns)?;
            for ((name, link), (ns, address)) in netns.iter().zip(&bed.namespaces) {
                hosts.insert(
                    name.clone(),
                    Host {
                        name: name.clone(),
                        prefix: vec!["ip".into(), "netns".into(), "exec".into(), ns.clone()],
                        launcher: format!("netns ({ns}, {address}{})", link.describe()),
                        address: Some(address.clone()),
                        local_address: Some(bed.address.clone()),
                        in_bed: true,
                    },
                );
            }
            Some(bed)
        };
        Ok(Hosts { hosts, _bed: bed })
    }

    pub fn get(&self, name: &str) -> Option<&Host> {
        self.hosts.get(name)
    }

    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }

    /// Where the bytes that roles on `placed` hosts send can all be counted, the devices that
    /// count each sent packet once: loopback's and the bridge's sending (this host's), and
    /// what the host end of each namespace's veth pair received (all its namespace sent).
    /// None where a placed host is not a namespace of this run (its link is not ours to read).
    pub fn wire_devices<'a>(
        &self,
        placed: impl IntoIterator<Item = &'a str>,
    ) -> Option<Vec<(String, Count)>> {
        let bed = self._bed.as_ref()?;
        let all_ours = placed
            .into_iter()
            .all(|h| h == LOCAL || self.hosts.get(h).is_some_and(|x| x.in_bed));
        if !all_ours {
            return None;
        }
        let mut devices = vec![
            ("lo".to_string(), Count::Sent),
            (bed.bridge.clone(), Count::Sent),
        ];
        devices.extend(bed.outer.iter().map(|d| (d.clone(), Count::Received)));
        Some(devices)
    }
}

/// Which of a device's counters holds the packets sent through it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    Sent,
    Received,
}

/// Where `msgperf deploy` puts this binary on a far host, relative to where its launcher
/// starts programs (ssh: the home directory): named by build, so builds never mix.
pub fn deployed_path() -> String {
    format!(".cache/msgperf/msgperf-{}", super::control::build_id())
}

/// Copies this binary to `host` through its launcher (to [`deployed_path`] there), and checks
/// that the copy runs and is this build. Each step is one launcher command of plain words
/// (`mkdir`, `dd`, `chmod`, `mv`), so ssh's joining of words and exec-style launchers run it
/// alike. Returns the path there.
pub fn deploy(host: &Host, timeout: Duration) -> Result<String, ExecError> {
    let exe = super::own_executable()?;
    let path = deployed_path();
    let part = format!("{path}.part");
    let dir = path.rsplit_once('/').map_or(".", |(d, _)| d);
    let step = |words: &[&str], input: Option<&std::path::Path>| -> Result<(), ExecError> {
        let mut cmd = Command::new(&host.prefix[0]);
        cmd.args(&host.prefix[1..])
            .args(words)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        match input {
            Some(f) => cmd.stdin(
                std::fs::File::open(f)
                    .map_err(|e| ExecError::os(format!("cannot read {}", f.display()), e))?,
            ),
            None => cmd.stdin(Stdio::null()),
        };
        crate::sys::role_command(&mut cmd, &[]);
        let child = cmd.spawn().map_err(|e| {
            ExecError::Refused(format!(
                "host {}: its launcher could not start ({e}): is `{}` installed here?",
                host.name, host.prefix[0]
            ))
        })?;
        // Copying a binary over a slow link takes longer than a step of a case.
        match crate::sys::output_within(child, timeout.max(Duration::from_secs(120))) {
            Ok(Some(out)) if out.status.success() => Ok(()),
            Ok(Some(out)) => Err(ExecError::Refused(format!(
                "host {}: `{} {}` failed ({}): {}",
                host.name,
                host.launcher,
                words.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))),
            Err(e) => Err(ExecError::os(format!("host {}", host.name), e)),
            Ok(None) => Err(ExecError::Refused(format!(
                "host {}: `{}` did not finish within the bound",
                host.name,
                words.join(" ")
            ))),
        }
    };
    step(&["mkdir", "-p", dir], None)?;
    step(
        &["dd", &format!("of={part}"), "bs=1M", "status=none"],
        Some(&exe),
    )?;
    step(&["chmod", "755", &part], None)?;
    step(&["mv", "-f", &part, &path], None)?;
    let hello = super::runner::far_hello(host, std::path::Path::new(&path), timeout)?;
    if hello.build != super::control::build_id() {
        return Err(ExecError::Refused(format!(
            "host {}: the copy at {path} says it is build {}, not {}: the copy was damaged; deploy again",
            host.name,
            hello.build,
            super::control::build_id()
        )));
    }
    Ok(path)
}

/// The runner's address that reaches `far` (the source address its routes pick); no packet
/// is sent.
pub fn local_address_towards(far: &str) -> Option<String> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect((far, 9)).ok()?;
    Some(s.local_addr().ok()?.ip().to_string())
}

/// Network namespaces on a bridge: `msgperf-PID-NAME`, a veth pair each, addresses in a /24
/// no route of this machine uses.
struct Bed {
    bridge: String,
    /// The bridge's address: the runner's side.
    address: String,
    /// Namespace and its address, per host.
    namespaces: Vec<(String, String)>,
    /// The host end of each namespace's veth pair.
    outer: Vec<String>,
}

impl Bed {
    fn make(names: &[(String, Link)]) -> Result<Bed, ExecError> {
        sweep_stale();
        let pid = std::process::id();
        let net = free_subnet().ok_or_else(|| {
            ExecError::Refused(
                "--host NAME=netns: every 10.x.y.0/24 msgperf tries is in use by a route here: remove some, or give launchers instead".into(),
            )
        })?;
        let mut bed = Bed {
            bridge: format!("mpb{pid}"),
            address: format!("{net}.1"),
            namespaces: Vec::new(),
            outer: Vec::new(),
        };
        ip(&["link", "add", &bed.bridge, "type", "bridge"])?;
        ip(&[
            "addr",
            "add",
            &format!("{}/24", bed.address),
            "dev",
            &bed.bridge,
        ])?;
        ip(&["link", "set", &bed.bridge, "up"])?;
        for (i, (name, link)) in names.iter().enumerate() {
            let ns = format!("msgperf-{pid}-{name}");
            let (outer, inner) = (format!("mp{pid}h{i}"), format!("mp{pid}p{i}"));
            let address = format!("{net}.{}", i + 2);
            ip(&["netns", "add", &ns])?;
            // Pushed at once: dropping the bed removes what was made so far.
            bed.namespaces.push((ns.clone(), address.clone()));
            ip(&[
                "link", "add", &outer, "type", "veth", "peer", "name", &inner,
            ])?;
            bed.outer.push(outer.clone());
            ip(&["link", "set", &inner, "netns", &ns])?;
            ip(&["link", "set", &outer, "master", &bed.bridge])?;
            ip(&["link", "set", &outer, "up"])?;
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{address}/24"),
                "dev",
                &inner,
            ])?;
            ip(&["-n", &ns, "link", "set", &inner, "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            if let Some(rate) = link.rate_bits {
                // A token bucket on each end's egress: the rate holds both ways.
                limit_rate(None, &outer, rate)?;
                limit_rate(Some(&ns), &inner, rate)?;
            }
        }
        Ok(bed)
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        // Deleting one end of a veth pair deletes both. A namespace's own end would go with the
        // namespace, but a namespace outlives its name while anything holds it (a socket that
        // could not close over a link that went down retries for minutes): the pair goes now.
        for outer in &self.outer {
            let _ = ip(&["link", "del", outer]);
        }
        for (ns, _) in &self.namespaces {
            let _ = ip(&["netns", "del", ns]);
        }
        let _ = ip(&["link", "del", &self.bridge]);
    }
}

/// Runs `ip ARGS` within a bound; its complaint, named, if it fails.
fn ip(args: &[&str]) -> Result<String, ExecError> {
    run_within("ip", args, "iproute2")
}

/// Runs `program ARGS` (from Debian's `package`) within a bound; its complaint, named.
fn run_within(program: &str, args: &[&str], package: &str) -> Result<String, ExecError> {
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            ExecError::os(
                format!("--host NAME=netns needs `{program}` (Debian: apt-get install {package})"),
                e,
            )
        })?;
    match crate::sys::output_within(child, Duration::from_secs(10)) {
        Ok(Some(out)) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout).into()),
        Ok(Some(out)) => Err(ExecError::Refused(format!(
            "`{program} {}` failed: {} (making network namespaces needs root: run as root, or give --host a launcher)",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))),
        Err(e) => Err(ExecError::os(format!("`{program} {}`", args.join(" ")), e)),
        Ok(None) => Err(ExecError::Refused(format!(
            "`{program} {}` did not finish within 10 s",
            args.join(" ")
        ))),
    }
}

/// A token bucket of `rate` bits/s on a device's egress (`tc qdisc ... tbf`). Its bucket
/// holds 2 ms of the rate (16 KiB at least: a few full frames), so short round trips pass
/// unshaped while a stream is held to the rate within a few percent.
fn limit_rate(netns: Option<&str>, dev: &str, rate: u64) -> Result<(), ExecError> {
    let burst = (rate / 8 / 500).max(16 * 1024).to_string();
    let rate = format!("{rate}bit");
    let mut args = netns.map_or(vec![], |ns| vec!["-n", ns]);
    args.extend([
        "qdisc", "add", "dev", dev, "root", "tbf", "rate", &rate, "burst", &burst, "latency",
        "50ms",
    ]);
    run_within("tc", &args, "iproute2").map(|_| ())
}

/// A 10.x.y.0/24 that no route here covers, from this process's id (concurrent runs pick
/// different ones).
fn free_subnet() -> Option<String> {
    let routes = ip(&["-4", "route", "show", "table", "all"]).unwrap_or_default();
    let pid = std::process::id();
    (0..64u32)
        .map(|k| {
            let n = pid.wrapping_add(k * 7919);
            format!("10.{}.{}", 64 + (n >> 8) % 128, n & 255)
        })
        .find(|net| !routes.contains(&format!("{net}.")))
}

/// Namespaces and bridges of runs whose process is gone (killed before it could clean up).
fn sweep_stale() {
    // Only names msgperf makes (its process id in them): anything else is not ours to remove.
    let gone = |pid: &str| {
        pid.parse::<u32>()
            .is_ok_and(|p| !crate::sys::process_alive(p))
    };
    if let Ok(list) = ip(&["netns", "list"]) {
        for ns in list.lines().filter_map(|l| l.split_whitespace().next()) {
            if let Some(pid) = ns
                .strip_prefix("msgperf-")
                .and_then(|r| r.split('-').next())
            {
                if gone(pid) {
                    let _ = ip(&["netns", "del", ns]);
                }
            }
        }
    }
    if let Ok(links) = ip(&["-o", "link", "show", "type", "bridge"]) {
        for link in links.lines().filter_map(|l| l.split(": ").nth(1)) {
            if let Some(pid) = link.strip_prefix("mpb") {
                if gone(pid) {
                    let _ = ip(&["link", "del", link]);
                }
            }
        }
    }
    // The host ends of veth pairs (`mpPIDhN@ifM`) whose run was killed.
    if let Ok(links) = ip(&["-o", "link", "show", "type", "veth"]) {
        for link in links.lines().filter_map(|l| l.split(": ").nth(1)) {
            let name = link.split('@').next().unwrap_or(link);
            let pid = name.strip_prefix("mp").and_then(|r| r.split_once('h'));
            if pid.is_some_and(|(pid, _)| gone(pid)) {
                let _ = ip(&["link", "del", name]);
            }
        }
    }
}
