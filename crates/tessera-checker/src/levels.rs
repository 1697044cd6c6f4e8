//! The graph each isolation level forbids cycles in.
//!
//! Nodes `0..n` are the committed transactions (in start order). Two levels
//! need auxiliary nodes `n..2n`, which cycles are mapped back through:
//!
//! * Strict serializability adds real-time order. Adding `T1 -> T2` for every
//!   `T1.end < T2.start` would be quadratic, so a chain of virtual nodes
//!   stands for it (the standard construction): virtual node `n + i`
//!   represents "started at or after `txns[i].start`", with edges
//!   `n + i -> i` and `n + i -> n + i + 1`; a transaction points at the first
//!   virtual node whose transaction started strictly after it ended. A path
//!   `T1 -> n + i -> ... -> T2` exists iff `T1.end < T2.start`, with O(n)
//!   edges. Consecutive transactions of one client process are ordered too,
//!   even when the next one starts at the very instant the previous one ended
//!   (clients re-issue immediately, so such ties are common); those get a
//!   direct edge.
//! * Snapshot isolation forbids cycles in `D ∪ (D;rw)` with `D = ww ∪ wr`.
//!   Composing each `D` edge with each `rw` edge leaving its target could be
//!   quadratic at hot keys, so node `n + v` stands for "reached `v` by a `D`
//!   edge": every `D` edge `u -> v` also yields `u -> n + v`, and every `rw`
//!   edge `v -> w` becomes `n + v -> w`. A cycle in this graph is exactly a
//!   cycle of `D` and `D;rw` steps, since each `rw` edge must be entered
//!   through a `D` edge.

use crate::graph::Graph;
use crate::index::TxnIndex;
use crate::report::{EdgeKind, Level};
use crate::versions::Versions;
use tessera_core::{fast_map, FastMap};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Aux {
    None,
    /// Nodes `n..2n` are the real-time chain.
    RealTime,
    /// Node `n + v` is transaction `v` entered through a `D` edge.
    Primed,
}

pub(crate) struct LevelGraph {
    pub graph: Graph,
    /// Number of transaction nodes.
    n: u32,
    aux: Aux,
}

impl LevelGraph {
    pub fn build(idx: &TxnIndex<'_>, versions: &Versions, level: Level) -> LevelGraph {
        let n = idx.len();
        let nu = n as u32;
        match level {
            Level::Serializable => LevelGraph {
                graph: Graph::build(n, |f| versions.for_each_edge(&mut *f)),
                n: nu,
                aux: Aux::None,
            },
            Level::StrictSerializable => {
                let starts: Vec<u64> = idx.txns.iter().map(|t| t.start).collect();
                // First transaction (in start order) that started after each
                // one ended.
                let after: Vec<u32> = idx
                    .txns
                    .iter()
                    .map(|t| starts.partition_point(|&s| s <= t.end) as u32)
                    .collect();
                let mut ties = Vec::new();
                let mut last: FastMap<u64, u32> = fast_map();
                for (i, t) in idx.txns.iter().enumerate() {
                    if let Some(p) = last.insert(t.process, i as u32) {
                        if idx.txns[p as usize].end == t.start {
                            ties.push((p, i as u32));
                        }
                    }
                }
                let graph = Graph::build(2 * n, |f| {
                    versions.for_each_edge(&mut *f);
                    for (i, &j) in after.iter().enumerate() {
                        if j < nu {
                            f(i as u32, nu + j, EdgeKind::Rt);
                        }
                    }
                    for j in 0..nu {
                        f(nu + j, j, EdgeKind::Rt);
                        if j + 1 < nu {
                            f(nu + j, nu + j + 1, EdgeKind::Rt);
                        }
                    }
                    for &(p, i) in &ties {
                        f(p, i, EdgeKind::Rt);
                    }
                });
                LevelGraph {
                    graph,
                    n: nu,
                    aux: Aux::RealTime,
                }
            }
            Level::SnapshotIsolation => LevelGraph {
                graph: Graph::build(2 * n, |f| {
                    versions.for_each_edge(|a, b, k| match k {
                        EdgeKind::Ww | EdgeKind::Wr => {
                            f(a, b, k);
                            f(a, nu + b, k);
                        }
                        EdgeKind::Rw => f(nu + a, b, k),
                        EdgeKind::Rt => unreachable!("versions yield data edges only"),
                    })
                }),
                n: nu,
                aux: Aux::Primed,
            },
        }
    }

    /// The transaction behind a graph node; `None` for real-time chain
    /// nodes.
    fn txn_of(&self, node: u32) -> Option<u32> {
        match self.aux {
            _ if node < self.n => Some(node),
            Aux::Primed => Some(node - self.n),
            Aux::None | Aux::RealTime => None,
        }
    }

    /// True for nodes that are transactions themselves (a cycle search
    /// should start at one).
    pub fn is_txn(&self, node: u32) -> bool {
        node < self.n
    }

    /// Maps a cycle of graph nodes to one of transactions: a run of hops
    /// through real-time chain nodes becomes one `rt` edge, and a primed node
    /// becomes its transaction (so `u -D-> v' -rw-> w` reads
    /// `u -D-> v -rw-> w`). The cycle must start at a transaction node.
    pub fn to_txns(&self, cycle: &[(u32, EdgeKind, u32)]) -> Vec<(u32, EdgeKind, u32)> {
        let mut out = Vec::with_capacity(cycle.len());
        let mut from: Option<(u32, EdgeKind)> = None;
        for &(a, kind, b) in cycle {
            let (src, k) = match from {
                Some(pending) => pending,
                None => (self.txn_of(a).expect("cycle starts at a txn"), kind),
            };
            match self.txn_of(b) {
                Some(t) => {
                    out.push((src, k, t));
                    from = None;
                }
                None => from = Some((src, k)),
            }
        }
        out
    }
}
