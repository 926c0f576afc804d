//! Histograms as results carry them (a leaf every room may use): HdrHistogram's V2 deflate
//! encoding in base64, compact, lossless and mergeable, and readable by HdrHistogram's other
//! implementations.

use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// The range every latency histogram covers: 1 ns to an hour.
pub const HIGHEST_NS: u64 = 3_600_000_000_000;

/// An empty latency histogram: 1 ns to an hour at `digits` significant digits.
pub fn new(digits: u8) -> Histogram<u64> {
    Histogram::<u64>::new_with_bounds(1, HIGHEST_NS, digits).expect("valid histogram bounds")
}

/// An HdrHistogram in its V2 deflate encoding, base64: compact, lossless, mergeable.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct EncodedHistogram(pub String);

/// Why a stored histogram could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum HistogramError {
    #[error("a histogram is not base64: {0}")]
    NotBase64(#[from] base64::DecodeError),
    #[error("a histogram does not decode: {0}")]
    Deserialize(#[from] hdrhistogram::serialization::DeserializeError),
}

impl EncodedHistogram {
    pub fn encode(h: &Histogram<u64>) -> Self {
        let mut bytes = Vec::new();
        V2DeflateSerializer::new()
            .serialize(h, &mut bytes)
            .expect("serializing a histogram into memory cannot fail");
        EncodedHistogram(base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn decode(&self) -> Result<Histogram<u64>, HistogramError> {
        let bytes = base64::engine::general_purpose::STANDARD.decode(&self.0)?;
        Ok(Deserializer::new().deserialize(&mut bytes.as_slice())?)
    }
}
