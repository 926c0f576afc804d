//! `rkyv`: a zero-copy format: the archive is read where it lies after a validation pass
//! (`access`), or deserialized into the owned type (`decode`); both are measured, apart.

use super::types::Fields;
use super::{Codec, CodecError, Format};
use rkyv::api::high::{HighSerializer, HighValidator};
use rkyv::bytecheck::CheckBytes;
use rkyv::rancor::Error;
use rkyv::ser::allocator::ArenaHandle;
use rkyv::ser::writer::Buffer;
use rkyv::util::AlignedVec;
use rkyv::{Archive, Deserialize};

pub const FORMAT: Format = Format {
    name: "rkyv",
    about: "zero-copy archives (rkyv): read in place after validation, or deserialized",
    codec: |values| super::types::for_each_type!(values, v: T => Box::new(RkyvCodec::<T> { values: v, aligned: AlignedVec::new() })),
};

struct RkyvCodec<T> {
    values: Vec<T>,
    /// A body that arrived at an address its archive cannot be read at is copied here first
    /// (as a reader of a misaligned buffer must).
    aligned: AlignedVec,
}

impl<T: Archive> RkyvCodec<T> {
    /// The body at an address its archive can be read at (the archived type's alignment).
    fn aligned<'a>(aligned: &'a mut AlignedVec, body: &'a [u8]) -> &'a [u8] {
        if (body.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T::Archived>()) {
            return body;
        }
        aligned.clear();
        aligned.extend_from_slice(body);
        aligned
    }
}

impl<T> Codec for RkyvCodec<T>
where
    T: Archive
        + Fields
        + Send
        + for<'a, 'b> rkyv::Serialize<HighSerializer<Buffer<'b>, ArenaHandle<'a>, Error>>,
    T::Archived: for<'a> CheckBytes<HighValidator<'a, Error>>
        + Deserialize<T, rkyv::api::high::HighDeserializer<Error>>
        + Fields,
{
    fn encode(&mut self, index: usize, out: &mut [u8]) -> Result<usize, CodecError> {
        let room = out.len();
        // A full buffer is the only way these types can fail to serialize.
        rkyv::api::high::to_bytes_in::<_, Error>(&self.values[index], Buffer::from(out))
            .map(|b| b.len())
            .map_err(|_| CodecError::NoRoom { room })
    }
    fn decode(&mut self, body: &[u8]) -> Result<u64, CodecError> {
        let body = Self::aligned(&mut self.aligned, body);
        let archived = rkyv::access::<T::Archived, Error>(body).map_err(CodecError::format)?;
        rkyv::deserialize::<T, Error>(archived)
            .map(|v| v.checksum())
            .map_err(CodecError::format)
    }
    fn access(&mut self, body: &[u8]) -> Option<Result<u64, CodecError>> {
        let body = Self::aligned(&mut self.aligned, body);
        Some(
            rkyv::access::<T::Archived, Error>(body)
                .map(Fields::checksum)
                .map_err(CodecError::format),
        )
    }
}
