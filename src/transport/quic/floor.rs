//! QUIC's floor: the plainest quinn loops with the same configuration (certificate, MTU,
//! congestion controller, runtimes as the adapter's ends use them) and nothing of msgperf: a
//! client that writes `size` bytes and reads them back, echoed by a server (ping-pong), and a
//! client that writes while the server reads and counts (a stream), on one bidirectional stream
//! or, with `--opt datagrams=true`, in datagrams. The server writes its address and
//! certificate fingerprint into a small memory file that both sides share; the client reads it.

use super::{endpoint, handshake_in, handshake_out, parse_bound, server_config, Driver};
use crate::sys;
use crate::transport::floor::{
    measure_round_trips, FloorFigure, FloorLoop, FloorRun, Notes, NotesFloor, ReadWindow,
};
use bytes::Bytes;
use std::sync::atomic::Ordering;

pub struct QuicFloor;

/// One side's connection: its stream, or None for datagrams.
struct Side {
    driver: Driver,
    conn: quinn::Connection,
    stream: Option<(quinn::SendStream, quinn::RecvStream)>,
    _endpoint: quinn::Endpoint,
}

fn io(what: &str, e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(format!("quic floor: {what}: {e}"))
}

impl NotesFloor for QuicFloor {
    fn run_with(&self, run: FloorRun, notes: Notes) -> std::io::Result<Option<FloorFigure>> {
        let (l, side, size, roles, stop) = (run.kind, run.side, run.size, run.roles, run.stop);
        let spec = roles.spec(size, Notes::WAIT);
        // Ping-pong: side 0 calls, side 1 echoes. A stream: side 1 writes, side 0 reads and
        // measures. The runtimes are the adapter's: the server's own, the shared one for the
        // client.
        let serves = side == 1 && l == FloorLoop::PingPong || side == 0 && l == FloorLoop::Stream;
        let driver = Driver::new(serves)?;
        let (endpoint, (conn, stream)) = if serves {
            let socket = std::net::UdpSocket::bind("127.0.0.1:0")?;
            let (config, fingerprint) = server_config(&spec).map_err(|e| io("server", e))?;
            let address = socket.local_addr()?;
            let endpoint = endpoint(&driver, Some(config), socket).map_err(|e| io("server", e))?;
            notes.put(0, &format!("{fingerprint}@{address}"))?;
            let incoming = driver
                .run(Some(Notes::WAIT), endpoint.accept())
                .map_err(|e| io("accepting", e))?
                .ok_or_else(|| io("accepting", "no connection"))?;
            let joined = handshake_in(&driver, incoming, &spec).map_err(|e| io("accepting", e))?;
            (endpoint, joined)
        } else {
            let bound = notes.wait(0, Notes::WAIT)?;
            let (server, fingerprint) = parse_bound(&bound).map_err(|e| io("address", e))?;
            let socket = std::net::UdpSocket::bind("127.0.0.1:0")?;
            let endpoint = endpoint(&driver, None, socket).map_err(|e| io("client", e))?;
            let joined = handshake_out(&driver, &endpoint, server, fingerprint, &spec)
                .map_err(|e| io("connecting", e))?;
            (endpoint, joined)
        };
        let mut me = Side {
            driver,
            conn,
            stream,
            _endpoint: endpoint,
        };
        let bound = Some(roles.warmup + roles.duration + Notes::WAIT);
        let mut buf = vec![7u8; size];
        let figure = match (l, side, me.stream.as_mut()) {
            (FloorLoop::PingPong, 0, Some((send, recv))) => {
                let f = measure_round_trips(roles, stop, || {
                    me.driver
                        .run(None, async {
                            send.write_all(&buf).await.is_ok()
                                && recv.read_exact(&mut buf).await.is_ok()
                        })
                        .unwrap_or(false)
                });
                let _ = send.finish();
                f.map(Some)
            }
            (FloorLoop::PingPong, 0, None) => {
                let data = Bytes::from(buf.clone());
                let conn = &me.conn;
                let f = measure_round_trips(roles, stop, || {
                    me.driver
                        .run(None, async {
                            conn.send_datagram(data.clone()).is_ok()
                                && conn.read_datagram().await.is_ok_and(|d| d.len() == size)
                        })
                        .unwrap_or(false)
                });
                let _ = conn.send_datagram(Bytes::new());
                f.map(Some)
            }
            (FloorLoop::PingPong, _, Some((send, recv))) => {
                let _ = me.driver.run(bound, async {
                    while recv.read_exact(&mut buf).await.is_ok() {
                        if send.write_all(&buf).await.is_err() {
                            break;
                        }
                    }
                });
                Ok(None)
            }
            (FloorLoop::PingPong, _, None) => {
                let conn = &me.conn;
                let _ = me.driver.run(bound, async {
                    while let Ok(d) = conn.read_datagram().await {
                        if d.is_empty() || conn.send_datagram(d).is_err() {
                            break;
                        }
                    }
                });
                Ok(None)
            }
            (FloorLoop::Stream, 0, mut stream) => {
                let conn = &me.conn;
                let mut window = ReadWindow::new(roles.warmup);
                let _ = me.driver.run(bound, async {
                    while !stop.load(Ordering::Relaxed) {
                        let ok = match stream.as_mut() {
                            Some((_, recv)) => recv.read_exact(&mut buf).await.is_ok(),
                            None => conn.read_datagram().await.is_ok_and(|d| !d.is_empty()),
                        };
                        if !ok {
                            break;
                        }
                        window.read();
                    }
                });
                Ok(Some(window.figure(size)))
            }
            (FloorLoop::Stream, _, mut stream) => {
                let end = sys::monotonic_ns() + (roles.warmup + roles.duration).as_nanos() as u64;
                let data = Bytes::from(buf.clone());
                while sys::monotonic_ns() < end && !stop.load(Ordering::Relaxed) {
                    let sent = match stream.as_mut() {
                        Some((send, _)) => me
                            .driver
                            .run(None, send.write_all(&buf))
                            .is_ok_and(|r| r.is_ok()),
                        None => me
                            .driver
                            .run(None, me.conn.send_datagram_wait(data.clone()))
                            .is_ok_and(|r| r.is_ok()),
                    };
                    if !sent {
                        break;
                    }
                }
                match stream {
                    Some((send, _)) => {
                        let _ = send.finish();
                        let _ = me.driver.run(Some(Notes::WAIT), send.stopped());
                    }
                    None => {
                        let _ = me
                            .driver
                            .run(Some(Notes::WAIT), me.conn.send_datagram_wait(Bytes::new()));
                    }
                }
                Ok(None)
            }
        };
        me.conn.close(0u32.into(), b"done");
        let _ = me.driver.now(std::future::pending::<()>());
        figure
    }
}
