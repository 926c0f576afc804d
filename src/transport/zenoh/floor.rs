//! Zenoh's floor: the plainest ping-pong and stream loops over the same library and settings
//! (endpoint, congestion control, express, shared memory, subscriber queue) and nothing of
//! msgperf: no header, no histogram. Side 0 listens and writes its endpoint into a small memory
//! file that both sides share; side 1 reads it and connects.

use super::{config, copy_out, publisher, wait_matched, Inbox};
use crate::transport::floor::{
    measure_round_trips, FloorFigure, FloorLoop, FloorRun, Notes, NotesFloor,
};
use std::sync::atomic::Ordering;
use std::time::Duration;
use zenoh::Wait;

pub struct ZenohFloor;

impl NotesFloor for ZenohFloor {
    fn run_with(&self, run: FloorRun, notes: Notes) -> std::io::Result<Option<FloorFigure>> {
        let (l, side, size, roles, stop) = (run.kind, run.side, run.size, run.roles, run.stop);
        let spec = roles.spec(size, Notes::WAIT);
        let io = |e: crate::transport::TransportError| std::io::Error::other(e.to_string());
        // A unix socket's directory, removed when the loop ends.
        let dir =
            (side == 0 && roles.options.get("endpoint").is_some_and(|e| e == "unix")).then(|| {
                crate::transport::DirGuard(
                    std::env::temp_dir().join(crate::transport::fresh_name()),
                )
            });
        let session = if side == 0 {
            let endpoint = match &dir {
                Some(d) => {
                    std::fs::create_dir(&d.0)?;
                    format!("unixsock-stream/{}", d.0.join("floor.sock").display())
                }
                None => {
                    let port = std::net::TcpListener::bind(("127.0.0.1", 0))?
                        .local_addr()?
                        .port();
                    format!("tcp/127.0.0.1:{port}")
                }
            };
            let s = zenoh::open(config(Some(&endpoint), None, &spec).map_err(io)?)
                .wait()
                .map_err(|e| std::io::Error::other(format!("zenoh floor: {e}")))?;
            notes.put(0, &endpoint)?;
            s
        } else {
            let at = notes.wait(0, Notes::WAIT)?;
            zenoh::open(config(None, Some(&at), &spec).map_err(io)?)
                .wait()
                .map_err(|e| std::io::Error::other(format!("zenoh floor: {e}")))?
        };
        let (out, inn) = if side == 0 {
            ("floor/forth", "floor/back")
        } else {
            ("floor/back", "floor/forth")
        };
        let inbox = Inbox::declare(&session, inn, &spec).map_err(io)?;
        let p = publisher(&session, out, &spec).map_err(io)?;
        wait_matched(&p, Notes::WAIT).map_err(io)?;
        let mut buf = vec![7u8; size.max(1)];
        // The next message's length, copied into `buf` for an echo and else read where it lies
        // (gathered into one piece if it came in several), as a case reads it (None: the peer
        // is gone or stop was raised).
        let next = |buf: Option<&mut [u8]>| -> Option<usize> {
            let deadline = crate::deadline::Deadline::after(Notes::WAIT);
            loop {
                match inbox.recv(Duration::from_millis(100)) {
                    Ok(Some(s)) => {
                        return match buf {
                            Some(buf) => copy_out(&s, buf).ok(),
                            None => Some(s.payload().to_bytes().len()),
                        }
                    }
                    Ok(None) if deadline.expired() || stop.load(Ordering::Relaxed) => return None,
                    Ok(None) => {}
                    Err(_) => return None,
                }
            }
        };
        // A message of one byte ends a loop; repeated, as a dropping publisher may lose one.
        let send_end = || {
            for _ in 0..10 {
                let _ = p.put(vec![0u8]).wait();
                std::thread::sleep(Duration::from_millis(10));
            }
        };
        let figure = match (l, side) {
            (FloorLoop::PingPong, 0) => {
                let f = measure_round_trips(roles, stop, || {
                    p.put(buf.clone()).wait().is_ok() && next(None) == Some(size)
                });
                send_end();
                f.map(Some)
            }
            (FloorLoop::PingPong, _) => {
                while let Some(n) = next(Some(&mut buf)) {
                    if n <= 1 || p.put(buf[..n].to_vec()).wait().is_err() {
                        break;
                    }
                }
                Ok(None)
            }
            (FloorLoop::Stream, 0) => {
                Ok(Some(run.read_stream(|| next(None).is_some_and(|n| n > 1))))
            }
            (FloorLoop::Stream, _) => {
                run.write_stream(|| p.put(buf.clone()).wait().is_ok());
                send_end();
                Ok(None)
            }
        };
        drop((p, inbox));
        let _ = session.close().wait();
        drop(dir);
        if side == 0 && spec.flag("shm", false) {
            super::sweep_shm();
        }
        figure
    }
}
