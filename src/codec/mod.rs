//! Room `codec`: typed message bodies and the formats that encode them (`--payload
//! TYPE:FORMAT`). A format is one file or folder here and one line in `registry!`; the types
//! are declared once, in [`types`], with what every format reads from them.
//!
//! A typed message keeps msgperf's header (sequence number, timestamps) outside the encoded
//! body, so timing never depends on decoding; the receiver decodes every body in full and
//! checks the checksum of the fields it decoded against the value that was sent.

pub mod types;

use types::{TypeSpec, Values};

/// Declares the formats' modules (`src/codec/NAME.rs` or `NAME/`, each with its `FORMAT`)
/// and lists them in [`REGISTRY`].
macro_rules! registry {
    ($($module:ident),* $(,)?) => {
        $(mod $module;)*

        /// The formats msgperf knows, in the order help lists them.
        pub static REGISTRY: &[&Format] = &[$(&$module::FORMAT),*];
    };
}

// Adding a format is its file and one line here.
registry! {
    raw,
    postcard,
    protobuf,
    cdr,
    rkyv,
    flatbuf,
    capnproto,
    json,
}

/// Why a body could not be encoded or decoded. A format's own error is kept as the cause.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// The encoding needs more than the room the message leaves for its body.
    #[error("the encoded value does not fit in {room} B")]
    NoRoom { room: usize },
    /// A body that ends before the value does.
    #[error("the body ends before byte {end}")]
    Short { end: usize },
    /// Bytes after a whole value: a length that does not match what was encoded.
    #[error("{bytes} bytes follow the value")]
    Trailing { bytes: usize },
    /// What the format's crate said.
    #[error("{0}")]
    Format(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A body that decodes, but to fields that were not sent.
    #[error("message {seq} decodes to fields that were not sent: its body was damaged")]
    Damaged { seq: u64 },
}

/// A payload whose codec does not round-trip its own values: which payload, and the codec's
/// error where it gave one.
#[derive(Debug, thiserror::Error)]
pub enum MarshalError {
    #[error("{payload}: encoding failed: {cause}")]
    Encode {
        payload: String,
        #[source]
        cause: CodecError,
    },
    #[error("{payload}: its own encoding does not decode: {cause}")]
    Decode {
        payload: String,
        #[source]
        cause: CodecError,
    },
    #[error("{0}: a value does not survive its round trip")]
    RoundTrip(String),
}

impl CodecError {
    /// The format's crate's error, kept as the cause.
    pub fn format(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        CodecError::Format(Box::new(e))
    }
}

/// An encoding of the typed messages, from its own crate.
pub struct Format {
    pub name: &'static str,
    pub about: &'static str,
    /// A codec for these values (made once per role, before its loop).
    pub codec: fn(Values) -> Box<dyn Codec>,
}

/// What a format that keeps no state of its own does to one value; [`ValueCodec`] keeps the
/// rotation of values and checks what decodes.
pub(crate) trait Encoding<T>: 'static {
    /// Encodes the value into `out`; returns the bytes written.
    fn encode(value: &T, out: &mut [u8]) -> Result<usize, CodecError>;
    /// Decodes a whole body: trailing bytes are an error.
    fn decode(body: &[u8]) -> Result<T, CodecError>;
}

/// The codec of an [`Encoding`] for one type's values.
pub(crate) struct ValueCodec<T, E> {
    values: Vec<T>,
    encoding: std::marker::PhantomData<fn() -> E>,
}

impl<T: types::Fields + Send + 'static, E: Encoding<T>> ValueCodec<T, E> {
    pub(crate) fn boxed(values: Vec<T>) -> Box<dyn Codec> {
        Box::new(ValueCodec::<T, E> {
            values,
            encoding: std::marker::PhantomData,
        })
    }
}

impl<T: types::Fields + Send, E: Encoding<T>> Codec for ValueCodec<T, E> {
    fn encode(&mut self, index: usize, out: &mut [u8]) -> Result<usize, CodecError> {
        E::encode(&self.values[index], out)
    }
    fn decode(&mut self, body: &[u8]) -> Result<u64, CodecError> {
        E::decode(body).map(|v| types::Fields::checksum(&v))
    }
}

/// One format's encoder and decoder for one type's values.
pub trait Codec: Send {
    /// Encodes value `index` of the rotation into `out`; returns the bytes written.
    fn encode(&mut self, index: usize, out: &mut [u8]) -> Result<usize, CodecError>;
    /// Decodes a body in full (into the type's owned form, as an application would); returns
    /// the decoded fields' checksum.
    fn decode(&mut self, body: &[u8]) -> Result<u64, CodecError>;
    /// Zero-copy formats: checks the body and reads its fields where they lie, without
    /// deserializing; returns their checksum. None where the format has no such access.
    fn access(&mut self, _body: &[u8]) -> Option<Result<u64, CodecError>> {
        None
    }
}

/// The seed every run's values come from: runs repeat.
pub const SEED: u64 = 0x6d73_6770_6572_6600;

/// A `--payload` value: a type and a format.
#[derive(Clone, Copy)]
pub struct Payload {
    pub ty: TypeSpec,
    pub format: &'static Format,
}

/// `--payload`'s value for msgperf's own bytes (a pattern and a tail, no encoding).
pub const BYTES: &str = "bytes";

impl Payload {
    /// `TYPE:FORMAT` (`struct256:postcard`, `array:1000:cdr`); `bytes` is None.
    pub fn parse(text: &str) -> Result<Option<Payload>, String> {
        let text = text.trim();
        if text == BYTES {
            return Ok(None);
        }
        let Some((ty, format)) = text.rsplit_once(':') else {
            return Err(format!(
                "`{text}` names no format: write TYPE:FORMAT, e.g. struct256:postcard (formats: {}), or `bytes`",
                names()
            ));
        };
        let format = find(format).ok_or_else(|| {
            format!(
                "`{format}` in `{text}` is not a format: use one of {}",
                names()
            )
        })?;
        let ty = TypeSpec::parse(ty)?;
        Ok(Some(Payload { ty, format }))
    }
}

impl std::fmt::Display for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.ty, self.format.name)
    }
}

/// `TYPE:*` stands for the type in every format, in registry order; any other value for
/// itself.
pub fn expand(value: &str) -> Vec<String> {
    match value.strip_suffix(":*") {
        Some(ty) => REGISTRY
            .iter()
            .map(|f| format!("{ty}:{}", f.name))
            .collect(),
        None => vec![value.to_string()],
    }
}

pub fn find(name: &str) -> Option<&'static Format> {
    REGISTRY.iter().copied().find(|f| f.name == name)
}

fn names() -> String {
    REGISTRY
        .iter()
        .map(|f| f.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A role's codec with the rotation it sends and expects: what a message body needs.
pub struct Marshal {
    codec: Box<dyn Codec>,
    checksums: Vec<u64>,
    /// Each value's encoded length.
    sizes: Vec<usize>,
}

impl Marshal {
    pub fn new(p: &Payload) -> Result<Marshal, MarshalError> {
        let values = Values::new(p.ty, SEED);
        let checksums = values.checksums();
        let mut codec = (p.format.codec)(values);
        let mut scratch = vec![0u8; 64 * p.ty.field_bytes() + 4096];
        let sizes = (0..checksums.len())
            .map(|i| {
                let n = codec
                    .encode(i, &mut scratch)
                    .map_err(|cause| MarshalError::Encode {
                        payload: p.to_string(),
                        cause,
                    })?;
                let got = codec
                    .decode(&scratch[..n])
                    .map_err(|cause| MarshalError::Decode {
                        payload: p.to_string(),
                        cause,
                    })?;
                if got != checksums[i] {
                    return Err(MarshalError::RoundTrip(p.to_string()));
                }
                Ok(n)
            })
            .collect::<Result<Vec<_>, MarshalError>>()?;
        Ok(Marshal {
            codec,
            checksums,
            sizes,
        })
    }

    /// The most bytes a body takes: every message has room for it.
    pub fn capacity(&self) -> usize {
        self.sizes.iter().copied().max().unwrap_or(0)
    }

    /// The mean encoded length over the rotation.
    pub fn mean_size(&self) -> f64 {
        self.sizes.iter().sum::<usize>() as f64 / self.sizes.len().max(1) as f64
    }

    /// The value message `seq` carries.
    #[inline(always)]
    pub fn index(&self, seq: u64) -> usize {
        (seq % self.checksums.len() as u64) as usize
    }

    /// Encodes message `seq`'s value into `out`; returns its length.
    #[inline(always)]
    pub fn encode(&mut self, seq: u64, out: &mut [u8]) -> Result<usize, CodecError> {
        let i = self.index(seq);
        self.codec.encode(i, out)
    }

    /// Decodes message `seq`'s body and checks that its fields are the ones sent.
    #[inline(always)]
    pub fn decode(&mut self, seq: u64, body: &[u8]) -> Result<(), CodecError> {
        let sum = self.codec.decode(body)?;
        self.check(seq, sum)
    }

    /// As [`Marshal::decode`], reading in place (zero-copy formats; None for the others).
    pub fn access(&mut self, seq: u64, body: &[u8]) -> Option<Result<(), CodecError>> {
        let sum = self.codec.access(body)?;
        Some(sum.and_then(|s| self.check(seq, s)))
    }

    #[inline(always)]
    fn check(&self, seq: u64, sum: u64) -> Result<(), CodecError> {
        if sum != self.checksums[self.index(seq)] {
            return Err(CodecError::Damaged { seq });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_type() -> Vec<TypeSpec> {
        [
            "array:100",
            "struct16",
            "struct256",
            "struct4k",
            "seq:10",
            "string:50",
            "pointcloud:20",
            "nml",
            "nml:1000",
        ]
        .iter()
        .map(|t| TypeSpec::parse(t).unwrap())
        .collect()
    }

    #[test]
    fn every_format_carries_every_type_and_damage_is_caught() {
        for f in REGISTRY {
            for ty in every_type() {
                let p = Payload { ty, format: f };
                let mut m = Marshal::new(&p).unwrap_or_else(|e| panic!("{e}"));
                let mut buf = vec![0u8; m.capacity()];
                for seq in 0..10 {
                    let n = m.encode(seq, &mut buf).unwrap();
                    m.decode(seq, &buf[..n])
                        .unwrap_or_else(|e| panic!("{p}: {e}"));
                    if let Some(r) = m.access(seq, &buf[..n]) {
                        r.unwrap_or_else(|e| panic!("{p} in place: {e}"));
                    }
                    // Another value's body is not this message's.
                    assert!(m.decode(seq + 1, &buf[..n]).is_err(), "{p}");
                }
                // A changed byte in the fields changes what decodes (or fails to).
                let n = m.encode(0, &mut buf).unwrap();
                let mid = n / 2;
                buf[mid] ^= 0x10;
                assert!(m.decode(0, &buf[..n]).is_err(), "{p}: damage went unseen");
                // A value that does not fit is said to, with the room there was.
                let e = m.encode(0, &mut buf[..n - 1]).unwrap_err();
                assert!(
                    matches!(e, CodecError::NoRoom { room } if room == n - 1),
                    "{p}: {e:?}"
                );
                // A body cut short is refused, not read past its end.
                m.encode(0, &mut buf).unwrap();
                assert!(m.decode(0, &buf[..n / 3]).is_err(), "{p}: a third decoded");
            }
        }
    }

    #[test]
    fn payloads_parse_and_bad_ones_name_the_fix() {
        assert!(Payload::parse("bytes").unwrap().is_none());
        let p = Payload::parse("array:1000:cdr").unwrap().unwrap();
        assert_eq!(p.to_string(), "array:1000:cdr");
        assert_eq!(
            Payload::parse("nml:postcard").unwrap().unwrap().to_string(),
            "nml:200:postcard"
        );
        for (bad, says) in [
            ("struct256", "names no format"),
            ("struct256:bincode", "not a format"),
            ("blob:postcard", "not a message type"),
            ("array:postcard", "needs a count"),
            ("array:0:postcard", "holds nothing"),
            ("struct16:3:json", "fixed size"),
        ] {
            let e = Payload::parse(bad).err().unwrap();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn values_repeat_from_the_seed() {
        for ty in every_type() {
            assert_eq!(
                Values::new(ty, SEED).checksums(),
                Values::new(ty, SEED).checksums()
            );
            let sums = Values::new(ty, SEED).checksums();
            let mut distinct = sums.clone();
            distinct.dedup();
            assert_eq!(distinct.len(), sums.len(), "{ty}: values repeat");
        }
    }
}
