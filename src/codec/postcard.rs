//! `postcard`: serde's compact binary format (varints, no field names), from the postcard
//! crate.

use super::types::for_each_type;
use super::{CodecError, Encoding, Format, ValueCodec};
use serde::{de::DeserializeOwned, Serialize};

pub const FORMAT: Format = Format {
    name: "postcard",
    about: "serde's compact binary format: varints, no field names (postcard crate)",
    codec: |values| for_each_type!(values, v: T => ValueCodec::<T, Postcard>::boxed(v)),
};

struct Postcard;

impl<T: Serialize + DeserializeOwned + 'static> Encoding<T> for Postcard {
    fn encode(value: &T, out: &mut [u8]) -> Result<usize, CodecError> {
        let room = out.len();
        postcard::to_slice(value, out)
            .map(|b| b.len())
            .map_err(|e| match e {
                postcard::Error::SerializeBufferFull => CodecError::NoRoom { room },
                e => CodecError::format(e),
            })
    }
    fn decode(body: &[u8]) -> Result<T, CodecError> {
        match postcard::take_from_bytes::<T>(body) {
            Ok((v, [])) => Ok(v),
            Ok((_, rest)) => Err(CodecError::Trailing { bytes: rest.len() }),
            Err(e) => Err(CodecError::format(e)),
        }
    }
}
