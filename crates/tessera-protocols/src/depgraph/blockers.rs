//! The STARTED ancestors a blocked COMMITTING vertex waits for
//! ([`super::graph::DepGraph::settle`]), each with its vertex's slot (each
//! vertex of a graph gets the next slot when it is created), in slot order.
//!
//! A resumed settle looks for the STARTED vertices behind a risen blocker
//! that are not yet in the set; over three sites with 10,800 clients at
//! zipf 0.9 those are hundreds per resume and almost all already in it,
//! and a hash look-up for each was 85% of a janus-micro-wan run (`perf`).
//! Two lists in slot order are compared in one pass instead. (Bits by slot
//! were faster still but took gigabytes: a vertex blocked on an old and a
//! new vertex spans every slot created in between.)

use tessera_core::ids::TxnId;

#[derive(Default)]
pub(crate) struct Blockers {
    /// (slot, transaction), in slot order; a removed one stays as `None`
    /// until they are as many as the rest: blockers mostly rise oldest
    /// first, and shifting the list at each removal was a fifth of a run.
    items: Vec<(u64, Option<TxnId>)>,
    /// How many are not removed.
    live: usize,
}

impl Blockers {
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = TxnId> + '_ {
        self.items.iter().filter_map(|&(_, t)| t)
    }

    #[cfg(test)]
    pub fn contains(&self, t: TxnId) -> bool {
        self.iter().any(|u| u == t)
    }

    /// Replace the set with `items` (in any order).
    pub fn set(&mut self, items: Vec<(u64, TxnId)>) {
        self.items = items.into_iter().map(|(s, t)| (s, Some(t))).collect();
        self.items.sort_unstable();
        self.items.dedup();
        self.live = self.items.len();
    }

    /// Add those of `sorted` (in slot order) not in the set; returns them.
    /// Each is looked for by a galloping search from the last one's place:
    /// a resume's list may be much shorter than the set (a scan of the set
    /// was 41% of a run) or as long (a bisection each was 80%).
    pub fn add(&mut self, sorted: &[(u64, TxnId)]) -> Vec<TxnId> {
        let mut missing = Vec::new();
        let mut i = 0;
        for &(s, t) in sorted {
            let mut step = 1;
            while i + step < self.items.len() && self.items[i + step].0 < s {
                i += step;
                step *= 2;
            }
            let end = (i + step + 1).min(self.items.len());
            i += self.items[i..end].partition_point(|x| x.0 < s);
            let present = self.items[i..]
                .iter()
                .take_while(|x| x.0 == s)
                .any(|x| x.1 == Some(t));
            if !present {
                missing.push((s, Some(t)));
            }
        }
        if missing.is_empty() {
            return Vec::new();
        }
        let mut merged = Vec::with_capacity(self.items.len() + missing.len());
        let mut old = std::mem::take(&mut self.items).into_iter().peekable();
        for &m in &missing {
            while let Some(o) = old.next_if(|o| o.0 < m.0) {
                merged.push(o);
            }
            merged.push(m);
        }
        merged.extend(old);
        self.items = merged;
        self.live += missing.len();
        missing.into_iter().filter_map(|(_, t)| t).collect()
    }

    /// Remove `t` of slot `s`; true when it was in the set.
    pub fn remove(&mut self, t: TxnId, s: u64) -> bool {
        let from = self.items.partition_point(|x| x.0 < s);
        let Some(at) = self.items[from..]
            .iter()
            .take_while(|x| x.0 == s)
            .position(|x| x.1 == Some(t))
        else {
            return false;
        };
        self.items[from + at].1 = None;
        self.live -= 1;
        if self.live == 0 {
            self.items = Vec::new();
        } else if self.items.len() > 2 * self.live + 8 {
            self.items.retain(|x| x.1.is_some());
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random adds and removes against a plain set.
    #[test]
    fn adds_return_exactly_the_missing() {
        use rand::{Rng, SeedableRng};
        use std::collections::BTreeSet;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let mut b = Blockers::default();
        let mut model: BTreeSet<u64> = BTreeSet::new();
        let item = |s: u64| (s, TxnId(s * 3));
        for _ in 0..5_000 {
            if rng.random_bool(0.6) {
                let mut add: Vec<u64> = (0..rng.random_range(0..8))
                    .map(|_| rng.random_range(0..300))
                    .collect();
                add.sort_unstable();
                add.dedup();
                let want: Vec<TxnId> = add
                    .iter()
                    .filter(|s| !model.contains(s))
                    .map(|&s| item(s).1)
                    .collect();
                let sorted: Vec<(u64, TxnId)> = add.iter().map(|&s| item(s)).collect();
                assert_eq!(b.add(&sorted), want);
                model.extend(add);
            } else {
                let s = rng.random_range(0..300);
                assert_eq!(b.remove(item(s).1, s), model.remove(&s));
            }
            let all: Vec<TxnId> = model.iter().map(|&s| item(s).1).collect();
            assert_eq!(b.iter().collect::<Vec<_>>(), all);
        }
    }
}
