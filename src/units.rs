//! Leaf: sizes, durations, rates and their lists and ranges as users type them
//! (`64`, `4k`, `1M`, `64,1k,64k`, `64..1M*4`, `200..1000+200`, `500ms`, `10s`), and durations as
//! files store them (integer nanoseconds).

use std::time::Duration;

/// Parses one size: a number with an optional suffix, binary as msgperf writes sizes (`k`,
/// `K`, `KiB` = 1024, `M`, `MiB`, `G`, `GiB`) or decimal as the SI writes them (`kB` = 1000,
/// `MB`, `GB`): a suffix means what it says, never bent to the other.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let (num, mult) = [
        ("kib", 1usize << 10),
        ("mib", 1 << 20),
        ("gib", 1 << 30),
        ("kb", 1_000),
        ("mb", 1_000_000),
        ("gb", 1_000_000_000),
        ("k", 1 << 10),
        ("m", 1 << 20),
        ("g", 1 << 30),
        ("b", 1),
    ]
    .iter()
    .find_map(|(suf, m)| lower.strip_suffix(suf).map(|n| (n.trim().to_string(), *m)))
    .unwrap_or((lower.clone(), 1));
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{t}` is not a size: write e.g. 64, 4k or 1M"))?;
    if !(v.is_finite() && v >= 0.0) {
        return Err(format!("`{t}` is not a size: write e.g. 64, 4k or 1M"));
    }
    Ok((v * mult as f64).round() as usize)
}

/// Parses a list of sizes: comma-separated items, each a size or a range `A..B*F` (multiply by F
/// up to B) or `A..B+S` (add S up to B). The result keeps the user's order, without repeats.
pub fn parse_size_list(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        if let Some((from, rest)) = item.split_once("..") {
            let from = parse_size(from)?;
            let (to, step) = if let Some((to, f)) = rest.split_once('*') {
                let f: f64 = f.trim().parse().map_err(|_| {
                    format!("`{item}`: the factor after `*` must be a number, as in 64..1M*4")
                })?;
                if f <= 1.0 {
                    return Err(format!("`{item}`: the factor must be above 1"));
                }
                (parse_size(to)?, Step::Times(f))
            } else if let Some((to, a)) = rest.split_once('+') {
                let a = parse_size(a)?;
                if a == 0 {
                    return Err(format!("`{item}`: the increment must be above 0"));
                }
                (parse_size(to)?, Step::Plus(a))
            } else {
                (parse_size(rest)?, Step::Times(2.0))
            };
            if to < from {
                return Err(format!("`{item}`: the range ends below its start"));
            }
            let mut v = from;
            while v <= to {
                out.push(v);
                let next = match step {
                    Step::Times(f) => (v as f64 * f).round() as usize,
                    Step::Plus(a) => v + a,
                };
                if next <= v {
                    return Err(format!("`{item}`: the range does not grow from {v}"));
                }
                v = next;
            }
        } else {
            out.push(parse_size(item)?);
        }
    }
    if out.is_empty() {
        return Err("no size given: write e.g. --size 64 or --size 64,1k,64k".into());
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|v| seen.insert(*v));
    Ok(out)
}

enum Step {
    Times(f64),
    Plus(usize),
}

/// Parses a duration: a number with `ns`, `us`, `ms`, `s`, `m` or `h` (a bare number is seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let err = || format!("`{t}` is not a duration: write e.g. 500ms, 10s or 2m");
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| err())?;
    let secs = match unit.trim() {
        "ns" => v / 1e9,
        "us" | "µs" => v / 1e6,
        "ms" => v / 1e3,
        "" | "s" => v,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(err()),
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(err());
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses a rate: `1khz`, `500hz`, `2k`, `1000` (messages per second), or `max` (None).
pub fn parse_rate(s: &str) -> Result<Option<f64>, String> {
    let t = s.trim().to_ascii_lowercase();
    if t == "max" {
        return Ok(None);
    }
    let err = || format!("`{s}` is not a rate: write e.g. 100hz, 1khz, 20khz or max");
    let n = t.strip_suffix("hz").unwrap_or(&t);
    let (n, mult) = match n.strip_suffix('k') {
        Some(n) => (n, 1e3),
        None => match n.strip_suffix('m') {
            Some(n) => (n, 1e6),
            None => (n, 1.0),
        },
    };
    let v: f64 = n.trim().parse().map_err(|_| err())?;
    if !(v.is_finite() && v > 0.0) {
        return Err(err());
    }
    Ok(Some(v * mult))
}

/// The offered loads of `--rate sweep`, up to saturation (`max` last).
pub const SWEEP_HZ: [f64; 12] = [100.0, 1e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6];

/// Parses a list of rates: `10hz,100hz,1khz,max`, or `sweep`.
pub fn parse_rate_list(s: &str) -> Result<Vec<Option<f64>>, String> {
    if s.trim() == "sweep" {
        return Ok(SWEEP_HZ.iter().map(|r| Some(*r)).chain([None]).collect());
    }
    let v: Vec<Option<f64>> = s
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(parse_rate)
        .collect::<Result<_, _>>()?;
    if v.is_empty() {
        return Err("no rate given: write e.g. --rate 1khz or --rate 10hz,1khz,max".into());
    }
    Ok(v)
}

/// Formats a size the way users type it (`64`, `4k`, `1M`, `1500`).
pub fn format_size(v: usize) -> String {
    if v >= 1 << 30 && v.is_multiple_of(1 << 30) {
        format!("{} GiB", v >> 30)
    } else if v >= 1 << 20 && v.is_multiple_of(1 << 20) {
        format!("{} MiB", v >> 20)
    } else if v >= 1 << 10 && v.is_multiple_of(1 << 10) {
        format!("{} KiB", v >> 10)
    } else {
        format!("{v} B")
    }
}

/// Formats a duration compactly (`250ms`, `3s`).
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1_000) {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

/// Durations in files are integer nanoseconds (`warmup_ns: 200000000`), not serde's
/// `{"secs", "nanos"}` pairs: `#[serde(with = "crate::units::nanos")]`.
fn to_ns(d: &Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

pub mod nanos {
    use super::to_ns;
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(to_ns(d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_nanos(u64::deserialize(d)?))
    }
}

pub mod opt_nanos {
    use super::to_ns;
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_and_decimal_suffixes_as_they_say() {
        assert_eq!(parse_size("64").unwrap(), 64);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("64KiB").unwrap(), 65536);
        assert_eq!(parse_size("1M").unwrap(), 1 << 20);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        // Decimal suffixes mean what they say.
        assert_eq!(parse_size("64kB").unwrap(), 64_000);
        assert_eq!(parse_size("64kb").unwrap(), 64_000);
        assert_eq!(parse_size("1MB").unwrap(), 1_000_000);
        assert_eq!(parse_size("2GB").unwrap(), 2_000_000_000);
        assert!(parse_size("abc").is_err());
        assert!(parse_size("-1").is_err());
    }

    #[test]
    fn lists_and_ranges_expand_in_order() {
        assert_eq!(parse_size_list("64,1k,64k").unwrap(), vec![64, 1024, 65536]);
        assert_eq!(
            parse_size_list("64..1M*4").unwrap(),
            vec![64, 256, 1024, 4096, 16384, 65536, 262144, 1048576]
        );
        assert_eq!(
            parse_size_list("200..1000+400").unwrap(),
            vec![200, 600, 1000]
        );
        assert!(parse_size_list("1k..64").is_err());
        assert!(parse_size_list("64..1k*1").is_err());
        assert!(parse_size_list("").is_err());
    }

    #[test]
    fn rates_parse() {
        assert_eq!(parse_rate("1khz").unwrap(), Some(1000.0));
        assert_eq!(parse_rate("10Hz").unwrap(), Some(10.0));
        assert_eq!(parse_rate("2k").unwrap(), Some(2000.0));
        assert_eq!(parse_rate("max").unwrap(), None);
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("0hz").is_err());
    }

    #[test]
    fn durations_parse_and_format() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("10 parsecs").is_err());
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(format_size(65536), "64 KiB");
        assert_eq!(format_size(1500), "1500 B");
        assert_eq!(format_size(1 << 30), "1 GiB");
    }
}
