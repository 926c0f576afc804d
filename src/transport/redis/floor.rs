//! Redis's floor: the plainest redis-rs loops through the same kind of server, in the same mode,
//! with the same connections (commands on a synchronous one, a subscription on a tokio runtime of
//! each side's own, run by its thread), and nothing of msgperf. Ping-pong: PUBLISH a ping that the
//! other side's subscription answers with a PUBLISH (pubsub), or XADD one that the other side's
//! XREAD answers with an XADD (streams). A stream: PUBLISH or XADD as fast as the server answers,
//! counted as the other side reads it. Side 1 starts the server (as a case's set-up does, on side
//! 1's CPU) or uses `--opt broker`; side 0 measures.

use super::{commands, subscribe, BATCH, SERVER};
use crate::sys;
use crate::transport::broker;
use crate::transport::floor::{
    io, measure_round_trips, FloorFigure, FloorLoop, FloorRun, Notes, NotesFloor, ReadWindow,
};
use crate::transport::runtime::Local;
use futures_util::{FutureExt, StreamExt};
use redis::aio::PubSubStream;
use redis::streams::StreamReadReply;
use redis::{Commands, Connection, Value};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::Duration;

pub struct RedisFloor;

/// One side's way in: a subscription, or a stream key read from its start.
enum Reader {
    /// The subscription, and the client and channel to subscribe again with.
    Channel(PubSubStream, redis::Client, String),
    Stream(String, String, VecDeque<Vec<u8>>),
}

impl Reader {
    fn open(
        rt: &Local,
        client: &redis::Client,
        name: String,
        streams: bool,
    ) -> std::io::Result<Self> {
        if streams {
            return Ok(Reader::Stream(name, "0".into(), VecDeque::new()));
        }
        let messages = rt
            .wait(Notes::WAIT, subscribe(client, name.clone()))
            .map_err(io)?;
        Ok(Reader::Channel(messages.map_err(io)?, client.clone(), name))
    }

    /// Hands the next message's payload to `take` where redis-rs delivered it (as a role
    /// reads it); false at the end or after `within`.
    fn next(
        &mut self,
        rt: &Local,
        con: &mut Connection,
        within: Duration,
        take: &mut dyn FnMut(&[u8]),
    ) -> bool {
        match self {
            Reader::Channel(s, client, name) => {
                // What the connection has taken already is had without a timer.
                let m = match s.next().now_or_never() {
                    Some(m) => m,
                    None => match rt.wait(within, s.next()) {
                        Ok(m) => m,
                        Err(_) => return false,
                    },
                };
                match m {
                    Some(m) => {
                        take(m.get_payload_bytes());
                        true
                    }
                    // The server dropped a subscriber that fell behind (as for the roles'
                    // ends): subscribe again rather than spin on an ended stream.
                    None => {
                        if let Ok(Ok(again)) = rt.wait(Notes::WAIT, subscribe(client, name.clone()))
                        {
                            *s = again;
                        }
                        false
                    }
                }
            }
            Reader::Stream(key, last, got) => {
                if got.is_empty() {
                    let Ok(reply) = redis::cmd("XREAD")
                        .arg("COUNT")
                        .arg(BATCH)
                        .arg("BLOCK")
                        .arg(within.as_millis() as u64)
                        .arg("STREAMS")
                        .arg(&*key)
                        .arg(&*last)
                        .query::<StreamReadReply>(con)
                    else {
                        return false;
                    };
                    for mut id in reply.keys.into_iter().flat_map(|k| k.ids) {
                        if let Some(Value::BulkString(d)) = id.map.remove("d") {
                            got.push_back(d);
                        }
                        *last = id.id;
                    }
                }
                got.pop_front().map(|d| take(&d)).is_some()
            }
        }
    }
}

fn write(con: &mut Connection, to: &str, data: &[u8], streams: bool) -> redis::RedisResult<()> {
    if streams {
        let _: Value = redis::cmd("XADD")
            .arg(to)
            .arg("*")
            .arg("d")
            .arg(data)
            .query(con)?;
    } else {
        let _: i64 = con.publish(to, data)?;
    }
    Ok(())
}

fn connect(url: &str) -> redis::RedisResult<(redis::Client, Connection)> {
    let client = redis::Client::open(url)?;
    let con = commands(&client, Notes::WAIT)?;
    Ok((client, con))
}

impl NotesFloor for RedisFloor {
    fn run_with(&self, run: FloorRun, notes: Notes) -> std::io::Result<Option<FloorFigure>> {
        let (l, side, size, roles, stop) = (run.kind, run.side, run.size, run.roles, run.stop);
        let streams = roles.options.get("mode").is_some_and(|m| m == "streams");
        let rt = Local::new()?;
        let data = vec![7u8; size];
        let loop_ns = (roles.warmup + roles.duration).as_nanos() as u64;
        let tick = Duration::from_millis(100);
        if side == 1 {
            let (url, broker) = broker::for_floor(&SERVER, "redis", roles, Notes::WAIT)?;
            let name = format!("msgperf-floor-{}", std::process::id());
            let (client, mut con) = connect(&url).map_err(io)?;
            match l {
                FloorLoop::PingPong => {
                    let mut pings = Reader::open(&rt, &client, format!("{name}:ping"), streams)?;
                    notes.put(Notes::URL, &format!("{url} {name}"))?;
                    let end = sys::monotonic_ns() + loop_ns + Notes::WAIT.as_nanos() as u64;
                    let pong = format!("{name}:pong");
                    let mut p = Vec::new();
                    while sys::monotonic_ns() < end && !stop.load(Ordering::Relaxed) {
                        // The echo needs the ping's bytes: a copy, as a role's responder makes.
                        let mut copy = |m: &[u8]| {
                            p.clear();
                            p.extend_from_slice(m);
                        };
                        if pings.next(&rt, &mut con, tick, &mut copy) {
                            if p.len() <= 1 {
                                break;
                            }
                            write(&mut con, &pong, &p, streams).map_err(io)?;
                        }
                    }
                }
                FloorLoop::Stream => {
                    notes.put(Notes::URL, &format!("{url} {name}"))?;
                    notes.wait(Notes::READY, Notes::WAIT)?;
                    let to = format!("{name}:data");
                    let end = sys::monotonic_ns() + loop_ns;
                    while sys::monotonic_ns() < end && !stop.load(Ordering::Relaxed) {
                        write(&mut con, &to, &data, streams).map_err(io)?;
                    }
                    write(&mut con, &to, &[0], streams).map_err(io)?;
                }
            }
            // The server stays until side 0 has all it will read.
            let _ = notes.wait(Notes::DONE, Notes::WAIT);
            if broker.is_none() {
                let keys = [
                    format!("{name}:ping"),
                    format!("{name}:pong"),
                    format!("{name}:data"),
                ];
                let _: redis::RedisResult<()> = con.del(&keys);
            }
            drop(broker);
            return Ok(None);
        }
        let at = notes.wait(Notes::URL, Notes::WAIT)?;
        let (url, name) = at.split_once(' ').ok_or_else(|| io("bad notes"))?;
        let (client, mut con) = connect(url).map_err(io)?;
        let figure = match l {
            FloorLoop::PingPong => {
                let mut pongs = Reader::open(&rt, &client, format!("{name}:pong"), streams)?;
                let ping = format!("{name}:ping");
                let mut len = 0;
                let f = measure_round_trips(roles, stop, || {
                    write(&mut con, &ping, &data, streams).is_ok()
                        && pongs.next(&rt, &mut con, Notes::WAIT, &mut |m| len = m.len())
                        && len == size
                });
                let _ = write(&mut con, &ping, &[0], streams);
                f?
            }
            FloorLoop::Stream => {
                let mut msgs = Reader::open(&rt, &client, format!("{name}:data"), streams)?;
                notes.put(Notes::READY, "yes")?;
                let mut window = ReadWindow::new(roles.warmup);
                let deadline =
                    crate::deadline::Deadline::after(Duration::from_nanos(loop_ns) + Notes::WAIT);
                let mut len = 0;
                while !deadline.expired() && !stop.load(Ordering::Relaxed) {
                    if msgs.next(&rt, &mut con, tick, &mut |m| len = m.len()) {
                        if len <= 1 {
                            break;
                        }
                        window.read();
                    }
                }
                window.figure(size)
            }
        };
        notes.put(Notes::DONE, "yes")?;
        Ok(Some(figure))
    }
}
