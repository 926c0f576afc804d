//! Progress on a terminal: the plan's total time at the start, then a bar over the expected time
//! of the whole plan that advances inside each case too (updated five times a second), with what
//! is being measured now. On stderr, and only when stdout is a terminal and the plan is expected
//! to last over a second (no escape codes in files or pipes).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where the bar is: the expected time before the current step, when it started, and how long
/// it is expected to take.
struct At {
    before_ms: u64,
    started: Instant,
    expected_ms: u64,
}

pub struct Progress {
    bar: Option<ProgressBar>,
    steps: Vec<Duration>,
    at: Arc<Mutex<At>>,
    done: Arc<AtomicBool>,
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

impl Progress {
    /// A plan of steps (cases, floors) expected to take these times; `what` names them.
    pub fn new(what: &str, steps: Vec<Duration>) -> Self {
        let total: Duration = steps.iter().sum();
        let at = Arc::new(Mutex::new(At {
            before_ms: 0,
            started: Instant::now(),
            expected_ms: 0,
        }));
        let done = Arc::new(AtomicBool::new(false));
        if !std::io::stdout().is_terminal() || total < Duration::from_secs(1) {
            return Progress {
                bar: None,
                steps,
                at,
                done,
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
                "{spinner} {elapsed_precise} elapsed, ~{eta} left {bar:20} {msg}",
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
                    let inside = (at.started.elapsed().as_millis() as u64)
                        .min(at.expected_ms.saturating_sub(1));
                    b.set_position(at.before_ms + inside);
                }
            }
        });
        Progress {
            bar: Some(bar),
            steps,
            at,
            done,
        }
    }

    /// Step `i` starts: `label` says what is being measured.
    pub fn step(&self, i: usize, label: &str) {
        if let Some(b) = &self.bar {
            if let Ok(mut at) = self.at.lock() {
                at.before_ms = self.steps[..i].iter().map(|d| d.as_millis() as u64).sum();
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
