//! `protobuf`: Protocol Buffers, from prost (the types carry prost's derive: no .proto, no
//! protoc).

use super::types::for_each_type;
use super::{CodecError, Encoding, Format, ValueCodec};

pub const FORMAT: Format = Format {
    name: "protobuf",
    about: "Protocol Buffers (prost): tagged fields, varints, packed arrays",
    codec: |values| for_each_type!(values, v: T => ValueCodec::<T, Protobuf>::boxed(v)),
};

struct Protobuf;

impl<T: prost::Message + Default + 'static> Encoding<T> for Protobuf {
    fn encode(value: &T, out: &mut [u8]) -> Result<usize, CodecError> {
        let room = out.len();
        let mut rest = &mut out[..];
        value
            .encode(&mut rest)
            .map_err(|_| CodecError::NoRoom { room })?;
        Ok(room - rest.len())
    }
    fn decode(body: &[u8]) -> Result<T, CodecError> {
        T::decode(body).map_err(CodecError::format)
    }
}
