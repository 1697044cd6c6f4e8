//! Two versions per tuple (COCO §3.2): what a record held before the
//! first write of each epoch not yet committed, so that an aborted epoch
//! reverts every tuple to its last committed version.
//!
//! Writes of one record carry non-decreasing epochs in timestamp order
//! (a transaction's epoch is its timestamp's, and timestamps grow along
//! every read and overwrite), so one saved version per (record, open
//! epoch) is enough: reverting from epoch `e` restores the version saved
//! by the oldest write of an epoch `>= e`. A backup may skip a write
//! because a newer one arrived first (Thomas write rule); the skipped write
//! still belongs in the versions saved by later epochs, since reverting
//! those must bring it back; and if its own epoch has no saved version yet,
//! it gets the state the later epoch saved, so that reverting the skipped
//! write's epoch together with the later one does not bring it back.

use tessera_core::ids::{Key, Version};
use tessera_core::storage::Store;
use tessera_core::txn::Value;
use tessera_core::FastMap;

/// A record's state as a revert restores it.
#[derive(Clone, Debug, PartialEq)]
pub struct Saved {
    pub value: Value,
    pub version: Version,
    pub wts: u64,
    pub rts: u64,
}

impl Saved {
    /// What `store` holds at `key` (a missing record saves as the empty,
    /// never-written placeholder).
    pub fn of(store: &Store, key: Key) -> Self {
        match store.get(key) {
            Some(r) => Saved {
                value: r.value.clone(),
                version: r.meta.version,
                wts: r.meta.wts,
                rts: r.meta.rts,
            },
            None => Saved {
                value: Value::new(),
                version: Version::INITIAL,
                wts: 0,
                rts: 0,
            },
        }
    }
}

#[derive(Default)]
pub struct Undo {
    /// Per record, (epoch, state before that epoch's first write), by epoch.
    saved: FastMap<Key, Vec<(u64, Saved)>>,
}

impl Undo {
    /// `key` is about to be overwritten by a write of `epoch`.
    pub fn before_write(&mut self, store: &Store, key: Key, epoch: u64) {
        let list = self.saved.entry(key).or_default();
        if list.last().is_none_or(|(e, _)| *e < epoch) {
            list.push((epoch, Saved::of(store, key)));
        }
    }

    /// A write of `epoch` with timestamp `ts` was skipped as older than the
    /// record's: fold it into the versions saved by later epochs.
    pub fn skipped_write(
        &mut self,
        key: Key,
        epoch: u64,
        ts: u64,
        value: &Value,
        version: Version,
    ) {
        if let Some(list) = self.saved.get_mut(&key) {
            // Entries from `at` on are of later epochs; the first one saved
            // the state before any write of `epoch` was applied here.
            let at = list.partition_point(|(e, _)| *e <= epoch);
            let own = at > 0 && list[at - 1].0 == epoch;
            if !own && list.get(at).is_some_and(|(_, s)| s.wts < ts) {
                let before = list[at].1.clone();
                list.insert(at, (epoch, before));
            }
            for (_, s) in list.iter_mut().filter(|(e, s)| *e > epoch && s.wts < ts) {
                s.value = value.clone();
                s.version = version;
                s.wts = ts;
                s.rts = s.rts.max(ts);
            }
        }
    }

    /// The version `key` had before the oldest open epoch wrote it: its
    /// last committed one, once every earlier epoch is decided.
    pub fn oldest(&self, key: Key) -> Option<&Saved> {
        self.saved.get(&key).and_then(|l| l.first()).map(|(_, s)| s)
    }

    /// Every epoch up to `epoch` committed: their saved versions are
    /// no longer needed.
    pub fn committed(&mut self, epoch: u64) {
        self.saved.retain(|_, list| {
            list.retain(|(e, _)| *e > epoch);
            !list.is_empty()
        });
    }

    /// Epochs `[from, to)` aborted: restore every record they wrote. A
    /// record a later epoch wrote since (a backup can apply such a write
    /// before it hears of the abort) keeps that write, and the version
    /// saved for the later epoch becomes the last committed one. The lock
    /// word is left alone (the caller releases the locks); the rts stays as
    /// high as it got, which only pushes later writers up.
    pub fn revert(&mut self, store: &mut Store, from: u64, to: u64) -> usize {
        let mut n = 0;
        self.saved.retain(|&key, list| {
            let i = list.partition_point(|(e, _)| *e < from);
            let j = list.partition_point(|(e, _)| *e < to);
            if i == j {
                return true;
            }
            n += 1;
            let committed = list[i].1.clone();
            if j < list.len() {
                list[j].1 = committed;
            } else {
                if store.get(key).is_none() {
                    store.load(key, Value::new());
                }
                let r = store.get_mut(key).expect("just ensured");
                r.value = committed.value;
                r.meta.version = committed.version;
                r.meta.wts = committed.wts;
                r.meta.rts = r.meta.rts.max(committed.rts);
            }
            list.drain(i..j);
            !list.is_empty()
        });
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(store: &mut Store, undo: &mut Undo, k: Key, epoch: u64, ts: u64, v: &'static [u8]) {
        undo.before_write(store, k, epoch);
        store.install(k, Value::from_static(v), Version(ts));
        store.get_mut(k).unwrap().meta.wts = ts;
    }

    #[test]
    fn revert_restores_the_last_committed_version() {
        let k = Key::new(0, 1);
        let mut store = Store::new();
        store.load(k, Value::from_static(b"v0"));
        let mut undo = Undo::default();
        write(&mut store, &mut undo, k, 3, 30, b"v3");
        write(&mut store, &mut undo, k, 4, 40, b"v4");
        write(&mut store, &mut undo, k, 4, 41, b"v4b");
        write(&mut store, &mut undo, k, 5, 50, b"v5");
        undo.committed(3);
        assert_eq!(undo.revert(&mut store, 4, 6), 1);
        let r = store.get(k).unwrap();
        assert_eq!((&r.value[..], r.meta.wts), (&b"v3"[..], 30));
        // Nothing of epoch 4 or 5 is left to revert.
        assert_eq!(undo.revert(&mut store, 4, 6), 0);
    }

    #[test]
    fn a_later_epoch_written_before_the_abort_arrived_keeps_its_write() {
        let k = Key::new(0, 1);
        let mut store = Store::new();
        store.load(k, Value::from_static(b"v0"));
        let mut undo = Undo::default();
        write(&mut store, &mut undo, k, 4, 40, b"v4");
        // Epochs 4 and 5 abort; the backup applies epoch 6 first.
        write(&mut store, &mut undo, k, 6, 60, b"v6");
        undo.revert(&mut store, 4, 6);
        assert_eq!(&store.get(k).unwrap().value[..], b"v6");
        // Should epoch 6 abort too, the record goes back to v0, not v4.
        undo.revert(&mut store, 6, 8);
        assert_eq!(&store.get(k).unwrap().value[..], b"v0");
    }

    #[test]
    fn a_skipped_older_write_survives_the_revert_of_a_newer_epoch() {
        let k = Key::new(0, 1);
        let mut store = Store::new();
        let mut undo = Undo::default();
        // Epoch 5's write arrives first; epoch 4's, older, is skipped.
        write(&mut store, &mut undo, k, 5, 50, b"v5");
        undo.skipped_write(k, 4, 40, &Value::from_static(b"v4"), Version(40));
        undo.committed(4);
        undo.revert(&mut store, 5, 7);
        let r = store.get(k).unwrap();
        assert_eq!((&r.value[..], r.meta.wts), (&b"v4"[..], 40));
    }

    /// Found by the cut-off-server seeds once clients stopped waiting for
    /// results: the skipped write's own epoch aborts with the newer one, so
    /// neither write may survive at this backup (its primary reverted both).
    #[test]
    fn a_skipped_write_of_an_aborted_epoch_does_not_survive_the_revert() {
        let k = Key::new(0, 1);
        let mut store = Store::new();
        store.load(k, Value::from_static(b"v0"));
        let mut undo = Undo::default();
        write(&mut store, &mut undo, k, 6, 60, b"v6");
        undo.skipped_write(k, 5, 50, &Value::from_static(b"v5"), Version(50));
        undo.revert(&mut store, 5, 7);
        assert_eq!(&store.get(k).unwrap().value[..], b"v0");
    }

    #[test]
    fn a_skipped_write_of_a_committed_epoch_survives_when_its_epoch_stays() {
        let k = Key::new(0, 1);
        let mut store = Store::new();
        store.load(k, Value::from_static(b"v0"));
        let mut undo = Undo::default();
        write(&mut store, &mut undo, k, 6, 60, b"v6");
        undo.skipped_write(k, 5, 50, &Value::from_static(b"v5"), Version(50));
        // Only epoch 6 aborts: epoch 5's skipped write is the last one.
        undo.revert(&mut store, 6, 8);
        assert_eq!(&store.get(k).unwrap().value[..], b"v5");
    }
}
