//! AMQP's floor: the plainest lapin loops through the same kind of broker, with the same queue
//! type, confirms and acknowledgements, on the same runtime, and nothing of msgperf: a ping
//! published to one queue and answered on another (ping-pong), and a queue filled as fast as
//! the client takes it and counted as it drains (a stream). Side 1 starts the broker (as a
//! case's set-up does) or uses `--opt broker`; side 0 measures.

use super::{Client, Settings, SERVER};
use crate::sys;
use crate::transport::broker;
use crate::transport::floor::{
    io, measure_round_trips, FloorFigure, FloorLoop, FloorRun, Notes, NotesFloor, ReadWindow,
};
use crate::transport::runtime::runtime;
use futures_util::{FutureExt, StreamExt};
use lapin::options::{BasicAckOptions, BasicQosOptions};
use lapin::Consumer;
use std::sync::atomic::Ordering;
use std::time::Duration;

pub struct AmqpFloor;

/// The next delivery's size, acknowledged if the settings say so; None at the end or after
/// `Notes::WAIT` without one.
fn next(c: &mut Consumer, s: &Settings) -> std::io::Result<Option<usize>> {
    let rt = runtime();
    // What is queued is taken without a timer, as the adapter takes it.
    let got = match c.next().now_or_never() {
        Some(n) => Ok(n),
        None => rt.block_on(async { tokio::time::timeout(Notes::WAIT, c.next()).await }),
    };
    match got {
        Ok(Some(Ok(d))) => {
            if s.manual_ack {
                rt.block_on(d.ack(BasicAckOptions::default())).map_err(io)?;
            }
            Ok(Some(d.data.len()))
        }
        Ok(Some(Err(e))) => Err(io(e)),
        Ok(None) | Err(_) => Ok(None),
    }
}

impl NotesFloor for AmqpFloor {
    fn run_with(&self, run: FloorRun, notes: Notes) -> std::io::Result<Option<FloorFigure>> {
        let (l, side, size, roles, stop) = (run.kind, run.side, run.size, run.roles, run.stop);
        let s = Settings::of(&roles.options);
        let rt = runtime();
        let data = vec![7u8; size];
        let loop_ns = (roles.warmup + roles.duration).as_nanos() as u64;
        let queues = |name: &str| {
            (
                format!("{name}.ping"),
                format!("{name}.pong"),
                format!("{name}.data"),
            )
        };
        let consume = |c: &Client, q: &str| -> std::io::Result<Consumer> {
            if s.manual_ack && s.prefetch > 0 {
                rt.block_on(c.channel.basic_qos(s.prefetch, BasicQosOptions::default()))
                    .map_err(io)?;
            }
            c.consume(q, &s, Notes::WAIT).map_err(io)
        };
        let publish = |c: &Client, q: &str, m: &[u8]| -> std::io::Result<()> {
            rt.block_on(c.publish("", q, m, &s)).map_err(io)
        };
        let confirming = |c: &Client| -> std::io::Result<()> {
            if s.confirm {
                rt.block_on(c.channel.confirm_select(Default::default()))
                    .map_err(io)?;
            }
            Ok(())
        };
        if side == 1 {
            let (url, broker) = broker::for_floor(&SERVER, "amqp", roles, Notes::WAIT)?;
            let c = Client::connect(&url, Notes::WAIT).map_err(io)?;
            let name = format!("msgperf-floor-{}", std::process::id());
            let (ping, pong, queue) = queues(&name);
            for q in [&ping, &pong, &queue] {
                c.declare(q, &s, Notes::WAIT).map_err(io)?;
            }
            confirming(&c)?;
            let at = format!("{url} {name}");
            match l {
                FloorLoop::PingPong => {
                    let mut pings = consume(&c, &ping)?;
                    notes.put(Notes::URL, &at)?;
                    let end = sys::monotonic_ns() + loop_ns + Notes::WAIT.as_nanos() as u64;
                    while sys::monotonic_ns() < end && !stop.load(Ordering::Relaxed) {
                        match next(&mut pings, &s)? {
                            Some(n) if n > 1 => publish(&c, &pong, &data)?,
                            _ => break,
                        }
                    }
                }
                FloorLoop::Stream => {
                    notes.put(Notes::URL, &at)?;
                    notes.wait(Notes::READY, Notes::WAIT)?;
                    let end = sys::monotonic_ns() + loop_ns;
                    while sys::monotonic_ns() < end && !stop.load(Ordering::Relaxed) {
                        publish(&c, &queue, &data)?;
                    }
                    publish(&c, &queue, &[0u8])?;
                }
            }
            // The broker stays until side 0 has all it will read.
            let _ = notes.wait(Notes::DONE, Notes::WAIT + Duration::from_nanos(loop_ns));
            // Queues expire unused, but a stream does not.
            c.delete(&[&ping, &pong, &queue]);
            drop(c);
            drop(broker);
            return Ok(None);
        }
        // Side 1 declared the queues, named after it, before it wrote where they are.
        let at = notes.wait(Notes::URL, Notes::WAIT + SERVER.boots_within)?;
        let (url, name) = at.split_once(' ').ok_or_else(|| io("bad notes"))?;
        let (ping, pong, queue) = queues(name);
        let c = Client::connect(url, Notes::WAIT).map_err(io)?;
        confirming(&c)?;
        let figure = match l {
            FloorLoop::PingPong => {
                let mut pongs = consume(&c, &pong)?;
                let f = measure_round_trips(roles, stop, || {
                    publish(&c, &ping, &data).is_ok()
                        && next(&mut pongs, &s).is_ok_and(|n| n == Some(size))
                });
                let _ = publish(&c, &ping, &[0u8]);
                f?
            }
            FloorLoop::Stream => {
                let mut stream = consume(&c, &queue)?;
                notes.put(Notes::READY, "yes")?;
                let mut window = ReadWindow::new(roles.warmup);
                while !stop.load(Ordering::Relaxed) {
                    match next(&mut stream, &s)? {
                        Some(len) if len > 1 => {
                            window.read();
                        }
                        _ => break,
                    }
                }
                window.figure(size)
            }
        };
        notes.put(Notes::DONE, "yes")?;
        Ok(Some(figure))
    }
}
