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

//!
//! **Per column.** A conflict is on the data a piece accesses (§3): where a
//! piece declares the columns of a row it reads or writes, conflicts are
//! tracked per [`Item`] `(row, column)`, as the authors' code does, so that
//! TPC-C's NewOrder (`D_NEXT_O_ID`) and Payment (`D_YTD`) do not depend on
//! each other through the district row. A whole-row access (no declared
//! columns, or `Columns::ALL`) is an item of its own that conflicts with
//! every column of the row: the per-row bookkeeping of each row holds the
//! whole-row entry beside one entry per column in use. Ordering per column
//! is only correct because the store then keeps each column's last writer
//! and the run is checked per column (`depgraph::Granularity::Column`,
//! `tessera_checker::check_columns`): replicas may execute two writers of
//! disjoint columns of a row in either order.

use bytes::{BufMut, BytesMut};
use tessera_core::codec::{
    get_bool, get_key, get_len, get_txn_id, get_u8, put_key, put_txn_id, put_varint, DecodeError,
};
use tessera_core::ids::{Key, TxnId};
use tessera_core::txn::Access;
use tessera_core::FastMap;

/// What a conflict is tracked on: one column of a row, or (`column`
/// `None`) the whole row, which conflicts with each of its columns.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct Item {
    pub key: Key,
    pub column: Option<u8>,
}

impl Item {
    /// The items `a` touches: one per declared column if `per_column`,
    /// else (or for a whole-row access) the row.
    pub fn of(a: &Access, per_column: bool, out: &mut Vec<Item>) {
        let whole = Item {
            key: a.key,
            column: None,
        };
        if !per_column || a.columns.bits() == u64::MAX {
            out.push(whole);
            return;
        }
        out.extend(
            (0..64u8)
                .filter(|c| a.columns.0 & (1u64 << c) != 0)
                .map(|c| Item {
                    key: a.key,
                    column: Some(c),
                }),
        );
    }
}

#[derive(Default, Debug)]
struct Entry {
    /// Pre-accepted here, not executed here: (txn, writes the item).
    pending: Vec<(TxnId, bool)>,
    last_write: Option<TxnId>,
    reads_since: Vec<TxnId>,
}

impl Entry {
    /// Push onto `deps` what an access of `txn` (a write if `write`)
    /// conflicts with here.
    fn conflicts(&self, txn: TxnId, write: bool, deps: &mut Vec<TxnId>) {
        for &(t, w) in &self.pending {
            if t != txn && (w || write) {
                deps.push(t);
            }
        }
        deps.extend(self.last_write.filter(|t| *t != txn));
        if write {
            deps.extend(self.reads_since.iter().filter(|t| **t != txn));
        }
    }

    /// `txn` executed here (`executed`) or was abandoned.
    fn finished(&mut self, txn: TxnId, write: bool, executed: bool) {
        self.pending.retain(|(t, _)| *t != txn);
        if !executed {
            return;
        }
        if write {
            self.last_write = Some(txn);
            self.reads_since.clear();
        } else if !self.reads_since.contains(&txn) {
            self.reads_since.push(txn);
        }
    }

    fn forget(&mut self, txn: TxnId) {
        if self.last_write == Some(txn) {
            self.last_write = None;
        }
        self.reads_since.retain(|t| *t != txn);
    }

    fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.last_write.is_none() && self.reads_since.is_empty()
    }

    fn encode(&self, out: &mut BytesMut) {
        put_varint(out, self.pending.len() as u64);
        for &(t, w) in &self.pending {
            put_txn_id(out, t);
            out.put_u8(u8::from(w));
        }
        match self.last_write {
            None => out.put_u8(0),
            Some(t) => {
                out.put_u8(1);
                put_txn_id(out, t);
            }
        }
        put_varint(out, self.reads_since.len() as u64);
        for &t in &self.reads_since {
            put_txn_id(out, t);
        }
    }

    fn decode(buf: &mut &[u8]) -> Result<Entry, DecodeError> {
        let n = get_len(buf, 9, "tracker pending")?;
        let mut pending = Vec::with_capacity(n);
        for _ in 0..n {
            pending.push((get_txn_id(buf)?, get_bool(buf, "tracker write")?));
        }
        let last_write = if get_bool(buf, "tracker last writer")? {
            Some(get_txn_id(buf)?)
        } else {
            None
        };
        let n = get_len(buf, 8, "tracker readers")?;
        let mut reads_since = Vec::with_capacity(n);
        for _ in 0..n {
            reads_since.push(get_txn_id(buf)?);
        }
        Ok(Entry {
            pending,
            last_write,
            reads_since,
        })
    }
}

/// One row's entries: the whole row's, and one per column in use.
#[derive(Default, Debug)]
struct Row {
    whole: Entry,
    columns: Vec<(u8, Entry)>,
}

impl Row {
    fn entry(&mut self, column: Option<u8>) -> &mut Entry {
        let Some(c) = column else {
            return &mut self.whole;
        };
        let i = match self.columns.iter().position(|(x, _)| *x == c) {
            Some(i) => i,
            None => {
                self.columns.push((c, Entry::default()));
                self.columns.len() - 1
            }
        };
        &mut self.columns[i].1
    }
}

#[derive(Default, Debug)]
pub(crate) struct Tracker {
    rows: FastMap<Key, Row>,
}

impl Tracker {
    /// Record `txn`'s accesses at PreAccept; push the transactions it
    /// conflicts with onto `deps` (may repeat; the caller dedups). An item
    /// conflicts with the same item, a column with its row's whole-row
    /// item, and the whole row with every column of the row.
    pub fn pre_accept(
        &mut self,
        txn: TxnId,
        reads: &[Item],
        writes: &[Item],
        deps: &mut Vec<TxnId>,
    ) {
        for (&i, write) in writes.iter().map(|i| (i, true)).chain(
            reads
                .iter()
                .filter(|i| !writes.contains(i))
                .map(|i| (i, false)),
        ) {
            let row = self.rows.entry(i.key).or_default();
            row.whole.conflicts(txn, write, deps);
            let e = match i.column {
                None => {
                    for (_, e) in &row.columns {
                        e.conflicts(txn, write, deps);
                    }
                    &mut row.whole
                }
                Some(_) => {
                    let e = row.entry(i.column);
                    e.conflicts(txn, write, deps);
                    e
                }
            };
            if !e.pending.iter().any(|(t, _)| *t == txn) {
                e.pending.push((txn, write));
            }
        }
    }

    /// `txn` executed here (or was abandoned: `executed` false), touching
    /// `reads` and `writes`. A whole-row write executed stands, for later
    /// accesses of any column, for the column writers and readers before
    /// it (it executed after them here), which are dropped.
    pub fn finished(&mut self, txn: TxnId, reads: &[Item], writes: &[Item], executed: bool) {
        for i in writes.iter().chain(reads) {
            let write = writes.contains(i);
            let row = self.rows.entry(i.key).or_default();
            if executed && write && i.column.is_none() {
                for (_, e) in &mut row.columns {
                    e.last_write = None;
                    e.reads_since.clear();
                }
            }
            row.entry(i.column).finished(txn, write, executed);
        }
    }

    /// Items with pending transactions, pending entries in all, and the
    /// most on one item ([`super::stats`]).
    pub fn pending(&self) -> (usize, usize, usize) {
        let lens = self
            .rows
            .values()
            .flat_map(|r| std::iter::once(&r.whole).chain(r.columns.iter().map(|(_, e)| e)))
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
    pub fn forget(&mut self, txn: TxnId, reads: &[Item], writes: &[Item]) {
        for i in writes.iter().chain(reads) {
            if let Some(row) = self.rows.get_mut(&i.key) {
                row.entry(i.column).forget(txn);
            }
        }
    }

    /// Every row with something tracked, for a checkpoint
    /// ([`super::image`]): the tracker's order matters (the last executed
    /// writer, the dependencies' order in an answer), and a replay of the
    /// live transactions' records alone could not rebuild it, since the
    /// forgotten ones shaped it too.
    pub fn encode(&self, out: &mut BytesMut) {
        let mut rows: Vec<(&Key, &Row)> = self
            .rows
            .iter()
            .filter(|(_, r)| !r.whole.is_empty() || r.columns.iter().any(|(_, e)| !e.is_empty()))
            .collect();
        rows.sort_unstable_by_key(|(k, _)| **k);
        put_varint(out, rows.len() as u64);
        for (k, r) in rows {
            put_key(out, *k);
            r.whole.encode(out);
            put_varint(out, r.columns.len() as u64);
            for (c, e) in &r.columns {
                out.put_u8(*c);
                e.encode(out);
            }
        }
    }

    pub fn decode(buf: &mut &[u8]) -> Result<Tracker, DecodeError> {
        let n = get_len(buf, 6, "tracker rows")?;
        let mut rows = tessera_core::fast_map();
        for _ in 0..n {
            let k = get_key(buf)?;
            let whole = Entry::decode(buf)?;
            let m = get_len(buf, 4, "tracker columns")?;
            let mut columns = Vec::with_capacity(m);
            for _ in 0..m {
                let c = get_u8(buf, "tracker column")?;
                columns.push((c, Entry::decode(buf)?));
            }
            rows.insert(k, Row { whole, columns });
        }
        Ok(Tracker { rows })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::ids::NodeId;

    fn t(i: u32) -> TxnId {
        TxnId::new(NodeId(9), 0, i)
    }

    fn item(column: Option<u8>) -> Item {
        Item {
            key: Key::new(0, 1),
            column,
        }
    }

    #[test]
    fn every_unexecuted_conflict_and_the_last_executed_writer() {
        let x = [item(None)];
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

    /// Columns of one row: disjoint ones do not conflict, a common one
    /// does, and the whole row conflicts with each column, pending or
    /// executed.
    #[test]
    fn columns_conflict_with_the_same_column_and_the_whole_row() {
        let (a, b, row) = ([item(Some(0))], [item(Some(1))], [item(None)]);
        let mut tr = Tracker::default();
        let mut d = Vec::new();
        tr.pre_accept(t(1), &a, &a, &mut d);
        tr.pre_accept(t(2), &b, &b, &mut d);
        assert!(d.is_empty(), "disjoint columns: {d:?}");
        tr.pre_accept(t(3), &a, &[], &mut d);
        assert_eq!(d, [t(1)], "a common column");
        d.clear();
        tr.pre_accept(t(4), &row, &[], &mut d);
        assert_eq!(d, [t(1), t(2)], "a whole-row read after column writes");
        d.clear();
        tr.pre_accept(t(5), &b, &b, &mut d);
        assert_eq!(d, [t(4), t(2)], "a column write after a whole-row read");
        for i in 1..=5 {
            let (r, w): (&[Item], &[Item]) = match i {
                1 => (&a, &a),
                2 | 5 => (&b, &b),
                3 => (&a, &[]),
                _ => (&row, &[]),
            };
            tr.finished(t(i), r, w, true);
        }
        d.clear();
        tr.pre_accept(t(6), &row, &row, &mut d);
        d.sort_unstable();
        assert_eq!(
            d,
            [t(1), t(3), t(4), t(5)],
            "executed: each column's last writer and readers since"
        );
        tr.finished(t(6), &row, &row, true);
        d.clear();
        tr.pre_accept(t(7), &a, &a, &mut d);
        assert_eq!(
            d,
            [t(6)],
            "the whole-row writer stands for the columns' history"
        );
    }
}
