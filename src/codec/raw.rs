//! `raw`: the fields copied as they lie in memory (plain-old-data structs whole, each array
//! with one copy after its length): the floor every encoding is compared with.

use super::types::{self as t, for_each_type};
use super::{CodecError, Encoding, Format, ValueCodec};
use bytemuck::Pod;

pub const FORMAT: Format = Format {
    name: "raw",
    about: "the in-memory fields copied as they lie, arrays after their length (the floor; same CPU type at both ends)",
    codec: |values| for_each_type!(values, v: T => ValueCodec::<T, Raw>::boxed(v)),
};

struct Raw;

impl<T: Flat + 'static> Encoding<T> for Raw {
    fn encode(value: &T, out: &mut [u8]) -> Result<usize, CodecError> {
        let mut w = Writer { out, at: 0 };
        value.put(&mut w)?;
        Ok(w.at)
    }
    fn decode(body: &[u8]) -> Result<T, CodecError> {
        let mut r = Reader { bytes: body, at: 0 };
        let v = T::take(&mut r)?;
        if r.at != body.len() {
            return Err(CodecError::Trailing {
                bytes: body.len() - r.at,
            });
        }
        Ok(v)
    }
}

struct Writer<'a> {
    out: &'a mut [u8],
    at: usize,
}

impl Writer<'_> {
    fn bytes(&mut self, b: &[u8]) -> Result<(), CodecError> {
        let end = self.at + b.len();
        let room = self.out.len();
        self.out
            .get_mut(self.at..end)
            .ok_or(CodecError::NoRoom { room })?
            .copy_from_slice(b);
        self.at = end;
        Ok(())
    }
    fn pod<P: Pod>(&mut self, v: &P) -> Result<(), CodecError> {
        self.bytes(bytemuck::bytes_of(v))
    }
    /// An array after its length: a u64, so that the elements lie 8-aligned where the length
    /// does, as in memory (an unaligned 4 KiB copy can cost several times an aligned one).
    fn slice<P: Pod>(&mut self, v: &[P]) -> Result<(), CodecError> {
        self.pod(&(v.len() as u64))?;
        self.bytes(bytemuck::cast_slice(v))
    }
    /// A bool is one byte in memory but not plain data (only 0 and 1 are bools).
    fn bools(&mut self, v: &[bool]) -> Result<(), CodecError> {
        self.pod(&(v.len() as u64))?;
        let start = self.at;
        let room = self.out.len();
        let out = self
            .out
            .get_mut(start..start + v.len())
            .ok_or(CodecError::NoRoom { room })?;
        for (o, &b) in out.iter_mut().zip(v) {
            *o = b as u8;
        }
        self.at = start + v.len();
        Ok(())
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn bytes(&mut self, n: usize) -> Result<&[u8], CodecError> {
        let end = self.at + n;
        let b = self
            .bytes
            .get(self.at..end)
            .ok_or(CodecError::Short { end })?;
        self.at = end;
        Ok(b)
    }
    fn pod<P: Pod>(&mut self) -> Result<P, CodecError> {
        Ok(bytemuck::pod_read_unaligned(
            self.bytes(std::mem::size_of::<P>())?,
        ))
    }
    fn vec<P: Pod>(&mut self) -> Result<Vec<P>, CodecError> {
        let n = self.pod::<u64>()? as usize;
        let b = self.bytes(n * std::mem::size_of::<P>())?;
        // One copy where the bytes lie aligned for P; else one into zeroed memory first.
        Ok(match bytemuck::try_cast_slice::<u8, P>(b) {
            Ok(v) => v.to_vec(),
            Err(_) => bytemuck::allocation::pod_collect_to_vec(b),
        })
    }
    fn string(&mut self) -> Result<String, CodecError> {
        String::from_utf8(self.vec::<u8>()?).map_err(CodecError::format)
    }
}

/// How a type lies in memory: its plain parts, in order.
trait Flat: Sized {
    fn put(&self, w: &mut Writer) -> Result<(), CodecError>;
    fn take(r: &mut Reader) -> Result<Self, CodecError>;
}

/// Plain-old-data structs: one copy of the whole.
macro_rules! flat_pod {
    ($($T:ty),*) => {$(
        impl Flat for $T {
            fn put(&self, w: &mut Writer) -> Result<(), CodecError> {
                w.pod(self)
            }
            fn take(r: &mut Reader) -> Result<Self, CodecError> {
                r.pod()
            }
        }
    )*};
}
flat_pod!(t::Struct16, t::Struct256);

impl Flat for t::Array {
    fn put(&self, w: &mut Writer) -> Result<(), CodecError> {
        w.slice(&self.values)
    }
    fn take(r: &mut Reader) -> Result<Self, CodecError> {
        Ok(t::Array { values: r.vec()? })
    }
}

impl Flat for t::Struct4k {
    fn put(&self, w: &mut Writer) -> Result<(), CodecError> {
        w.pod(&self.head.unwrap_or_default())?;
        w.slice(&self.samples)
    }
    fn take(r: &mut Reader) -> Result<Self, CodecError> {
        Ok(t::Struct4k {
            head: Some(r.pod()?),
            samples: r.vec()?,
        })
    }
}

impl Flat for t::Sequence {
    fn put(&self, w: &mut Writer) -> Result<(), CodecError> {
        w.slice(&self.items)
    }
    fn take(r: &mut Reader) -> Result<Self, CodecError> {
        Ok(t::Sequence { items: r.vec()? })
    }
}

impl Flat for t::Text {
    fn put(&self, w: &mut Writer) -> Result<(), CodecError> {
        w.slice(self.text.as_bytes())
    }
    fn take(r: &mut Reader) -> Result<Self, CodecError> {
        Ok(t::Text { text: r.string()? })
    }
}

impl Flat for t::PointCloud {
    fn put(&self, w: &mut Writer) -> Result<(), CodecError> {
        w.pod(&self.stamp_ns)?;
        w.slice(self.frame.as_bytes())?;
        w.slice(&self.points)
    }
    fn take(r: &mut Reader) -> Result<Self, CodecError> {
        Ok(t::PointCloud {
            stamp_ns: r.pod()?,
            frame: r.string()?,
            points: r.vec()?,
        })
    }
}

impl Flat for t::Nml {
    fn put(&self, w: &mut Writer) -> Result<(), CodecError> {
        w.slice(&self.chars)?;
        w.slice(&self.ints)?;
        w.slice(&self.uints)?;
        w.slice(&self.longs)?;
        w.slice(&self.ulongs)?;
        w.slice(&self.floats)?;
        w.slice(&self.doubles)?;
        w.bools(&self.bools)
    }
    fn take(r: &mut Reader) -> Result<Self, CodecError> {
        let mut m = t::Nml {
            chars: r.vec()?,
            ints: r.vec()?,
            uints: r.vec()?,
            longs: r.vec()?,
            ulongs: r.vec()?,
            floats: r.vec()?,
            doubles: r.vec()?,
            bools: Vec::new(),
        };
        let bools: Vec<u8> = r.vec()?;
        if let Some(b) = bools.iter().find(|&&b| b > 1) {
            return Err(CodecError::format(NotABool(*b)));
        }
        m.bools = bools.iter().map(|&b| b == 1).collect();
        Ok(m)
    }
}

/// A byte of a bool array that is neither 0 nor 1.
#[derive(Debug, thiserror::Error)]
#[error("{0} is not a bool")]
struct NotABool(u8);
