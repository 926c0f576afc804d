//! The shm floor: two sides passing a `size`-byte message through shared memory with one flag
//! each way and the same wait strategy as the run (spin, spin-yield, or futex sleep), no ring,
//! no header. For streams, the plainest shared-memory stream between the same two roles: as many
//! slots as shm's ring holds such messages, a head and a tail counter, one copy in and one copy out per message, no header and no
//! check. (`msgperf floor` also shows memcpy bandwidth on one CPU, which a stream between two
//! CPUs cannot reach: every byte must cross from one core's cache to the other's.)

use super::ring::{futex_wait, futex_wake, SharedAnon};
use crate::sys;
use crate::transport::floor::{
    pinned, rtt_figure, start_peer, Floor, FloorFigure, FloorRoles, MAX_SAMPLES,
};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

pub struct ShmFloor;

#[derive(Clone, Copy, PartialEq)]
enum Wait {
    Spin,
    SpinYield,
    Block,
}

/// Waits until `flag` differs from `old`.
fn wait_change(flag: &AtomicU32, old: u32, how: Wait, end_ns: u64) -> Option<u32> {
    let mut spins = 0u32;
    loop {
        let v = flag.load(Ordering::Acquire);
        if v != old {
            return Some(v);
        }
        spins = spins.wrapping_add(1);
        match how {
            Wait::Spin => std::hint::spin_loop(),
            Wait::SpinYield if spins < 256 => std::hint::spin_loop(),
            Wait::SpinYield => std::thread::yield_now(),
            Wait::Block => futex_wait(flag, old, Duration::from_millis(50)),
        }
        if spins.is_multiple_of(4096) && sys::monotonic_ns() > end_ns {
            return None;
        }
    }
}

fn post(flag: &AtomicU32, v: u32, how: Wait) {
    flag.store(v, Ordering::Release);
    if how == Wait::Block {
        futex_wake(flag);
    }
}

impl Floor for ShmFloor {
    fn pingpong(&self, size: usize, roles: &FloorRoles) -> std::io::Result<FloorFigure> {
        let how = wait_of(roles);
        // Line 0: ping, line 1: pong, line 2: done; then one buffer each way.
        let shared = SharedAnon::new(512 + 2 * size.next_multiple_of(64))?;
        let (a2b, b2a) = (512, 512 + size.next_multiple_of(64));
        let base = shared.ptr as usize;
        let limit = sys::monotonic_ns()
            + (roles.warmup + roles.duration + Duration::from_secs(10)).as_nanos() as u64;
        let shared_ref = &shared;
        let (ping, pong, done) = (
            shared_ref.u32_at(0),
            shared_ref.u32_at(128),
            shared_ref.u32_at(256),
        );
        // Allocated before the fork: a forked child must not allocate.
        let mut buf = vec![0u8; size];
        let peer = start_peer(roles, move || {
            // SAFETY of the raw copies: both buffers lie inside the mapping, which the parent
            // keeps until the peer has finished (threads) or which the fork copied (processes).
            let at = |off: usize| (base + off) as *mut u8;
            let (ping, pong, done) = unsafe {
                (
                    &*(at(0) as *const AtomicU32),
                    &*(at(128) as *const AtomicU32),
                    &*(at(256) as *const AtomicU32),
                )
            };
            let mut last = 0;
            while let Some(v) = wait_change(ping, last, how, limit) {
                if done.load(Ordering::Acquire) != 0 {
                    break;
                }
                last = v;
                unsafe {
                    std::ptr::copy_nonoverlapping(at(a2b), buf.as_mut_ptr(), size);
                    std::ptr::copy_nonoverlapping(buf.as_ptr(), at(b2a), size);
                }
                post(pong, v, how);
            }
            0
        })?;
        let mut buf = vec![1u8; size];
        let mut samples: Vec<u32> = Vec::with_capacity(MAX_SAMPLES);
        let ok = pinned(roles, || {
            let warm_end = sys::monotonic_ns() + roles.warmup.as_nanos() as u64;
            let end = warm_end + roles.duration.as_nanos() as u64;
            let mut i = 0u32;
            loop {
                i = i.wrapping_add(1).max(1);
                let t0 = sys::monotonic_ns();
                // SAFETY: inside the mapping, which outlives this loop.
                unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), shared.ptr.add(a2b), size) };
                let before = pong.load(Ordering::Acquire);
                post(ping, i, how);
                if wait_change(pong, before, how, limit).is_none() {
                    return false;
                }
                unsafe {
                    std::ptr::copy_nonoverlapping(shared.ptr.add(b2a), buf.as_mut_ptr(), size)
                };
                let t1 = sys::monotonic_ns();
                if t0 >= warm_end {
                    samples.push((t1 - t0).min(u32::MAX as u64) as u32);
                }
                if t1 >= end || samples.len() == MAX_SAMPLES {
                    return true;
                }
            }
        });
        done.store(1, Ordering::Release);
        post(ping, 0, Wait::Block);
        peer.finish(Duration::from_secs(5));
        if !ok {
            return Err(std::io::Error::other(
                "the shm floor's peer stopped answering",
            ));
        }
        Ok(rtt_figure(&mut samples))
    }

    fn stream(&self, size: usize, roles: &FloorRoles) -> std::io::Result<FloorFigure> {
        let how = wait_of(roles);
        let slot = size.next_multiple_of(64);
        // As many slots as shm's ring holds such messages (a power of two, so that the
        // wrapping counters index them right), at least two.
        let capacity = roles
            .options
            .get("capacity")
            .and_then(|c| crate::units::parse_size(c).ok())
            .unwrap_or(super::DEFAULT_CAPACITY);
        let fit = (capacity / slot).max(2);
        let slots = if fit.is_power_of_two() {
            fit
        } else {
            fit.next_power_of_two() / 2
        };
        let slots_u32 = slots as u32;
        // Line 0: head (written), line 1: tail (read), line 2: done; then the slots.
        let shared = SharedAnon::new(512 + slots * slot)?;
        let base = shared.ptr as usize;
        let limit = sys::monotonic_ns()
            + (roles.warmup + roles.duration + Duration::from_secs(10)).as_nanos() as u64;
        let src = vec![7u8; size];
        let peer = start_peer(roles, move || {
            // SAFETY: the counters and slots lie inside the mapping, which the parent keeps
            // until the peer has finished (threads) or which the fork shares (processes).
            let at = |off: usize| (base + off) as *mut u8;
            let (head, tail, done) = unsafe {
                (
                    &*(at(0) as *const AtomicU32),
                    &*(at(128) as *const AtomicU32),
                    &*(at(256) as *const AtomicU32),
                )
            };
            let mut h = 0u32;
            while done.load(Ordering::Acquire) == 0 {
                // Wait for a free slot.
                let mut t = tail.load(Ordering::Acquire);
                while h.wrapping_sub(t) >= slots_u32 {
                    match wait_change(tail, t, how, limit) {
                        Some(v) => t = v,
                        None => return 1,
                    }
                    if done.load(Ordering::Acquire) != 0 {
                        return 0;
                    }
                }
                let dst = at(512 + (h % slots_u32) as usize * slot);
                unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst, size) };
                h = h.wrapping_add(1);
                post(head, h, how);
            }
            0
        })?;
        let (head, tail, done) = (shared.u32_at(0), shared.u32_at(128), shared.u32_at(256));
        let mut buf = vec![0u8; size];
        let got = pinned(roles, || {
            let warm_end = sys::monotonic_ns() + roles.warmup.as_nanos() as u64;
            let end = warm_end + roles.duration.as_nanos() as u64;
            let (mut t, mut h) = (0u32, 0u32);
            let (mut n, mut start) = (0u64, None);
            loop {
                if h == t {
                    h = wait_change(head, h, how, limit)?;
                }
                let from = 512 + (t % slots_u32) as usize * slot;
                // SAFETY: inside the mapping, which outlives this loop.
                unsafe {
                    std::ptr::copy_nonoverlapping(shared.ptr.add(from), buf.as_mut_ptr(), size)
                };
                std::hint::black_box(&mut buf);
                t = t.wrapping_add(1);
                post(tail, t, how);
                let now = sys::monotonic_ns();
                match start {
                    None if now >= warm_end => start = Some(now),
                    Some(s) => {
                        n += 1;
                        if now >= end {
                            return Some((n, now - s));
                        }
                    }
                    None => {}
                }
            }
        });
        done.store(1, Ordering::Release);
        post(tail, u32::MAX, Wait::Block);
        peer.finish(Duration::from_secs(5));
        let (n, ns) = got.ok_or_else(|| std::io::Error::other("the shm floor's writer stopped"))?;
        let secs = ns.max(1) as f64 / 1e9;
        Ok(FloorFigure {
            samples: n,
            msgs_per_s: n as f64 / secs,
            bytes_per_s: n as f64 * size as f64 / secs,
            ..Default::default()
        })
    }
}

fn wait_of(roles: &FloorRoles) -> Wait {
    match roles.options.get("wait").map(String::as_str) {
        Some("spin") => Wait::Spin,
        Some("block") => Wait::Block,
        _ => Wait::SpinYield,
    }
}
