//! The STARTED ancestors a blocked COMMITTING vertex waits for
//! ([`super::graph::DepGraph::settle`]), as a set of transactions and, for
//! the membership test of a resumed settle, as bits of the vertices' slots
//! (each vertex of a graph gets the next slot when it is created).
//!
//! A resumed settle tests every STARTED vertex behind a risen blocker for
//! membership; over three sites with 10,800 clients at zipf 0.9 those are
//! hundreds per resume, and the hash look-ups were 85% of a janus-micro-wan
//! run (`perf`). The blockers of one vertex are recent vertices, so their
//! slots are close together and the bits few words.

use tessera_core::ids::TxnId;
use tessera_core::FastMap;

#[derive(Default)]
pub(crate) struct Blockers {
    /// Each blocker with its slot.
    txns: FastMap<TxnId, u64>,
    /// Bit `s - base` is set for each blocker's slot `s`; `base` is a
    /// multiple of 64 and the first word is never zero.
    base: u64,
    words: Vec<u64>,
}

impl Blockers {
    pub fn is_empty(&self) -> bool {
        self.txns.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = TxnId> + '_ {
        self.txns.keys().copied()
    }

    #[cfg(test)]
    pub fn contains(&self, t: TxnId) -> bool {
        self.txns.contains_key(&t)
    }

    /// Whether the blocker of slot `s` is in the set.
    pub fn has_slot(&self, s: u64) -> bool {
        s >= self.base
            && self
                .words
                .get(((s - self.base) / 64) as usize)
                .is_some_and(|w| w & (1 << (s % 64)) != 0)
    }

    /// Add `t` of slot `s`; true when it was not in the set.
    pub fn insert(&mut self, t: TxnId, s: u64) -> bool {
        if self.txns.insert(t, s).is_some() {
            return false;
        }
        let at = s & !63;
        if self.words.is_empty() {
            self.base = at;
        } else if at < self.base {
            let more = ((self.base - at) / 64) as usize;
            self.words.splice(0..0, std::iter::repeat_n(0, more));
            self.base = at;
        }
        let i = ((s - self.base) / 64) as usize;
        if i >= self.words.len() {
            self.words.resize(i + 1, 0);
        }
        self.words[i] |= 1 << (s % 64);
        true
    }

    /// Remove `t`; true when it was in the set.
    pub fn remove(&mut self, t: TxnId) -> bool {
        let Some(s) = self.txns.remove(&t) else {
            return false;
        };
        let i = ((s - self.base) / 64) as usize;
        self.words[i] &= !(1 << (s % 64));
        let zeros = self.words.iter().take_while(|w| **w == 0).count();
        if zeros > 0 {
            self.words.drain(..zeros);
            self.base += 64 * zeros as u64;
        }
        true
    }

    pub fn clear(&mut self) {
        self.txns.clear();
        self.words.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random inserts and removes: the bits say what the map says.
    #[test]
    fn slots_follow_the_set() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let mut b = Blockers::default();
        for _ in 0..20_000 {
            let s = rng.random_range(0..1_000u64);
            let t = TxnId(s * 3);
            if rng.random_bool(0.5) {
                let had = b.contains(t);
                assert_eq!(b.insert(t, s), !had);
            } else {
                let had = b.contains(t);
                assert_eq!(b.remove(t), had);
            }
            for q in [s, s ^ 1, s + 64, s.saturating_sub(64)] {
                assert_eq!(b.has_slot(q), b.contains(TxnId(q * 3)), "slot {q}");
            }
            assert!(b.words.first().is_none_or(|w| *w != 0));
        }
    }
}
