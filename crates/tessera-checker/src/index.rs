//! Which attempts count as committed, and the dense numbering the graph uses.
//!
//! The dependency graph is over committed transactions only. Committed means
//! the client saw a commit, or the outcome is unknown but some committed
//! transaction read one of the attempt's versions (so it must have
//! committed: we trust no server, but a committed reader saw the write). An
//! unknown attempt nobody observed is dropped: treating it as aborted can
//! hide nothing, since no committed transaction depends on it.
//!
//! Committed transactions become graph nodes `0..n`, numbered in order of
//! start time; the real-time edges rely on that order.

use crate::report::Violation;
use std::borrow::Cow;
use std::collections::hash_map::Entry;
use tessera_core::history::{History, HistoryTxn, Outcome};
use tessera_core::{fast_map, FastMap, Key, Version};

/// "No node": a sentinel for `u32` node and slot fields.
pub(crate) const NONE: u32 = u32::MAX;

/// Graph nodes carry an edge kind in their top bits (see `graph`), and
/// auxiliary nodes double the count, so this bounds the history size.
pub(crate) const MAX_TXNS: usize = 1 << 28;

/// Who wrote the version a read observed.
pub(crate) enum Writer<'h> {
    /// A committed transaction, and the position of the key in its writes.
    Node { node: u32, pos: u32 },
    /// An attempt that aborted (or was dropped as in-doubt).
    Aborted(&'h HistoryTxn),
    /// Nobody wrote this version of this key.
    Missing,
}

/// `history` with every in-doubt attempt's write list completed by what
/// committed transactions saw it write.
///
/// An in-doubt attempt (its client crashed) is recorded with the writes its
/// client knew of in advance: a piece whose keys depend on earlier pieces'
/// outputs (TPC-C's order rows, keyed by the order id a district piece
/// hands out) is only known by a placeholder. A committed transaction that
/// read version `v` of key `k`, where `v` is an in-doubt attempt's id, is
/// proof that the attempt committed and wrote `k` (versions are unique
/// attempt ids), so `k` joins its writes. Borrowed when nothing is missing.
pub fn with_observed_writes(history: &History) -> Cow<'_, History> {
    let all = &history.txns;
    let unknown: FastMap<u64, usize> = all
        .iter()
        .enumerate()
        .filter(|(_, t)| t.outcome == Outcome::Unknown)
        .map(|(i, t)| (t.id.0, i))
        .collect();
    if unknown.is_empty() {
        return Cow::Borrowed(history);
    }
    let mut missing: Vec<(usize, Key)> = Vec::new();
    for t in all.iter().filter(|t| t.outcome == Outcome::Committed) {
        for r in &t.reads {
            if let Some(&i) = unknown.get(&r.version.0) {
                if !all[i].writes.contains(&r.key) {
                    missing.push((i, r.key));
                }
            }
        }
    }
    if missing.is_empty() {
        return Cow::Borrowed(history);
    }
    missing.sort_unstable();
    missing.dedup();
    let mut h = history.clone();
    for (i, k) in missing {
        h.txns[i].writes.push(k);
    }
    Cow::Owned(h)
}

pub(crate) struct TxnIndex<'h> {
    history: &'h History,
    /// Committed transactions; node `i` is `txns[i]`. Sorted by (start, id).
    pub txns: Vec<&'h HistoryTxn>,
    /// History position -> node, or `NONE`.
    node_of: Vec<u32>,
    /// Attempt id -> history position of its first occurrence.
    by_id: FastMap<u64, u32>,
    pub dropped_unknown: usize,
}

impl<'h> TxnIndex<'h> {
    /// # Panics
    /// If the history holds more than 2^28 attempts.
    pub fn build(history: &'h History, violations: &mut Vec<Violation>) -> Self {
        let all = &history.txns;
        assert!(
            all.len() < MAX_TXNS,
            "the checker handles fewer than {MAX_TXNS} attempts"
        );
        let mut by_id = fast_map();
        by_id.reserve(all.len());
        let mut duplicate = vec![false; all.len()];
        for (i, t) in all.iter().enumerate() {
            match by_id.entry(t.id.0) {
                Entry::Vacant(e) => {
                    e.insert(i as u32);
                }
                Entry::Occupied(_) => {
                    duplicate[i] = true;
                    violations.push(Violation::DuplicateTxn { txn: t.id });
                }
            }
        }

        let mut promoted = vec![false; all.len()];
        for (i, t) in all.iter().enumerate() {
            if duplicate[i] || t.outcome != Outcome::Committed {
                continue;
            }
            for r in &t.reads {
                if r.version == Version::INITIAL {
                    continue;
                }
                if let Some(&j) = by_id.get(&r.version.0) {
                    let w = &all[j as usize];
                    if w.outcome == Outcome::Unknown && w.writes.contains(&r.key) {
                        promoted[j as usize] = true;
                    }
                }
            }
        }

        let mut order: Vec<u32> = (0..all.len())
            .filter(|&i| !duplicate[i] && (all[i].outcome == Outcome::Committed || promoted[i]))
            .map(|i| i as u32)
            .collect();
        order.sort_unstable_by_key(|&i| (all[i as usize].start, all[i as usize].id));
        let mut node_of = vec![NONE; all.len()];
        for (node, &i) in order.iter().enumerate() {
            node_of[i as usize] = node as u32;
        }
        let dropped_unknown = (0..all.len())
            .filter(|&i| !duplicate[i] && all[i].outcome == Outcome::Unknown && !promoted[i])
            .count();
        TxnIndex {
            history,
            txns: order.iter().map(|&i| &all[i as usize]).collect(),
            node_of,
            by_id,
            dropped_unknown,
        }
    }

    /// Number of committed transactions (graph nodes).
    pub fn len(&self) -> usize {
        self.txns.len()
    }

    /// Who wrote `version` of `key`. Versions are attempt ids, so this is a
    /// hash lookup plus a scan of the writer's (short) write list.
    pub fn writer_of(&self, key: Key, version: Version) -> Writer<'h> {
        let Some(&i) = self.by_id.get(&version.0) else {
            return Writer::Missing;
        };
        let w = &self.history.txns[i as usize];
        let Some(pos) = w.writes.iter().position(|&k| k == key) else {
            return Writer::Missing;
        };
        match self.node_of[i as usize] {
            NONE => Writer::Aborted(w),
            node => Writer::Node {
                node,
                pos: pos as u32,
            },
        }
    }
}
