//! Aeron's floor: the plainest loops with the same client, driver settings and channel, and
//! nothing of msgperf, as Aeron's own ping/pong samples do: side 0 offers `size` bytes and
//! polls for the echo (ping-pong), or polls and counts what side 1 offers (a stream: each
//! message's index in its first 8 bytes, as Aeron's StreamingPublisher writes it), reading
//! each message's first and last 8 bytes in place where the poll hands it over (one fragment
//! per poll, as the adapter polls; waiting only after a poll that found nothing, as Aeron's
//! idle strategies do, not between the fragments of a message). Side 0 starts the media driver (the
//! same configuration as a case's) and writes its directory into a small memory file that both
//! sides share.

use super::{client, driver::MediaDriver, uri};
use crate::sys;
use crate::transport::floor::{
    measure_round_trips, FloorFigure, FloorLoop, FloorRun, Notes, NotesFloor, ReadWindow,
};
use rusteron_client as rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

pub struct AeronFloor;

/// The stream each way: side 0 writes on PING, side 1 on PONG.
const PING: i32 = 1;
const PONG: i32 = 2;

/// What a poll handed over: the message's length, and its first and last 8 bytes, read as
/// msgperf's reader reads a message's header and tail: the floor touches what it receives.
#[derive(Default)]
struct Read {
    got: Option<usize>,
    ends: u64,
}

fn read_ends(read: &mut Read, m: &[u8], _: rc::AeronHeader) {
    let word = |at: usize| {
        m.get(at..at + 8)
            .map_or(0, |w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
    };
    read.ends = word(0) ^ word(m.len().saturating_sub(8));
    read.got = Some(m.len());
}

/// What one poll found.
enum Polled {
    /// A whole message, of this length (0: the end).
    Message(usize),
    /// A fragment of a longer message: the rest is in the log already.
    Part,
    Nothing,
}

fn io(what: &str, e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(format!("aeron floor: {what}: {e}"))
}

impl NotesFloor for AeronFloor {
    fn run_with(&self, run: FloorRun, notes: Notes) -> std::io::Result<Option<FloorFigure>> {
        let (l, side, size, roles, stop) = (run.kind, run.side, run.size, run.roles, run.stop);
        let udp = roles.options.get("channel").is_some_and(|c| c == "udp");
        let spin = roles.options.get("wait").is_some_and(|w| w == "spin");
        // Side 0 starts the driver (and picks the UDP ports); side 1 reads where.
        let (_driver, dir, ports) = if side == 0 {
            let made = crate::transport::private_dir()?;
            // Where a case's driver runs: beside the echoing side, or the stream's reader.
            let cpu = roles.service_cpu();
            let d = MediaDriver::start(&made.join("aeron"), &roles.options, cpu, Notes::WAIT)
                .map_err(|e| io("its media driver", e))?;
            let ports = if udp {
                (Some(super::free_port()?), Some(super::free_port()?))
            } else {
                (None, None)
            };
            let dir = d.dir.clone();
            notes.put(
                0,
                &format!(
                    "{} {} {}",
                    dir.display(),
                    ports.0.unwrap_or(0),
                    ports.1.unwrap_or(0)
                ),
            )?;
            (Some((d, crate::transport::DirGuard(made))), dir, ports)
        } else {
            let at = notes.wait(0, Notes::WAIT)?;
            let mut words = at.split(' ');
            let dir = std::path::PathBuf::from(words.next().unwrap_or_default());
            let mut port = || {
                words
                    .next()
                    .and_then(|p| p.parse::<u16>().ok())
                    .filter(|p| *p > 0)
            };
            let ports = (port(), port());
            (None, dir, ports)
        };
        let (_context, aeron) = client(&dir).map_err(|e| io("a client", e))?;
        let (mine, theirs, my_port, their_port) = if side == 0 {
            (PING, PONG, ports.0, ports.1)
        } else {
            (PONG, PING, ports.1, ports.0)
        };
        let publication = aeron
            .async_add_exclusive_publication(&uri(their_port, false), mine)
            .and_then(|p| p.poll_blocking(Notes::WAIT))
            .map_err(|e| io("a publication", format!("{e:?}")))?;
        let subscription = aeron
            .async_add_subscription(
                &uri(my_port, false),
                theirs,
                rc::Handlers::NONE,
                rc::Handlers::NONE,
            )
            .and_then(|s| s.poll_blocking(Notes::WAIT))
            .map_err(|e| io("a subscription", format!("{e:?}")))?;
        let deadline = crate::deadline::Deadline::after(Notes::WAIT);
        while !(publication.is_connected() && subscription.is_connected()) {
            if deadline.expired() {
                return Err(io("joining", "the other side never came"));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let idle = || {
            if spin {
                std::hint::spin_loop()
            } else {
                std::thread::yield_now()
            }
        };
        let offer = |m: &[u8]| loop {
            match publication.offer(m) {
                Ok(_) => return true,
                Err(rc::AeronOfferError::BackPressured | rc::AeronOfferError::AdminAction) => {
                    idle()
                }
                Err(_) => return false,
            }
        };
        let mut assembler = rc::AeronFragmentClosureAssembler::new()
            .map_err(|e| io("an assembler", format!("{e:?}")))?;
        let mut poll = || {
            let mut read = Read::default();
            let fragments = assembler
                .poll(&subscription, &mut read, read_ends, 1)
                .unwrap_or(0);
            std::hint::black_box(read.ends);
            match read.got {
                Some(n) => Polled::Message(n),
                None if fragments > 0 => Polled::Part,
                None => Polled::Nothing,
            }
        };
        let data = vec![7u8; size];
        let bound =
            sys::monotonic_ns() + (roles.warmup + roles.duration + Notes::WAIT).as_nanos() as u64;
        let ended = || stop.load(Ordering::Relaxed) || sys::monotonic_ns() > bound;
        match (l, side) {
            (FloorLoop::PingPong, 0) => {
                let f = measure_round_trips(roles, stop, || {
                    if !offer(&data) {
                        return false;
                    }
                    // The bound is read every 256 empty polls, as the adapter's reader does.
                    let mut empty = 0u32;
                    let got = loop {
                        match poll() {
                            Polled::Message(n) => break n,
                            Polled::Part => {}
                            Polled::Nothing => {
                                empty = empty.wrapping_add(1);
                                if empty.is_multiple_of(256) && ended() {
                                    break 0;
                                }
                                idle()
                            }
                        }
                    };
                    got == size
                });
                offer(&[]);
                f.map(Some)
            }
            // The bound is read where a poll found nothing, as the adapter's reader does: a
            // clock read a message would slow the floor below the case it stands under.
            (FloorLoop::PingPong, _) => {
                loop {
                    match poll() {
                        Polled::Message(0) => break,
                        Polled::Message(_) => {
                            if !offer(&data) {
                                break;
                            }
                        }
                        Polled::Part => {}
                        Polled::Nothing if ended() => break,
                        Polled::Nothing => idle(),
                    }
                }
                Ok(None)
            }
            (FloorLoop::Stream, 0) => {
                let mut window = ReadWindow::new(roles.warmup);
                loop {
                    match poll() {
                        Polled::Message(0) => break,
                        Polled::Message(_) => window.read(),
                        Polled::Part => {}
                        Polled::Nothing if ended() => break,
                        Polled::Nothing => idle(),
                    }
                }
                Ok(Some(window.figure(size)))
            }
            // Each message carries its index in its first bytes, written before the offer, as
            // Aeron's StreamingPublisher sample does (`putLong(0, i)`): a message built, then
            // copied into the log, as a case's writer does, not one constant buffer.
            (FloorLoop::Stream, _) => {
                let mut data = data;
                let n = size.min(8);
                let mut index = 0u64;
                run.write_stream(|| {
                    data[..n].copy_from_slice(&index.to_le_bytes()[..n]);
                    index += 1;
                    offer(&data)
                });
                offer(&[]);
                Ok(None)
            }
        }
    }
}
