//! Durations in results are integer nanoseconds (`warmup_ns: 200000000`), not serde's
//! `{"secs", "nanos"}` pairs.

use serde::{Deserialize, Deserializer, Serializer};
use std::time::Duration;

fn to_ns(d: &Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

pub mod nanos {
    use super::*;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(to_ns(d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_nanos(u64::deserialize(d)?))
    }
}

pub mod opt_nanos {
    use super::*;

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&to_ns(d)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_nanos))
    }
}
