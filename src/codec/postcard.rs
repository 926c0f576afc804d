//! `postcard`: serde's compact binary format (varints, no field names), from the postcard
//! crate.

use super::types::{Fields, Values};
use super::{Codec, CodecError, Format};
use serde::{de::DeserializeOwned, Serialize};

pub struct Postcard;

impl Format for Postcard {
    fn name(&self) -> &'static str {
        "postcard"
    }
    fn about(&self) -> &'static str {
        "serde's compact binary format: varints, no field names (postcard crate)"
    }
    fn codec(&self, values: Values) -> Box<dyn Codec> {
        super::types::for_each_type!(values, v: T => Box::new(PostcardCodec::<T> { values: v }))
    }
}

struct PostcardCodec<T> {
    values: Vec<T>,
}

impl<T: Serialize + DeserializeOwned + Fields + Send> Codec for PostcardCodec<T> {
    fn encode(&mut self, index: usize, out: &mut [u8]) -> Result<usize, CodecError> {
        let out_len = out.len();
        postcard::to_slice(&self.values[index], out)
            .map(|b| b.len())
            .map_err(|e| match e {
                postcard::Error::SerializeBufferFull => CodecError::NoRoom { room: out_len },
                e => CodecError::format(e),
            })
    }
    fn decode(&mut self, body: &[u8]) -> Result<u64, CodecError> {
        match postcard::take_from_bytes::<T>(body) {
            Ok((v, [])) => Ok(v.checksum()),
            Ok((_, rest)) => Err(CodecError::Trailing { bytes: rest.len() }),
            Err(e) => Err(CodecError::format(e)),
        }
    }
}
