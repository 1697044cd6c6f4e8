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
//! then number the transactions in flight.
//!
//! A tombstone above its coordinator's floor never expires by age while
//! that coordinator incarnation is the newest one heard of its node: a
//! live coordinator may resend a request whenever it likes (after a stall
//! of its own, say, it retransmits before it reads the answers waiting for
//! it), and a copy that finds no tombstone would run the transaction a
//! second time — a duplicated Payment over `tcp` did exactly that when
//! tombstones expired two seconds after they were made. Tombstones of an
//! incarnation that a newer one of its node replaced (it crashed; its
//! stragglers are refused by the servers), and of coordinators that never
//! send floors, expire after `keep`.
//!
//! A protocol whose tombstones also answer messages from *other* servers,
//! which no coordinator's floor covers, keeps one below its floor a while
//! longer: `linger` (Janus: a server's Inquire about a transaction it
//! depends on, answered with the forgotten transaction's component; see
//! `janus/gc.rs`). The clock is the caller's: 2PC passes times, Janus
//! passes its garbage-collection epochs.

use tessera_core::ids::{Time, TxnId};
use tessera_core::FastMap;

/// The coordinator incarnation a transaction id belongs to (its node and
/// incarnation bits).
fn incarnation_of(txn: TxnId) -> u64 {
    txn.0 >> 32
}

/// Is incarnation `a` newer than `b`? Incarnations are a `u8` that wraps:
/// `a` is newer when `a - b` (mod 256) is in 1..=127.
fn newer(a: u8, b: u8) -> bool {
    (a.wrapping_sub(b) as i8) > 0
}

/// Tombstones with values of type `V` (the outcome to answer with).
#[derive(Debug)]
pub struct Tombstones<V> {
    ended: FastMap<TxnId, (V, Time)>,
    floors: FastMap<u64, TxnId>,
    keep: Time,
    linger: Time,
}

impl<V> Tombstones<V> {
    /// Tombstones of coordinators that fall silent expire after `keep`.
    pub fn new(keep: Time) -> Self {
        Self::lingering(keep, 0)
    }

    /// As [`Self::new`], and a tombstone below its coordinator's floor is
    /// still kept until it is `linger` old.
    pub fn lingering(keep: Time, linger: Time) -> Self {
        Tombstones {
            ended: tessera_core::fast_map(),
            floors: tessera_core::fast_map(),
            keep,
            linger,
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

    /// Forget `txn`'s tombstone (a replicated log overrides an outcome a
    /// replica decided alone).
    pub fn remove(&mut self, txn: TxnId) {
        self.ended.remove(&txn);
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

    /// Drop tombstones below their floor (once `linger` old), and those
    /// older than `keep` whose coordinator incarnation sends no floors or
    /// has been replaced.
    pub fn sweep(&mut self, now: Time) {
        let (floors, keep, linger) = (&self.floors, self.keep, self.linger);
        let replaced = |inc: u64| {
            let node = inc >> 8;
            floors
                .keys()
                .any(|&other| other >> 8 == node && newer((other & 0xff) as u8, (inc & 0xff) as u8))
        };
        self.ended.retain(|txn, (_, at)| {
            let inc = incarnation_of(*txn);
            match floors.get(&inc) {
                Some(f) if *txn < *f => now - *at < linger,
                Some(_) if !replaced(inc) => true,
                _ => now - *at < keep,
            }
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
    }

    /// Age alone never lets a live coordinator's late copy find nothing.
    #[test]
    fn only_replaced_or_floorless_coordinators_tombstones_expire() {
        let mut t = Tombstones::new(100);
        let a = |seq| TxnId::new(NodeId(1), 0, seq);
        let b = |seq| TxnId::new(NodeId(2), 0, seq);
        let a_again = |seq| TxnId::new(NodeId(1), 1, seq);
        t.insert(a(5), 'a', 0);
        t.raise_floor(a(3));
        t.insert(b(1), 'c', 0);
        t.sweep(100);
        assert!(t.contains(a(5)), "a live coordinator may still resend");
        assert!(!t.contains(b(1)), "b sends no floors: expired by age");
        t.raise_floor(a_again(1));
        t.insert(a_again(2), 'c', 100);
        t.sweep(150);
        assert!(!t.contains(a(5)), "a replaced incarnation's expire by age");
        t.sweep(1_000);
        assert!(t.contains(a_again(2)));
    }

    /// Below its floor a lingering tombstone still lives `linger`; above
    /// it, age alone never drops it.
    #[test]
    fn a_lingering_tombstone_below_its_floor_lives_its_linger() {
        let mut t = Tombstones::lingering(10, 4);
        let a = |seq| TxnId::new(NodeId(1), 0, seq);
        t.insert(a(1), 'c', 0);
        t.insert(a(2), 'c', 0);
        t.raise_floor(a(2));
        t.sweep(3);
        assert!(t.contains(a(1)), "below the floor, but younger than linger");
        t.sweep(4);
        assert!(!t.contains(a(1)));
        t.sweep(1_000);
        assert!(t.contains(a(2)), "at the floor: its coordinator may resend");
    }

    #[test]
    fn incarnations_compare_across_the_wrap() {
        assert!(newer(1, 0));
        assert!(newer(0, 255));
        assert!(!newer(0, 1));
        assert!(!newer(5, 5));
    }
}
