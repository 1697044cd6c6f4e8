//! A compact, immutable directed graph with labelled edges.
//!
//! At 10^6 transactions the dependency graph has tens of millions of edges,
//! so it is stored in compressed sparse row form with the edge kind packed
//! into the top two bits of the target: 4 bytes per edge. It is built in two
//! passes over the same edge source (count out-degrees, then fill), which
//! avoids ever holding an edge list next to the finished graph.

use crate::report::EdgeKind;

const KIND_SHIFT: u32 = 30;
const NODE_MASK: u32 = (1 << KIND_SHIFT) - 1;

fn pack(to: u32, kind: EdgeKind) -> u32 {
    let k = match kind {
        EdgeKind::Ww => 0,
        EdgeKind::Wr => 1,
        EdgeKind::Rw => 2,
        EdgeKind::Rt => 3,
    };
    to | (k << KIND_SHIFT)
}

fn unpack(e: u32) -> (u32, EdgeKind) {
    let kind = match e >> KIND_SHIFT {
        0 => EdgeKind::Ww,
        1 => EdgeKind::Wr,
        2 => EdgeKind::Rw,
        _ => EdgeKind::Rt,
    };
    (e & NODE_MASK, kind)
}

pub(crate) struct Graph {
    /// Node -> offset of its first out-edge in `adj` (one extra at the end).
    off: Vec<usize>,
    adj: Vec<u32>,
}

impl Graph {
    /// Builds a graph on `n` nodes from `emit`, which is called twice and
    /// must report the same edges both times.
    ///
    /// # Panics
    /// If `n` does not fit in 30 bits, or an edge names a node `>= n`.
    pub fn build(n: usize, emit: impl Fn(&mut dyn FnMut(u32, u32, EdgeKind))) -> Graph {
        assert!(n <= NODE_MASK as usize, "graph too large: {n} nodes");
        let mut off = vec![0usize; n + 1];
        emit(&mut |from, _, _| off[from as usize + 1] += 1);
        for i in 0..n {
            off[i + 1] += off[i];
        }
        let mut cursor = off.clone();
        let mut adj = vec![0u32; off[n]];
        emit(&mut |from, to, kind| {
            assert!((to as usize) < n, "edge to unknown node {to}");
            let c = &mut cursor[from as usize];
            adj[*c] = pack(to, kind);
            *c += 1;
        });
        debug_assert!((0..n).all(|i| cursor[i] == off[i + 1]), "emit changed");
        Graph { off, adj }
    }

    pub fn len(&self) -> usize {
        self.off.len() - 1
    }

    /// Out-edges of `node` as (target, kind).
    pub fn edges(&self, node: u32) -> impl Iterator<Item = (u32, EdgeKind)> + '_ {
        let node = node as usize;
        self.adj[self.off[node]..self.off[node + 1]]
            .iter()
            .map(|&e| unpack(e))
    }

    /// Target of the `i`-th edge in the packed edge array.
    pub fn target(&self, i: usize) -> u32 {
        self.adj[i] & NODE_MASK
    }

    /// Range of `node`'s out-edges in the packed edge array.
    pub fn edge_range(&self, node: u32) -> std::ops::Range<usize> {
        self.off[node as usize]..self.off[node as usize + 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_labelled_adjacency() {
        let edges = [
            (0, 1, EdgeKind::Ww),
            (1, 2, EdgeKind::Rt),
            (0, 2, EdgeKind::Rw),
            (2, 0, EdgeKind::Wr),
        ];
        let g = Graph::build(3, |f| {
            for &(a, b, k) in &edges {
                f(a, b, k)
            }
        });
        assert_eq!(g.len(), 3);
        assert_eq!(
            g.edges(0).collect::<Vec<_>>(),
            [(1, EdgeKind::Ww), (2, EdgeKind::Rw)]
        );
        assert_eq!(g.edges(1).collect::<Vec<_>>(), [(2, EdgeKind::Rt)]);
        assert_eq!(g.edges(2).collect::<Vec<_>>(), [(0, EdgeKind::Wr)]);
        assert_eq!(g.target(g.edge_range(2).start), 0);
    }
}
