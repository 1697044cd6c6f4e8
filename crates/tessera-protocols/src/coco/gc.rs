//! Deletes and inserts (COCO §6.3): placeholders, delete bits, and their
//! garbage collection at the next epoch.
//!
//! * **Insert.** The lock step puts a *placeholder* record in the store
//!   for a key the write set inserts: locked by the inserter, so that a
//!   concurrent insert of the same key fails its NO_WAIT lock and a reader
//!   that saw the key absent fails validation; invisible to readers (it
//!   reads as absent, with TID 0) until the write-back installs the value.
//!   If the inserter aborts, the placeholder stays unlocked and empty.
//! * **Delete.** A delete is a write of the empty value (the workloads'
//!   convention: TPC-C's Delivery writes its NEW-ORDER row empty, see
//!   `tessera_workloads::tpcc`): the empty value is the delete bit, and the
//!   record keeps the deleting transaction's TID as its `wts`. It is thus
//!   locked, validated, logged ([`super::redo`]), replicated under the
//!   Thomas write rule and reverted by an epoch abort ([`super::undo`])
//!   like any other write, and a reader sees the key absent.
//! * **Absent reads, LT-OCC.** A reader of an absent key leaves a
//!   placeholder whose `rts` is the timestamp it validated at, so that a
//!   later insert of the key commits above it (§5.2's rule for every
//!   overwritten record). Without it an insert could take a timestamp below
//!   a reader that saw the key absent, and a cycle through that read and
//!   two ordinary conflicts would commit. PT-OCC needs nothing: a reader
//!   validates an absent key as still absent and unlocked (Silo's point
//!   reads), after its own write locks are held.
//! * **Collection.** Deleted records and placeholders are removed once the
//!   epoch of every timestamp they carry has committed (checked when an
//!   epoch commits, in every commit mode: in the 2PC modes the delete has
//!   committed at its write-back, and its epoch commits soon after), no
//!   lock is held on them, and no open epoch saved a version of them. In
//!   `epoch` mode that is "never before": an aborted epoch must be able to
//!   revert the record to its last committed-epoch version. Every write
//!   after the collection is in a later epoch, and the epoch is the top
//!   bits of every timestamp ([`super::tid`]), so a re-insert gets a
//!   timestamp above everything the removed record carried: a backup that
//!   still holds the deleted record applies it (Thomas write rule), and an
//!   LT-OCC reader's `rts` is respected. A backup collects at the same
//!   epoch commits; a replicated write of an epoch already committed is a
//!   duplicate (the epoch could not commit before every backup had
//!   acknowledged it) and is dropped, so that it cannot bring a collected
//!   record back.

use super::tid::epoch_of;
use super::undo::Undo;
use std::collections::BTreeSet;
use tessera_core::ids::Key;
use tessera_core::storage::{Record, Store};

/// Keys that may hold a deleted record or a placeholder.
#[derive(Default)]
pub struct Garbage {
    candidates: BTreeSet<Key>,
}

/// A record a reader must see as absent: a placeholder or a deleted record.
pub fn is_absent(r: &Record) -> bool {
    r.value.is_empty()
}

impl Garbage {
    /// `key` may be (or, after an epoch abort, may become) a deleted record
    /// or a placeholder.
    pub fn note(&mut self, key: Key) {
        self.candidates.insert(key);
    }

    /// Epoch `committed` (and every earlier one) committed: remove the
    /// deleted records and placeholders nothing can need any more, and
    /// return their keys. A candidate holding a live value that no open
    /// epoch can revert is forgotten.
    pub fn collect(&mut self, store: &mut Store, undo: &Undo, committed: u64) -> Vec<Key> {
        let mut removed = Vec::new();
        self.candidates.retain(|&k| {
            if undo.oldest(k).is_some() {
                return true; // an open epoch wrote it: an abort may revert it
            }
            let Some(r) = store.get(k) else {
                return false;
            };
            if !is_absent(r) {
                return false;
            }
            if r.meta.lock != 0
                || epoch_of(r.meta.wts) > committed
                || epoch_of(r.meta.rts) > committed
            {
                return true;
            }
            store.remove(k);
            removed.push(k);
            false
        });
        removed
    }

    /// Keys still waiting (tests).
    pub fn pending(&self) -> usize {
        self.candidates.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coco::tid::epoch_start;
    use tessera_core::ids::Version;
    use tessera_core::txn::Value;

    fn put(store: &mut Store, k: Key, v: &'static [u8], wts: u64) {
        store.install(k, Value::from_static(v), Version(wts));
        store.get_mut(k).unwrap().meta.wts = wts;
    }

    #[test]
    fn a_delete_is_collected_once_its_epoch_committed_and_not_before() {
        let (k, live) = (Key::new(0, 1), Key::new(0, 2));
        let mut store = Store::new();
        let mut undo = Undo::default();
        let mut g = Garbage::default();
        put(&mut store, k, b"row", epoch_start(2) + 4);
        put(&mut store, live, b"row", epoch_start(2) + 8);
        // Epoch 3 deletes `k`.
        undo.before_write(&store, k, 3);
        put(&mut store, k, b"", epoch_start(3) + 4);
        g.note(k);
        g.note(live);
        assert!(g.collect(&mut store, &undo, 2).is_empty());
        assert!(store.get(k).is_some(), "epoch 3 may still abort");
        undo.committed(3);
        assert_eq!(g.collect(&mut store, &undo, 3), vec![k]);
        assert!(store.get(k).is_none());
        assert!(store.get(live).is_some(), "live records stay");
        assert_eq!(g.pending(), 0);
    }

    #[test]
    fn locked_placeholders_and_recent_reads_wait() {
        let k = Key::new(0, 1);
        let mut store = Store::new();
        let undo = Undo::default();
        let mut g = Garbage::default();
        store.load(k, Value::new());
        store.get_mut(k).unwrap().meta.lock = 9;
        g.note(k);
        assert!(g.collect(&mut store, &undo, 5).is_empty());
        // Unlocked, but an LT-OCC reader saw it absent in epoch 6.
        let r = store.get_mut(k).unwrap();
        r.meta.lock = 0;
        r.meta.rts = epoch_start(6) + 4;
        assert!(g.collect(&mut store, &undo, 5).is_empty());
        assert_eq!(g.collect(&mut store, &undo, 6), vec![k]);
    }

    #[test]
    fn an_insert_an_open_epoch_may_revert_stays_a_candidate() {
        let k = Key::new(0, 1);
        let mut store = Store::new();
        let mut undo = Undo::default();
        let mut g = Garbage::default();
        undo.before_write(&store, k, 4);
        put(&mut store, k, b"row", epoch_start(4) + 4);
        g.note(k);
        assert!(g.collect(&mut store, &undo, 3).is_empty());
        assert_eq!(g.pending(), 1, "epoch 4 may abort and leave a placeholder");
        undo.revert(&mut store, 4, 5);
        assert_eq!(g.collect(&mut store, &undo, 5), vec![k]);
    }
}
