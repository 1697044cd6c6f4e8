//! One concrete, explained cycle per strongly connected component.
//!
//! Knowing that a component is cyclic is enough for the verdict, but a
//! report must show a cycle someone can follow. A breadth-first search from
//! one transaction of the component, restricted to the component, finds a
//! shortest cycle through it in time linear in the component's size. Each
//! edge is then labelled with a key that witnesses it, found again from the
//! two transactions' reads and writes (cheaper than storing a key per edge
//! for the whole graph).

use crate::graph::Graph;
use crate::index::{TxnIndex, NONE};
use crate::report::{CycleEdge, EdgeKind};
use crate::scc::Sccs;
use std::collections::VecDeque;
use tessera_core::Key;

/// Reusable search state: per-node arrays are allocated once and only the
/// visited entries reset, so searching many small components stays cheap.
pub(crate) struct CycleFinder {
    parent: Vec<u32>,
    via: Vec<EdgeKind>,
    touched: Vec<u32>,
    queue: VecDeque<u32>,
}

impl CycleFinder {
    pub fn new(nodes: usize) -> Self {
        CycleFinder {
            parent: vec![NONE; nodes],
            via: vec![EdgeKind::Ww; nodes],
            touched: Vec::new(),
            queue: VecDeque::new(),
        }
    }

    /// A shortest cycle through `start` inside component `comp` of `sccs`,
    /// as (from, kind, to) graph-node edges beginning at `start`.
    pub fn find(
        &mut self,
        g: &Graph,
        sccs: &Sccs,
        comp: u32,
        start: u32,
    ) -> Vec<(u32, EdgeKind, u32)> {
        self.parent[start as usize] = start;
        self.touched.push(start);
        self.queue.push_back(start);
        let mut closing = None;
        'search: while let Some(u) = self.queue.pop_front() {
            for (w, kind) in g.edges(u) {
                if sccs.comp[w as usize] != comp {
                    continue;
                }
                if w == start {
                    closing = Some((u, kind));
                    break 'search;
                }
                if self.parent[w as usize] == NONE {
                    self.parent[w as usize] = u;
                    self.via[w as usize] = kind;
                    self.touched.push(w);
                    self.queue.push_back(w);
                }
            }
        }
        let (last, kind) =
            closing.expect("a strongly connected component has a cycle through each member");
        let mut path = vec![(last, kind, start)];
        let mut x = last;
        while x != start {
            let p = self.parent[x as usize];
            path.push((p, self.via[x as usize], x));
            x = p;
        }
        path.reverse();
        for &t in &self.touched {
            self.parent[t as usize] = NONE;
        }
        self.touched.clear();
        self.queue.clear();
        path
    }
}

/// Names the transactions of a cycle (given as transaction nodes) and finds
/// a key behind each data edge.
pub(crate) fn label(idx: &TxnIndex<'_>, cycle: &[(u32, EdgeKind, u32)]) -> Vec<CycleEdge> {
    cycle
        .iter()
        .map(|&(a, kind, b)| {
            let (ta, tb) = (idx.txns[a as usize], idx.txns[b as usize]);
            // The usual witnesses first; then the weaker ones behind edges
            // to blind writes placed after a key's initial chain (b wrote
            // the key without reading it).
            let key: Option<Key> = match kind {
                // b read a's version (and, for ww, overwrote it).
                EdgeKind::Ww | EdgeKind::Wr => tb
                    .reads
                    .iter()
                    .filter(|r| r.version == ta.id.version())
                    .find(|r| kind == EdgeKind::Wr || tb.writes.contains(&r.key))
                    .map(|r| r.key)
                    .or_else(|| ta.writes.iter().copied().find(|k| tb.writes.contains(k))),
                // Both read the same version, and b overwrote it.
                EdgeKind::Rw => ta
                    .reads
                    .iter()
                    .find(|r| tb.writes.contains(&r.key) && tb.reads.contains(r))
                    .or_else(|| ta.reads.iter().find(|r| tb.writes.contains(&r.key)))
                    .map(|r| r.key),
                EdgeKind::Rt => None,
            };
            CycleEdge {
                from: ta.id,
                kind,
                key,
                column: None,
                to: tb.id,
            }
        })
        .collect()
}
