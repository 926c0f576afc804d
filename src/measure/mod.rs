//! Room `measure`: the stopwatch. Clock, recorder (preallocated histograms and counters), CPU
//! usage at the start and end of a role, and the sequence tracker for loss, duplicates and
//! reordering. No I/O, no formatting, no locks, and no allocation after a recorder is built.
//! Imports only `result` (what it produces) and the leaves.

pub mod clock;
pub mod integrity;
pub mod offset;
pub mod pacing;
pub mod recorder;

pub use recorder::{Metric, Recorder};
