//! `protobuf`: Protocol Buffers, from prost (the types carry prost's derive: no .proto, no
//! protoc).

use super::types::{Fields, Values};
use super::{Codec, CodecError, Format};

pub struct Protobuf;

impl Format for Protobuf {
    fn name(&self) -> &'static str {
        "protobuf"
    }
    fn about(&self) -> &'static str {
        "Protocol Buffers (prost): tagged fields, varints, packed arrays"
    }
    fn codec(&self, values: Values) -> Box<dyn Codec> {
        super::types::for_each_type!(values, v: T => Box::new(ProtobufCodec::<T> { values: v }))
    }
}

struct ProtobufCodec<T> {
    values: Vec<T>,
}

impl<T: prost::Message + Default + Fields + Send> Codec for ProtobufCodec<T> {
    fn encode(&mut self, index: usize, out: &mut [u8]) -> Result<usize, CodecError> {
        let room = out.len();
        let mut rest = &mut out[..];
        self.values[index]
            .encode(&mut rest)
            .map_err(|_| CodecError::NoRoom { room })?;
        Ok(room - rest.len())
    }
    fn decode(&mut self, body: &[u8]) -> Result<u64, CodecError> {
        T::decode(body)
            .map(|v| v.checksum())
            .map_err(CodecError::format)
    }
}
