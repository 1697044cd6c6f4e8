//! Strongly connected components (Tarjan), without recursion.
//!
//! A history is cyclic iff its graph has a component of two or more nodes
//! (the graph has no self-edges). Histories have 10^5..10^6 transactions and
//! dependency chains as long as the history, so a recursive depth-first
//! search would overflow the stack: this one keeps its own call stack of
//! (node, next edge) frames.

use crate::graph::Graph;
use crate::index::NONE;

pub(crate) struct Sccs {
    /// Node -> index into `components`, or `NONE` for a single-node
    /// component.
    pub comp: Vec<u32>,
    /// The components with two or more nodes, in the order Tarjan finishes
    /// them.
    pub components: Vec<Vec<u32>>,
}

/// Tarjan's bookkeeping, shared by the explicit call stack.
struct State<'g> {
    g: &'g Graph,
    index: Vec<u32>,
    low: Vec<u32>,
    on_stack: Vec<bool>,
    stack: Vec<u32>,
    /// Frames: (node, position of its next edge to explore).
    call: Vec<(u32, usize)>,
    next_index: u32,
}

impl State<'_> {
    fn visit(&mut self, v: u32) {
        self.index[v as usize] = self.next_index;
        self.low[v as usize] = self.next_index;
        self.next_index += 1;
        self.stack.push(v);
        self.on_stack[v as usize] = true;
        self.call.push((v, self.g.edge_range(v).start));
    }
}

pub(crate) fn tarjan(g: &Graph) -> Sccs {
    let n = g.len();
    let mut s = State {
        g,
        index: vec![NONE; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        call: Vec::new(),
        next_index: 0,
    };
    let mut comp = vec![NONE; n];
    let mut components = Vec::new();

    for root in 0..n as u32 {
        if s.index[root as usize] != NONE {
            continue;
        }
        s.visit(root);
        while let Some(&(v, pos)) = s.call.last() {
            if pos < g.edge_range(v).end {
                s.call.last_mut().expect("non-empty").1 += 1;
                let w = g.target(pos);
                if s.index[w as usize] == NONE {
                    s.visit(w);
                } else if s.on_stack[w as usize] {
                    s.low[v as usize] = s.low[v as usize].min(s.index[w as usize]);
                }
                continue;
            }
            s.call.pop();
            if let Some(&(parent, _)) = s.call.last() {
                s.low[parent as usize] = s.low[parent as usize].min(s.low[v as usize]);
            }
            if s.low[v as usize] == s.index[v as usize] {
                let top = s
                    .stack
                    .iter()
                    .rposition(|&x| x == v)
                    .expect("v is on the stack");
                let members = s.stack.split_off(top);
                for &m in &members {
                    s.on_stack[m as usize] = false;
                }
                if members.len() > 1 {
                    for &m in &members {
                        comp[m as usize] = components.len() as u32;
                    }
                    components.push(members);
                }
            }
        }
    }
    Sccs { comp, components }
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

    #[test]
    fn deep_chains_do_not_recurse() {
        let n = 1_000_000u32;
        let mut edges: Vec<(u32, u32)> = (0..n - 1).map(|i| (i, i + 1)).collect();
        assert!(tarjan(&graph(n as usize, &edges)).components.is_empty());
        edges.push((n - 1, 0));
        let s = tarjan(&graph(n as usize, &edges));
        assert_eq!(s.components.len(), 1);
        assert_eq!(s.components[0].len(), n as usize);
    }
}
