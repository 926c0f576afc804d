//! Sequence tracking: every message carries a sequence number; the receiver counts what was
//! lost, duplicated or arrived out of order, with a window of recently seen numbers.

/// How far back (in sequence numbers) duplicates are told from late arrivals.
const WINDOW: u64 = 1024;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeqCounts {
    pub received: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub reordered: u64,
}

/// What one arrival was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    InOrder,
    /// Came after a gap of this many messages.
    AfterGap(u64),
    Duplicate,
    Late,
}

pub struct SeqTracker {
    expected: u64,
    /// Every number from here up to `expected` arrived, in order: their bits in `seen` are
    /// written only when a gap ends the run, so an arrival in order touches no bitmap.
    run_from: u64,
    first: u64,
    started: bool,
    seen: [u64; (WINDOW / 64) as usize],
    pub counts: SeqCounts,
}

impl Default for SeqTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl SeqTracker {
    pub fn new() -> Self {
        SeqTracker {
            expected: 0,
            run_from: 0,
            first: 0,
            started: false,
            seen: [0; (WINDOW / 64) as usize],
            counts: SeqCounts::default(),
        }
    }

    /// Forgets everything: the next arrival starts the count (after a warm-up).
    pub fn reset(&mut self) {
        *self = Self::new();
    }

    fn bit(&mut self, seq: u64) -> (usize, u64) {
        let i = (seq % WINDOW) as usize;
        (i / 64, 1u64 << (i % 64))
    }

    /// Takes `seq` where it is the next number of a started count, as most are: true. Else
    /// nothing changes, and [`Self::observe`] tells what it is.
    #[inline(always)]
    pub fn next_in_order(&mut self, seq: u64) -> bool {
        let next = self.started && seq == self.expected;
        if next {
            self.counts.received += 1;
            self.expected = seq + 1;
        }
        next
    }

    #[inline(always)]
    pub fn observe(&mut self, seq: u64) -> Arrival {
        if !self.started {
            self.started = true;
            self.expected = seq;
            self.run_from = seq;
            self.first = seq;
        }
        self.counts.received += 1;
        if seq == self.expected {
            self.expected = seq + 1;
            return Arrival::InOrder;
        }
        self.out_of_order(seq)
    }

    #[inline(never)]
    fn out_of_order(&mut self, seq: u64) -> Arrival {
        if seq > self.expected {
            let gap = seq - self.expected;
            // Clear the slots of numbers entering the window, after writing the run's.
            if gap >= WINDOW {
                self.seen = [0; (WINDOW / 64) as usize];
            } else {
                for s in self.run_from.max(self.expected.saturating_sub(WINDOW))..self.expected {
                    let (w, b) = self.bit(s);
                    self.seen[w] |= b;
                }
                for s in self.expected..seq {
                    let (w, b) = self.bit(s);
                    self.seen[w] &= !b;
                }
            }
            self.run_from = seq;
            self.expected = seq + 1;
            self.counts.lost += gap;
            return Arrival::AfterGap(gap);
        }
        if self.expected - seq > WINDOW {
            // Too old to tell: counted late, as it had been counted lost.
            self.counts.reordered += 1;
            self.counts.lost = self.counts.lost.saturating_sub(1);
            return Arrival::Late;
        }
        let (w, b) = self.bit(seq);
        if seq >= self.run_from || self.seen[w] & b != 0 {
            self.counts.duplicated += 1;
            Arrival::Duplicate
        } else {
            self.seen[w] |= b;
            self.counts.reordered += 1;
            self.counts.lost = self.counts.lost.saturating_sub(1);
            Arrival::Late
        }
    }

    /// The sender said it sent `first..next` (exclusive): what never came is lost, at the
    /// end and before the first arrival alike.
    pub fn end(&mut self, next: u64, first: u64) {
        if !self.started {
            self.counts.lost += next.saturating_sub(first);
            return;
        }
        if next > self.expected {
            self.counts.lost += next - self.expected;
            self.expected = next;
        }
        if self.first > first {
            self.counts.lost += self.first - first;
            self.first = first;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_stream_has_no_defects() {
        let mut t = SeqTracker::new();
        for s in 10..1010 {
            assert_eq!(t.observe(s), Arrival::InOrder);
        }
        t.end(1010, 10);
        assert_eq!(
            t.counts,
            SeqCounts {
                received: 1000,
                ..Default::default()
            }
        );
    }

    #[test]
    fn gaps_duplicates_and_late_arrivals_are_told_apart() {
        let mut t = SeqTracker::new();
        for s in [2, 3, 4, 7, 8, 5, 8, 9] {
            t.observe(s);
        }
        t.end(12, 0);
        // 0 and 1 before the first arrival, 6 in between, 10 and 11 at the end were lost; 5
        // was late; the second 8 a duplicate.
        assert_eq!(
            t.counts,
            SeqCounts {
                received: 8,
                lost: 5,
                duplicated: 1,
                reordered: 1
            }
        );
    }

    #[test]
    fn duplicates_are_told_within_a_run_and_after_the_gap_that_ends_it() {
        let mut t = SeqTracker::new();
        let arrivals: Vec<Arrival> = [0, 1, 2, 1, 5, 2, 4, 3, 4, 5, 6]
            .into_iter()
            .map(|s| t.observe(s))
            .collect();
        use Arrival::*;
        assert_eq!(
            arrivals,
            [
                InOrder,
                InOrder,
                InOrder,
                Duplicate,
                AfterGap(2),
                Duplicate,
                Late,
                Late,
                Duplicate,
                Duplicate,
                InOrder
            ]
        );
        assert_eq!(
            t.counts,
            SeqCounts {
                received: 11,
                lost: 0,
                duplicated: 4,
                reordered: 2
            }
        );
    }

    #[test]
    fn window_wraps_without_false_duplicates() {
        let mut t = SeqTracker::new();
        for s in 0..10 * WINDOW {
            t.observe(s);
        }
        t.observe(20 * WINDOW);
        t.observe(20 * WINDOW + 1);
        assert_eq!(t.counts.duplicated, 0);
        assert_eq!(t.counts.lost, 10 * WINDOW);
    }
}
