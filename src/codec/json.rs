//! `json`: JSON text with field names, from serde_json.

use super::types::for_each_type;
use super::{CodecError, Encoding, Format, ValueCodec};
use serde::{de::DeserializeOwned, Serialize};

pub const FORMAT: Format = Format {
    name: "json",
    about: "JSON text with field names (serde_json)",
    codec: |values| for_each_type!(values, v: T => ValueCodec::<T, Json>::boxed(v)),
};

struct Json;

impl<T: Serialize + DeserializeOwned + 'static> Encoding<T> for Json {
    fn encode(value: &T, out: &mut [u8]) -> Result<usize, CodecError> {
        let room = out.len();
        let mut w = std::io::Cursor::new(out);
        serde_json::to_writer(&mut w, value).map_err(|e| match e.is_io() {
            // Writing into a full slice is its only io error.
            true => CodecError::NoRoom { room },
            false => CodecError::format(e),
        })?;
        Ok(w.position() as usize)
    }
    fn decode(body: &[u8]) -> Result<T, CodecError> {
        serde_json::from_slice::<T>(body).map_err(CodecError::format)
    }
}
