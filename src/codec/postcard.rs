//! `postcard`: serde's compact binary format (varints, no field names), from the postcard
//! crate.

use super::types::{Fields, Values};
use super::{Codec, Format};
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
    fn encode(&mut self, index: usize, out: &mut [u8]) -> Result<usize, String> {
        postcard::to_slice(&self.values[index], out)
            .map(|b| b.len())
            .map_err(|e| e.to_string())
    }
    fn decode(&mut self, body: &[u8]) -> Result<u64, String> {
        match postcard::take_from_bytes::<T>(body) {
            Ok((v, [])) => Ok(v.checksum()),
            Ok((_, rest)) => Err(format!("{} bytes follow the value", rest.len())),
            Err(e) => Err(e.to_string()),
        }
    }
}
