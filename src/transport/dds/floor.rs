//! Cyclone DDS's floor: the plainest ping-pong and stream loops over the same library, type and
//! QoS (reliability, history, how a reader waits) and nothing of msgperf: no header, no
//! histogram, a take straight into one buffer. The runner picks the domain and tag and writes
//! them into a small memory file that both sides read.

use super::cyclone::{self, Participant, Reader, Writer};
use crate::transport::floor::{
    measure_round_trips, Floor, FloorEnds, FloorFigure, FloorLoop, FloorRoles, FloorRun, Notes,
};
use crate::transport::ChannelSpec;
use std::sync::atomic::Ordering;
use std::time::Duration;

pub struct DdsFloor;

impl Floor for DdsFloor {
    fn make(&self, _: FloorLoop, _: usize, _: &FloorRoles) -> std::io::Result<[FloorEnds; 2]> {
        let (id, tag) = super::pick_domain().map_err(std::io::Error::other)?;
        let notes = Notes::new()?;
        notes.put(0, &format!("{id}/{tag}"))?;
        notes.ends()
    }

    fn run(&self, run: FloorRun, ends: FloorEnds) -> std::io::Result<Option<FloorFigure>> {
        let (l, side, size, roles, stop) = (run.kind, run.side, run.size, run.roles, run.stop);
        let key = Notes::of(ends)?.get(0)?.unwrap_or_default();
        let (id, tag) = key
            .split_once('/')
            .and_then(|(id, tag)| Some((id.parse::<u32>().ok()?, tag.to_string())))
            .ok_or_else(|| std::io::Error::other("the dds floor's memory file holds no domain"))?;
        let spec = ChannelSpec {
            options: roles.options.clone(),
            timeout: Notes::WAIT,
            poll: false,
            max_message: size,
            watched: false,
            exchange: crate::transport::Exchange::Both,
        };
        let io = |e: cyclone::DdsError| std::io::Error::other(e.to_string());
        let participant =
            Participant::join(id, &cyclone::config(&tag, None, spec.timeout)).map_err(io)?;
        let qos = super::qos_of(&spec);
        let wake = super::wake_of(&spec);
        // Side 0 writes "forth" and reads "back"; side 1 the other way round.
        let (out, inn) = if side == 0 {
            ("forth", "back")
        } else {
            ("back", "forth")
        };
        let writer = Writer::new(&participant, &format!("{tag}/{out}"), &qos).map_err(io)?;
        let mut reader =
            Reader::new(&participant, &format!("{tag}/{inn}"), &qos, wake).map_err(io)?;
        let met = crate::deadline::Deadline::after(Notes::WAIT);
        writer.wait_matched(1, met).map_err(io)?;
        reader.wait_matched(met).map_err(io)?;
        let mut writer = writer;
        let mut buf = vec![7u8; size.max(1)];
        // Takes the next message, waiting for it (None: the peer is gone, or stop was raised).
        let next = |reader: &mut Reader, buf: &mut [u8]| -> Option<usize> {
            let deadline = crate::deadline::Deadline::after(Notes::WAIT);
            loop {
                match reader.take(buf) {
                    Ok(Some(n)) => return Some(n),
                    Ok(None) => {}
                    Err(_) => return None,
                }
                if deadline.expired() || stop.load(Ordering::Relaxed) {
                    return None;
                }
                reader.wait(Duration::from_millis(100)).ok()?;
            }
        };
        // The end, repeated: best-effort may lose one.
        let send_end = |writer: &mut Writer| {
            for _ in 0..10 {
                let _ = writer.write(&[0]);
                let _ = writer.flush();
                std::thread::sleep(Duration::from_millis(10));
            }
        };
        // A write whose reply is awaited goes out at once, as the adapter sends it.
        let batching = qos.batching;
        let ask = |writer: &mut Writer, m: &[u8]| {
            writer.write(m)?;
            if batching {
                writer.flush()?;
            }
            Ok::<_, cyclone::DdsError>(())
        };
        // A message of one byte ends a loop.
        match (l, side) {
            (FloorLoop::PingPong, 0) => {
                let f = measure_round_trips(roles, stop, || {
                    ask(&mut writer, &buf).is_ok() && next(&mut reader, &mut buf) == Some(size)
                });
                send_end(&mut writer);
                f.map(Some)
            }
            (FloorLoop::PingPong, _) => {
                while let Some(n) = next(&mut reader, &mut buf) {
                    if n <= 1 || ask(&mut writer, &buf[..n]).is_err() {
                        break;
                    }
                }
                // Stay until the last reply is acknowledged, or the measuring side misses it.
                std::thread::sleep(Duration::from_millis(100));
                Ok(None)
            }
            (FloorLoop::Stream, 0) => {
                Ok(Some(run.read_stream(|| {
                    next(&mut reader, &mut buf).is_some_and(|n| n > 1)
                })))
            }
            (FloorLoop::Stream, _) => {
                run.write_stream(|| writer.write(&buf).is_ok());
                send_end(&mut writer);
                Ok(None)
            }
        }
    }
}
