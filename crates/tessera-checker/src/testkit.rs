//! Test support: hand-built histories, a serial store that generates correct
//! ones, and brute-force oracles that decide small histories by trying
//! every order.
//!
//! The oracles are independent of the graph machinery, so agreement between
//! them and the checker on random (mutated) histories is evidence the graph
//! construction is right, not just self-consistent.

use std::collections::HashMap;
use tessera_core::history::{History, HistoryTxn, Outcome};
use tessera_core::txn::ReadObs;
use tessera_core::{Key, NodeId, Time, TxnId, Version};

/// The attempt numbered `n` (`n >= 1`).
pub fn tid(n: u32) -> TxnId {
    TxnId::new(NodeId(1), 0, n)
}

/// Row `row` of table 1.
pub fn key(row: u64) -> Key {
    Key::new(1, row)
}

/// Version written by attempt `n`; `0` is the initial version.
pub fn ver(n: u32) -> Version {
    if n == 0 {
        Version::INITIAL
    } else {
        tid(n).version()
    }
}

/// A committed attempt `n` on its own process `n`, reading `(row, writer)`
/// pairs (writer 0 = initial version) and writing `writes`.
pub fn txn(n: u32, start: Time, end: Time, reads: &[(u64, u32)], writes: &[u64]) -> HistoryTxn {
    HistoryTxn {
        id: tid(n),
        process: n as u64,
        start,
        end,
        reads: reads
            .iter()
            .map(|&(row, w)| ReadObs::row(key(row), ver(w)))
            .collect(),
        writes: writes.iter().map(|&r| key(r)).collect(),
        write_columns: Vec::new(),
        outcome: Outcome::Committed,
    }
}

pub fn history(txns: Vec<HistoryTxn>) -> History {
    History { txns }
}

/// How a planned transaction ends.
#[derive(Clone, Copy, Debug)]
pub enum Fate {
    Commit,
    Abort,
    /// The client never learns; `applied` says whether the store did.
    Unknown {
        applied: bool,
    },
}

/// One transaction for [`simulate`]: keys (rows) it reads, the subset it
/// then writes, and how far its start and end lie from its serial point.
#[derive(Clone, Debug)]
pub struct Planned {
    pub reads: Vec<u64>,
    pub writes: Vec<u64>,
    pub fate: Fate,
    pub before: Time,
    pub after: Time,
}

/// Runs `plan` against a serial store: transaction `i` takes effect
/// atomically at time `100 * (i + 1)`, inside its `[start, end]` interval,
/// so the history is strict serializable by construction (and intervals of
/// neighbours overlap when the slacks exceed 100).
pub fn simulate(plan: &[Planned]) -> History {
    let mut store: HashMap<u64, Version> = HashMap::new();
    let mut txns = Vec::new();
    for (i, p) in plan.iter().enumerate() {
        let n = i as u32 + 1;
        let point = 100 * (n as Time) + 1_000;
        let seen: Vec<(u64, u32)> = p
            .reads
            .iter()
            .map(|r| (*r, store.get(r).map_or(0, |v| v.0 as u32)))
            .collect();
        let mut t = txn(n, point - p.before, point + p.after, &seen, &p.writes);
        let apply = match p.fate {
            Fate::Commit => true,
            Fate::Abort => {
                t.outcome = Outcome::Aborted;
                false
            }
            Fate::Unknown { applied } => {
                t.outcome = Outcome::Unknown;
                t.reads.clear();
                t.end = Time::MAX;
                applied
            }
        };
        if apply {
            for &w in &p.writes {
                store.insert(w, t.id.version());
            }
        }
        txns.push(t);
    }
    History { txns }
}

/// Committed attempts, plus in-doubt ones whose writes a committed attempt
/// observed (the checker's rule; the others may as well have aborted).
fn committed(h: &History) -> Vec<&HistoryTxn> {
    let observed: Vec<Version> = h
        .txns
        .iter()
        .filter(|t| t.outcome == Outcome::Committed)
        .flat_map(|t| t.reads.iter().map(|r| r.version))
        .collect();
    let c: Vec<&HistoryTxn> = h
        .txns
        .iter()
        .filter(|t| {
            t.outcome == Outcome::Committed
                || (t.outcome == Outcome::Unknown && observed.contains(&t.id.version()))
        })
        .collect();
    assert!(c.len() <= 9, "oracles are exponential");
    c
}

/// Must `a` precede `b` in real time (the checker's rule)?
fn precedes(a: &HistoryTxn, b: &HistoryTxn) -> bool {
    a.end < b.start || (a.process == b.process && a.end <= b.start && a.start < b.start)
}

/// Is there a serial order of the committed transactions (respecting real
/// time if `strict`) in which every read returns exactly what it observed?
/// Exact for histories without blind writes, where view and conflict
/// serializability coincide.
pub fn serializable_oracle(h: &History, strict: bool) -> bool {
    fn place(
        txns: &[&HistoryTxn],
        placed: &mut Vec<bool>,
        store: &mut HashMap<Key, Version>,
        strict: bool,
        left: usize,
    ) -> bool {
        if left == 0 {
            return true;
        }
        for i in 0..txns.len() {
            if placed[i] {
                continue;
            }
            let t = txns[i];
            if strict && (0..txns.len()).any(|j| !placed[j] && j != i && precedes(txns[j], t)) {
                continue;
            }
            let reads_ok = t
                .reads
                .iter()
                .all(|r| store.get(&r.key).copied().unwrap_or(Version::INITIAL) == r.version);
            if !reads_ok {
                continue;
            }
            let saved: Vec<(Key, Option<Version>)> = t
                .writes
                .iter()
                .map(|&k| (k, store.insert(k, t.id.version())))
                .collect();
            placed[i] = true;
            let ok = place(txns, placed, store, strict, left - 1);
            placed[i] = false;
            for (k, old) in saved.into_iter().rev() {
                match old {
                    Some(v) => store.insert(k, v),
                    None => store.remove(&k),
                };
            }
            if ok {
                return true;
            }
        }
        false
    }
    let txns = committed(h);
    let mut placed = vec![false; txns.len()];
    place(&txns, &mut placed, &mut HashMap::new(), strict, txns.len())
}

/// Is there an execution under (operational) snapshot isolation: a commit
/// order and, for each transaction, a snapshot that is a prefix of the
/// commits before it, such that every read returns the snapshot's version
/// and no two transactions that write a common key overlap (one committing
/// between the other's snapshot and commit: first committer wins)?
///
/// For a fixed commit order the latest snapshot consistent with the reads is
/// always the best choice (it shrinks every overlap), so only orders are
/// enumerated.
pub fn si_oracle(h: &History) -> bool {
    fn try_orders(txns: &[&HistoryTxn], order: &mut Vec<usize>, used: &mut Vec<bool>) -> bool {
        if order.len() == txns.len() {
            return si_order_ok(txns, order);
        }
        for i in 0..txns.len() {
            if !used[i] {
                used[i] = true;
                order.push(i);
                let ok = try_orders(txns, order, used);
                order.pop();
                used[i] = false;
                if ok {
                    return true;
                }
            }
        }
        false
    }
    let txns = committed(h);
    try_orders(&txns, &mut Vec::new(), &mut vec![false; txns.len()])
}

fn si_order_ok(txns: &[&HistoryTxn], order: &[usize]) -> bool {
    let n = order.len();
    // snapshot[p]: number of commits visible to the transaction committing
    // at position p.
    let mut snapshot = vec![0usize; n];
    for (p, &i) in order.iter().enumerate() {
        let visible = |s: usize, key: Key| {
            order[..s]
                .iter()
                .rev()
                .find(|&&j| txns[j].writes.contains(&key))
                .map_or(Version::INITIAL, |&j| txns[j].id.version())
        };
        let Some(s) = (0..=p)
            .rev()
            .find(|&s| txns[i].reads.iter().all(|r| visible(s, r.key) == r.version))
        else {
            return false;
        };
        snapshot[p] = s;
    }
    for p in 0..n {
        for q in snapshot[p]..p {
            let (a, b) = (txns[order[p]], txns[order[q]]);
            if a.writes.iter().any(|k| b.writes.contains(k)) {
                return false;
            }
        }
    }
    true
}
