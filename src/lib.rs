//! msgperf: a laboratory for message-passing performance.
//!
//! Rooms and the one-way arrows between them (checked by `tests/arrows.rs`):
//!
//! ```text
//! cli ─► plan ─► exec ─► workload ─┬─► transport   (imports nothing of the other rooms)
//!                                  ├─► codec       (typed bodies and their formats; likewise)
//!                                  └─► measure ─► result
//! cli ─► report ─► result                          (report reads results only)
//! cli ─► suite ─► plan, report, result, transport  (the source reports as data)
//! ```
//! `deadline`, `delivery`, `histogram`, `units` and `sys` are leaves every room may use.

#![deny(unsafe_code)]

pub mod cli;
pub mod codec;
pub mod deadline;
pub mod delivery;
pub mod exec;
pub mod histogram;
pub mod measure;
pub mod plan;
pub mod report;
pub mod result;
pub mod suite;
#[allow(unsafe_code)]
pub mod sys;
pub mod transport;
pub mod units;
pub mod workload;
