//! Conflict tracking at one replica for PreAccept (Algorithm 2, l. 28:
//! "an edge T′ → T is inserted if an existing vertex T′ … and T both intend
//! to make conflicting access to a common data item").
//!
//! Rococo's one-hop tracking (an edge from the nearest conflict only) is not
//! enough here: a commit *replaces* a transaction's dependencies with those
//! of a quorum (Algorithm 4, l. 39), so the path T1 → T2 → T3 this replica
//! saw may lose its middle edge when T2's quorum did not include it, leaving
//! T1 and T3 unordered and the replicas free to diverge. So per key we keep
//! every transaction pre-accepted here and not yet executed here, and, of
//! those executed here, the last writer and the readers since: an executed
//! transaction's conflicts with earlier executed ones are already ordered in
//! the committed graph (the replica executed them in its order), so the
//! nearest executed ones imply the rest.
//!
//! The answers are therefore as long as the backlog on the transaction's
//! keys, and are sent and stored whole: a replica cannot drop one it knows
//! is ordered here (executed before another it lists), since replicas at
//! different execution points would then answer differently and lose the
//! fast path (Algorithm 1 compares the answers), and the quorum's union
//! (Algorithm 4, l. 39) could lack the edge another replica needs. They
//! stay bounded by the pending transactions per key: over three sites at
//! zipf 0.9 with 10,800 clients, at most 566 per key and per PreAccept-OK
//! (`stats`; the memory that run outgrew was the log's component listings,
//! see [`super::wal`]).

use tessera_core::ids::{Key, TxnId};
use tessera_core::FastMap;

#[derive(Default)]
struct Entry {
    /// Pre-accepted here, not executed here: (txn, writes the key).
    pending: Vec<(TxnId, bool)>,
    last_write: Option<TxnId>,
    reads_since: Vec<TxnId>,
}

#[derive(Default)]
pub(crate) struct Tracker {
    keys: FastMap<Key, Entry>,
}

impl Tracker {
    /// Record `txn`'s accesses at PreAccept; push the transactions it
    /// conflicts with onto `deps` (may repeat; the caller dedups).
    pub fn pre_accept(&mut self, txn: TxnId, reads: &[Key], writes: &[Key], deps: &mut Vec<TxnId>) {
        for (&k, write) in writes.iter().map(|k| (k, true)).chain(
            reads
                .iter()
                .filter(|k| !writes.contains(k))
                .map(|k| (k, false)),
        ) {
            let e = self.keys.entry(k).or_default();
            for &(t, w) in &e.pending {
                if t != txn && (w || write) {
                    deps.push(t);
                }
            }
            deps.extend(e.last_write.filter(|t| *t != txn));
            if write {
                deps.extend(e.reads_since.iter().filter(|t| **t != txn));
            }
            if !e.pending.iter().any(|(t, _)| *t == txn) {
                e.pending.push((txn, write));
            }
        }
    }

    /// `txn` executed here (or was abandoned: `executed` false), touching
    /// `reads` and `writes`.
    pub fn finished(&mut self, txn: TxnId, reads: &[Key], writes: &[Key], executed: bool) {
        for k in writes.iter().chain(reads) {
            let e = self.keys.entry(*k).or_default();
            e.pending.retain(|(t, _)| *t != txn);
            if !executed {
                continue;
            }
            if writes.contains(k) {
                e.last_write = Some(txn);
                e.reads_since.clear();
            } else if !e.reads_since.contains(&txn) {
                e.reads_since.push(txn);
            }
        }
    }
    /// Keys with pending transactions, pending entries in all, and the
    /// most on one key ([`super::stats`]).
    pub fn pending(&self) -> (usize, usize, usize) {
        let lens = self
            .keys
            .values()
            .map(|e| e.pending.len())
            .filter(|&n| n > 0);
        lens.fold((0, 0, 0), |(k, s, m), n| (k + 1, s + n, m.max(n)))
    }

    /// `txn` is forgotten (graph garbage collection): it executed at every
    /// replica of every shard it involves, so a transaction pre-accepted
    /// from now on executes after it everywhere anyway and needs no edge
    /// from it (it cannot join its component, which is decided and run).
    /// Without this the last writer of a cold key would be named as a
    /// dependency long after its tombstone expired.
    pub fn forget(&mut self, txn: TxnId, reads: &[Key], writes: &[Key]) {
        for k in writes.iter().chain(reads) {
            if let Some(e) = self.keys.get_mut(k) {
                if e.last_write == Some(txn) {
                    e.last_write = None;
                }
                e.reads_since.retain(|t| *t != txn);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::ids::NodeId;

    fn t(i: u32) -> TxnId {
        TxnId::new(NodeId(9), 0, i)
    }

    #[test]
    fn every_unexecuted_conflict_and_the_last_executed_writer() {
        let x = [Key::new(0, 1)];
        let mut tr = Tracker::default();
        let mut d = Vec::new();
        tr.pre_accept(t(1), &x, &x, &mut d);
        tr.pre_accept(t(2), &x, &x, &mut d);
        assert_eq!(d, [t(1)]);
        d.clear();
        tr.pre_accept(t(3), &x, &[], &mut d);
        assert_eq!(d, [t(1), t(2)], "not just the nearest (one hop)");
        tr.finished(t(1), &x, &x, true);
        tr.finished(t(2), &x, &x, true);
        d.clear();
        tr.pre_accept(t(4), &x, &[], &mut d);
        assert_eq!(d, [t(2)], "the last executed writer stands for the rest");
        d.clear();
        tr.pre_accept(t(5), &[], &x, &mut d);
        assert_eq!(d, [t(3), t(4), t(2)]);
    }
}
