//! `cdr`: OMG's Common Data Representation, the encoding DDS puts on the wire (plain CDR,
//! little-endian, aligned), from cdr-encoding (RustDDS's).

use super::types::{Fields, Values};
use super::{Codec, CodecError, Format};
use byteorder::LittleEndian;
use serde::{de::DeserializeOwned, Serialize};

pub struct Cdr;

impl Format for Cdr {
    fn name(&self) -> &'static str {
        "cdr"
    }
    fn about(&self) -> &'static str {
        "OMG CDR, the encoding DDS puts on the wire: aligned, little-endian (cdr-encoding)"
    }
    fn codec(&self, values: Values) -> Box<dyn Codec> {
        super::types::for_each_type!(values, v: T => Box::new(CdrCodec::<T> { values: v }))
    }
}

struct CdrCodec<T> {
    values: Vec<T>,
}

impl<T: Serialize + DeserializeOwned + Fields + Send> Codec for CdrCodec<T> {
    fn encode(&mut self, index: usize, out: &mut [u8]) -> Result<usize, CodecError> {
        let room = out.len();
        let mut w = std::io::Cursor::new(out);
        cdr_encoding::to_writer::<T, LittleEndian, _>(&mut w, &self.values[index])
            .map_err(|e| match e {
                // The io error of a full buffer means no room; any other is the crate's.
                cdr_encoding::Error::Io(_) => CodecError::NoRoom { room },
                e => CodecError::format(e),
            })?;
        Ok(w.position() as usize)
    }
    fn decode(&mut self, body: &[u8]) -> Result<u64, CodecError> {
        match cdr_encoding::from_bytes::<T, LittleEndian>(body) {
            Ok((v, n)) if n == body.len() => Ok(v.checksum()),
            Ok((_, n)) => Err(CodecError::Trailing {
                bytes: body.len() - n,
            }),
            Err(e) => Err(CodecError::format(e)),
        }
    }
}
