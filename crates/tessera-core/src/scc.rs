//! Strongly connected components (Tarjan, 1972), without recursion.
//!
//! Shared by the isolation checker (a history is cyclic iff its dependency
//! graph has a component of two or more nodes) and by the protocols that
//! order transactions by their dependency graph (Rococo §3.2 and Janus §3
//! compute the SCC of a committing transaction). Histories have 10^5..10^6
//! transactions and dependency chains as long as the history, so a recursive
//! depth-first search would overflow the stack: this one keeps its own call
//! stack of (node, next edge) frames.

/// A directed graph on the dense nodes `0..node_count()`, as Tarjan reads
/// it: out-edges by position.
pub trait Digraph {
    fn node_count(&self) -> usize;
    fn out_degree(&self, v: u32) -> usize;
    /// The target of `v`'s `i`-th out-edge, `i < out_degree(v)`.
    fn successor(&self, v: u32, i: usize) -> u32;
}

/// A graph as adjacency lists: node `v`'s successors are `self[v]`.
impl Digraph for [Vec<u32>] {
    fn node_count(&self) -> usize {
        self.len()
    }
    fn out_degree(&self, v: u32) -> usize {
        self[v as usize].len()
    }
    fn successor(&self, v: u32, i: usize) -> u32 {
        self[v as usize][i]
    }
}

/// Marks a node outside every component of two or more nodes.
pub const SINGLETON: u32 = u32::MAX;

/// The components of a graph.
#[derive(Debug)]
pub struct Sccs {
    /// Node -> index into `components`, or [`SINGLETON`] for a node that is
    /// a component on its own.
    pub comp: Vec<u32>,
    /// The components with two or more nodes, in the order Tarjan finishes
    /// them: a component comes before every component it can be reached
    /// from (reverse topological order of the condensation).
    pub components: Vec<Vec<u32>>,
}

const UNVISITED: u32 = u32::MAX;

/// Tarjan's bookkeeping, shared by the explicit call stack.
struct State {
    index: Vec<u32>,
    low: Vec<u32>,
    on_stack: Vec<bool>,
    stack: Vec<u32>,
    /// Frames: (node, position of its next edge to explore).
    call: Vec<(u32, usize)>,
    next_index: u32,
}

impl State {
    fn visit(&mut self, v: u32) {
        self.index[v as usize] = self.next_index;
        self.low[v as usize] = self.next_index;
        self.next_index += 1;
        self.stack.push(v);
        self.on_stack[v as usize] = true;
        self.call.push((v, 0));
    }
}

/// The strongly connected components of `g`.
pub fn tarjan<G: Digraph + ?Sized>(g: &G) -> Sccs {
    let n = g.node_count();
    let mut s = State {
        index: vec![UNVISITED; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        call: Vec::new(),
        next_index: 0,
    };
    let mut comp = vec![SINGLETON; n];
    let mut components = Vec::new();

    for root in 0..n as u32 {
        if s.index[root as usize] != UNVISITED {
            continue;
        }
        s.visit(root);
        while let Some(&(v, pos)) = s.call.last() {
            if pos < g.out_degree(v) {
                s.call.last_mut().expect("non-empty").1 += 1;
                let w = g.successor(v, pos);
                if s.index[w as usize] == UNVISITED {
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

    fn graph(n: usize, edges: &[(u32, u32)]) -> Vec<Vec<u32>> {
        let mut g = vec![Vec::new(); n];
        for &(a, b) in edges {
            g[a as usize].push(b);
        }
        g
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
        let s = tarjan(g.as_slice());
        assert_eq!(s.comp[5], SINGLETON);
        assert_ne!(s.comp[0], s.comp[3]);
        assert_eq!(sorted(s), vec![vec![0, 1, 2], vec![3, 4]]);
        assert!(tarjan(graph(3, &[(0, 1), (1, 2)]).as_slice())
            .components
            .is_empty());
    }

    #[test]
    fn components_come_in_reverse_topological_order() {
        // {0,1} -> {2,3}: the sink component finishes first.
        let g = graph(4, &[(0, 1), (1, 0), (1, 2), (2, 3), (3, 2)]);
        let s = tarjan(g.as_slice());
        assert_eq!(s.components.len(), 2);
        assert!(s.components[0].contains(&2));
        assert!(s.components[1].contains(&0));
    }

    #[test]
    fn self_loops_and_parallel_edges_are_harmless() {
        let g = graph(2, &[(0, 0), (0, 1), (0, 1)]);
        assert!(tarjan(g.as_slice()).components.is_empty());
    }

    #[test]
    fn deep_chains_do_not_recurse() {
        let n = 1_000_000u32;
        let mut edges: Vec<(u32, u32)> = (0..n - 1).map(|i| (i, i + 1)).collect();
        assert!(tarjan(graph(n as usize, &edges).as_slice())
            .components
            .is_empty());
        edges.push((n - 1, 0));
        let s = tarjan(graph(n as usize, &edges).as_slice());
        assert_eq!(s.components.len(), 1);
        assert_eq!(s.components[0].len(), n as usize);
    }
}
