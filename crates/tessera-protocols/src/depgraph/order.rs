//! The commit phase's ordering step (§3.2, Fig. 7): the strongly connected
//! component of a transaction among its ancestors (Tarjan, shared with the
//! isolation checker), then a deterministic topological sort of the
//! component by its i-edges, ties broken by transaction id, so that every
//! server executes the component's deferred pieces in the same order.

use super::Edge;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use tessera_core::ids::TxnId;
use tessera_core::scc::{tarjan, SINGLETON};
use tessera_core::FastMap;

/// The component of `t` in the graph on `sub` (which holds `t` and its
/// relevant ancestors; `parents(v)` gives v's incoming edges, which may name
/// vertices outside `sub`), in execution order.
pub(crate) fn component_in_order<'a>(
    t: TxnId,
    sub: &[TxnId],
    parents: impl Fn(TxnId) -> &'a [(TxnId, Edge)],
) -> Vec<TxnId> {
    let index: FastMap<TxnId, u32> = sub
        .iter()
        .enumerate()
        .map(|(i, &v)| (v, i as u32))
        .collect();
    // Edges point from parent to child; the component is the same either
    // way, so we walk child -> parent, which is how the graph is stored.
    let adj: Vec<Vec<u32>> = sub
        .iter()
        .map(|&v| {
            parents(v)
                .iter()
                .filter_map(|(p, _)| index.get(p).copied())
                .collect()
        })
        .collect();
    let sccs = tarjan(adj.as_slice());
    let c = sccs.comp[index[&t] as usize];
    if c == SINGLETON {
        return vec![t];
    }
    let members: Vec<TxnId> = sccs.components[c as usize]
        .iter()
        .map(|&i| sub[i as usize])
        .collect();
    sort_by_i_edges(&members, parents)
}

/// Every strongly connected component of the graph on `sub` with two or
/// more members, each in execution order. (Every other vertex of `sub` is
/// a component on its own.)
pub(crate) fn components_in_order<'a>(
    sub: &[TxnId],
    parents: impl Fn(TxnId) -> &'a [(TxnId, Edge)] + Copy,
) -> Vec<Vec<TxnId>> {
    let index: FastMap<TxnId, u32> = sub
        .iter()
        .enumerate()
        .map(|(i, &v)| (v, i as u32))
        .collect();
    let adj: Vec<Vec<u32>> = sub
        .iter()
        .map(|&v| {
            parents(v)
                .iter()
                .filter_map(|(p, _)| index.get(p).copied())
                .collect()
        })
        .collect();
    tarjan(adj.as_slice())
        .components
        .iter()
        .map(|c| {
            let members: Vec<TxnId> = c.iter().map(|&i| sub[i as usize]).collect();
            sort_by_i_edges(&members, parents)
        })
        .collect()
}

/// Kahn's algorithm over the i-edges among `members`, smallest id first.
/// The offline checker guarantees the i-edges of a component are acyclic;
/// should they not be (a workload that failed the check), the smallest
/// remaining id goes next and an error is logged: every server still picks
/// the same order.
pub(crate) fn sort_by_i_edges<'a>(
    members: &[TxnId],
    parents: impl Fn(TxnId) -> &'a [(TxnId, Edge)],
) -> Vec<TxnId> {
    let pos: FastMap<TxnId, usize> = members.iter().enumerate().map(|(i, &m)| (m, i)).collect();
    let mut indegree = vec![0usize; members.len()];
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); members.len()];
    for (i, &m) in members.iter().enumerate() {
        for &(p, e) in parents(m) {
            if e != Edge::I {
                continue;
            }
            if let Some(&j) = pos.get(&p) {
                if j != i {
                    indegree[i] += 1;
                    children[j].push(i);
                }
            }
        }
    }
    let mut ready: BinaryHeap<Reverse<(TxnId, usize)>> = members
        .iter()
        .enumerate()
        .filter(|(i, _)| indegree[*i] == 0)
        .map(|(i, &m)| Reverse((m, i)))
        .collect();
    let mut done = vec![false; members.len()];
    let mut out = Vec::with_capacity(members.len());
    while out.len() < members.len() {
        let i = match ready.pop() {
            Some(Reverse((_, i))) => i,
            None => {
                tracing::error!(
                    ?members,
                    "i-edges form a cycle: the workload needs merged pieces (tessera check-workload)"
                );
                (0..members.len())
                    .filter(|&i| !done[i])
                    .min_by_key(|&i| members[i])
                    .expect("some member is left")
            }
        };
        if done[i] {
            continue;
        }
        done[i] = true;
        out.push(members[i]);
        for &c in &children[i] {
            indegree[c] = indegree[c].saturating_sub(1);
            if indegree[c] == 0 && !done[c] {
                ready.push(Reverse((members[c], c)));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::ids::NodeId;

    fn t(i: u32) -> TxnId {
        TxnId::new(NodeId(9), 0, i)
    }

    #[test]
    fn i_edges_order_before_ids() {
        // T1 <-d- T2, T2 <-i- T3 (T3 -i-> T2... ) and a d-cycle through all.
        let parents: FastMap<TxnId, Vec<(TxnId, Edge)>> = [
            (t(1), vec![(t(3), Edge::D)]),
            (t(2), vec![(t(1), Edge::D), (t(3), Edge::I)]),
            (t(3), vec![(t(2), Edge::D)]),
        ]
        .into_iter()
        .collect();
        let sub = [t(1), t(2), t(3)];
        let order = component_in_order(t(2), &sub, |v| parents[&v].as_slice());
        // T3 must precede T2 (i-edge); T1 has no i-constraint: ids decide.
        assert_eq!(order, vec![t(1), t(3), t(2)]);
    }

    #[test]
    fn outside_the_component_is_left_out() {
        let parents: FastMap<TxnId, Vec<(TxnId, Edge)>> = [
            (t(1), vec![]),
            (t(2), vec![(t(1), Edge::D), (t(3), Edge::D)]),
            (t(3), vec![(t(2), Edge::D)]),
        ]
        .into_iter()
        .collect();
        let sub = [t(1), t(2), t(3)];
        assert_eq!(
            component_in_order(t(3), &sub, |v| parents[&v].as_slice()),
            vec![t(2), t(3)]
        );
        assert_eq!(
            component_in_order(t(1), &sub, |v| parents[&v].as_slice()),
            vec![t(1)]
        );
    }
}
