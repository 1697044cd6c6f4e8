//! tessera-checker: does a run's history satisfy an isolation level?
//!
//! The checker reads only what clients observed (a [`History`]): the
//! version of every key each transaction read, the keys it wrote (each write
//! installs version `txn.id.version()`), and real-time start and end. It is
//! black-box in Elle's sense; no server state is trusted.
//!
//! The pipeline, one module per step:
//! 1. `index` — which attempts are committed (in-doubt ones count iff a
//!    committed transaction read their writes, and every key it saw them
//!    write is theirs: [`with_observed_writes`]); node numbering by start
//!    time.
//! 2. `versions` — resolve each read to its writer (G1a if there is none),
//!    and infer each key's version order from read-modify-writes (lost
//!    updates if a version has two successors).
//! 3. `levels` — the dependency graph (`ww`, `wr`, `rw`) plus what the level
//!    adds: real-time edges through an O(n) chain of virtual nodes, or the
//!    `D ∪ (D;rw)` composition for snapshot isolation.
//! 4. `scc` — iterative Tarjan; every component of two or more nodes is a
//!    cycle the level forbids.
//! 5. `cycle` — one shortest cycle per component, labelled edge by edge.
//!
//! [`write_elle`] exports a history for Jepsen's Elle (or the `adya` crate),
//! as a cross-check.
//!
//! ```
//! use tessera_checker::{check, Level};
//! use tessera_core::history::History;
//!
//! let report = check(&History::default(), Level::StrictSerializable);
//! assert!(report.ok);
//! ```

mod columns;
mod cycle;
mod elle;
mod graph;
mod index;
mod levels;
mod report;
mod scc;
mod versions;

#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;

pub use elle::{write_elle, ExportError};
pub use index::with_observed_writes;
pub use report::{CycleEdge, EdgeKind, Level, Report, Violation};

use cycle::CycleFinder;
use index::TxnIndex;
use levels::LevelGraph;
use tessera_core::history::History;
use versions::Versions;

/// Checks `history` against `level`.
///
/// Linear in the history's size (plus a sort by start time). To check one
/// history at several levels, [`Checker`] shares the level-independent work.
///
/// # Panics
/// If the history has 2^28 attempts or more.
pub fn check(history: &History, level: Level) -> Report {
    Checker::new(&with_observed_writes(history)).check(level)
}

/// Checks `history` against `level` per column: the object a read or
/// write is about is one column of a row wherever the history declares
/// columns ([`tessera_core::txn::ReadObs::columns`],
/// [`tessera_core::history::HistoryTxn::write_columns`]), the row
/// elsewhere. For protocols that order conflicts per column (Janus): two
/// transactions that wrote disjoint columns of a row in either order are
/// not a lost update here, as they are per row; a serial order must still
/// exist for every column. A history that declares no columns checks
/// exactly as with [`check`]. Violations name the row and, for a column
/// some access names, the column (`1:8.c10`).
pub fn check_columns(history: &History, level: Level) -> Report {
    let (expanded, objects) = columns::expand(history);
    columns::rename(check(&expanded, level), &objects)
}

/// A history prepared for checking: committed set, read resolution and
/// version order, plus the violations they revealed, computed once for any
/// number of levels.
pub struct Checker<'h> {
    idx: TxnIndex<'h>,
    versions: Versions,
    /// Violations found before any graph (G1a, lost updates, duplicates).
    direct: Vec<Violation>,
}

impl<'h> Checker<'h> {
    /// Takes in-doubt attempts' write lists as recorded; [`check`] first
    /// completes them with [`with_observed_writes`].
    ///
    /// # Panics
    /// If the history has 2^28 attempts or more.
    pub fn new(history: &'h History) -> Self {
        let mut direct = Vec::new();
        let idx = TxnIndex::build(history, &mut direct);
        let versions = Versions::build(&idx, &mut direct);
        Checker {
            idx,
            versions,
            direct,
        }
    }

    /// Number of committed transactions (including observed in-doubt ones).
    pub fn committed(&self) -> usize {
        self.idx.len()
    }

    pub fn check(&self, level: Level) -> Report {
        let lg = LevelGraph::build(&self.idx, &self.versions, level);
        let sccs = scc::tarjan(&lg.graph);
        let mut violations = self.direct.clone();
        let mut finder = CycleFinder::new(lg.graph.len());
        for (c, members) in sccs.components.iter().enumerate() {
            let start = *members
                .iter()
                .filter(|&&m| lg.is_txn(m))
                .min()
                .expect("every cycle passes through a transaction");
            let raw = finder.find(&lg.graph, &sccs, c as u32, start);
            let edges = cycle::label(&self.idx, &lg.to_txns(&raw));
            violations.push(Violation::Cycle { edges });
        }
        Report {
            level,
            ok: violations.is_empty(),
            committed: self.idx.len(),
            dropped_unknown: self.idx.dropped_unknown,
            unordered_writes: self.versions.unordered.clone(),
            violations,
        }
    }
}
