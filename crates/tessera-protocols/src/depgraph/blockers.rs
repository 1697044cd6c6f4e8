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
    /// (slot, transaction), in slot order; slots are unique.
    items: Vec<(u64, TxnId)>,
}

impl Blockers {
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = TxnId> + '_ {
        self.items.iter().map(|&(_, t)| t)
    }

    #[cfg(test)]
    pub fn contains(&self, t: TxnId) -> bool {
        self.items.iter().any(|&(_, u)| u == t)
    }

    /// Replace the set with `items` (in any order).
    pub fn set(&mut self, mut items: Vec<(u64, TxnId)>) {
        items.sort_unstable();
        items.dedup();
        self.items = items;
    }

    /// Add those of `sorted` (in slot order) not in the set; returns them.
    pub fn add(&mut self, sorted: &[(u64, TxnId)]) -> Vec<TxnId> {
        let mut missing = Vec::new();
        let mut i = 0;
        for &item in sorted {
            while i < self.items.len() && self.items[i].0 < item.0 {
                i += 1;
            }
            if self.items.get(i) != Some(&item) {
                missing.push(item);
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
        missing.into_iter().map(|(_, t)| t).collect()
    }

    /// Remove `t` of slot `s`; true when it was in the set.
    pub fn remove(&mut self, t: TxnId, s: u64) -> bool {
        match self.items.binary_search(&(s, t)) {
            Ok(i) => {
                self.items.remove(i);
                if self.items.is_empty() {
                    self.items = Vec::new();
                }
                true
            }
            Err(_) => false,
        }
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
