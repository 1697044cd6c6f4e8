//! S2PL, COCO's locking baseline (§7.1.2), as a third concurrency control
//! in COCO's framework: the same coordinator, servers, commit modes,
//! replication, epoch commit, redo log and recovery as PT-OCC and LT-OCC;
//! only the execution and the lock word differ.
//!
//! * **Execution at the primaries.** A piece runs at its shard's primary,
//!   never at a backup: 2PL "must always read from the primary replica,
//!   since there is no way for [it] to tell if records are locked by only
//!   communicating with backup replicas" (§3). Before a piece reads, the
//!   primary takes a shared lock on each record it reads; after it runs, an
//!   exclusive lock on each record it writes (upgrading its own shared
//!   lock). NO_WAIT (§4.2.1): any conflict aborts the transaction — the
//!   primary drops every lock it holds for it and refuses the **Read**, so
//!   no transaction ever waits and there are no deadlocks. The writes come
//!   back to the coordinator, as COCO's do, and stay buffered at the
//!   primary, exclusively locked, until write-back.
//! * **No lock or validation round.** Every lock is held once the last
//!   piece has run, so the coordinator decides at once: the commit
//!   timestamp is PT-OCC's TID (Silo's rules: above every record read or
//!   written, above the worker's last, in the current epoch), which the
//!   locks make agree with the serial order, so backups can apply writes
//!   by the Thomas write rule and epochs grow along dependencies, exactly
//!   as for PT-OCC (COCO's own S2PL code assigns the same TIDs).
//! * **Write-back** installs the writes at the primaries, releases the
//!   locks there (strict 2PL: nothing is released before the decision) and
//!   replicates per commit mode; primaries the transaction only read get a
//!   **Release** (no answer needed: a read lock lost after the last read
//!   only lets later writers in, which the locks order after it anyway).
//! * **Lost locks.** An epoch abort (§3.2) or a server crash drops the
//!   locks a primary held. Each **ReadOk** carries the primary's epoch and
//!   abort floor, as **Prepared** does for the OCC variants: a transaction
//!   whose primaries answered with different floors read some records
//!   before an abort and some after, and aborts; one whose write locks
//!   went with an abort is told so at write-back.
//!
//! With `--commit epoch` the paper does not run S2PL ("it's not
//! straightforward to asynchronously apply writes on replicas without
//! write locks being held", §7.1.2). Here the TIDs make it
//! straightforward: backups order writes by TID whether or not the
//! primary still holds the lock, so S2PL commits by epochs like the OCC
//! variants — locks released at the primary's write-back, replication
//! asynchronous, results released when the epoch commits. That line has
//! no counterpart in the paper's figures.
//!
//! The lock word is the record's [`Meta::lock`]: 0 when free, the holder's
//! transaction id when locked exclusively (as the OCC variants' write
//! locks), or [`SHARED`] plus the number of holders when locked shared.
//! Which transaction holds which shared lock is the primary's to remember.

use tessera_core::ids::TxnId;
use tessera_core::storage::Meta;

/// The bit of a shared lock word; the bits below count the holders.
/// Transaction ids never have it set (their node id sits in bits 40–62).
pub const SHARED: u64 = 1 << 63;

/// Take a shared lock for `txn`, which does not hold one on this record
/// yet. An exclusive lock of its own covers the read.
pub fn lock_shared(meta: &mut Meta, txn: TxnId) -> bool {
    debug_assert_eq!(txn.0 & SHARED, 0);
    match meta.lock {
        0 => meta.lock = SHARED | 1,
        l if l == txn.0 => {}
        l if l & SHARED != 0 => meta.lock += 1,
        _ => return false,
    }
    true
}

/// Take an exclusive lock for `txn`; `holds_shared`: it holds a shared
/// lock on the record, which it upgrades if it is the only holder (the
/// caller then forgets that shared lock).
pub fn lock_exclusive(meta: &mut Meta, txn: TxnId, holds_shared: bool) -> bool {
    match meta.lock {
        0 => meta.lock = txn.0,
        l if l == txn.0 => {}
        l if l == SHARED | 1 && holds_shared => meta.lock = txn.0,
        _ => return false,
    }
    true
}

/// Drop one shared lock.
pub fn unlock_shared(meta: &mut Meta) {
    debug_assert!(meta.lock & SHARED != 0 && meta.lock != SHARED);
    if meta.lock & SHARED != 0 {
        meta.lock -= 1;
        if meta.lock == SHARED {
            meta.lock = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::ids::NodeId;

    fn t(seq: u32) -> TxnId {
        TxnId::new(NodeId(3), 0, seq)
    }

    #[test]
    fn readers_share_and_writers_exclude() {
        let mut m = Meta::default();
        assert!(lock_shared(&mut m, t(1)));
        assert!(lock_shared(&mut m, t(2)));
        assert_eq!(m.lock, SHARED | 2);
        // NO_WAIT: a writer meets readers and fails, leaving them be.
        assert!(!lock_exclusive(&mut m, t(3), false));
        assert!(!lock_exclusive(&mut m, t(1), true), "two readers");
        unlock_shared(&mut m);
        assert!(
            lock_exclusive(&mut m, t(2), true),
            "the last reader upgrades"
        );
        assert_eq!(m.lock, t(2).0);
        assert!(
            lock_shared(&mut m, t(2)),
            "its own write lock covers a read"
        );
        assert!(!lock_shared(&mut m, t(1)));
        assert!(!lock_exclusive(&mut m, t(1), false));
        assert!(lock_exclusive(&mut m, t(2), false), "re-entrant");
    }

    #[test]
    fn the_last_shared_unlock_frees_the_record() {
        let mut m = Meta::default();
        assert!(lock_shared(&mut m, t(1)));
        assert!(lock_shared(&mut m, t(2)));
        unlock_shared(&mut m);
        unlock_shared(&mut m);
        assert_eq!(m.lock, 0);
        assert!(lock_exclusive(&mut m, t(3), false));
    }
}
