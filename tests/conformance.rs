//! The transport contract (see `src/transport/mod.rs`), checked against every registry entry
//! with no per-transport code.

use msgperf::transport::{ChannelSpec, Endpoint, Transport, TransportError, REGISTRY};
use std::collections::BTreeMap;
use std::time::Duration;

fn spec(timeout_ms: u64) -> ChannelSpec {
    ChannelSpec {
        options: BTreeMap::new(),
        timeout: Duration::from_millis(timeout_ms),
        poll: false,
        max_message: 70_000,
        listen_at: None,
        watched: false,
    }
}

/// A message as the contract wants it: length in the first four bytes, then a pattern.
fn message(len: usize, tag: u8) -> Vec<u8> {
    let mut m: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(tag))
        .collect();
    m[..4].copy_from_slice(&(len as u32).to_le_bytes());
    m
}

/// Opens a connected pair: (connector, acceptor).
fn pair(
    t: &dyn Transport,
    s: &ChannelSpec,
) -> (
    Box<dyn Endpoint>,
    Box<dyn Endpoint>,
    msgperf::transport::Rendezvous,
) {
    let mut l = t
        .listen(s)
        .unwrap_or_else(|e| panic!("{}: listen: {e}", t.name()));
    let at = l.rendezvous();
    let s2 = s.clone();
    let accepter = std::thread::spawn(move || l.accept(&s2).map_err(|e| e.to_string()));
    let c = t
        .connect(&at, s)
        .unwrap_or_else(|e| panic!("{}: connect: {e}", t.name()));
    let a = accepter
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("{}: accept: {e}", t.name()));
    (c, a, at)
}

#[test]
fn every_transport_delivers_whole_messages_both_ways_in_order() {
    for t in REGISTRY {
        let s = spec(5_000);
        let (mut c, mut a, _) = pair(*t, &s);
        let max = t.capabilities().max_message_bytes.min(65_536);
        let sizes = [4usize, 32, 1000, 4096, max];
        let mut buf = vec![0u8; 70_000];
        // Back to back, so that byte streams must split them correctly.
        let sender = std::thread::spawn(move || {
            for (i, &n) in sizes.iter().enumerate() {
                c.send(&message(n, i as u8)).unwrap();
            }
            c
        });
        for (i, &n) in sizes.iter().enumerate() {
            let got = a
                .recv(&mut buf)
                .unwrap_or_else(|e| panic!("{}: recv {n}: {e}", t.name()));
            assert_eq!(got, n, "{}: length", t.name());
            assert_eq!(
                &buf[..n],
                &message(n, i as u8)[..],
                "{}: bytes of message {i}",
                t.name()
            );
        }
        let mut c = sender.join().unwrap();
        a.send(&message(100, 9)).unwrap();
        assert_eq!(c.recv(&mut buf).unwrap(), 100, "{}: reply", t.name());
    }
}

#[test]
fn every_transport_times_out_instead_of_waiting_forever() {
    for t in REGISTRY.iter().filter(|t| t.name() != "pipe") {
        // Pipes have no receive timeout: their bound is the peer's end of file and the
        // controller's watchdog (checked in tests/faults.rs).
        let s = spec(200);
        let (_c, mut a, _) = pair(*t, &s);
        let start = std::time::Instant::now();
        let r = a.recv(&mut [0u8; 100]);
        assert!(
            matches!(r, Err(TransportError::Timeout(_))),
            "{}: {r:?}",
            t.name()
        );
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "{}: took {:?}",
            t.name(),
            start.elapsed()
        );
    }
}

#[test]
fn try_recv_returns_at_once_when_polling() {
    for t in REGISTRY {
        let mut s = spec(2_000);
        s.poll = true;
        let (mut c, mut a, _) = pair(*t, &s);
        let mut buf = vec![0u8; 1000];
        assert!(
            matches!(a.try_recv(&mut buf), Ok(None)),
            "{}: empty channel",
            t.name()
        );
        c.send(&message(64, 1)).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        loop {
            match a.try_recv(&mut buf).unwrap() {
                Some(n) => {
                    assert_eq!(n, 64, "{}", t.name());
                    break;
                }
                None => assert!(
                    std::time::Instant::now() < deadline,
                    "{}: message never came",
                    t.name()
                ),
            }
        }
    }
}

#[test]
fn a_closed_peer_is_reported_on_reliable_transports() {
    for t in REGISTRY
        .iter()
        .filter(|t| t.capabilities().reliable && t.name() != "uds-dgram")
    {
        // (A unix datagram socket does not learn that its connected peer closed until it sends.)
        let s = spec(2_000);
        let (c, mut a, _) = pair(*t, &s);
        drop(c);
        let r = a.recv(&mut [0u8; 100]);
        assert!(
            matches!(r, Err(TransportError::PeerClosed)),
            "{}: {r:?}",
            t.name()
        );
    }
}

#[test]
fn a_message_larger_than_the_buffer_is_an_error_not_a_truncation() {
    for t in REGISTRY {
        let s = spec(2_000);
        let (mut c, mut a, _) = pair(*t, &s);
        c.send(&message(2000, 3)).unwrap();
        let r = a.recv(&mut [0u8; 1000]);
        assert!(
            matches!(r, Err(TransportError::TooLarge { .. })),
            "{}: {r:?}",
            t.name()
        );
    }
}

#[test]
fn listeners_leave_no_files_behind() {
    for t in REGISTRY {
        let s = spec(2_000);
        let at = {
            let (_c, _a, at) = pair(*t, &s);
            at
        };
        if at.address.starts_with('/') {
            assert!(
                !std::path::Path::new(&at.address).exists(),
                "{}: {} left behind",
                t.name(),
                at.address
            );
        }
        let l = t.listen(&s).unwrap();
        let at = l.rendezvous();
        drop(l);
        if at.address.starts_with('/') {
            assert!(
                !std::path::Path::new(&at.address).exists(),
                "{}: {} left by an unused listener",
                t.name(),
                at.address
            );
        }
    }
}

#[test]
fn connecting_to_nobody_fails_within_the_timeout() {
    for t in REGISTRY {
        let s = spec(500);
        let l = t.listen(&s).unwrap();
        let at = l.rendezvous();
        drop(l);
        let start = std::time::Instant::now();
        let r = t.connect(&at, &s);
        assert!(r.is_err(), "{}: connected to a closed listener", t.name());
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "{}: took {:?}",
            t.name(),
            start.elapsed()
        );
    }
}

#[test]
fn a_listener_with_many_peers_serves_them_at_once_on_separate_channels() {
    const PEERS: usize = 3;
    for t in REGISTRY.iter().filter(|t| t.capabilities().many_peers) {
        let s = spec(5_000);
        let mut l = t.listen(&s).unwrap();
        let at = l.rendezvous();
        // All connect at once, as publishers starting together do.
        let connectors: Vec<_> = (0..PEERS)
            .map(|i| {
                let (at, s) = (at.clone(), s.clone());
                let t = *t;
                std::thread::spawn(move || {
                    let mut c = t
                        .connect(&at, &s)
                        .unwrap_or_else(|e| panic!("{}: connect {i}: {e}", t.name()));
                    c.send(&message(100 + i, i as u8)).unwrap();
                    let mut buf = vec![0u8; 1000];
                    let n = c.recv(&mut buf).unwrap();
                    assert_eq!(buf[..n], message(200 + i, i as u8)[..], "{}", t.name());
                })
            })
            .collect();
        let mut buf = vec![0u8; 1000];
        let mut accepted = Vec::new();
        for _ in 0..PEERS {
            let mut a = l
                .accept(&s)
                .unwrap_or_else(|e| panic!("{}: accept: {e}", t.name()));
            let n = a.recv(&mut buf).unwrap();
            let i = n - 100;
            assert!(i < PEERS, "{}: a message of {n} B", t.name());
            assert_eq!(buf[..n], message(n, i as u8)[..], "{}", t.name());
            accepted.push((i, a));
        }
        // Each answer goes back on its own channel only.
        for (i, a) in accepted.iter_mut() {
            a.send(&message(200 + *i, *i as u8)).unwrap();
        }
        for c in connectors {
            c.join().unwrap();
        }
    }
}
