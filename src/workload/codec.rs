//! `codec`: a format alone, no transport: encode a typed body, decode it in full (and, for a
//! zero-copy format, read it in place), message after message on one CPU; each step timed on
//! its own, and as a batch mean that carries no clock cost. A quick choice of format before
//! any transport is involved.

use super::payload::{self, PAYLOAD};
use super::runtime::one_role;
use super::{phases, Param, Params, RoleError, RoleRun, Sent, StopRule, Topology, Workload};
use crate::codec::Marshal;
use crate::measure::{clock::IntervalClock, Metric, Recorder};
use crate::result::{CaseConfig, LatencyKind, RoleKind};
use crate::transport::Capabilities;
use std::sync::atomic::AtomicBool;

pub struct Codec;

const CODER: RoleKind = RoleKind::new("coder");

// The message workloads' keys, so that tables read them alike.
const ENCODE: Metric = Metric::new(Metric::ENCODE.key(), 0);
const DECODE: Metric = Metric::new(Metric::DECODE.key(), 1);
const ACCESS: Metric = Metric::new(Metric::ACCESS.key(), 2);

const ENCODING: LatencyKind = LatencyKind::new(
    "encode",
    "encoding one body into a buffer, alone, on the role's clock (its cost included)",
    true,
);

/// Messages encoded, or decoded, in one timing for the batch means...
const BATCH: u64 = 200;
/// ...and batches, the median of which is taken.
const BATCHES: usize = 9;

impl Workload for Codec {
    fn name(&self) -> &'static str {
        "codec"
    }
    fn about(&self) -> &'static str {
        "a format alone, no transport (--payload TYPE:FORMAT, TYPE:* for all): encode, decode and in-place read per message, against a memcpy"
    }
    fn params(&self) -> &'static [&'static Param] {
        &[&PAYLOAD]
    }
    fn metrics(&self) -> &'static [Metric] {
        &[ENCODE, DECODE, ACCESS]
    }
    fn message_size(&self, params: &Params) -> Option<Result<usize, String>> {
        payload::message_size(params)
    }
    fn latency(&self, _: &CaseConfig) -> (LatencyKind, Metric) {
        (ENCODING, ENCODE)
    }
    fn default_transport(&self, _: &Params) -> Option<&'static str> {
        Some(crate::transport::NO_CHANNEL.name())
    }
    fn check(&self, case: &CaseConfig, _: &Capabilities) -> Result<(), String> {
        if case.transport != crate::transport::NO_CHANNEL.name() {
            return Err(format!(
                "codec measures a format alone, not a transport: drop -t {} (a message workload with --payload measures the format over it)",
                case.transport
            ));
        }
        super::check_two_roles(case)?;
        if case.rate_hz.is_some() {
            return Err("codec encodes as fast as it can: --rate does not apply; drop it".into());
        }
        if payload::of(&case.effective_params).is_none() {
            return Err(
                "codec needs a typed payload: e.g. --payload struct256:* (every format) or struct256:postcard,struct256:cdr"
                    .into(),
            );
        }
        Ok(())
    }
    fn topology(&self, case: &CaseConfig, _: &Capabilities) -> Topology {
        one_role(case, CODER)
    }
    fn run(&self, r: RoleRun) -> Result<Option<Sent>, RoleError> {
        let (case, rec, ctl) = (r.case, r.rec, r.ctl);
        let p = payload::of(&case.effective_params)
            .ok_or_else(|| RoleError::Work("codec without a typed payload".into()))?;
        let mut m = Marshal::new(&p)?;
        let mut words = vec![0u64; (m.capacity() + 4096).div_ceil(8)];
        let buf = body_buffer(&mut words, m.capacity());
        let clock = IntervalClock::new();
        let sent = phases(case, rec, |rec, seq, rule, record| {
            coding(&mut m, buf, rec, seq, rule, record, ctl.stop, &clock)
        })?;
        batch_means(&mut m, buf, rec, &clock)?;
        payload::record_figures(&m, rec, || clock.now());
        Ok(Some(sent))
    }
}

/// The buffer bodies are encoded into: 8-aligned, as a message body is, and 2 KiB into a
/// page, away from where the allocator puts the blocks a decoder allocates (a copy between
/// two places a multiple of 4 KiB apart meets 4K aliasing and costs several times as much on
/// x86, which would be the buffers' placement measured, not the format).
fn body_buffer(words: &mut [u64], room: usize) -> &mut [u8] {
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(words);
    let skip = (2048 + 4096 - bytes.as_ptr() as usize % 4096) % 4096;
    &mut bytes[skip..skip + room]
}

/// One phase: encode, decode and (zero-copy formats) access message after message.
#[allow(clippy::too_many_arguments)]
fn coding(
    m: &mut Marshal,
    buf: &mut [u8],
    rec: &mut Recorder,
    seq: &mut u64,
    rule: StopRule,
    record: bool,
    stop: &AtomicBool,
    clock: &IntervalClock,
) -> Result<(), RoleError> {
    let mut done = 0u64;
    loop {
        let this = *seq;
        let t0 = clock.now();
        let n = m
            .encode(this, buf)
            .map_err(|e| RoleError::Work(format!("encoding message {this}: {e}")))?;
        let t1 = clock.now();
        m.decode(this, &buf[..n]).map_err(integrity)?;
        let t2 = clock.now();
        let accessed = m.access(this, &buf[..n]);
        let t3 = clock.now();
        let in_place = accessed.is_some();
        accessed.transpose().map_err(integrity)?;
        *seq += 1;
        if record {
            rec.record_primary(ENCODE, t1 - t0, t1);
            rec.record(DECODE, t2 - t1);
            if in_place {
                rec.record(ACCESS, t3 - t2);
            }
            let c = &mut rec.counters;
            c.messages_sent += 1;
            c.messages_received += 1;
            c.bytes_sent += n as u64;
            c.bytes_received += n as u64;
            rec.mark_end(t3);
        }
        done += 1;
        if rule.done(done, t3, stop) {
            return Ok(());
        }
    }
}

/// Encode, decode, read in place (zero-copy formats) and copy messages, each step timed over
/// a batch of [`BATCH`]: means with no clock cost, the median of [`BATCHES`] batches (one
/// that a timer tick or a preemption hit does not move it).
fn batch_means(
    m: &mut Marshal,
    buf: &mut [u8],
    rec: &mut Recorder,
    clock: &IntervalClock,
) -> Result<(), RoleError> {
    let n = m.encode(BATCH - 1, buf).map_err(work)?;
    let mut floor = payload::CopyFloor::new(n);
    let median = |step: &mut dyn FnMut(u64) -> Result<(), RoleError>| {
        let mut means = Vec::with_capacity(BATCHES);
        for _ in 0..BATCHES {
            let t0 = clock.now();
            for seq in 0..BATCH {
                step(seq)?;
            }
            means.push((clock.now() - t0) as f64 / BATCH as f64);
        }
        means.sort_by(f64::total_cmp);
        Ok::<f64, RoleError>(means[BATCHES / 2])
    };
    let encode = median(&mut |seq| m.encode(seq, buf).map(|_| ()).map_err(work))?;
    // One value over and over (the last encoded): the body stays in cache, as one just
    // received does.
    let last = BATCH - 1;
    m.encode(last, buf).map_err(work)?;
    let decode = median(&mut |_| m.decode(last, &buf[..n]).map_err(integrity))?;
    let in_place = m.access(last, &buf[..n]).is_some();
    let access = median(&mut |_| match m.access(last, &buf[..n]) {
        Some(r) => r.map_err(integrity),
        None => Ok(()),
    })?;
    // And a copy of as many bytes, the floor of both.
    let memcpy = median(&mut |_| {
        floor.copy();
        Ok(())
    })?;
    rec.figure("encode, batch mean", "ns", encode);
    rec.figure("decode, batch mean", "ns", decode);
    if in_place {
        rec.figure("in place, batch mean", "ns", access);
    }
    rec.figure("memcpy, batch mean", "ns", memcpy);
    Ok(())
}

/// A value that does not encode: the format's or the room's fault, not the data's.
fn work(e: crate::codec::CodecError) -> RoleError {
    RoleError::Work(e.to_string())
}

/// A body that does not decode to what was sent.
fn integrity(e: crate::codec::CodecError) -> RoleError {
    RoleError::Integrity(e.to_string())
}
