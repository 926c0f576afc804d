//! `.hlog`: HdrHistogram interval logs (format 1.3, V2 compressed histograms), one tag per case
//! and role (`pingpong/uds/64B/cross-cpu/c66f523f/initiator`), one line per `--interval`:
//! what HistogramLogAnalyzer and the HdrHistogram readers of other languages read. Values in
//! nanoseconds; timestamps from the run's first measured window.

use super::{case_slug, role_slug, ExportError};
use crate::result::{EncodedHistogram, RunResult};
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use std::time::{Duration, UNIX_EPOCH};

pub const FORMAT: super::Format = super::Format {
    name: "hlog",
    about: "HdrHistogram interval logs, a tag per case and role (HistogramLogAnalyzer reads them)",
    writes: super::Writes::File(to_hlog),
};

/// One interval of one role: when it started (ns since the epoch), how long, its tag.
struct Line {
    start_unix_ns: u64,
    length_ns: u64,
    tag: String,
    histogram: EncodedHistogram,
}

pub fn to_hlog(run: &RunResult) -> Result<Vec<u8>, ExportError> {
    let mut lines = Vec::new();
    for c in &run.cases {
        for r in &c.roles {
            let tag = format!("{}/{}", case_slug(run, c), role_slug(&r.role));
            if r.interval_histograms.is_empty() {
                // A result from before interval histograms: the whole window, once.
                if let Some(h) = r.histograms.get(&c.latency_metric) {
                    lines.push(Line {
                        start_unix_ns: r.started_unix_ns,
                        length_ns: r.measured_ns,
                        tag,
                        histogram: h.clone(),
                    });
                }
                continue;
            }
            for iv in &r.interval_histograms {
                lines.push(Line {
                    start_unix_ns: r.started_unix_ns + iv.start_ns,
                    length_ns: iv.end_ns.saturating_sub(iv.start_ns),
                    tag: tag.clone(),
                    histogram: iv.histogram.clone(),
                });
            }
        }
    }
    lines.sort_by_key(|l| l.start_unix_ns);
    let start_ns = lines.first().map_or(0, |l| l.start_unix_ns);
    let start = UNIX_EPOCH + Duration::from_nanos(start_ns);
    let what = "the interval log";

    let mut out = Vec::new();
    let mut serializer = V2DeflateSerializer::new();
    // The headers, then the legend line the readers skip (the writer prefixes every comment
    // with `#`), then the intervals.
    IntervalLogWriterBuilder::new()
        .add_comment("[Histogram log format version 1.3]")
        .add_comment(&format!(
            "[msgperf {}: {}]",
            run.msgperf_version,
            run.command_line.join(" ")
        ))
        .add_comment("[values in nanoseconds; tags: case key / role]")
        .with_start_time(start)
        .with_base_time(start)
        .begin_log_with(&mut out, &mut serializer)
        .map_err(|e| ExportError::new(what, e))?;
    out.extend_from_slice(
        b"\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n",
    );
    let mut w = IntervalLogWriterBuilder::new()
        .begin_log_with(&mut out, &mut serializer)
        .map_err(|e| ExportError::new(what, e))?;
    for l in &lines {
        let h = l
            .histogram
            .decode()
            .map_err(|e| ExportError::new(format!("{what} ({})", l.tag), e))?;
        let tag = Tag::new(&l.tag).ok_or_else(|| {
            ExportError::new(what, format!("`{}` is not a tag it can hold", l.tag))
        })?;
        w.write_histogram(
            &h,
            Duration::from_nanos(l.start_unix_ns - start_ns),
            Duration::from_nanos(l.length_ns),
            Some(tag),
        )
        .map_err(|e| ExportError::new(what, e))?;
    }
    Ok(out)
}
