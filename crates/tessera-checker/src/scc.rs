//! Strongly connected components of a history's dependency graph: the
//! shared Tarjan of [`tessera_core::scc`], read through the compact graph.
//!
//! A history is cyclic iff its graph has a component of two or more nodes
//! (the graph has no self-edges).

use crate::graph::Graph;
use tessera_core::scc::Digraph;

pub(crate) use tessera_core::scc::Sccs;

impl Digraph for Graph {
    fn node_count(&self) -> usize {
        self.len()
    }
    fn out_degree(&self, v: u32) -> usize {
        self.edge_range(v).len()
    }
    fn successor(&self, v: u32, i: usize) -> u32 {
        self.target(self.edge_range(v).start + i)
    }
}

pub(crate) fn tarjan(g: &Graph) -> Sccs {
    tessera_core::scc::tarjan(g)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::EdgeKind;

    fn graph(n: usize, edges: &[(u32, u32)]) -> Graph {
        Graph::build(n, |f| {
            for &(a, b) in edges {
                f(a, b, EdgeKind::Ww)
            }
        })
    }

    fn sorted(mut s: Sccs) -> Vec<Vec<u32>> {
        for c in &mut s.components {
            c.sort_unstable();
        }
        s.components.sort();
        s.components
    }

    #[test]
    fn finds_only_nontrivial_components() {
        // 0 -> 1 -> 2 -> 0, 2 -> 3, 3 -> 4 -> 3, 5 alone.
        let g = graph(6, &[(0, 1), (1, 2), (2, 0), (2, 3), (3, 4), (4, 3)]);
        assert_eq!(sorted(tarjan(&g)), vec![vec![0, 1, 2], vec![3, 4]]);
        assert!(tarjan(&graph(3, &[(0, 1), (1, 2)])).components.is_empty());
    }
}
