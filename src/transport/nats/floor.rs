//! NATS's floor: the plainest async-nats loops through the same kind of server, on the same
//! runtime and settings, and nothing of msgperf: a ping published on one subject and answered
//! on another (ping-pong), and a subject published as fast as the client takes it and counted
//! as it arrives (a stream). Side 1 starts the server (as a case's set-up does, on side 1's
//! CPU) or uses `--opt broker`; side 0 measures. With `--opt jetstream`, side 1 makes the
//! stream, publishes wait for their acknowledgements as `--opt acks-in-flight` says and every
//! read is acknowledged, as the adapter's are.

use super::{
    connect, consume, create_stream, jetstream_context, jetstream_of, runtime, synced, Acks, SERVER,
};
use crate::sys;
use crate::transport::broker;
use crate::transport::floor::{
    io, measure_round_trips, FloorFigure, FloorLoop, FloorRun, Notes, NotesFloor, ReadWindow,
};
use async_nats::jetstream::{self, consumer::push};
use async_nats::{Client, Subscriber};
use bytes::Bytes;
use futures_util::StreamExt;
use std::sync::atomic::Ordering;
use std::time::Duration;

pub struct NatsFloor;

/// What a side reads: a core subscription, or a JetStream consumer's messages.
enum Reader {
    Core(Subscriber),
    // Boxed: a consumer's messages are some 500 B.
    Stream(Box<push::Messages>),
}

impl Reader {
    /// Subscribes to `subject`, known to the server when this returns.
    async fn of(
        client: &Client,
        js: Option<(&jetstream::Context, &str)>,
        subject: String,
    ) -> Result<Reader, async_nats::Error> {
        Ok(match js {
            None => {
                let sub = client.subscribe(subject).await?;
                synced(client).await?;
                Reader::Core(sub)
            }
            Some((js, stream)) => {
                Reader::Stream(Box::new(consume(js, client, stream, subject).await?))
            }
        })
    }

    /// The next payload (acknowledged, from a stream).
    async fn next(&mut self) -> Option<Bytes> {
        match self {
            Reader::Core(sub) => sub.next().await.map(|m| m.payload),
            Reader::Stream(msgs) => {
                let m = msgs.next().await?.ok()?;
                m.ack().await.ok()?;
                Some(m.payload.clone())
            }
        }
    }
}

/// Publishes, through JetStream with its acknowledgements when the case asks for it.
async fn publish(
    client: &Client,
    js: Option<&jetstream::Context>,
    acks: &mut Acks,
    subject: String,
    data: Bytes,
) -> Result<(), async_nats::Error> {
    match js {
        None => Ok(client.publish(subject, data).await?),
        Some(js) => acks.publish(js, subject.into(), data).await,
    }
}

impl NotesFloor for NatsFloor {
    fn run_with(&self, run: FloorRun, notes: Notes) -> std::io::Result<Option<FloorFigure>> {
        let (l, side, size, roles, stop) = (run.kind, run.side, run.size, run.roles, run.stop);
        let spec = roles.spec(size, Notes::WAIT);
        let rt = runtime();
        let data = Bytes::from(vec![7u8; size]);
        let end_mark = Bytes::from_static(&[0]);
        let loop_ns = (roles.warmup + roles.duration).as_nanos() as u64;
        let storage = jetstream_of(&roles.options);
        let mut acks = Acks::of(&roles.options);
        if side == 1 {
            let (url, broker) = broker::for_floor(&SERVER, "nats", roles, Notes::WAIT)?;
            let client = connect(&url, &spec).map_err(io)?;
            let name = format!("msgperf-floor-{}", std::process::id());
            let js = storage.map(|_| jetstream_context(client.clone()));
            if let (Some(js), Some(storage)) = (&js, storage) {
                create_stream(js, &name, storage, Notes::WAIT).map_err(io)?;
            }
            let js = js.as_ref();
            match l {
                FloorLoop::PingPong => {
                    let mut pings = rt
                        .block_on(Reader::of(
                            &client,
                            js.map(|j| (j, name.as_str())),
                            format!("{name}.ping"),
                        ))
                        .map_err(io)?;
                    notes.put(Notes::URL, &format!("{url} {name}"))?;
                    let end = sys::monotonic_ns() + loop_ns + Notes::WAIT.as_nanos() as u64;
                    while sys::monotonic_ns() < end && !stop.load(Ordering::Relaxed) {
                        let got = rt.block_on(async {
                            tokio::time::timeout(Duration::from_millis(100), pings.next()).await
                        });
                        match got {
                            Ok(Some(m)) if m.len() > 1 => {
                                let pong = format!("{name}.pong");
                                rt.block_on(publish(&client, js, &mut acks, pong, m))
                                    .map_err(io)?;
                            }
                            Ok(_) => break,
                            Err(_) => {}
                        }
                    }
                }
                FloorLoop::Stream => {
                    notes.put(Notes::URL, &format!("{url} {name}"))?;
                    notes.wait(Notes::READY, Notes::WAIT)?;
                    let subject = format!("{name}.data");
                    let end = sys::monotonic_ns() + loop_ns;
                    // One async loop, as a program written for the client would run it.
                    rt.block_on(async {
                        while sys::monotonic_ns() < end && !stop.load(Ordering::Relaxed) {
                            let data = Bytes::copy_from_slice(&data);
                            publish(&client, js, &mut acks, subject.clone(), data).await?;
                        }
                        publish(&client, js, &mut acks, subject, end_mark).await?;
                        acks.settle().await?;
                        client.flush().await?;
                        Ok::<_, async_nats::Error>(())
                    })
                    .map_err(io)?;
                }
            }
            // The server stays until side 0 has all it will read.
            let _ = notes.wait(Notes::DONE, Notes::WAIT);
            if let Some(js) = js {
                let _ = rt.block_on(js.delete_stream(&name));
            }
            drop(client);
            drop(broker);
            return Ok(None);
        }
        let at = notes.wait(Notes::URL, Notes::WAIT)?;
        let (url, name) = at.split_once(' ').ok_or_else(|| io("bad notes"))?;
        let client = connect(url, &spec).map_err(io)?;
        let js = storage.map(|_| jetstream_context(client.clone()));
        let js = js.as_ref();
        let reader = |subject: String| {
            rt.block_on(Reader::of(&client, js.map(|j| (j, name)), subject))
                .map_err(io)
        };
        let figure = match l {
            FloorLoop::PingPong => {
                let mut pongs = reader(format!("{name}.pong"))?;
                let ping = format!("{name}.ping");
                let f = measure_round_trips(roles, stop, || {
                    rt.block_on(async {
                        publish(
                            &client,
                            js,
                            &mut acks,
                            ping.clone(),
                            Bytes::copy_from_slice(&data),
                        )
                        .await
                        .is_ok()
                            && tokio::time::timeout(Notes::WAIT, pongs.next())
                                .await
                                .is_ok_and(|m| m.is_some_and(|m| m.len() == size))
                    })
                });
                let _ = rt.block_on(publish(&client, js, &mut acks, ping, end_mark));
                let _ = rt.block_on(acks.settle());
                let _ = rt.block_on(client.flush());
                f?
            }
            FloorLoop::Stream => {
                let mut msgs = reader(format!("{name}.data"))?;
                notes.put(Notes::READY, "yes")?;
                let mut window = ReadWindow::new(roles.warmup);
                // Core NATS may drop the end mark with other messages: the loop's length bounds it.
                let deadline =
                    crate::deadline::Deadline::after(Duration::from_nanos(loop_ns) + Notes::WAIT);
                rt.block_on(async {
                    while !deadline.expired() && !stop.load(Ordering::Relaxed) {
                        // A queued message is taken before the timer is polled.
                        match tokio::time::timeout(Duration::from_millis(100), msgs.next()).await {
                            Ok(Some(m)) if m.len() > 1 => window.read(),
                            Ok(_) => break,
                            Err(_) if window.began_before(Duration::from_nanos(loop_ns)) => break,
                            Err(_) => {}
                        }
                    }
                });
                window.figure(size)
            }
        };
        notes.put(Notes::DONE, "yes")?;
        Ok(Some(figure))
    }
}
