//! The media driver a case's set-up starts: Aeron's C driver, linked into msgperf and run as
//! `msgperf service aeron DIR` in a process of its own, so that the runner measures its CPU
//! and watches it as it does a broker. It is configured by Aeron's own environment variables
//! (threading mode, idle strategies, term length), is up once a client connects to it, and is
//! stopped (SIGTERM, then SIGKILL) with its directory removed when the case ends; it dies with
//! the process that started it.

use super::client;
use crate::sys;
use crate::transport::{Options, Service, TransportError};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The length of each term of a publication's log (three terms): a message may take an
/// eighth of it.
pub(super) const TERM: usize = 4 << 20;

/// A running media driver, stopped when dropped.
pub(super) struct MediaDriver {
    pub dir: PathBuf,
    pid: u32,
    child: Option<Child>,
    log: PathBuf,
}

/// Aeron's environment for the driver that `options` ask for.
fn environment(dir: &Path, options: &Options) -> Vec<(&'static str, String)> {
    let opt = |k: &str, d: &str| options.get(k).cloned().unwrap_or_else(|| d.to_string());
    let threading = match opt("threading", "shared").as_str() {
        "dedicated" => "DEDICATED",
        "shared-network" => "SHARED_NETWORK",
        _ => "SHARED",
    };
    let idle = match opt("driver-idle", "backoff").as_str() {
        "busy-spin" => "spin",
        "yield" => "yield",
        "sleep" => "sleeping",
        _ => "backoff",
    };
    let mut env = vec![
        ("AERON_DIR", dir.display().to_string()),
        ("AERON_THREADING_MODE", threading.to_string()),
        ("AERON_DIR_DELETE_ON_START", "true".into()),
        ("AERON_DIR_DELETE_ON_SHUTDOWN", "true".into()),
        ("AERON_TERM_BUFFER_LENGTH", TERM.to_string()),
        ("AERON_IPC_TERM_BUFFER_LENGTH", TERM.to_string()),
    ];
    // Every agent idles alike, whichever of them the threading mode runs.
    for key in [
        "AERON_CONDUCTOR_IDLE_STRATEGY",
        "AERON_SENDER_IDLE_STRATEGY",
        "AERON_RECEIVER_IDLE_STRATEGY",
        "AERON_SHAREDNETWORK_IDLE_STRATEGY",
        "AERON_SHARED_IDLE_STRATEGY",
    ] {
        env.push((key, idle.to_string()));
    }
    env
}

impl MediaDriver {
    /// Starts a driver in `dir` (which it makes and removes) on `cpu`, up within `timeout`.
    pub fn start(
        dir: &Path,
        options: &Options,
        cpu: Option<usize>,
        timeout: Duration,
    ) -> Result<MediaDriver, TransportError> {
        let exe = sys::own_executable()?;
        let log = dir.with_extension("log");
        let out = std::fs::File::create(&log)?;
        let mut cmd = Command::new(exe);
        cmd.args(["service", "aeron"])
            .arg(dir)
            .envs(environment(dir, options))
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        sys::service_command(&mut cmd, cpu);
        let child = cmd.spawn().map_err(|e| {
            TransportError::broker("aeron", format!("could not start the media driver: {e}"))
        })?;
        let mut d = MediaDriver {
            dir: dir.to_path_buf(),
            pid: child.id(),
            child: Some(child),
            log,
        };
        let deadline = crate::deadline::Deadline::after(timeout);
        loop {
            if let Some(Ok(Some(status))) = d.child.as_mut().map(Child::try_wait) {
                d.child = None;
                return Err(TransportError::broker(
                    "aeron",
                    format!(
                        "the media driver exited at start ({status}): {}",
                        d.last_words()
                    ),
                ));
            }
            if dir.join("cnc.dat").exists() && client(dir).is_ok() {
                return Ok(d);
            }
            if deadline.expired() {
                return Err(TransportError::broker(
                    "aeron",
                    format!(
                        "the media driver in {} did not take clients within {timeout:?}: {}",
                        dir.display(),
                        d.last_words()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// What the runner watches and measures.
    pub fn service(&self) -> Service {
        Service {
            label: "media driver".into(),
            program: "msgperf service aeron".into(),
            pid: self.pid,
            log: Some(self.log.clone()),
        }
    }

    fn last_words(&self) -> String {
        self.service()
            .last_words()
            .unwrap_or_else(|| "it said nothing".into())
    }
}

impl Drop for MediaDriver {
    fn drop(&mut self) {
        if self.child.take().is_some() {
            sys::stop_child(self.pid, Duration::from_secs(3));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_file(&self.log);
    }
}

/// `msgperf service aeron DIR`: runs the driver that the environment describes until SIGTERM.
pub(super) fn run(args: &[String]) -> Result<(), TransportError> {
    use rusteron_media_driver::{AeronDriver, AeronDriverContext};
    if args.len() != 1 {
        return Err(TransportError::Unsupported(
            "usage: msgperf service aeron DIR (started by a case's set-up)".into(),
        ));
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [libc::SIGTERM, libc::SIGINT] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let failed = |what: &str, e: rusteron_media_driver::AeronCError| {
        TransportError::middleware("aeron media driver", what, e)
    };
    let context = AeronDriverContext::new().map_err(|e| failed("its context", e))?;
    let driver = AeronDriver::new(&context).map_err(|e| failed("starting", e))?;
    driver.start(true).map_err(|e| failed("starting", e))?;
    while !stop.load(Ordering::Acquire) {
        let work = driver.main_do_work().map_err(|e| failed("its work", e))?;
        driver.main_idle_strategy(work);
    }
    Ok(())
}
