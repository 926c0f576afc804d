//! MQTT's floor: the plainest rumqttc loops through the same kind of broker, at the same QoS,
//! on the same runtime, and nothing of msgperf: a ping published on one topic and answered on
//! another (ping-pong), and a topic published as fast as the client takes it and counted as it
//! arrives (a stream). Side 1 starts the broker (as a case's set-up does, on side 1's CPU) or
//! uses `--opt broker`; side 0 measures.

use super::{qos_of, Client, SERVER};
use crate::sys;
use crate::transport::broker;
use crate::transport::floor::{
    io, measure_round_trips, FloorFigure, FloorLoop, FloorRun, Notes, NotesFloor, ReadWindow,
};
use crate::transport::runtime::runtime;
use rumqttc::Packet;
use std::sync::atomic::Ordering;
use std::time::Duration;

pub struct MqttFloor;

impl NotesFloor for MqttFloor {
    fn run_with(&self, run: FloorRun, notes: Notes) -> std::io::Result<Option<FloorFigure>> {
        let (l, side, size, roles, stop) = (run.kind, run.side, run.size, run.roles, run.stop);
        let spec = roles.spec(size, Notes::WAIT);
        let qos = qos_of(&roles.options);
        let rt = runtime();
        let data = vec![7u8; size];
        let loop_ns = (roles.warmup + roles.duration).as_nanos() as u64;
        let tick = Duration::from_millis(100);
        let name = format!("msgperf-floor-{}", std::process::id());
        let subscribe = |c: &mut Client, topic: String| -> std::io::Result<()> {
            rt.block_on(c.client.subscribe(topic, qos)).map_err(io)?;
            c.until(Notes::WAIT, |p| matches!(p, Packet::SubAck(_)))
                .map_err(io)?;
            Ok(())
        };
        if side == 1 {
            let (url, broker) = broker::for_floor(&SERVER, "mqtt", roles, Notes::WAIT)?;
            let mut c = Client::connect(&url, &format!("{name}-1"), &spec).map_err(io)?;
            match l {
                FloorLoop::PingPong => {
                    subscribe(&mut c, format!("{name}/ping"))?;
                    notes.put(Notes::URL, &format!("{url} {name}"))?;
                    let end = sys::monotonic_ns() + loop_ns + Notes::WAIT.as_nanos() as u64;
                    while sys::monotonic_ns() < end && !stop.load(Ordering::Relaxed) {
                        match c.next(tick).map_err(io)? {
                            Some(Packet::Publish(p)) if p.payload.len() > 1 => {
                                let pong = format!("{name}/pong");
                                c.publish(&pong, qos, &p.payload, Notes::WAIT).map_err(io)?;
                            }
                            Some(Packet::Publish(_)) => break,
                            _ => {}
                        }
                    }
                }
                FloorLoop::Stream => {
                    notes.put(Notes::URL, &format!("{url} {name}"))?;
                    notes.wait(Notes::READY, Notes::WAIT)?;
                    let topic = format!("{name}/data");
                    let end = sys::monotonic_ns() + loop_ns;
                    while sys::monotonic_ns() < end && !stop.load(Ordering::Relaxed) {
                        c.publish(&topic, qos, &data, Notes::WAIT).map_err(io)?;
                    }
                    c.publish(&topic, qos, &[0u8], Notes::WAIT).map_err(io)?;
                }
            }
            // The broker stays until side 0 has all it will read.
            let _ = notes.wait(Notes::DONE, Notes::WAIT);
            drop(c);
            drop(broker);
            return Ok(None);
        }
        let at = notes.wait(Notes::URL, Notes::WAIT)?;
        // Side 1's names: the topics are its.
        let (url, name) = at.split_once(' ').ok_or_else(|| io("bad notes"))?;
        let mut c = Client::connect(url, &format!("{name}-0"), &spec).map_err(io)?;
        let figure = match l {
            FloorLoop::PingPong => {
                subscribe(&mut c, format!("{name}/pong"))?;
                let ping = format!("{name}/ping");
                let f = measure_round_trips(roles, stop, || {
                    c.publish(&ping, qos, &data, Notes::WAIT).is_ok()
                        && c.until(Notes::WAIT, |p| matches!(p, Packet::Publish(_)))
                            .is_ok_and(
                                |p| matches!(p, Packet::Publish(p) if p.payload.len() == size),
                            )
                });
                let _ = c.publish(&ping, qos, &[0u8], Notes::WAIT);
                f?
            }
            FloorLoop::Stream => {
                subscribe(&mut c, format!("{name}/data"))?;
                notes.put(Notes::READY, "yes")?;
                let mut window = ReadWindow::new(roles.warmup);
                let deadline =
                    crate::deadline::Deadline::after(Duration::from_nanos(loop_ns) + Notes::WAIT);
                while !deadline.expired() && !stop.load(Ordering::Relaxed) {
                    match c.next(tick).map_err(io)? {
                        Some(Packet::Publish(p)) if p.payload.len() > 1 => {
                            window.read();
                        }
                        Some(Packet::Publish(_)) => break,
                        _ => {}
                    }
                }
                window.figure(size)
            }
        };
        notes.put(Notes::DONE, "yes")?;
        Ok(Some(figure))
    }
}
