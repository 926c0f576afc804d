//! The shm floor: two sides passing a `size`-byte message through shared memory with one flag
//! each way and the same wait strategy as the run (spin, spin-yield, or futex sleep), no ring,
//! no header. For streams, the plainest shared-memory stream between the same two roles: as many
//! slots as shm's ring holds such messages, a head and a tail counter, one copy in and one copy out per message, no header and no
//! check. (`msgperf floor` also shows memcpy bandwidth on one CPU, which a stream between two
//! CPUs cannot reach: every byte must cross from one core's cache to the other's.)

use super::ring::{futex_wait, futex_wake, SharedMem};
use crate::sys;
use crate::transport::floor::{
    measure_round_trips, stream_figure, Floor, FloorEnds, FloorFigure, FloorLoop, FloorRoles,
    FloorRun,
};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

pub struct ShmFloor;

/// How long spin-yield spins before it yields: as shm's endpoints do (`endpoint.rs`).
const SPIN_BUDGET_NS: u64 = 2_000;

#[derive(Clone, Copy, PartialEq)]
enum Wait {
    Spin,
    SpinYield,
    Block,
}

/// Waits until `flag` differs from `old`, with the wait strategy of shm's own endpoints
/// (spin-yield spins 64 times and at least 2 us, then yields), so that the floor waits as the
/// case does.
fn wait_change(flag: &AtomicU32, old: u32, how: Wait, end_ns: u64) -> Option<u32> {
    let v = flag.load(Ordering::Acquire);
    if v != old {
        return Some(v);
    }
    let start = sys::monotonic_ns();
    let mut spins = 0u32;
    loop {
        let v = flag.load(Ordering::Acquire);
        if v != old {
            return Some(v);
        }
        spins = spins.wrapping_add(1);
        match how {
            Wait::Spin => std::hint::spin_loop(),
            Wait::SpinYield if spins < 64 || sys::monotonic_ns() - start < SPIN_BUDGET_NS => {
                std::hint::spin_loop()
            }
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

/// The bytes a floor loop's shared memory takes: three flag lines, then a buffer each way
/// (ping-pong) or the slots (stream).
fn layout(l: FloorLoop, size: usize, roles: &FloorRoles) -> (usize, usize) {
    let slot = size.next_multiple_of(64);
    match l {
        FloorLoop::PingPong => (512 + 2 * slot, 0),
        FloorLoop::Stream => {
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
            (512 + slots * slot, slots)
        }
    }
}

impl Floor for ShmFloor {
    fn make(
        &self,
        l: FloorLoop,
        size: usize,
        roles: &FloorRoles,
    ) -> std::io::Result<[FloorEnds; 2]> {
        let (len, _) = layout(l, size, roles);
        let (_, fd) = SharedMem::create(len)?;
        Ok([
            FloorEnds::Fds(vec![fd.try_clone()?]),
            FloorEnds::Fds(vec![fd]),
        ])
    }

    fn run(&self, run: FloorRun, ends: FloorEnds) -> std::io::Result<Option<FloorFigure>> {
        let (l, side, size, roles, stop) = (run.kind, run.side, run.size, run.roles, run.stop);
        let FloorEnds::Fds(fds) = ends else {
            return Err(std::io::Error::other("the shm floor shares a memory file"));
        };
        let (len, slots) = layout(l, size, roles);
        let shared = SharedMem::map(&fds[0], len)?;
        let how = wait_of(roles);
        let limit = sys::monotonic_ns()
            + (roles.warmup + roles.duration + Duration::from_secs(10)).as_nanos() as u64;
        let (f0, f1, done) = (shared.u32_at(0), shared.u32_at(128), shared.u32_at(256));
        let at = |off: usize| {
            // SAFETY: every offset used below lies inside the mapping.
            unsafe { shared.ptr.add(off) }
        };
        let slot = size.next_multiple_of(64);
        let mut buf = vec![7u8; size];
        match (l, side) {
            // Line 0: ping, line 1: pong, line 2: done; then one buffer each way.
            (FloorLoop::PingPong, 0) => {
                let (ping, pong) = (f0, f1);
                let mut i = 0u32;
                let f = measure_round_trips(roles, stop, || {
                    i = i.wrapping_add(1).max(1);
                    // SAFETY: inside the mapping, which outlives this loop.
                    unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), at(512), size) };
                    let before = pong.load(Ordering::Acquire);
                    post(ping, i, how);
                    if wait_change(pong, before, how, limit).is_none() {
                        return false;
                    }
                    unsafe {
                        std::ptr::copy_nonoverlapping(at(512 + slot), buf.as_mut_ptr(), size)
                    };
                    true
                });
                done.store(1, Ordering::Release);
                post(ping, 0, Wait::Block);
                f.map(Some)
            }
            (FloorLoop::PingPong, _) => {
                let (ping, pong) = (f0, f1);
                let mut last = 0;
                while let Some(v) = wait_change(ping, last, how, limit) {
                    if done.load(Ordering::Acquire) != 0 {
                        break;
                    }
                    last = v;
                    // SAFETY: both buffers lie inside the mapping.
                    unsafe {
                        std::ptr::copy_nonoverlapping(at(512), buf.as_mut_ptr(), size);
                        std::ptr::copy_nonoverlapping(buf.as_ptr(), at(512 + slot), size);
                    }
                    post(pong, v, how);
                }
                Ok(None)
            }
            // Line 0: head (written), line 1: tail (read), line 2: done; then the slots.
            (FloorLoop::Stream, 0) => {
                let (head, tail) = (f0, f1);
                let slots = slots as u32;
                let warm_end = sys::monotonic_ns() + roles.warmup.as_nanos() as u64;
                let end = warm_end + roles.duration.as_nanos() as u64;
                let (mut t, mut h) = (0u32, 0u32);
                let (mut n, mut start) = (0u64, None);
                let got = loop {
                    if h == t {
                        match wait_change(head, h, how, limit) {
                            Some(v) => h = v,
                            None => break None,
                        }
                    }
                    let from = 512 + (t % slots) as usize * slot;
                    // SAFETY: inside the mapping, which outlives this loop.
                    unsafe { std::ptr::copy_nonoverlapping(at(from), buf.as_mut_ptr(), size) };
                    std::hint::black_box(&mut buf);
                    t = t.wrapping_add(1);
                    post(tail, t, how);
                    let now = sys::monotonic_ns();
                    match start {
                        None if now >= warm_end => start = Some(now),
                        Some(s) => {
                            n += 1;
                            if now >= end || stop.load(Ordering::Relaxed) {
                                break Some((n, now - s));
                            }
                        }
                        None => {}
                    }
                };
                done.store(1, Ordering::Release);
                post(tail, u32::MAX, Wait::Block);
                let (n, ns) =
                    got.ok_or_else(|| std::io::Error::other("the shm floor's writer stopped"))?;
                Ok(Some(stream_figure(n, n * size as u64, ns)))
            }
            (FloorLoop::Stream, _) => {
                let (head, tail) = (f0, f1);
                let slots = slots as u32;
                let mut h = 0u32;
                'write: while done.load(Ordering::Acquire) == 0 {
                    // Wait for a free slot.
                    let mut t = tail.load(Ordering::Acquire);
                    while h.wrapping_sub(t) >= slots {
                        match wait_change(tail, t, how, limit) {
                            Some(v) => t = v,
                            None => break 'write,
                        }
                        if done.load(Ordering::Acquire) != 0 {
                            break 'write;
                        }
                    }
                    let dst = 512 + (h % slots) as usize * slot;
                    // SAFETY: inside the mapping.
                    unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), at(dst), size) };
                    h = h.wrapping_add(1);
                    post(head, h, how);
                }
                Ok(None)
            }
        }
    }
}

fn wait_of(roles: &FloorRoles) -> Wait {
    match roles.options.get("wait").map(String::as_str) {
        Some("spin") => Wait::Spin,
        Some("block") => Wait::Block,
        _ => Wait::SpinYield,
    }
}
