//! Progress on a terminal: the plan's total time at the start, then a bar over the expected time
//! of the whole plan that advances inside each case too (updated five times a second), with what
//! is being measured now. On stderr, and only when stdout is a terminal and the plan is expected
//! to last over a second (no escape codes in files or pipes).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where the bar is: the expected time before the current step, when it started, how long it
/// is expected to take, and how much longer than expected the steps so far took (broker starts,
/// slow warm-ups: the time left counts what it has seen).
struct At {
    before_ms: u64,
    started: Instant,
    expected_ms: u64,
    slower_by: f64,
}

pub struct Progress {
    bar: Option<ProgressBar>,
    steps: Vec<Duration>,
    at: Arc<Mutex<At>>,
    done: Arc<AtomicBool>,
    started: Instant,
}

fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{} h {} min", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{} min {} s", s / 60, s % 60)
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// How much longer than expected the steps done so far took (1 before any is done).
fn slower_by(elapsed: Duration, expected_done_ms: u64) -> f64 {
    if expected_done_ms == 0 {
        return 1.0;
    }
    (elapsed.as_millis() as f64 / expected_done_ms as f64).clamp(0.5, 50.0)
}

/// The time left: what remains of this step and the steps after it, each as much longer than
/// expected as the steps so far were.
fn time_left(total_ms: u64, at: &At, elapsed_in_step_ms: u64) -> Duration {
    let after = total_ms.saturating_sub(at.before_ms + at.expected_ms);
    let this = (at.expected_ms as f64 * at.slower_by - elapsed_in_step_ms as f64).max(0.0);
    Duration::from_millis((this + after as f64 * at.slower_by) as u64)
}

impl Progress {
    /// A plan of steps (cases, floors) expected to take these times; `what` names them.
    pub fn new(what: &str, steps: Vec<Duration>) -> Self {
        let total: Duration = steps.iter().sum();
        let at = Arc::new(Mutex::new(At {
            before_ms: 0,
            started: Instant::now(),
            expected_ms: 0,
            slower_by: 1.0,
        }));
        let total_ms = total.as_millis() as u64;
        let done = Arc::new(AtomicBool::new(false));
        if !std::io::stdout().is_terminal() || total < Duration::from_secs(1) {
            return Progress {
                bar: None,
                steps,
                at,
                done,
                started: Instant::now(),
            };
        }
        eprintln!(
            "msgperf: {} {what}, about {} (each with its floor where one applies)",
            steps.len(),
            human(total)
        );
        let bar = ProgressBar::with_draw_target(
            Some(total.as_millis() as u64),
            ProgressDrawTarget::stderr(),
        );
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} {elapsed_precise} elapsed, {prefix} {bar:20} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        // Drawing and advancing wake a thread five times a second: negligible next to the
        // roles, which are pinned to their own CPUs.
        bar.enable_steady_tick(Duration::from_millis(200));
        let (b, a, d) = (bar.clone(), at.clone(), done.clone());
        std::thread::spawn(move || {
            while !d.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                if let Ok(at) = a.lock() {
                    // Inside a step, up to just short of its expected end.
                    let elapsed = at.started.elapsed().as_millis() as u64;
                    let inside = elapsed.min(at.expected_ms.saturating_sub(1));
                    b.set_position(at.before_ms + inside);
                    let left = time_left(total_ms, &at, elapsed);
                    b.set_prefix(format!("~{} left", human(left)));
                }
            }
        });
        Progress {
            bar: Some(bar),
            steps,
            at,
            done,
            started: Instant::now(),
        }
    }

    /// Step `i` starts: `label` says what is being measured.
    pub fn step(&self, i: usize, label: &str) {
        if let Some(b) = &self.bar {
            if let Ok(mut at) = self.at.lock() {
                at.before_ms = self.steps[..i].iter().map(|d| d.as_millis() as u64).sum();
                at.slower_by = slower_by(self.started.elapsed(), at.before_ms);
                at.expected_ms = self.steps.get(i).map_or(0, |d| d.as_millis() as u64);
                at.started = Instant::now();
            }
            b.set_message(format!("{}/{}: {label}", i + 1, self.steps.len()));
        }
    }

    pub fn finish(&self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_left_learns_from_steps_that_took_longer() {
        // Ten steps of 1 s; four done, in 20 s (brokers starting): the rest will take 5x too.
        let k = slower_by(Duration::from_secs(20), 4_000);
        assert_eq!(k, 5.0);
        let at = At {
            before_ms: 4_000,
            started: Instant::now(),
            expected_ms: 1_000,
            slower_by: k,
        };
        // 2 s into the fifth step: 3 s of it left, then five steps of 5 s.
        assert_eq!(time_left(10_000, &at, 2_000), Duration::from_secs(28));
        // Before any step is done, the plan's own estimate.
        assert_eq!(slower_by(Duration::from_secs(3), 0), 1.0);
        let fresh = At {
            before_ms: 0,
            started: Instant::now(),
            expected_ms: 1_000,
            slower_by: 1.0,
        };
        assert_eq!(time_left(10_000, &fresh, 0), Duration::from_secs(10));
        // A step running past its estimate counts as ending now, not as time left.
        assert_eq!(time_left(10_000, &fresh, 4_000), Duration::from_secs(9));
    }
}
