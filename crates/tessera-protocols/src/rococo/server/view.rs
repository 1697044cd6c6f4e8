//! The finished view of a server's data: what read-only requests read
//! (§4.1, Fig. 10).
//!
//! Immediate pieces install their writes when they run, in the start phase,
//! long before their transaction is FINISHED. §4.1's argument holds only for
//! writes of transactions a read waited for or that had finished (a finished
//! transaction has started at every server, so the next round's read there
//! meets it): a read must never see the write of an unfinished transaction.
//! Waiting until none is left (every newcomer included) starves a read of a
//! hot row — a district's next order id always has some NewOrder in flight.
//! So the server keeps, for each key that unfinished transactions wrote
//! immediately, its record as of the finished ones, and read-only requests
//! read through it: they wait for the conflicting transactions that were
//! there when they arrived (Fig. 10's `S.dep`), never for later ones, and
//! do not see the later ones' writes.
//!
//! Per key, the writes are kept in install order. A transaction finishes
//! only after its local ancestors (Fig. 7), and the members of a component
//! together, so the finished writes form a prefix; the record below the
//! first unfinished write is the one shown. A deferrable piece runs when its
//! transaction finishes: its write supersedes the key's pending ones (the
//! record in the store is then a finished transaction's).

use std::collections::VecDeque;
use tessera_core::ids::{Key, TxnId};
use tessera_core::storage::{Record, Store};
use tessera_core::FastMap;

/// One key with unfinished immediate writes.
struct Pending {
    /// The record as of the finished writers (`None`: absent).
    finished: Option<Record>,
    /// The writes since, in install order: writer, record, finished yet.
    writes: VecDeque<(TxnId, Option<Record>, bool)>,
}

/// The records written immediately by unfinished transactions, as they
/// were before those writes.
#[derive(Default)]
pub(super) struct FinishedView {
    keys: FastMap<Key, Pending>,
}

impl FinishedView {
    /// The record of `key` a read-only request reads.
    pub fn get<'a>(&'a self, store: &'a Store, key: Key) -> Option<&'a Record> {
        match self.keys.get(&key) {
            Some(p) => p.finished.as_ref(),
            None => store.get(key),
        }
    }

    /// An immediate piece is about to write some of `keys`: remember what
    /// the store holds now, where no unfinished write is kept yet.
    pub fn before_immediate(&mut self, store: &Store, keys: impl Iterator<Item = Key>) {
        for k in keys {
            self.keys.entry(k).or_insert_with(|| Pending {
                finished: store.get(k).cloned(),
                writes: VecDeque::new(),
            });
        }
    }

    /// `txn`'s immediate piece, given `declared` before it ran, wrote
    /// `written` (some of them).
    pub fn after_immediate(
        &mut self,
        store: &Store,
        txn: TxnId,
        declared: impl Iterator<Item = Key>,
        written: &[Key],
    ) {
        for k in declared {
            let Some(p) = self.keys.get_mut(&k) else {
                continue;
            };
            if !written.contains(&k) {
                if p.writes.is_empty() {
                    self.keys.remove(&k);
                }
                continue;
            }
            let rec = store.get(k).cloned();
            match p.writes.back_mut() {
                Some((t, r, _)) if *t == txn => *r = rec,
                _ => p.writes.push_back((txn, rec, false)),
            }
        }
    }

    /// A deferrable piece of a finishing transaction wrote `key`.
    pub fn deferred(&mut self, key: Key) {
        self.keys.remove(&key);
    }

    /// `txn` finished; `keys` holds at least the keys it wrote.
    pub fn finished(&mut self, txn: TxnId, keys: &[Key]) {
        for k in keys {
            let Some(p) = self.keys.get_mut(k) else {
                continue;
            };
            for w in p.writes.iter_mut().filter(|w| w.0 == txn) {
                w.2 = true;
            }
            while let Some((_, rec, true)) = p.writes.front() {
                p.finished = rec.clone();
                p.writes.pop_front();
            }
            if p.writes.is_empty() {
                self.keys.remove(k);
            }
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.keys.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::ids::{NodeId, Version};
    use tessera_core::txn::Value;

    fn t(i: u32) -> TxnId {
        TxnId::new(NodeId(9), 0, i)
    }

    fn write(v: &mut FinishedView, s: &mut Store, txn: TxnId, k: Key, x: &'static [u8]) {
        v.before_immediate(s, [k].into_iter());
        s.install(k, Value::from_static(x), txn.version());
        v.after_immediate(s, txn, [k].into_iter(), &[k]);
    }

    fn seen(v: &FinishedView, s: &Store, k: Key) -> Option<Version> {
        v.get(s, k).map(|r| r.meta.version)
    }

    #[test]
    fn reads_see_only_finished_writes_in_their_order() {
        let k = Key::new(0, 1);
        let mut s = Store::new();
        s.load(k, Value::from_static(b"0"));
        let mut v = FinishedView::default();
        write(&mut v, &mut s, t(1), k, b"1");
        write(&mut v, &mut s, t(2), k, b"2");
        assert_eq!(seen(&v, &s, k), Some(Version::INITIAL));
        v.finished(t(1), &[k]);
        assert_eq!(seen(&v, &s, k), Some(t(1).version()));
        assert_eq!(v.get(&s, k).unwrap().value, Value::from_static(b"1"));
        v.finished(t(2), &[k]);
        assert_eq!(seen(&v, &s, k), Some(t(2).version()));
        assert_eq!(v.len(), 0, "nothing kept once every writer finished");
    }

    #[test]
    fn a_deferred_write_supersedes_pending_ones_and_a_missing_row_stays_missing() {
        let (k, new) = (Key::new(0, 1), Key::new(0, 2));
        let mut s = Store::new();
        s.load(k, Value::from_static(b"0"));
        let mut v = FinishedView::default();
        write(&mut v, &mut s, t(1), k, b"1");
        write(&mut v, &mut s, t(1), new, b"n");
        assert!(v.get(&s, new).is_none(), "an unfinished insert is not seen");
        s.install(k, Value::from_static(b"d"), t(3).version());
        v.deferred(k);
        assert_eq!(seen(&v, &s, k), Some(t(3).version()));
        // A piece that declared a write and did not write keeps nothing.
        v.before_immediate(&s, [Key::new(0, 3)].into_iter());
        v.after_immediate(&s, t(4), [Key::new(0, 3)].into_iter(), &[]);
        v.finished(t(1), &[k, new]);
        assert_eq!(seen(&v, &s, new), Some(t(1).version()));
        assert_eq!(v.len(), 0);
    }
}
