//! Checking per column: the object a read or write is about becomes one
//! column of a row, for the accesses that declare columns.
//!
//! A protocol that orders conflicts per column (Janus as its authors built
//! it: TPC-C's NewOrder, which writes `D_NEXT_O_ID`, and Payment, which
//! writes `D_YTD`, do not conflict) may execute two writers of disjoint
//! columns of one row in either order, and different replicas in different
//! orders. Per row, that is two writers of one version: a lost update the
//! protocol never committed to avoid. Per column it is two chains, one per
//! column, each of which must still be a serial order: a real lost update
//! of one column, or a cycle through column versions, is still found.
//!
//! The history says which columns each access covers
//! ([`ReadObs::columns`], [`HistoryTxn::write_columns`]): a write of
//! columns `C` installs a new version of `(row, c)` for each `c` in `C`; a
//! read of `C` saw, per column, the last writer of that column (the store
//! reports one [`ReadObs`] per distinct last writer). An access of every
//! column ([`Columns::ALL`]) touches every column of the row: the columns
//! some access of the history names one by one, plus one object for all
//! the others (which only whole-row accesses touch, so they cannot be told
//! apart). A history without column declarations therefore checks exactly
//! as it does per row: one object per row.
//!
//! The expanded history is checked by the unchanged per-row machinery on
//! dense object keys; the report is then written back in rows and columns.

use crate::report::{CycleEdge, Report, Violation};
use tessera_core::history::{History, HistoryTxn};
use tessera_core::txn::{Columns, ReadObs};
use tessera_core::{fast_map, FastMap, Key};

/// The objects of a history checked per column: `(row, Some(column))`, or
/// `(row, None)` for the columns no access names one by one.
pub(crate) struct Objects {
    /// Per row, the columns some access names one by one.
    named: FastMap<Key, u64>,
    ids: FastMap<(Key, Option<u32>), u64>,
    names: Vec<(Key, Option<u32>)>,
}

impl Objects {
    fn new(history: &History) -> Self {
        let mut named: FastMap<Key, u64> = fast_map();
        for t in &history.txns {
            let reads = t.reads.iter().map(|r| (r.key, r.columns));
            let writes = t
                .writes
                .iter()
                .enumerate()
                .map(|(i, &k)| (k, write_columns(t, i)));
            for (k, c) in reads.chain(writes) {
                let m = c.bits();
                if m != u64::MAX {
                    *named.entry(k).or_default() |= m;
                }
            }
        }
        Objects {
            named,
            ids: fast_map(),
            names: Vec::new(),
        }
    }

    fn id(&mut self, key: Key, column: Option<u32>) -> Key {
        let next = self.names.len() as u64;
        let id = *self.ids.entry((key, column)).or_insert(next);
        if id == next {
            self.names.push((key, column));
        }
        Key::new(0, id)
    }

    /// The object keys an access of `columns` of `key` touches, appended
    /// to `out`.
    fn expand(&mut self, key: Key, columns: Columns, out: &mut Vec<Key>) {
        let m = columns.bits();
        let (cols, rest) = if m == u64::MAX {
            (self.named.get(&key).copied().unwrap_or(0), true)
        } else {
            (m, false)
        };
        for c in (0..64u32).filter(|c| cols & (1u64 << c) != 0) {
            out.push(self.id(key, Some(c)));
        }
        if rest {
            out.push(self.id(key, None));
        }
    }

    /// The row and column behind an object key of the expanded history.
    fn name(&self, object: Key) -> (Key, Option<u32>) {
        self.names[object.row as usize]
    }
}

/// The columns the `i`-th write of `t` covers.
fn write_columns(t: &HistoryTxn, i: usize) -> Columns {
    t.write_columns.get(i).copied().unwrap_or(Columns::ALL)
}

/// `history` with every access turned into accesses of objects (see the
/// module docs), and the objects' names.
pub(crate) fn expand(history: &History) -> (History, Objects) {
    let mut objs = Objects::new(history);
    let mut keys = Vec::new();
    let txns = history
        .txns
        .iter()
        .map(|t| {
            let mut reads = Vec::with_capacity(t.reads.len());
            for r in &t.reads {
                keys.clear();
                objs.expand(r.key, r.columns, &mut keys);
                reads.extend(keys.iter().map(|&key| ReadObs {
                    key,
                    version: r.version,
                    columns: Columns::ALL,
                }));
            }
            // In the history's order (the report's witnesses follow it).
            let mut writes = Vec::with_capacity(t.writes.len());
            for (i, &k) in t.writes.iter().enumerate() {
                keys.clear();
                objs.expand(k, write_columns(t, i), &mut keys);
                for &o in &keys {
                    if !writes.contains(&o) {
                        writes.push(o);
                    }
                }
            }
            HistoryTxn {
                reads,
                writes,
                write_columns: Vec::new(),
                ..t.clone()
            }
        })
        .collect();
    (History { txns }, objs)
}

/// `report`, checked on the expanded history, written back in rows and
/// columns.
pub(crate) fn rename(mut report: Report, objs: &Objects) -> Report {
    let edge = |e: &mut CycleEdge| {
        if let Some(k) = e.key {
            let (key, column) = objs.name(k);
            e.key = Some(key);
            e.column = column;
        }
    };
    for v in &mut report.violations {
        match v {
            Violation::Cycle { edges } => edges.iter_mut().for_each(edge),
            Violation::LostUpdate { key, column, .. }
            | Violation::AbortedRead { key, column, .. }
            | Violation::GarbageRead { key, column, .. } => {
                (*key, *column) = objs.name(*key);
            }
            Violation::DuplicateTxn { .. } => {}
        }
    }
    for (_, k) in &mut report.unordered_writes {
        *k = objs.name(*k).0;
    }
    report.unordered_writes.dedup();
    report
}
