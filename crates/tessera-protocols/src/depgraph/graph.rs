//! A server's dependency graph `S.dep` (§3.2): a vertex per transaction with
//! its status and its incoming edges, merged from what the server saw itself
//! (start requests, through the [`super::tracker::Tracker`]) and what commit
//! requests and status replies told it.
//!
//! Invariant: a vertex whose status is at least COMMITTING has all its
//! incoming edges (its start phase is over and the commit request carried
//! the union of its start replies), except edges from transactions that are
//! DECIDED in a component of their own, which can never join the component
//! of a later transaction and are therefore left out of messages.

use super::order;
use super::{Edge, Status, Vertex};
use std::sync::Arc;
use tessera_core::ids::{ShardId, TxnId};
use tessera_core::{FastMap, FastSet};

/// One transaction as this server knows it.
pub(crate) struct Node {
    pub status: Status,
    pub shards: Arc<[ShardId]>,
    pub parents: Vec<(TxnId, Edge)>,
    /// When DECIDED in a component of two or more: the members in their
    /// execution order.
    pub scc: Option<Arc<[TxnId]>>,
    /// The transaction has pieces at this server.
    pub local: bool,
    /// Its deferred pieces here have run (`T.finished`, §3.2).
    pub finished: bool,
    /// The epoch of the last change, for garbage collection (§3.4).
    pub epoch: u64,
    /// The STARTED ancestors the last [`DepGraph::settle`] of this
    /// COMMITTING vertex found: while one of them is still STARTED, a walk
    /// that reaches this vertex is blocked on it without going further.
    blocked_on: Vec<TxnId>,
}

/// What [`DepGraph::decide`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// These ancestors are STARTED: their edges are not all known yet.
    Blocked(Vec<TxnId>),
    /// The component of the transaction, in execution order.
    Scc(Vec<TxnId>),
}

/// A vertex [`DepGraph::collect`] dropped: what a tombstone keeps of it.
pub(crate) struct Dropped {
    pub txn: TxnId,
    pub local: bool,
    /// Its component when of two or more members, in execution order.
    pub scc: Option<Arc<[TxnId]>>,
}

#[derive(Default)]
pub(crate) struct DepGraph {
    nodes: FastMap<TxnId, Node>,
}

/// Add `(p, e)` to `parents`, keeping the stronger type of a repeated edge.
fn add_parent(parents: &mut Vec<(TxnId, Edge)>, p: TxnId, e: Edge) {
    match parents.iter_mut().find(|(q, _)| *q == p) {
        Some(slot) => slot.1 = slot.1.max(e),
        None => parents.push((p, e)),
    }
}

impl DepGraph {
    pub fn get(&self, t: TxnId) -> Option<&Node> {
        self.nodes.get(&t)
    }

    pub fn get_mut(&mut self, t: TxnId) -> Option<&mut Node> {
        self.nodes.get_mut(&t)
    }

    pub fn iter(&self) -> impl Iterator<Item = (TxnId, &Node)> {
        self.nodes.iter().map(|(&t, n)| (t, n))
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn status(&self, t: TxnId) -> Option<Status> {
        self.nodes.get(&t).map(|n| n.status)
    }

    /// The vertex of a transaction that starts here (Fig. 6,
    /// `S.dep[p.owner].status = STARTED`).
    pub fn start_local(&mut self, t: TxnId, shards: Arc<[ShardId]>, epoch: u64) {
        let n = self.nodes.entry(t).or_insert_with(|| Node {
            status: Status::Started,
            shards: shards.clone(),
            parents: Vec::new(),
            scc: None,
            local: true,
            finished: false,
            epoch,
            blocked_on: Vec::new(),
        });
        n.local = true;
        if n.shards.is_empty() {
            n.shards = shards;
        }
    }

    /// Record the edges `parents -> t` (self-edges ignored).
    pub fn add_parents(&mut self, t: TxnId, parents: &[(TxnId, Edge)]) {
        if let Some(n) = self.nodes.get_mut(&t) {
            for &(p, e) in parents {
                if p != t {
                    add_parent(&mut n.parents, p, e);
                }
            }
        }
    }

    /// Raise `t`'s status to at least `s`. True when it rose from STARTED.
    pub fn raise(&mut self, t: TxnId, s: Status, epoch: u64) -> bool {
        let Some(n) = self.nodes.get_mut(&t) else {
            return false;
        };
        let rose = n.status == Status::Started && s > Status::Started;
        if s > n.status {
            n.status = s;
            n.epoch = epoch;
        }
        rose
    }

    /// Merge what a message says about one transaction (the union of §3.2:
    /// union of edges, highest status). Returns the transactions whose status
    /// rose from STARTED, and those that became DECIDED here by it.
    pub fn merge(&mut self, v: &Vertex, epoch: u64, rose: &mut Vec<TxnId>) {
        let n = self.nodes.entry(v.txn).or_insert_with(|| Node {
            status: Status::Started,
            shards: v.shards.clone(),
            parents: Vec::new(),
            scc: None,
            local: false,
            finished: false,
            epoch,
            blocked_on: Vec::new(),
        });
        if n.shards.is_empty() {
            n.shards = v.shards.clone();
        }
        for &(p, e) in &v.parents {
            if p != v.txn {
                add_parent(&mut n.parents, p, e);
            }
        }
        n.epoch = epoch;
        if v.status == Status::Decided && n.status < Status::Decided {
            // A DECIDED vertex names its exact component (every server
            // computes the same one), so it can be adopted as it is.
            let members: Arc<[TxnId]> = v.scc.clone().unwrap_or_else(|| Arc::from([v.txn]));
            self.mark_decided(&members, epoch, rose);
        } else if v.status > Status::Started && n.status == Status::Started {
            n.status = v.status;
            rose.push(v.txn);
        }
    }

    /// Set the members of one component DECIDED, with their order. Members
    /// this server has not heard of get a vertex of their own.
    pub fn mark_decided(&mut self, members: &Arc<[TxnId]>, epoch: u64, rose: &mut Vec<TxnId>) {
        let scc = (members.len() > 1).then(|| members.clone());
        for &m in members.iter() {
            let n = self.nodes.entry(m).or_insert_with(|| Node {
                status: Status::Started,
                shards: Arc::from([]),
                parents: Vec::new(),
                scc: None,
                local: false,
                finished: false,
                epoch,
                blocked_on: Vec::new(),
            });
            if n.status == Status::Decided {
                continue;
            }
            rose.push(m);
            n.status = Status::Decided;
            n.scc = scc.clone();
            n.epoch = epoch;
        }
    }

    /// The component of a transaction, as DECIDED here: its members in
    /// execution order.
    pub fn members(&self, t: TxnId) -> Arc<[TxnId]> {
        match self.nodes.get(&t).and_then(|n| n.scc.clone()) {
            Some(s) => s,
            None => Arc::from([t]),
        }
    }

    /// A vertex is a cut-off of an ancestor walk from `t` when it is DECIDED
    /// (or forgotten, which implies DECIDED) in a component without `t`: it
    /// and its ancestors cannot be descendants of `t`, so they are not in
    /// `t`'s component (§3.2: the component of a DECIDED transaction is
    /// final, and every server computes the same one).
    fn cut_off(&self, v: TxnId, t: TxnId) -> bool {
        match self.nodes.get(&v) {
            None => true,
            Some(n) if v != t && n.status == Status::Decided => {
                !n.scc.as_ref().is_some_and(|s| s.contains(&t))
            }
            Some(_) => false,
        }
    }

    /// Fig. 7: once every ancestor of the COMMITTING transaction `t` is at
    /// least COMMITTING, its strongly connected component (Tarjan) in
    /// deterministic execution order; otherwise the ancestors to wait for.
    pub fn decide(&self, t: TxnId) -> Decision {
        match self.walk(t) {
            Ok(sub) => Decision::Scc(order::component_in_order(t, &sub, |v| {
                self.nodes[&v].parents.as_slice()
            })),
            Err(blocked) => Decision::Blocked(blocked),
        }
    }

    /// `t` and its ancestors up to DECIDED ones outside its component, or
    /// the STARTED ancestors to wait for (sorted).
    fn walk(&self, t: TxnId) -> Result<Vec<TxnId>, Vec<TxnId>> {
        match self.walk_with(t, true) {
            // A walk that took shortcuts has not seen every ancestor.
            (Ok(_), true) => self.walk_with(t, false).0,
            (result, _) => result,
        }
    }

    /// [`Self::walk`]; with `shortcuts`, through the STARTED ancestors that
    /// blocked a COMMITTING vertex's last settle (`blocked_on`) instead of
    /// through its parents. What lies behind a COMMITTING vertex changes
    /// only where a STARTED vertex rose (its edges became known), and
    /// nothing in between can be DECIDED while a STARTED vertex is behind
    /// it; so the STARTED ancestors found are those still STARTED among the
    /// recorded ones plus those behind the ones that rose — the full walk's
    /// set, and the same waits and inquiries follow. Only a blocked result
    /// is final: the vertices passed are not all of them. Without this,
    /// every transaction committing behind a STARTED one walked the whole
    /// COMMITTING history in between, again at each wake-up (a Janus TPC-C
    /// run: 97% of walks blocked, ~270 vertices each).
    /// Also says whether a shortcut was taken.
    fn walk_with(&self, t: TxnId, shortcuts: bool) -> (Result<Vec<TxnId>, Vec<TxnId>>, bool) {
        let mut took = false;
        let mut seen: FastSet<TxnId> = tessera_core::fast_set();
        let mut stack = vec![t];
        seen.insert(t);
        let mut sub: Vec<TxnId> = Vec::new();
        // Shortcuts name the same STARTED ancestors again and again (every
        // vertex blocked behind one records it): keep each once, or the
        // sort below handles every repetition (a janus-micro-wan run at
        // zipf 0.7: a fifth of the time in sorting them).
        let mut blocked = Vec::new();
        let mut named: FastSet<TxnId> = tessera_core::fast_set();
        while let Some(v) = stack.pop() {
            if self.cut_off(v, t) {
                continue;
            }
            let n = &self.nodes[&v];
            if n.status == Status::Started {
                if named.insert(v) {
                    blocked.push(v);
                }
                continue;
            }
            sub.push(v);
            if shortcuts && !n.blocked_on.is_empty() {
                took = true;
                for &w in &n.blocked_on {
                    if self.status(w) == Some(Status::Started) {
                        if named.insert(w) {
                            blocked.push(w);
                        }
                    } else if seen.insert(w) {
                        stack.push(w);
                    }
                }
                continue;
            }
            for &(p, _) in &n.parents {
                if seen.insert(p) {
                    stack.push(p);
                }
            }
        }
        if blocked.is_empty() {
            (Ok(sub), took)
        } else {
            blocked.sort_unstable();
            blocked.dedup();
            (Err(blocked), took)
        }
    }

    /// [`Self::decide`], and when `t` can be decided, every ancestor the
    /// walk passed is decided too: each is COMMITTING with all its
    /// ancestors at least COMMITTING. Only for a protocol whose COMMITTING
    /// vertices have final parents (Janus: the consensus dependencies);
    /// without it a vertex that never involves this server stays
    /// COMMITTING, and every later walk crosses it and all its ancestors
    /// again, so deciding costs grow with the history. Returns `t`'s
    /// component in execution order; the newly decided vertices go to
    /// `rose`.
    /// A blocked settle remembers what blocked `t` (see [`Self::walk`]).
    pub fn settle(&mut self, t: TxnId, epoch: u64, rose: &mut Vec<TxnId>) -> Decision {
        let sub = match self.walk(t) {
            Ok(sub) => sub,
            Err(blocked) => {
                if let Some(n) = self.nodes.get_mut(&t) {
                    n.blocked_on.clone_from(&blocked);
                }
                return Decision::Blocked(blocked);
            }
        };
        if let Some(n) = self.nodes.get_mut(&t) {
            n.blocked_on = Vec::new();
        }
        let nodes = &self.nodes;
        let components = order::components_in_order(&sub, |v| nodes[&v].parents.as_slice());
        let mut mine = vec![t];
        for c in components {
            if c.contains(&t) {
                mine = c.clone();
            }
            self.mark_decided(&c.into(), epoch, rose);
        }
        for v in sub {
            if self.nodes[&v].status == Status::Committing {
                self.mark_decided(&Arc::from([v]), epoch, rose);
            }
        }
        Decision::Scc(mine)
    }

    /// What to tell others about `t` (§3.4): `t` itself and, unless it is
    /// DECIDED, its undecided ancestors with their edges. DECIDED ancestors
    /// of a component of their own are left out (with the edges from them);
    /// those of a larger component are sent with their component, no edges.
    pub fn export(&self, t: TxnId) -> Vec<Vertex> {
        let mut out = Vec::new();
        let mut seen: FastSet<TxnId> = tessera_core::fast_set();
        let mut stack = vec![t];
        seen.insert(t);
        while let Some(v) = stack.pop() {
            let Some(n) = self.nodes.get(&v) else {
                continue;
            };
            if n.status == Status::Decided {
                out.push(Vertex {
                    txn: v,
                    status: Status::Decided,
                    shards: n.shards.clone(),
                    parents: Vec::new(),
                    scc: n.scc.clone(),
                });
                continue;
            }
            let mut parents = Vec::with_capacity(n.parents.len());
            for &(p, e) in &n.parents {
                let keep = self
                    .nodes
                    .get(&p)
                    .is_some_and(|pn| pn.status < Status::Decided || pn.scc.is_some());
                if !keep {
                    continue;
                }
                parents.push((p, e));
                if seen.insert(p) {
                    stack.push(p);
                }
            }
            out.push(Vertex {
                txn: v,
                status: n.status,
                shards: n.shards.clone(),
                parents,
                scc: None,
            });
        }
        out
    }

    /// Drop `t`'s vertex: a protocol replaying its log drops what it had
    /// collected before a crash (Janus, [`crate::janus`]).
    pub fn remove(&mut self, t: TxnId) {
        self.nodes.remove(&t);
    }
    /// Drop vertices no longer needed (§3.4 epochs), shared by Rococo and
    /// Janus: untouched for two epochs, local ones DECIDED and finished,
    /// no local member of their component unfinished, and
    /// `may_drop(txn, node)` (the protocol's own conditions). The last rule
    /// keeps a component whole while any of its members here still has to
    /// run: a later walk that meets a forgotten member must be able to
    /// take it as a cut-off (DECIDED outside the walker's component), which
    /// holds only once the whole component is done here.
    /// Returns each dropped vertex with whether it was local and its
    /// component (for the protocol's tombstone).
    pub fn collect(&mut self, epoch: u64, may_drop: impl Fn(TxnId, &Node) -> bool) -> Vec<Dropped> {
        let nodes = &self.nodes;
        let unfinished = |m: &TxnId| nodes.get(m).is_some_and(|n| n.local && !n.finished);
        let doomed: Vec<TxnId> = nodes
            .iter()
            .filter(|(&t, n)| {
                n.epoch + 2 <= epoch
                    && (!n.local || (n.status == Status::Decided && n.finished))
                    && !n.scc.as_ref().is_some_and(|s| s.iter().any(unfinished))
                    && may_drop(t, n)
            })
            .map(|(&t, _)| t)
            .collect();
        doomed
            .into_iter()
            .map(|t| {
                let n = self.nodes.remove(&t).expect("listed");
                Dropped {
                    txn: t,
                    local: n.local,
                    scc: n.scc,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::ids::NodeId;

    fn t(i: u32) -> TxnId {
        TxnId::new(NodeId(9), 0, i)
    }

    fn vertex(i: u32, status: Status, parents: &[(u32, Edge)]) -> Vertex {
        Vertex {
            txn: t(i),
            status,
            shards: Arc::from([ShardId(0)]),
            parents: parents.iter().map(|&(p, e)| (t(p), e)).collect(),
            scc: None,
        }
    }

    fn graph(vs: &[Vertex]) -> DepGraph {
        let mut g = DepGraph::default();
        let mut rose = Vec::new();
        for v in vs {
            g.merge(v, 0, &mut rose);
        }
        g
    }

    #[test]
    fn waits_for_started_ancestors() {
        let g = graph(&[
            vertex(1, Status::Started, &[]),
            vertex(2, Status::Committing, &[(1, Edge::D)]),
            vertex(3, Status::Committing, &[(2, Edge::D)]),
        ]);
        assert_eq!(g.decide(t(3)), Decision::Blocked(vec![t(1)]));
    }

    #[test]
    fn a_cycle_is_one_component_ordered_by_id() {
        let g = graph(&[
            vertex(2, Status::Committing, &[(1, Edge::D)]),
            vertex(1, Status::Committing, &[(2, Edge::D)]),
        ]);
        assert_eq!(g.decide(t(2)), Decision::Scc(vec![t(1), t(2)]));
        assert_eq!(g.decide(t(1)), Decision::Scc(vec![t(1), t(2)]));
    }

    /// Janus's life of a graph at random: vertices appear STARTED as
    /// dependencies, rise to COMMITTING with their final parents, and are
    /// settled (blocked ones remember their blockers). After every step
    /// the shortcut walk finds exactly the full walk's STARTED ancestors.
    #[test]
    fn shortcut_walks_find_what_full_walks_find() {
        use rand::{Rng, SeedableRng};
        for seed in 0..200u64 {
            let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
            let n = 24u32;
            let mut g = DepGraph::default();
            let mut rose = Vec::new();
            for i in 0..n {
                g.merge(&vertex(i, Status::Started, &[]), 0, &mut rose);
            }
            for _ in 0..120 {
                let v = t(rng.random_range(0..n));
                match g.status(v) {
                    Some(Status::Started) => {
                        let parents: Vec<(TxnId, Edge)> = (0..rng.random_range(0..4))
                            .map(|_| (t(rng.random_range(0..n)), Edge::D))
                            .collect();
                        g.add_parents(v, &parents);
                        g.raise(v, Status::Committing, 0);
                    }
                    Some(Status::Committing) => {
                        g.settle(v, 0, &mut rose);
                    }
                    _ => {}
                }
                for i in 0..n {
                    let u = t(i);
                    if g.status(u) != Some(Status::Committing) {
                        continue;
                    }
                    let full = g.walk_with(u, false).0.err();
                    let short = g.walk_with(u, true).0.err();
                    assert_eq!(short, full, "seed {seed}, walk from {i}");
                }
            }
        }
    }

    #[test]
    fn decided_ancestors_cut_the_walk() {
        let mut g = graph(&[
            vertex(1, Status::Started, &[]),
            vertex(2, Status::Committing, &[(1, Edge::D)]),
            vertex(3, Status::Committing, &[(2, Edge::D)]),
        ]);
        let mut rose = Vec::new();
        g.mark_decided(&Arc::from([t(2)]), 0, &mut rose);
        assert_eq!(g.decide(t(3)), Decision::Scc(vec![t(3)]));
        // Exported without the edge from the decided singleton.
        let e = g.export(t(3));
        assert_eq!(e.len(), 1);
        assert!(e[0].parents.is_empty());
    }

    #[test]
    fn a_decided_component_is_adopted_whole() {
        let mut g = graph(&[vertex(3, Status::Committing, &[(1, Edge::D)])]);
        let mut rose = Vec::new();
        let mut v = vertex(1, Status::Decided, &[]);
        v.scc = Some(Arc::from([t(1), t(3)]));
        g.merge(&v, 0, &mut rose);
        assert_eq!(g.status(t(3)), Some(Status::Decided));
        assert_eq!(&*g.members(t(3)), &[t(1), t(3)]);
    }
}
