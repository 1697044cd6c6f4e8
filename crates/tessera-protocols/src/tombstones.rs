//! Remembering finished transactions, for as long as it matters.
//!
//! Over a network that loses, duplicates and reorders, a server must answer
//! a late copy of a request for a transaction it has finished with the same
//! answer, never run it again. It keeps a *tombstone* (the outcome) per
//! finished transaction. Kept for a fixed time, tombstones number the
//! throughput times that time (~800k at 400k txn/s for two seconds: a 25 MB
//! map, two cache misses per transaction). Instead, every request carries
//! its coordinator's *floor*: the oldest transaction that coordinator still
//! works on. Transaction ids of one coordinator incarnation grow, so
//! everything of that incarnation below the floor is over: its tombstones
//! can go, and a late copy of its requests is stale and ignored. Tombstones
//! then number the transactions in flight. A coordinator that falls silent
//! stops raising its floor; its tombstones expire after `keep`.

use tessera_core::ids::{Time, TxnId};
use tessera_core::FastMap;

/// The coordinator incarnation a transaction id belongs to (its node and
/// incarnation bits).
fn incarnation_of(txn: TxnId) -> u64 {
    txn.0 >> 32
}

/// Tombstones with values of type `V` (the outcome to answer with).
#[derive(Debug)]
pub struct Tombstones<V> {
    ended: FastMap<TxnId, (V, Time)>,
    floors: FastMap<u64, TxnId>,
    keep: Time,
}

impl<V> Tombstones<V> {
    /// Tombstones of coordinators that fall silent expire after `keep`.
    pub fn new(keep: Time) -> Self {
        Tombstones {
            ended: tessera_core::fast_map(),
            floors: tessera_core::fast_map(),
            keep,
        }
    }

    /// `floor`'s coordinator says everything of its below `floor` is over.
    pub fn raise_floor(&mut self, floor: TxnId) {
        let f = self.floors.entry(incarnation_of(floor)).or_insert(floor);
        *f = (*f).max(floor);
    }

    /// True when `txn`'s coordinator has declared it over: a message about
    /// it that finds neither live state nor a tombstone is stale.
    pub fn below_floor(&self, txn: TxnId) -> bool {
        self.floors
            .get(&incarnation_of(txn))
            .is_some_and(|f| txn < *f)
    }

    pub fn get(&self, txn: TxnId) -> Option<&V> {
        self.ended.get(&txn).map(|(v, _)| v)
    }

    pub fn contains(&self, txn: TxnId) -> bool {
        self.ended.contains_key(&txn)
    }

    /// Remember that `txn` ended at `now` with `outcome`.
    pub fn insert(&mut self, txn: TxnId, outcome: V, now: Time) {
        self.ended.insert(txn, (outcome, now));
    }

    /// Every tombstone, in no particular order (for snapshots).
    pub fn iter(&self) -> impl Iterator<Item = (TxnId, &V)> {
        self.ended.iter().map(|(t, (v, _))| (*t, v))
    }

    pub fn len(&self) -> usize {
        self.ended.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ended.is_empty()
    }

    /// Drop tombstones below their floor or older than `keep`.
    pub fn sweep(&mut self, now: Time) {
        let (floors, keep) = (&self.floors, self.keep);
        self.ended.retain(|txn, (_, at)| {
            let above_floor = floors.get(&incarnation_of(*txn)).is_none_or(|f| *txn >= *f);
            above_floor && now - *at < keep
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::ids::NodeId;

    #[test]
    fn floors_are_per_coordinator_incarnation_and_only_rise() {
        let mut t = Tombstones::new(100);
        let a = |seq| TxnId::new(NodeId(1), 0, seq);
        let b = |seq| TxnId::new(NodeId(1), 1, seq);
        t.insert(a(1), 'c', 0);
        t.insert(a(5), 'a', 0);
        t.insert(b(1), 'c', 0);
        t.raise_floor(a(3));
        t.raise_floor(a(2));
        assert!(t.below_floor(a(2)));
        assert!(!t.below_floor(a(3)));
        assert!(
            !t.below_floor(b(1)),
            "another incarnation has its own floor"
        );
        t.sweep(1);
        assert!(!t.contains(a(1)));
        assert_eq!(t.get(a(5)), Some(&'a'));
        assert!(t.contains(b(1)));
        t.sweep(100);
        assert!(t.is_empty(), "silent coordinators' tombstones expire");
    }
}
