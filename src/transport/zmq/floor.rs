//! ZeroMQ's floor: the plainest ping-pong and stream loops over the same library and settings
//! (pattern, endpoint, high-water mark) and nothing of msgperf: no framing, no header, no
//! histogram. Side 0 binds and writes the address it got into a small memory file that both
//! sides share; side 1 reads it and connects.

use super::socket;
use crate::transport::floor::{
    measure_round_trips, FloorFigure, FloorLoop, FloorRun, Notes, NotesFloor,
};

pub struct ZmqFloor;

impl NotesFloor for ZmqFloor {
    fn run_with(&self, run: FloorRun, notes: Notes) -> std::io::Result<Option<FloorFigure>> {
        let (l, side, size, roles, stop) = (run.kind, run.side, run.size, run.roles, run.stop);
        let spec = roles.spec(size, Notes::WAIT);
        let pattern = roles.options.get("pattern").map_or("pair", String::as_str);
        let kind = match (l, pattern, side) {
            (FloorLoop::PingPong, "req-rep", 0) => zmq::REQ,
            (FloorLoop::PingPong, "req-rep", _) => zmq::REP,
            (FloorLoop::Stream, "push-pull", 0) => zmq::PULL,
            (FloorLoop::Stream, "push-pull", _) => zmq::PUSH,
            _ => zmq::PAIR,
        };
        let s = socket(kind, &spec).map_err(std::io::Error::other)?;
        let io = |e: zmq::Error| std::io::Error::other(format!("zmq floor: {e}"));
        if side == 0 {
            let at = if roles.options.get("endpoint").is_some_and(|e| e == "ipc") {
                // An abstract unix socket: no file to remove.
                format!("ipc://@msgperf-floor-{}", crate::transport::fresh_name())
            } else {
                "tcp://127.0.0.1:*".to_string()
            };
            s.bind(&at).map_err(io)?;
            let bound = s
                .get_last_endpoint()
                .map_err(io)?
                .map_err(|_| std::io::Error::other("a bound address that is not text"))?;
            notes.put(0, &bound)?;
        } else {
            s.connect(&notes.wait(0, Notes::WAIT)?).map_err(io)?;
        }
        let mut buf = vec![7u8; size];
        // A message of no bytes ends a loop.
        let done = |buf: &[u8], n: usize| n == 0 || buf.is_empty();
        match (l, side) {
            (FloorLoop::PingPong, 0) => {
                let f = measure_round_trips(roles, stop, || {
                    s.send(&buf[..], 0).is_ok() && s.recv_into(&mut buf, 0).is_ok_and(|n| n == size)
                });
                let _ = s.send(&[][..], 0);
                f.map(Some)
            }
            (FloorLoop::PingPong, _) => {
                while let Ok(n) = s.recv_into(&mut buf, 0) {
                    if done(&buf, n) || s.send(&buf[..n.min(size)], 0).is_err() {
                        break;
                    }
                }
                Ok(None)
            }
            (FloorLoop::Stream, 0) => {
                Ok(Some(run.read_stream(|| {
                    s.recv_into(&mut buf, 0).is_ok_and(|n| !done(&buf, n))
                })))
            }
            (FloorLoop::Stream, _) => {
                run.write_stream(|| s.send(&buf[..], 0).is_ok());
                let _ = s.send(&[][..], 0);
                Ok(None)
            }
        }
    }
}
