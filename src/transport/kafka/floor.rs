//! Kafka's floor: the plainest rdkafka loops through the same kind of broker, with the same
//! producer and consumer settings, and nothing of msgperf: a ping written to one topic and
//! answered on another (ping-pong), and a topic written as fast as the producer takes it and
//! counted as it is read (a stream). Side 1 starts the broker (as a case's set-up does) or uses
//! `--opt broker`, and makes the topics; side 0 measures.

use super::{create_topics, read_next, up, Settings, SERVER};
use crate::sys;
use crate::transport::broker;
use crate::transport::floor::{
    io, measure_round_trips, FloorFigure, FloorLoop, FloorRun, Notes, NotesFloor, ReadWindow,
};
use std::sync::atomic::Ordering;
use std::time::Duration;

pub struct KafkaFloor;

/// A stream message's first byte: written in the warm-up, or in the measured window (its end
/// is one byte long).
const WARM: u8 = 1;
const MEASURED: u8 = 2;

fn topics(name: &str) -> [String; 3] {
    ["ping", "pong", "data"].map(|t| format!("{name}.{t}"))
}

impl NotesFloor for KafkaFloor {
    fn run_with(&self, run: FloorRun, notes: Notes) -> std::io::Result<Option<FloorFigure>> {
        let (l, side, size, roles, stop) = (run.kind, run.side, run.size, run.roles, run.stop);
        let s = Settings::of(&roles.options);
        let data = vec![7u8; size];
        let loop_ns = (roles.warmup + roles.duration).as_nanos() as u64;
        let writer = |url: &str, topic: &str| s.writer(url, topic.into()).map_err(io);
        if side == 1 {
            let (url, broker) = broker::for_floor(&SERVER, "kafka", roles, Notes::WAIT)?;
            let name = format!("msgperf-floor-{}", std::process::id());
            if broker.is_some() {
                up(&s, &url, &name, SERVER.boots_within).map_err(io)?;
            }
            let [ping, pong, stream] = topics(&name);
            create_topics(
                &s,
                &url,
                &[ping.clone(), pong.clone(), stream.clone()],
                SERVER.boots_within,
            )
            .map_err(io)?;
            let at = format!("{url} {name}");
            match l {
                FloorLoop::PingPong => {
                    let pings = s.consumer(&url, &ping, Notes::WAIT).map_err(io)?;
                    let mut pongs = writer(&url, &pong)?;
                    notes.put(Notes::URL, &at)?;
                    let end = sys::monotonic_ns() + loop_ns + Notes::WAIT.as_nanos() as u64;
                    while sys::monotonic_ns() < end && !stop.load(Ordering::Relaxed) {
                        match read_next(&pings, &mut |m| Ok(m.len()), Notes::WAIT).map_err(io)? {
                            Some(n) if n > 1 => pongs.send(&data, Notes::WAIT).map_err(io)?,
                            _ => break,
                        }
                    }
                }
                FloorLoop::Stream => {
                    let mut w = writer(&url, &stream)?;
                    notes.put(Notes::URL, &at)?;
                    notes.wait(Notes::READY, Notes::WAIT)?;
                    let mut data = data;
                    let start = sys::monotonic_ns();
                    let (measured, end) = (start + roles.warmup.as_nanos() as u64, start + loop_ns);
                    loop {
                        let now = sys::monotonic_ns();
                        if now >= end || stop.load(Ordering::Relaxed) {
                            break;
                        }
                        data[0] = if now < measured { WARM } else { MEASURED };
                        w.send(&data, Notes::WAIT).map_err(io)?;
                    }
                    w.send(&[0u8], Notes::WAIT).map_err(io)?;
                    let _ = notes.wait(Notes::DONE, Notes::WAIT + Duration::from_nanos(loop_ns));
                    // What the client still holds is not waited for: the reader is done.
                    w.abandon();
                }
            }
            // The broker stays until side 0 has all it will read.
            let _ = notes.wait(Notes::DONE, Notes::WAIT + Duration::from_nanos(loop_ns));
            drop(broker);
            return Ok(None);
        }
        // Side 1 made the topics, named after it, before it wrote where they are.
        let at = notes.wait(Notes::URL, Notes::WAIT + SERVER.boots_within)?;
        let (url, name) = at.split_once(' ').ok_or_else(|| io("bad notes"))?;
        let [ping, pong, stream] = topics(name);
        let figure = match l {
            FloorLoop::PingPong => {
                let mut pings = writer(url, &ping)?;
                let pongs = s.consumer(url, &pong, Notes::WAIT).map_err(io)?;
                let f = measure_round_trips(roles, stop, || {
                    pings.send(&data, Notes::WAIT).is_ok()
                        && read_next(&pongs, &mut |m| Ok(m.len()), Notes::WAIT)
                            .is_ok_and(|n| n == Some(size))
                });
                let _ = pings.send(&[0u8], Notes::WAIT);
                f?
            }
            FloorLoop::Stream => {
                let reader = s.consumer(url, &stream, Notes::WAIT).map_err(io)?;
                notes.put(Notes::READY, "yes")?;
                // As a case's reader counts: the messages written in the measured window,
                // from the first one's arrival on. The producer may queue far ahead of the
                // broker (with librdkafka's 1 GiB, `--opt queue=1024`: 6 s of 64 KiB messages
                // here), so the first may come long after the warm-up, and the window closes
                // after the case's duration or at the last one, whichever comes first.
                let mut window = ReadWindow::new(Duration::ZERO);
                while !stop.load(Ordering::Relaxed) && !window.lasted(roles.duration) {
                    // Read where librdkafka keeps it, as the case's reader does.
                    let mut measured = false;
                    let got = read_next(
                        &reader,
                        &mut |m| {
                            measured = m.first() == Some(&MEASURED);
                            Ok(m.len())
                        },
                        Notes::WAIT,
                    );
                    match got.map_err(io)? {
                        Some(len) if len > 1 => {
                            if measured {
                                window.read();
                            }
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
