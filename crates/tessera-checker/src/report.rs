//! What the checker says: the level asked for, and every violation found.
//!
//! Violations name transactions by [`TxnId`] and keys by [`Key`], so a report
//! can be read against the raw history (and against an Elle export of it)
//! without this crate's internal numbering.

use serde::Serialize;
use std::fmt;
use tessera_core::{Key, TxnId, Version};

/// The isolation level a history is checked against.
///
/// All three are defined on Adya's direct serialization graph (DSG) over
/// committed transactions, with edges `ww` (T2 installed the version after
/// T1's), `wr` (T2 read T1's version) and `rw` (T2 installed the version after
/// the one T1 read: an anti-dependency).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Level {
    /// Adya PL-3: the DSG (`ww ∪ wr ∪ rw`) is acyclic.
    Serializable,
    /// Serializable in an order that also respects real time: the DSG plus
    /// `rt` edges (T1 ended before T2 started, or T2 is the next transaction
    /// of T1's client process) is acyclic.
    StrictSerializable,
    /// Adya PL-SI in the form of Cerone & Gotsman (2016): every cycle of the
    /// DSG contains two adjacent `rw` edges. Checked as: the graph with edges
    /// `D ∪ (D;rw)`, where `D = ww ∪ wr`, is acyclic (Elle does the same).
    SnapshotIsolation,
}

impl Level {
    /// All levels, strongest first.
    pub const ALL: [Level; 3] = [
        Level::StrictSerializable,
        Level::Serializable,
        Level::SnapshotIsolation,
    ];

    /// The level's name as Elle spells it.
    pub fn name(self) -> &'static str {
        match self {
            Level::Serializable => "serializable",
            Level::StrictSerializable => "strict-serializable",
            Level::SnapshotIsolation => "snapshot-isolation",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why one transaction must precede another in any valid serial order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum EdgeKind {
    /// Write-write: the target installed the version right after the
    /// source's.
    Ww,
    /// Write-read: the target read the source's version.
    Wr,
    /// Read-write (anti-dependency): the target installed the version right
    /// after the one the source read.
    Rw,
    /// Real time: the source ended before the target started (or is the
    /// previous transaction of the same client process).
    Rt,
}

impl EdgeKind {
    pub fn name(self) -> &'static str {
        match self {
            EdgeKind::Ww => "ww",
            EdgeKind::Wr => "wr",
            EdgeKind::Rw => "rw",
            EdgeKind::Rt => "rt",
        }
    }
}

impl fmt::Display for EdgeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One edge of a reported cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CycleEdge {
    pub from: TxnId,
    pub kind: EdgeKind,
    /// A key that witnesses a data edge; `None` for real-time edges.
    pub key: Option<Key>,
    /// The key's column, when the history is checked per column and the
    /// witness is a column the history's accesses name one by one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
    pub to: TxnId,
}

/// One way a history breaks the level it was checked against.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Violation {
    /// A cycle in the level's dependency graph. The edges form a closed walk
    /// (`edges[i].to == edges[i + 1].from`, and the last returns to the
    /// first); a transaction may appear twice in snapshot-isolation cycles,
    /// where one hop stands for a `D;rw` pair.
    Cycle { edges: Vec<CycleEdge> },
    /// Two committed transactions both read `version` of `key` and both
    /// overwrote it: one of the two updates was lost. Forbidden at every
    /// level this crate checks (snapshot isolation's first-committer-wins
    /// rule included).
    LostUpdate {
        key: Key,
        /// The column, when checked per column (see [`CycleEdge::column`]).
        #[serde(skip_serializing_if = "Option::is_none")]
        column: Option<u32>,
        version: Version,
        first: TxnId,
        second: TxnId,
    },
    /// G1a: a committed transaction read a version written by an attempt
    /// that aborted.
    AbortedRead {
        reader: TxnId,
        key: Key,
        /// The column, when checked per column (see [`CycleEdge::column`]).
        #[serde(skip_serializing_if = "Option::is_none")]
        column: Option<u32>,
        version: Version,
        writer: TxnId,
    },
    /// G1a's garbage variant: a committed transaction read a version that no
    /// committed or in-doubt attempt wrote to that key (including one it
    /// claims to have written itself, which it cannot have read before
    /// writing).
    GarbageRead {
        reader: TxnId,
        key: Key,
        /// The column, when checked per column (see [`CycleEdge::column`]).
        #[serde(skip_serializing_if = "Option::is_none")]
        column: Option<u32>,
        version: Version,
    },
    /// Two attempts in the history share an id; the later ones are ignored.
    /// Versions are attempt ids, so this makes reads ambiguous.
    DuplicateTxn { txn: TxnId },
}

impl Violation {
    /// A short name, following Elle's (G0, G1a, G-single, G2, lost-update...).
    pub fn name(&self) -> &'static str {
        match self {
            Violation::Cycle { edges } => cycle_name(edges),
            Violation::LostUpdate { .. } => "lost-update",
            Violation::AbortedRead { .. } | Violation::GarbageRead { .. } => "G1a",
            Violation::DuplicateTxn { .. } => "duplicate-txn",
        }
    }
}

/// Adya's names for a cycle by the edges it uses: G0 (only `ww`), G1c (`ww`
/// and `wr`), G-single (exactly one `rw`), G-nonadjacent (several `rw`, no
/// two adjacent) and G2 (two adjacent `rw`). A `-realtime` suffix says the
/// cycle needs a real-time edge.
fn cycle_name(edges: &[CycleEdge]) -> &'static str {
    let count = |k| edges.iter().filter(|e| e.kind == k).count();
    let rw = count(EdgeKind::Rw);
    let adjacent_rw = (0..edges.len()).any(|i| {
        edges[i].kind == EdgeKind::Rw && edges[(i + 1) % edges.len()].kind == EdgeKind::Rw
    });
    let realtime = count(EdgeKind::Rt) > 0;
    let base = match (rw, adjacent_rw) {
        (0, _) if count(EdgeKind::Wr) == 0 => 0,
        (0, _) => 1,
        (1, _) => 2,
        (_, false) => 3,
        (_, true) => 4,
    };
    const PLAIN: [&str; 5] = ["G0", "G1c", "G-single", "G-nonadjacent", "G2"];
    const REALTIME: [&str; 5] = [
        "G0-realtime",
        "G1c-realtime",
        "G-single-realtime",
        "G-nonadjacent-realtime",
        "G2-realtime",
    ];
    if realtime {
        REALTIME[base]
    } else {
        PLAIN[base]
    }
}

/// A version the way a reader recognises it: the writing attempt's id.
struct ShowVersion(Version);

impl fmt::Display for ShowVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == Version::INITIAL {
            f.write_str("initial")
        } else {
            write!(f, "{:?}", TxnId(self.0 .0))
        }
    }
}

/// A key, with its column when checked per column: `1:8` or `1:8.c10`.
struct Obj(Key, Option<u32>);

impl fmt::Display for Obj {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1 {
            Some(c) => write!(f, "{}.c{c}", self.0),
            None => write!(f, "{}", self.0),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Cycle { edges } => {
                write!(f, "{} cycle: ", self.name())?;
                if let Some(first) = edges.first() {
                    write!(f, "{:?}", first.from)?;
                }
                for e in edges {
                    match e.key {
                        Some(k) => write!(f, " -{}({})-> {:?}", e.kind, Obj(k, e.column), e.to)?,
                        None => write!(f, " -{}-> {:?}", e.kind, e.to)?,
                    }
                }
                Ok(())
            }
            Violation::LostUpdate {
                key,
                column,
                version,
                first,
                second,
            } => write!(
                f,
                "lost update: {first:?} and {second:?} both read {} at version {} and overwrote it",
                Obj(*key, *column),
                ShowVersion(*version)
            ),
            Violation::AbortedRead {
                reader,
                key,
                column,
                version,
                writer,
            } => write!(
                f,
                "G1a aborted read: {reader:?} read {} at version {}, written by aborted {writer:?}",
                Obj(*key, *column),
                ShowVersion(*version)
            ),
            Violation::GarbageRead {
                reader,
                key,
                column,
                version,
            } => write!(
                f,
                "G1a garbage read: {reader:?} read {} at version {}, which no committed or in-doubt transaction wrote",
                Obj(*key, *column),
                ShowVersion(*version)
            ),
            Violation::DuplicateTxn { txn } => {
                write!(f, "duplicate transaction id {txn:?} in the history")
            }
        }
    }
}

/// The verdict on one history at one level.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub level: Level,
    /// True iff `violations` is empty.
    pub ok: bool,
    /// Committed transactions checked, including in-doubt ones that a
    /// committed transaction observed.
    pub committed: usize,
    /// In-doubt (unknown-outcome) attempts nobody observed: dropped, as if
    /// aborted.
    pub dropped_unknown: usize,
    /// Committed writes whose immediate predecessor could not be inferred,
    /// because the writer did not read the key first (a blind write) or
    /// read a bad version. They are known to follow the chain of versions
    /// that starts at the key's initial version, but not how they order
    /// among themselves, so some anomalies through them can go unseen.
    /// Tessera's workloads read every key before writing it, so only
    /// in-doubt writers (which record no reads) land here.
    pub unordered_writes: Vec<(TxnId, Key)>,
    pub violations: Vec<Violation>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ok {
            write!(f, "{}: ok", self.level)?;
        } else {
            write!(f, "{}: {} violations", self.level, self.violations.len())?;
        }
        write!(
            f,
            " ({} committed, {} in-doubt dropped, {} unordered writes)",
            self.committed,
            self.dropped_unknown,
            self.unordered_writes.len()
        )?;
        for v in &self.violations {
            write!(f, "\n  {v}")?;
        }
        Ok(())
    }
}
