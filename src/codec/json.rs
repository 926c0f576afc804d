//! `json`: JSON text with field names, from serde_json.

use super::types::{Fields, Values};
use super::{Codec, CodecError, Format};
use serde::{de::DeserializeOwned, Serialize};

pub struct Json;

impl Format for Json {
    fn name(&self) -> &'static str {
        "json"
    }
    fn about(&self) -> &'static str {
        "JSON text with field names (serde_json)"
    }
    fn codec(&self, values: Values) -> Box<dyn Codec> {
        super::types::for_each_type!(values, v: T => Box::new(JsonCodec::<T> { values: v }))
    }
}

struct JsonCodec<T> {
    values: Vec<T>,
}

impl<T: Serialize + DeserializeOwned + Fields + Send> Codec for JsonCodec<T> {
    fn encode(&mut self, index: usize, out: &mut [u8]) -> Result<usize, CodecError> {
        let room = out.len();
        let mut w = std::io::Cursor::new(out);
        serde_json::to_writer(&mut w, &self.values[index])
            .map_err(|e| match e.is_io() {
                // Writing into a full slice is its only io error.
                true => CodecError::NoRoom { room },
                false => CodecError::format(e),
            })?;
        Ok(w.position() as usize)
    }
    fn decode(&mut self, body: &[u8]) -> Result<u64, CodecError> {
        serde_json::from_slice::<T>(body)
            .map(|v| v.checksum())
            .map_err(CodecError::format)
    }
}
