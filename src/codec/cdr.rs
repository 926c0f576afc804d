//! `cdr`: OMG's Common Data Representation, the encoding DDS puts on the wire (plain CDR,
//! little-endian, aligned), from cdr-encoding (RustDDS's).

use super::types::for_each_type;
use super::{CodecError, Encoding, Format, ValueCodec};
use byteorder::LittleEndian;
use serde::{de::DeserializeOwned, Serialize};

pub const FORMAT: Format = Format {
    name: "cdr",
    about: "OMG CDR, the encoding DDS puts on the wire: aligned, little-endian (cdr-encoding)",
    codec: |values| for_each_type!(values, v: T => ValueCodec::<T, Cdr>::boxed(v)),
};

struct Cdr;

impl<T: Serialize + DeserializeOwned + 'static> Encoding<T> for Cdr {
    fn encode(value: &T, out: &mut [u8]) -> Result<usize, CodecError> {
        let room = out.len();
        let mut w = std::io::Cursor::new(out);
        cdr_encoding::to_writer::<T, LittleEndian, _>(&mut w, value).map_err(|e| match e {
            // The io error of a full buffer means no room; any other is the crate's.
            cdr_encoding::Error::Io(_) => CodecError::NoRoom { room },
            e => CodecError::format(e),
        })?;
        Ok(w.position() as usize)
    }
    fn decode(body: &[u8]) -> Result<T, CodecError> {
        match cdr_encoding::from_bytes::<T, LittleEndian>(body) {
            Ok((v, n)) if n == body.len() => Ok(v),
            Ok((_, n)) => Err(CodecError::Trailing {
                bytes: body.len() - n,
            }),
            Err(e) => Err(CodecError::format(e)),
        }
    }
}
