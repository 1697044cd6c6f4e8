//! The lock table: shared/exclusive locks with a wait queue per key.

use super::Policy;
use crate::twopc::Priority;
use std::collections::VecDeque;
use tessera_core::ids::{Key, TxnId};
use tessera_core::{FastMap, FastSet};

pub enum Acquire {
    Granted,
    /// Waiting in the key's queue; [`LockTable::release`] grants it later.
    Queued,
    /// NO_WAIT conflict.
    Conflict,
}

#[derive(Default)]
struct Entry {
    exclusive: bool,
    holders: Vec<TxnId>,
    /// Waiters, oldest first: (who, exclusive).
    waiters: VecDeque<(Priority, bool)>,
}

impl Entry {
    /// May `txn` hold the lock in this mode alongside the current holders?
    fn compatible(&self, txn: TxnId, x: bool) -> bool {
        self.holders.is_empty()
            || self.holders == [txn]
            || (!x && !self.exclusive && !self.holders.is_empty())
    }
    fn holds(&self, txn: TxnId, x: bool) -> bool {
        self.holders.contains(&txn) && (self.exclusive || !x)
    }
    fn grant(&mut self, txn: TxnId, x: bool) {
        if !self.holders.contains(&txn) {
            self.holders.push(txn);
        }
        self.exclusive = x || (self.exclusive && self.holders.len() == 1);
    }
}

struct Holder {
    prio: Priority,
    keys: Vec<Key>,
    waiting_on: Option<Key>,
    prepared: bool,
}

#[derive(Default)]
pub struct LockTable {
    keys: FastMap<Key, Entry>,
    txns: FastMap<TxnId, Holder>,
}

impl LockTable {
    /// Lock `key` for `who` (exclusively when `x`). Under wound-wait a
    /// conflicting request wounds the younger holders that are not
    /// prepared, and with `wound_waiters` the younger waiters too
    /// ([`super::Wound::JanusBaseline`]); they go to `wounded`, for the
    /// participant to abort.
    pub fn acquire(
        &mut self,
        key: Key,
        who: Priority,
        x: bool,
        policy: Policy,
        wound_waiters: bool,
        wounded: &mut Vec<TxnId>,
    ) -> Acquire {
        let txn = who.txn;
        let e = self.keys.entry(key).or_default();
        if e.holds(txn, x) {
            return Acquire::Granted;
        }
        let t = self.txns.entry(txn).or_insert_with(|| Holder {
            prio: who,
            keys: Vec::new(),
            waiting_on: None,
            prepared: false,
        });
        if t.waiting_on == Some(key) {
            return Acquire::Queued;
        }
        // Waiters ahead of an older requester do not block it; a younger one
        // queues behind them.
        let older_waiting = e.waiters.iter().any(|(p, _)| *p < who);
        if e.compatible(txn, x) && !older_waiting {
            e.grant(txn, x);
            if !t.keys.contains(&key) {
                t.keys.push(key);
            }
            return Acquire::Granted;
        }
        if policy == Policy::NoWait {
            return Acquire::Conflict;
        }
        for h in &e.holders {
            if *h == txn {
                continue;
            }
            let hs = &self.txns[h];
            if hs.prio > who && !hs.prepared && !wounded.contains(h) {
                wounded.push(*h);
            }
        }
        if wound_waiters {
            for (p, _) in &e.waiters {
                let prepared = self.txns.get(&p.txn).is_some_and(|w| w.prepared);
                if *p > who && !prepared && !wounded.contains(&p.txn) {
                    wounded.push(p.txn);
                }
            }
        }
        let pos = e
            .waiters
            .iter()
            .position(|(p, _)| *p > who)
            .unwrap_or(e.waiters.len());
        e.waiters.insert(pos, (who, x));
        self.txns.get_mut(&txn).expect("inserted").waiting_on = Some(key);
        Acquire::Queued
    }

    pub fn set_prepared(&mut self, txn: TxnId) {
        if let Some(t) = self.txns.get_mut(&txn) {
            t.prepared = true;
        }
    }

    /// Drop every lock and wait of `txn`; grant what that frees.
    pub fn release(&mut self, txn: TxnId, granted: &mut Vec<TxnId>) {
        let Some(t) = self.txns.remove(&txn) else {
            return;
        };
        let mut touched: FastSet<Key> = tessera_core::fast_set();
        if let Some(k) = t.waiting_on {
            if let Some(e) = self.keys.get_mut(&k) {
                e.waiters.retain(|(p, _)| p.txn != txn);
                touched.insert(k);
            }
        }
        for k in &t.keys {
            if let Some(e) = self.keys.get_mut(k) {
                e.holders.retain(|h| *h != txn);
                if e.holders.len() <= 1 && e.exclusive && e.holders.is_empty() {
                    e.exclusive = false;
                }
                touched.insert(*k);
            }
        }
        let mut touched: Vec<Key> = touched.into_iter().collect();
        touched.sort_unstable();
        for k in touched {
            self.grant_waiters(k, granted);
        }
    }

    fn grant_waiters(&mut self, key: Key, granted: &mut Vec<TxnId>) {
        let Some(e) = self.keys.get_mut(&key) else {
            return;
        };
        while let Some(&(who, x)) = e.waiters.front() {
            if !e.compatible(who.txn, x) {
                break;
            }
            e.waiters.pop_front();
            e.grant(who.txn, x);
            if let Some(t) = self.txns.get_mut(&who.txn) {
                t.waiting_on = None;
                if !t.keys.contains(&key) {
                    t.keys.push(key);
                }
            }
            granted.push(who.txn);
        }
        if e.holders.is_empty() && e.waiters.is_empty() {
            self.keys.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(since: u64, t: u64) -> Priority {
        Priority {
            since,
            txn: TxnId(t),
        }
    }

    #[test]
    fn shared_locks_coexist_and_exclusive_waits() {
        let mut lt = LockTable::default();
        let k = Key::new(0, 1);
        let mut w = Vec::new();
        assert!(matches!(
            lt.acquire(k, p(1, 1), false, Policy::WoundWait, false, &mut w),
            Acquire::Granted
        ));
        assert!(matches!(
            lt.acquire(k, p(2, 2), false, Policy::WoundWait, false, &mut w),
            Acquire::Granted
        ));
        // Younger writer waits for the older readers.
        assert!(matches!(
            lt.acquire(k, p(3, 3), true, Policy::WoundWait, false, &mut w),
            Acquire::Queued
        ));
        assert!(w.is_empty());
        let mut g = Vec::new();
        lt.release(TxnId(1), &mut g);
        assert!(g.is_empty());
        lt.release(TxnId(2), &mut g);
        assert_eq!(g, vec![TxnId(3)]);
    }

    #[test]
    fn older_requester_wounds_younger_unprepared_holder() {
        let mut lt = LockTable::default();
        let k = Key::new(0, 1);
        let mut w = Vec::new();
        lt.acquire(k, p(5, 5), true, Policy::WoundWait, false, &mut w);
        assert!(matches!(
            lt.acquire(k, p(1, 1), true, Policy::WoundWait, false, &mut w),
            Acquire::Queued
        ));
        assert_eq!(w, vec![TxnId(5)]);
        let mut g = Vec::new();
        lt.release(TxnId(5), &mut g);
        assert_eq!(g, vec![TxnId(1)]);
    }

    #[test]
    fn prepared_holder_is_not_wounded() {
        let mut lt = LockTable::default();
        let k = Key::new(0, 1);
        let mut w = Vec::new();
        lt.acquire(k, p(5, 5), true, Policy::WoundWait, false, &mut w);
        lt.set_prepared(TxnId(5));
        assert!(matches!(
            lt.acquire(k, p(1, 1), true, Policy::WoundWait, false, &mut w),
            Acquire::Queued
        ));
        assert!(w.is_empty());
    }

    #[test]
    fn no_wait_conflicts_and_upgrade_of_sole_holder_succeeds() {
        let mut lt = LockTable::default();
        let k = Key::new(0, 1);
        let mut w = Vec::new();
        lt.acquire(k, p(1, 1), false, Policy::NoWait, false, &mut w);
        assert!(matches!(
            lt.acquire(k, p(1, 1), true, Policy::NoWait, false, &mut w),
            Acquire::Granted
        ));
        assert!(matches!(
            lt.acquire(k, p(0, 2), false, Policy::NoWait, false, &mut w),
            Acquire::Conflict
        ));
    }
}
