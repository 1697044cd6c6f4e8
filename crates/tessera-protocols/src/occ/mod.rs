//! OCC + 2PC (Rococo §5.1 "OCC"; COCO §4 lock / validate / write-back).
//!
//! * **execute** — pieces run on the latest committed data; reads return
//!   their versions; writes are buffered at the participant.
//! * **lock** — lock the write set, NO_WAIT: a record locked by another
//!   transaction fails the vote. With several participants this is a round
//!   of its own that ends before any participant validates.
//! * **validate** (2PC prepare) — every record read still has the version read
//!   and is not locked by another transaction. With one participant, lock
//!   and validate happen in one step.
//! * **write back** (2PC commit) — install the buffered writes with the
//!   transaction's version, unlock.
//!
//! The lock is the record's lock word (the owner's transaction id; 0 = free).
//! `validate: false` switches validation off: an intentionally broken
//! variant that exists so tests can show the isolation checker catches it.

use crate::twopc::{Admit, ConcurrencyControl, Priority};
use tessera_core::ids::{Key, TxnId, Version};
use tessera_core::storage::Store;
use tessera_core::txn::{Access, Value};

#[derive(Clone, Debug)]
pub struct OccConfig {
    /// Validate reads at prepare. Only tests turn this off.
    pub validate: bool,
}

impl Default for OccConfig {
    fn default() -> Self {
        OccConfig { validate: true }
    }
}

/// OCC's concurrency control at one shard.
pub struct Occ {
    validate: bool,
    locked: Vec<Key>,
}

impl Occ {
    /// Lock `writes` for `txn`, NO_WAIT; on a conflict undo and fail.
    fn lock_writes(&mut self, store: &mut Store, txn: TxnId, writes: &[Key]) -> bool {
        self.locked.clear();
        for &k in writes {
            if store.get(k).is_none() {
                // Lock a placeholder; it reads as missing until installed.
                store.load(k, Value::new());
            }
            let r = store.get_mut(k).expect("just ensured");
            if r.meta.lock != 0 && r.meta.lock != txn.0 {
                Self::unlock(store, txn, &self.locked);
                return false;
            }
            if r.meta.lock == 0 {
                r.meta.lock = txn.0;
                self.locked.push(k);
            }
        }
        true
    }

    fn unlock(store: &mut Store, txn: TxnId, keys: &[Key]) {
        for k in keys {
            if let Some(r) = store.get_mut(*k) {
                if r.meta.lock == txn.0 {
                    r.meta.lock = 0;
                }
            }
        }
    }
}

impl ConcurrencyControl for Occ {
    type Config = OccConfig;

    fn new(config: &OccConfig) -> Self {
        Occ {
            validate: config.validate,
            locked: Vec::new(),
        }
    }

    fn admit(
        &mut self,
        _store: &mut Store,
        _who: Priority,
        _reads: &[Access],
        _writes: &[Access],
        _wounded: &mut Vec<TxnId>,
    ) -> Admit {
        Admit::Go
    }

    const LOCK_ROUND: bool = true;

    fn lock(&mut self, store: &mut Store, txn: TxnId, writes: &[Key]) -> bool {
        self.lock_writes(store, txn, writes)
    }

    fn prepare(
        &mut self,
        store: &mut Store,
        txn: TxnId,
        reads: &[(Key, Version)],
        writes: &[Key],
    ) -> bool {
        // Already held after a lock round; taken here with one participant.
        if !self.lock_writes(store, txn, writes) {
            return false;
        }
        if self.validate {
            for &(k, seen) in reads {
                let (version, lock) = store
                    .get(k)
                    .map_or((Version::INITIAL, 0), |r| (r.meta.version, r.meta.lock));
                if version != seen || (lock != 0 && lock != txn.0) {
                    Self::unlock(store, txn, writes);
                    return false;
                }
            }
        }
        true
    }

    fn relock(&mut self, store: &mut Store, txn: TxnId, writes: &[Key]) {
        let ok = self.lock_writes(store, txn, writes);
        debug_assert!(ok, "prepared write sets overlap");
    }

    fn release(
        &mut self,
        store: &mut Store,
        txn: TxnId,
        writes: &[Key],
        _granted: &mut Vec<TxnId>,
    ) {
        Self::unlock(store, txn, writes);
    }
}

/// OCC + 2PC.
pub type OccProtocol = crate::twopc::TwoPc<Occ>;
