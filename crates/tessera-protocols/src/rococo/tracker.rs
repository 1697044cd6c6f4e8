//! One-hop dependency tracking (§3.4): per key, only the most recent
//! conflicting accesses are remembered, so handling a piece costs O(1) per
//! key it touches, and an edge is added only from the nearest conflicting
//! transaction(s) — the longer paths are implied by the edges already there.
//!
//! Per key: the last writer, and the readers since that write. A read
//! conflicts with the last writer; a write conflicts with the readers since
//! the last write, or with the last writer when there are none.

use super::msg::Edge;
use tessera_core::ids::{Key, TxnId};
use tessera_core::txn::{Access, PieceKind};
use tessera_core::FastMap;

#[derive(Default)]
struct Entry {
    last_write: Option<(TxnId, PieceKind)>,
    /// Readers since the last write, with their kind and whether the read
    /// was held ([`Tracker::access_held`]).
    reads: Vec<(TxnId, PieceKind, bool)>,
}

/// The most recent accesses of each key at one server.
#[derive(Default)]
pub(crate) struct Tracker {
    keys: FastMap<Key, Entry>,
}

/// The edge type between two conflicting pieces (§3.2). The offline checker
/// rules out immediate–deferrable conflicts; should one happen anyway (a
/// workload that fails `tessera check-workload`), the edge is typed `I`, the
/// stronger constraint, and a warning is logged — but not for the held
/// pieces of a read-only transaction's ordered form (`Tracker::access_held`),
/// which met no unfinished writer, nor for a later deferrable piece meeting
/// their reads: it runs after them and is ordered after them.
fn edge(earlier: (PieceKind, bool), later: PieceKind, held: bool) -> Edge {
    match (earlier.0, later) {
        (PieceKind::Deferrable, PieceKind::Deferrable) => Edge::D,
        (PieceKind::Immediate, PieceKind::Immediate) => Edge::I,
        _ => {
            if !held && !earlier.1 {
                tracing::warn!(
                    "immediate/deferrable conflict: the workload needs the offline checker"
                );
            }
            Edge::I
        }
    }
}

impl Tracker {
    /// Record that a piece of `txn` of kind `kind` reads `reads` and writes
    /// `writes`; push the one-hop edges into `txn` onto `parents`.
    pub fn access(
        &mut self,
        txn: TxnId,
        kind: PieceKind,
        reads: &[Access],
        writes: &[Access],
        parents: &mut Vec<(TxnId, Edge)>,
    ) {
        self.record(txn, kind, reads, writes, false, parents);
    }

    /// [`Tracker::access`] for the immediate reads of a held ordered form
    /// (Rococo's server): no writer of `reads` is unfinished here, so its
    /// edges from deferrable writers are typed `I` without a warning.
    pub fn access_held(&mut self, txn: TxnId, reads: &[Access], parents: &mut Vec<(TxnId, Edge)>) {
        self.record(txn, PieceKind::Immediate, reads, &[], true, parents);
    }

    fn record(
        &mut self,
        txn: TxnId,
        kind: PieceKind,
        reads: &[Access],
        writes: &[Access],
        held: bool,
        parents: &mut Vec<(TxnId, Edge)>,
    ) {
        for a in writes {
            let e = self.keys.entry(a.key).or_default();
            let others = e.reads.iter().filter(|(t, _, _)| *t != txn);
            let mut any = false;
            for &(t, k, h) in others {
                parents.push((t, edge((k, h), kind, held)));
                any = true;
            }
            if !any {
                if let Some((t, k)) = e.last_write.filter(|(t, _)| *t != txn) {
                    parents.push((t, edge((k, false), kind, held)));
                }
            }
            e.last_write = Some((txn, kind));
            e.reads.clear();
        }
        for a in reads {
            if writes.iter().any(|w| w.key == a.key) {
                continue;
            }
            let e = self.keys.entry(a.key).or_default();
            if let Some((t, k)) = e.last_write.filter(|(t, _)| *t != txn) {
                parents.push((t, edge((k, false), kind, held)));
            }
            if !e.reads.iter().any(|(t, _, _)| *t == txn) {
                e.reads.push((txn, kind, held));
            }
        }
    }

    /// The last transaction that wrote `key` here, if remembered.
    pub fn last_writer(&self, key: Key) -> Option<TxnId> {
        self.keys.get(&key)?.last_write.map(|(t, _)| t)
    }

    /// Forget `txn`'s accesses to `keys` (garbage collection, §3.4).
    pub fn forget(&mut self, txn: TxnId, keys: &[Key]) {
        for k in keys {
            let Some(e) = self.keys.get_mut(k) else {
                continue;
            };
            if e.last_write.is_some_and(|(t, _)| t == txn) {
                e.last_write = None;
            }
            e.reads.retain(|(t, _, _)| *t != txn);
            if e.last_write.is_none() && e.reads.is_empty() {
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
    use tessera_core::ids::NodeId;

    fn t(i: u32) -> TxnId {
        TxnId::new(NodeId(9), 0, i)
    }

    #[test]
    fn edges_come_from_the_nearest_conflicts_only() {
        let x = [Access::all(Key::new(0, 1))];
        let d = PieceKind::Deferrable;
        let mut tr = Tracker::default();
        let mut p = Vec::new();
        tr.access(t(1), d, &x, &x, &mut p);
        assert!(p.is_empty());
        tr.access(t(2), d, &x, &[], &mut p);
        tr.access(t(3), d, &x, &[], &mut p);
        assert_eq!(p, [(t(1), Edge::D), (t(1), Edge::D)]);
        p.clear();
        // A write after two reads depends on the readers, not on T1: the
        // path T1 -> T2 -> T4 already orders T1 before T4.
        tr.access(t(4), d, &x, &x, &mut p);
        assert_eq!(p, [(t(2), Edge::D), (t(3), Edge::D)]);
        p.clear();
        tr.access(t(5), PieceKind::Immediate, &[], &x, &mut p);
        assert_eq!(
            p,
            [(t(4), Edge::I)],
            "mixed kinds are typed as the stronger i-edge"
        );
        assert_eq!(tr.last_writer(x[0].key), Some(t(5)));
        tr.forget(t(5), &[x[0].key]);
        assert_eq!(tr.last_writer(x[0].key), None);
        assert_eq!(tr.len(), 0);
    }

    #[test]
    fn no_edge_to_oneself() {
        let x = [Access::all(Key::new(0, 1))];
        let mut tr = Tracker::default();
        let mut p = Vec::new();
        tr.access(t(1), PieceKind::Immediate, &x, &[], &mut p);
        tr.access(t(1), PieceKind::Immediate, &x, &x, &mut p);
        assert!(p.is_empty());
    }
}
