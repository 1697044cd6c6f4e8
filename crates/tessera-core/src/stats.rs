//! What clients measured: counts and latency, mergeable across hosts.

use hdrhistogram::Histogram;

/// Counts for one transaction type (or for all).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub committed: u64,
    pub attempts: u64,
    /// Transactions given up after the retry cap.
    pub failed: u64,
    /// Transactions the procedure rolled back itself (not retried).
    pub user_aborts: u64,
}

impl Counts {
    pub fn add(&mut self, o: &Counts) {
        self.committed += o.committed;
        self.attempts += o.attempts;
        self.failed += o.failed;
        self.user_aborts += o.user_aborts;
    }
}

/// Measurements of a set of closed-loop clients inside the measurement
/// window (warm-up and cool-down trimmed).
#[derive(Clone, Debug)]
pub struct ClientStats {
    pub total: Counts,
    /// Per transaction type, in first-seen order.
    pub by_type: Vec<(&'static str, Counts)>,
    /// Latency of committed transactions, first attempt to commit, in
    /// microseconds, retries included.
    pub latency_us: Histogram<u64>,
    /// Commits over the whole run, window or not (for per-transaction
    /// message counts, which the runtime counts over the whole run).
    pub run_committed: u64,
    /// Commits per window of [`crate::client::ClientConfig::timeline`]
    /// over the whole run (window `i` covers `[i·w, (i+1)·w)` from time
    /// 0, warm-up and cool-down included); empty without a timeline.
    pub timeline: Vec<u64>,
}

impl Default for ClientStats {
    fn default() -> Self {
        ClientStats {
            total: Counts::default(),
            by_type: Vec::new(),
            latency_us: Histogram::new_with_bounds(1, 3_600_000_000, 3)
                .expect("valid histogram bounds"),
            run_committed: 0,
            timeline: Vec::new(),
        }
    }
}

impl ClientStats {
    pub fn counts_mut(&mut self, ty: &'static str) -> &mut Counts {
        let i = match self.by_type.iter().position(|(n, _)| *n == ty) {
            Some(i) => i,
            None => {
                self.by_type.push((ty, Counts::default()));
                self.by_type.len() - 1
            }
        };
        &mut self.by_type[i].1
    }

    pub fn merge(&mut self, o: &ClientStats) {
        self.total.add(&o.total);
        self.run_committed += o.run_committed;
        if self.timeline.len() < o.timeline.len() {
            self.timeline.resize(o.timeline.len(), 0);
        }
        for (a, b) in self.timeline.iter_mut().zip(&o.timeline) {
            *a += b;
        }
        for (n, c) in &o.by_type {
            self.counts_mut(n).add(c);
        }
        self.latency_us
            .add(&o.latency_us)
            .expect("histograms share bounds");
    }

    /// Count a commit at `now` in its window of `window` ns.
    pub fn record_commit_at(&mut self, now: crate::ids::Time, window: crate::ids::Time) {
        let i = usize::try_from(now / window.max(1)).unwrap_or(usize::MAX);
        if i >= self.timeline.len() {
            self.timeline.resize(i + 1, 0);
        }
        self.timeline[i] += 1;
    }

    /// Latency quantile in milliseconds (0 when nothing committed).
    pub fn latency_ms(&self, q: f64) -> f64 {
        if self.latency_us.is_empty() {
            0.0
        } else {
            self.latency_us.value_at_quantile(q) as f64 / 1000.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_adds_counts_and_latency() {
        let mut a = ClientStats::default();
        a.counts_mut("x").committed = 2;
        a.latency_us.record(100).unwrap();
        let mut b = ClientStats::default();
        b.counts_mut("y").committed = 1;
        b.counts_mut("x").attempts = 4;
        b.latency_us.record(300).unwrap();
        a.merge(&b);
        assert_eq!(a.by_type.len(), 2);
        assert_eq!(a.counts_mut("x").attempts, 4);
        assert_eq!(a.latency_us.len(), 2);
        assert!(a.latency_ms(1.0) >= 0.299);
    }

    #[test]
    fn commits_fall_into_their_windows_and_merge_elementwise() {
        let mut a = ClientStats::default();
        for t in [0, 999, 1_000, 3_500] {
            a.record_commit_at(t, 1_000);
        }
        assert_eq!(a.timeline, vec![2, 1, 0, 1]);
        let mut b = ClientStats::default();
        b.record_commit_at(1_500, 1_000);
        b.merge(&a);
        assert_eq!(b.timeline, vec![2, 2, 0, 1]);
    }
}
