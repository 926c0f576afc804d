//! Progress on a terminal: a bar over the cases, on stderr, only when stdout is a terminal and
//! the run is expected to last over a second (no escape codes in files or pipes).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

pub struct Progress(Option<ProgressBar>);

impl Progress {
    pub fn new(cases: usize, expected: Duration) -> Self {
        if !std::io::stdout().is_terminal() || expected < Duration::from_secs(1) {
            return Progress(None);
        }
        let bar = ProgressBar::with_draw_target(Some(cases as u64), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} cases  {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        // Redrawing wakes a thread 5 times a second: negligible next to the roles, which are
        // pinned to their own CPUs.
        bar.enable_steady_tick(Duration::from_millis(200));
        Progress(Some(bar))
    }

    pub fn case(&self, label: &str) {
        if let Some(b) = &self.0 {
            b.set_message(label.to_string());
        }
    }

    pub fn done_one(&self) {
        if let Some(b) = &self.0 {
            b.inc(1);
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.0 {
            b.finish_and_clear();
        }
    }
}
