//! `--payload`: what a message's body is: msgperf's own bytes (a pattern and a tail), or a
//! typed value that a format encodes (`struct256:postcard`; see the `codec` room). A typed
//! body is encoded by the sender and decoded in full by the receiver for every message, each
//! timed on the role's own clock (metrics `encode_ns` and `decode_ns`); the role also times a
//! copy of as many bytes the same way, the floor the table divides by.

use super::message;
use super::{Param, ParamKind, Params, RoleError};
use crate::codec::{Marshal, Payload};
use crate::result::{CaseConfig, ENCODED_BYTES, MEMCPY_NS};

/// `--payload`: shared by the workloads that send messages.
pub(crate) const PAYLOAD: Param = Param {
    key: "payload",
    value_name: "TYPE:FORMAT[,...]",
    default: Some(crate::codec::BYTES),
    about: "the message body: `bytes` (msgperf's own), or a typed value and its encoding, TYPE:FORMAT, e.g. struct256:postcard, or struct256:* for every format (an unknown type or format is refused naming those there are); the message size follows from it",
    kind: ParamKind::Parsed {
        check,
        expand: crate::codec::expand,
    },
    sweeps: true,
    always_shown: false,
};

fn check(v: &str) -> Result<(), String> {
    Payload::parse(v).map(|_| ())
}

pub(crate) fn of(params: &Params) -> Option<Payload> {
    Payload::parse(params.get(PAYLOAD.key)?).ok().flatten()
}

/// The size of a typed payload's messages (None for bytes: `--size` says).
pub(crate) fn message_size(params: &Params) -> Option<Result<usize, String>> {
    let p = of(params)?;
    // The plan refuses the run with this sentence (it takes no codec's type).
    Some(
        Marshal::new(&p)
            .map(|m| message::typed_size(m.capacity()))
            .map_err(|e| e.to_string()),
    )
}

/// A role's typed bodies: its codec and the rotation of values it sends and expects.
pub(crate) struct Typed {
    marshal: Marshal,
}

/// How many copies the memcpy floor is the median of.
const COPIES: usize = 2001;

impl Typed {
    /// The case's typed bodies (None: msgperf's bytes).
    pub fn of(case: &CaseConfig) -> Result<Option<Typed>, RoleError> {
        let Some(p) = of(&case.effective_params) else {
            return Ok(None);
        };
        let marshal = Marshal::new(&p)?;
        if message::typed_size(marshal.capacity()) != case.size_bytes {
            return Err(RoleError::Work(format!(
                "{p}: bodies need {} B messages here but the case has {} B: the two ends build different values (a different msgperf?)",
                message::typed_size(marshal.capacity()),
                case.size_bytes
            )));
        }
        Ok(Some(Typed { marshal }))
    }

    /// Writes message `seq`'s body into the whole message `m` (its header and tail are the
    /// caller's).
    #[inline(always)]
    pub fn encode(&mut self, seq: u64, m: &mut [u8]) -> Result<(), RoleError> {
        let len = self
            .marshal
            .encode(seq, message::body_room(m))
            .map_err(|e| RoleError::Work(format!("encoding message {seq}: {e}")))?;
        message::set_body_len(m, len);
        Ok(())
    }

    /// Decodes message `m`'s body in full and checks its fields against those sent.
    #[inline(always)]
    pub fn decode(&mut self, m: &[u8]) -> Result<(), String> {
        let seq = message::seq(m);
        self.marshal
            .decode(seq, message::body(m)?)
            .map_err(|e| e.to_string())
    }

    /// The role's figures (see [`record_figures`]).
    pub fn record_figures(&self, rec: &mut crate::measure::Recorder, now: impl Fn() -> u64) {
        record_figures(&self.marshal, rec, now)
    }
}

/// A copy of `n` bytes, the floor encode and decode are divided by: source and destination
/// in one buffer, 2 KiB apart modulo 4 KiB, so that the copy never meets 4K aliasing (two
/// buffers of one size, allocated one after the other, often lie a multiple of 4 KiB apart,
/// and copying between them then costs ten times as much on x86).
pub(crate) struct CopyFloor {
    buf: Vec<u8>,
    n: usize,
    to: usize,
}

impl CopyFloor {
    pub fn new(n: usize) -> Self {
        let to = n.next_multiple_of(4096) + 2048;
        CopyFloor {
            buf: vec![0x5a; to + n],
            n,
            to,
        }
    }

    #[inline(always)]
    pub fn copy(&mut self) {
        let (from, to) = self.buf.split_at_mut(self.to);
        to.copy_from_slice(std::hint::black_box(&from[..self.n]));
        std::hint::black_box(&mut *to);
    }
}

/// A role's figures: the mean encoded size, and a copy of that many bytes timed as the role
/// times an encode (`now`, twice around it), the median of many.
pub(crate) fn record_figures(
    marshal: &Marshal,
    rec: &mut crate::measure::Recorder,
    now: impl Fn() -> u64,
) {
    let mut floor = CopyFloor::new(marshal.mean_size().round() as usize);
    let mut took: Vec<u64> = (0..COPIES)
        .map(|_| {
            let t0 = now();
            floor.copy();
            now() - t0
        })
        .collect();
    took.sort_unstable();
    rec.figure(ENCODED_BYTES, "B", marshal.mean_size());
    rec.figure(MEMCPY_NS, "ns", took[COPIES / 2] as f64);
}
