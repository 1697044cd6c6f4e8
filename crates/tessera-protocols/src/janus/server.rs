//! The server role (Algorithms 2–5): a replica of one shard. It answers
//! PreAccept with the transaction's direct dependencies here and Accept
//! under ballots; on Commit it puts the consensus dependencies into its
//! dependency graph (shared with Rococo, [`crate::depgraph`]), waits until
//! every ancestor is committing — asking a server of an ancestor it does
//! not know (Inquire) — and executes strongly connected components in the
//! deterministic order every replica computes.
//!
//! A replica that pre-accepted a transaction and never hears its commit
//! (the Commit was lost) asks the other replicas for it after a while, so
//! every replica of a shard executes every committed transaction.

use super::msg::{Ballot, CommitInfo, Dep, Msg, Prepared};
use super::tracker::Tracker;
use super::JanusConfig;
use crate::depgraph::graph::{Decision, DepGraph};
use crate::depgraph::{run_piece, Edge, PieceReply, Status, Vertex, Wakeups};
use std::sync::Arc;
use tessera_core::ids::{Key, NodeId, ShardId, Time, TimerId, TxnId};
use tessera_core::node::{Ctx, Node, NodeReport};
use tessera_core::protocol::ServerEnv;
use tessera_core::storage::Store;
use tessera_core::topology::Topology;
use tessera_core::txn::{participants, Txn};
use tessera_core::FastMap;

/// What this replica keeps of a transaction with pieces at its shard.
struct Local {
    proc: Txn,
    /// Highest ballot seen (`highest_ballot_S[T]`).
    ballot: Ballot,
    /// The ballot at which `deps` were accepted (§3.3: a recovery
    /// coordinator must prefer an accepted value to pre-accepted ones).
    accepted: Option<Ballot>,
    /// Its dependencies here: from PreAccept, replaced by Accept.
    deps: Vec<Dep>,
    /// The piece results once executed (`processed_S[T]`).
    results: Option<Vec<PieceReply>>,
    abandon: bool,
    commit_waiters: Vec<NodeId>,
    since: Time,
}

struct Asking {
    sent_at: Time,
    tries: u32,
}

const SWEEP: TimerId = TimerId(1);

/// The server role of [`super::Janus`].
pub struct JanusServer {
    cfg: JanusConfig,
    me: NodeId,
    shard: ShardId,
    topology: Arc<Topology>,
    store: Store,
    graph: DepGraph,
    tracker: Tracker,
    locals: FastMap<TxnId, Local>,
    /// Every transaction known committing here, as committed.
    committed: FastMap<TxnId, Arc<CommitInfo>>,
    wakeups: Wakeups,
    inquiries: FastMap<TxnId, Vec<NodeId>>,
    /// Ballots promised by Prepare for transactions never pre-accepted
    /// here, so that their late PreAccept from a lower ballot is refused
    /// once a recovery coordinator may have abandoned them (§3.3).
    promised: FastMap<TxnId, Ballot>,
    asking: FastMap<TxnId, Asking>,
    executed: u64,
}

impl JanusServer {
    pub fn new(cfg: JanusConfig, env: ServerEnv) -> Self {
        JanusServer {
            cfg,
            me: env.me,
            shard: env.shard,
            topology: env.topology,
            store: env.store,
            graph: DepGraph::default(),
            tracker: Tracker::default(),
            locals: tessera_core::fast_map(),
            committed: tessera_core::fast_map(),
            wakeups: Wakeups::default(),
            inquiries: tessera_core::fast_map(),
            promised: tessera_core::fast_map(),
            asking: tessera_core::fast_map(),
            executed: 0,
        }
    }

    /// The keys `proc`'s pieces at this shard read and write.
    fn keys(&self, proc: &Txn) -> (Vec<Key>, Vec<Key>) {
        let mut reads = Vec::new();
        let mut writes = Vec::new();
        for (i, p) in proc.pieces().iter().enumerate() {
            if p.shard != self.shard {
                continue;
            }
            let spec = proc.resolve(i, &[]);
            reads.extend(spec.reads.iter().map(|a| a.key));
            writes.extend(spec.writes.iter().map(|a| a.key));
        }
        (reads, writes)
    }

    fn deps_of(&self, ids: Vec<TxnId>) -> Vec<Dep> {
        let mut deps: Vec<Dep> = ids
            .into_iter()
            .map(|t| Dep {
                txn: t,
                shards: self.shards_of(t),
            })
            .collect();
        deps.sort_unstable();
        deps.dedup_by(|a, b| a.txn == b.txn);
        deps
    }

    fn shards_of(&self, t: TxnId) -> Arc<[ShardId]> {
        if let Some(l) = self.locals.get(&t) {
            return participants(l.proc.as_ref()).into();
        }
        self.graph
            .get(t)
            .map_or_else(|| Arc::from([]), |n| n.shards.clone())
    }

    // ---- PreAccept (Algorithm 2) ----

    fn on_pre_accept(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        txn: TxnId,
        ballot: Ballot,
        proc: Txn,
    ) {
        if self.committed.contains_key(&txn) {
            return; // late: the coordinator is past PreAccept
        }
        if let Some(l) = self.locals.get_mut(&txn) {
            if l.ballot > ballot {
                ctx.send(
                    from,
                    Msg::PreAcceptNotOk {
                        txn,
                        ballot: l.ballot,
                    },
                );
                return;
            }
            l.ballot = ballot;
            ctx.send(
                from,
                Msg::PreAcceptOk {
                    txn,
                    ballot,
                    deps: l.deps.clone(),
                },
            );
            return;
        }
        if let Some(&promised) = self.promised.get(&txn) {
            if promised > ballot {
                ctx.send(
                    from,
                    Msg::PreAcceptNotOk {
                        txn,
                        ballot: promised,
                    },
                );
                return;
            }
        }
        if proc.pieces().iter().any(|p| !p.inputs.is_empty()) {
            tracing::error!(
                ?txn,
                name = proc.name(),
                "Janus runs one-shot transactions only (§3)"
            );
            return;
        }
        let (reads, writes) = self.keys(&proc);
        let mut ids = Vec::new();
        self.tracker.pre_accept(txn, &reads, &writes, &mut ids);
        let deps = self.deps_of(ids);
        self.locals.insert(
            txn,
            Local {
                proc,
                ballot,
                accepted: None,
                deps: deps.clone(),
                results: None,
                abandon: false,
                commit_waiters: Vec::new(),
                since: ctx.now(),
            },
        );
        ctx.send(from, Msg::PreAcceptOk { txn, ballot, deps });
    }

    // ---- Accept (Algorithm 3) ----

    fn on_accept(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        txn: TxnId,
        ballot: Ballot,
        deps: &[Dep],
    ) {
        let committed = self.committed.contains_key(&txn);
        let Some(l) = self.locals.get_mut(&txn) else {
            // Never pre-accepted here (lost): accepting needs the procedure,
            // which the Commit will bring; a majority elsewhere suffices.
            return;
        };
        if committed || l.ballot > ballot {
            ctx.send(
                from,
                Msg::AcceptNotOk {
                    txn,
                    ballot: l.ballot,
                },
            );
            return;
        }
        l.ballot = ballot;
        l.accepted = Some(ballot);
        l.deps = deps.to_vec();
        ctx.send(from, Msg::AcceptOk { txn, ballot });
    }

    // ---- Prepare (§3.3, the replica's side of recovery) ----

    /// Promises `ballot` unless a higher one was seen, and reports what is
    /// held of `txn`; a committed transaction is answered with its Commit,
    /// which the recovery coordinator then only has to spread.
    fn on_prepare(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId, ballot: Ballot) {
        if let Some(info) = self.committed.get(&txn) {
            ctx.send(from, Msg::InquireOk(info.clone()));
            return;
        }
        let seen = match self.locals.get(&txn) {
            Some(l) => l.ballot,
            None => self.promised.get(&txn).copied().unwrap_or(0),
        };
        // Algorithm 7, l. 87: only a strictly higher ballot refuses, so a
        // recovery coordinator's retransmitted Prepare is promised again.
        if seen > ballot {
            ctx.send(from, Msg::PrepareNotOk { txn, ballot: seen });
            return;
        }
        let prepared = match self.locals.get_mut(&txn) {
            Some(l) => {
                l.ballot = ballot;
                Some(Prepared {
                    accepted: l.accepted,
                    deps: l.deps.clone(),
                })
            }
            None => {
                self.promised.insert(txn, ballot);
                None
            }
        };
        ctx.send(
            from,
            Msg::PrepareOk {
                txn,
                ballot,
                prepared,
            },
        );
    }

    // ---- Commit (Algorithm 4) ----

    /// Put a committed transaction into the graph: its dependencies replace
    /// whatever this replica had (l. 39), its status becomes committing.
    fn apply_commit(&mut self, ctx: &mut Ctx<Msg>, info: Arc<CommitInfo>) {
        let t = info.txn;
        if self.committed.contains_key(&t) {
            return;
        }
        self.promised.remove(&t);
        let shards: Arc<[ShardId]> = participants(info.proc.as_ref()).into();
        let mine = shards.contains(&self.shard);
        let mut rose = Vec::new();
        for d in &info.deps {
            let v = Vertex {
                txn: d.txn,
                status: Status::Started,
                shards: d.shards.clone(),
                parents: Vec::new(),
                scc: None,
            };
            self.graph.merge(&v, 0, &mut rose);
        }
        if mine {
            self.graph.start_local(t, shards.clone(), 0);
            let l = self.locals.entry(t).or_insert_with(|| Local {
                proc: info.proc.clone(),
                ballot: 0,
                accepted: None,
                deps: Vec::new(),
                results: None,
                abandon: false,
                commit_waiters: Vec::new(),
                since: ctx.now(),
            });
            l.deps = info.deps.clone();
            l.abandon = info.abandon;
        } else {
            let v = Vertex {
                txn: t,
                status: Status::Started,
                shards,
                parents: Vec::new(),
                scc: None,
            };
            self.graph.merge(&v, 0, &mut rose);
        }
        let parents: Vec<(TxnId, Edge)> = info.deps.iter().map(|d| (d.txn, Edge::D)).collect();
        self.graph.add_parents(t, &parents);
        self.graph.raise(t, Status::Committing, 0);
        self.committed.insert(t, info);
        self.asking.remove(&t);
        self.wakeups.wake(t);
        if let Some(askers) = self.inquiries.remove(&t) {
            let info = self.committed[&t].clone();
            for a in askers {
                ctx.send(a, Msg::InquireOk(info.clone()));
            }
        }
        if mine {
            self.wakeups.push(t);
        }
        self.drain(ctx);
    }

    fn on_commit(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, info: Arc<CommitInfo>) {
        let t = info.txn;
        let involves = info.proc.pieces().iter().any(|p| p.shard == self.shard);
        if !involves {
            tracing::warn!(txn = ?t, "commit for a transaction without pieces here");
            return;
        }
        if let Some(l) = self.locals.get_mut(&t) {
            if let Some(results) = &l.results {
                ctx.send(
                    from,
                    Msg::CommitOk {
                        txn: t,
                        abandon: l.abandon,
                        results: results.clone(),
                    },
                );
                return;
            }
        }
        self.apply_commit(ctx, info);
        if let Some(l) = self.locals.get_mut(&t) {
            match &l.results {
                Some(results) => ctx.send(
                    from,
                    Msg::CommitOk {
                        txn: t,
                        abandon: l.abandon,
                        results: results.clone(),
                    },
                ),
                None if !l.commit_waiters.contains(&from) => l.commit_waiters.push(from),
                None => {}
            }
        }
    }

    fn drain(&mut self, ctx: &mut Ctx<Msg>) {
        while let Some(t) = self.wakeups.pop() {
            self.progress(ctx, t);
        }
    }

    /// Wait & Inquire, then Execute (Algorithms 4 and 5) as far as `t` can
    /// go now.
    fn progress(&mut self, ctx: &mut Ctx<Msg>, t: TxnId) {
        match self.graph.status(t) {
            None | Some(Status::Started) => {}
            Some(Status::Committing) => match self.graph.decide(t) {
                Decision::Blocked(ancestors) => {
                    for a in ancestors {
                        self.wakeups.wait(a, t);
                        // An ancestor with pieces here will normally be
                        // committed here by its coordinator: ask only if it
                        // does not come (the sweep sends it).
                        let here = self.locals.contains_key(&a);
                        self.ask(ctx, a, !here);
                    }
                }
                Decision::Scc(members) => {
                    let members: Arc<[TxnId]> = members.into();
                    let mut rose = Vec::new();
                    self.graph.mark_decided(&members, 0, &mut rose);
                    self.try_execute(ctx, t);
                }
            },
            Some(Status::Decided) => self.try_execute(ctx, t),
        }
    }

    /// Algorithm 5: run the component once every ancestor outside it with
    /// pieces here is processed; members in the deterministic order.
    fn try_execute(&mut self, ctx: &mut Ctx<Msg>, t: TxnId) {
        let members = self.graph.members(t);
        if let Some(p) = self.blocker(&members) {
            self.wakeups.wait(p, t);
            if self.graph.status(p) == Some(Status::Started) {
                self.ask(ctx, p, true);
            }
            return;
        }
        for &m in members.iter() {
            if self.graph.get(m).is_some_and(|n| n.local && !n.finished) {
                self.execute(ctx, m);
            }
        }
    }

    /// An unprocessed ancestor with pieces here outside `members`. Unlike
    /// Rococo's one-hop graph, the committed graph may order two local
    /// transactions only through a path over transactions that do not
    /// involve this shard, so the walk goes through those. A non-local
    /// vertex found with nothing unprocessed behind it is marked finished
    /// (its ancestors are fixed), which keeps later walks short.
    fn blocker(&mut self, members: &[TxnId]) -> Option<TxnId> {
        let mut stack: Vec<TxnId> = Vec::new();
        let mut seen: Vec<TxnId> = members.to_vec();
        for &m in members {
            if let Some(n) = self.graph.get(m) {
                stack.extend(n.parents.iter().map(|(p, _)| *p));
            }
        }
        let mut through = Vec::new();
        while let Some(v) = stack.pop() {
            if seen.contains(&v) {
                continue;
            }
            seen.push(v);
            let Some(n) = self.graph.get(v) else { continue };
            if n.finished {
                continue;
            }
            if n.local || n.status == Status::Started {
                return Some(v);
            }
            through.push(v);
            stack.extend(n.parents.iter().map(|(p, _)| *p));
        }
        for v in through {
            if let Some(n) = self.graph.get_mut(v) {
                n.finished = true;
            }
        }
        None
    }

    /// Algorithm 4, ll. 53–57: execute `t`'s pieces here unless abandoned,
    /// mark it processed, reply to who asked.
    fn execute(&mut self, ctx: &mut Ctx<Msg>, t: TxnId) {
        let proc = self.locals[&t].proc.clone();
        let abandon = self.locals[&t].abandon;
        let (reads, writes) = self.keys(&proc);
        let mut results = Vec::new();
        if !abandon {
            let mut written = Vec::new();
            for (i, p) in proc.pieces().iter().enumerate() {
                if p.shard != self.shard {
                    continue;
                }
                let spec = proc.resolve(i, &[]);
                results.push(run_piece(
                    &mut self.store,
                    t,
                    &mut written,
                    &proc,
                    &spec,
                    i as u16,
                    &[],
                ));
            }
            self.executed += 1;
        }
        self.tracker.finished(t, &reads, &writes, !abandon);
        let l = self.locals.get_mut(&t).expect("local");
        for w in l.commit_waiters.drain(..) {
            ctx.send(
                w,
                Msg::CommitOk {
                    txn: t,
                    abandon,
                    results: results.clone(),
                },
            );
        }
        l.results = Some(results);
        if let Some(n) = self.graph.get_mut(t) {
            n.finished = true;
        }
        tracing::trace!(me = ?self.me, txn = ?t, "executed");
        self.wakeups.wake(t);
    }

    // ---- Inquire ----

    /// Ask a server that `a` involves for it (Algorithm 4, l. 45); `now`:
    /// send at once, else let the sweep send it after a retransmit period.
    fn ask(&mut self, ctx: &mut Ctx<Msg>, a: TxnId, now: bool) {
        if self.asking.contains_key(&a) {
            return;
        }
        if now {
            if let Some(to) = self.inquiree(a, 0) {
                ctx.send(to, Msg::Inquire { txn: a });
            }
        }
        self.asking.insert(
            a,
            Asking {
                sent_at: ctx.now(),
                tries: 0,
            },
        );
    }

    /// The `tries`-th server to ask about `a`: the replicas of its shards,
    /// other than this one, in turn.
    fn inquiree(&self, a: TxnId, tries: u32) -> Option<NodeId> {
        let shards = self.shards_of(a);
        let all: Vec<NodeId> = shards
            .iter()
            .flat_map(|s| self.topology.shards[s.0 as usize].replicas.iter().copied())
            .filter(|n| *n != self.me)
            .collect();
        (!all.is_empty()).then(|| all[tries as usize % all.len()])
    }

    fn on_inquire(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId) {
        if let Some(info) = self.committed.get(&txn) {
            ctx.send(from, Msg::InquireOk(info.clone()));
        } else {
            let askers = self.inquiries.entry(txn).or_default();
            if !askers.contains(&from) {
                askers.push(from);
            }
        }
    }

    // ---- timers ----

    fn sweep(&mut self, ctx: &mut Ctx<Msg>) {
        let now = ctx.now();
        // Pre-accepted here and never committed here: ask the others.
        let mut stale: Vec<TxnId> = self
            .locals
            .iter()
            .filter(|(t, l)| {
                !self.committed.contains_key(t)
                    && !self.asking.contains_key(t)
                    && now.saturating_sub(l.since) > self.cfg.inquire_after
            })
            .map(|(t, _)| *t)
            .collect();
        stale.sort_unstable();
        for t in stale {
            self.ask(ctx, t, true);
        }
        let mut resend = Vec::new();
        for (&a, ask) in self.asking.iter_mut() {
            let rto = self.cfg.retransmit.saturating_mul(1 << ask.tries.min(3));
            if now.saturating_sub(ask.sent_at) >= rto {
                ask.tries += 1;
                ask.sent_at = now;
                resend.push((a, ask.tries));
            }
        }
        resend.sort_unstable();
        for (a, tries) in resend {
            if let Some(to) = self.inquiree(a, tries) {
                ctx.send(to, Msg::Inquire { txn: a });
            }
        }
        ctx.set_timer(self.cfg.sweep, SWEEP);
    }
}

impl Node<Msg> for JanusServer {
    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        ctx.set_timer(self.cfg.sweep, SWEEP);
    }

    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        match msg {
            Msg::PreAccept { txn, ballot, proc } => {
                self.on_pre_accept(ctx, from, txn, ballot, proc)
            }
            Msg::Accept { txn, ballot, deps } => self.on_accept(ctx, from, txn, ballot, &deps),
            Msg::Commit(info) => self.on_commit(ctx, from, info),
            Msg::Prepare { txn, ballot } => self.on_prepare(ctx, from, txn, ballot),
            Msg::Inquire { txn } => self.on_inquire(ctx, from, txn),
            Msg::InquireOk(info) => self.apply_commit(ctx, info),
            Msg::PreAcceptOk { .. }
            | Msg::PrepareOk { .. }
            | Msg::PrepareNotOk { .. }
            | Msg::PreAcceptNotOk { .. }
            | Msg::AcceptOk { .. }
            | Msg::AcceptNotOk { .. }
            | Msg::CommitOk { .. } => {
                tracing::warn!(?from, "server got a coordinator's message");
            }
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<Msg>, id: TimerId) {
        if id == SWEEP {
            self.sweep(ctx);
        }
    }

    fn store(&self) -> Option<&Store> {
        Some(&self.store)
    }

    /// What is left unfinished here (at the end of a run, after quiescence,
    /// both should be 0), and how many transactions this replica executed.
    fn take_report(&mut self) -> NodeReport {
        let waiting = self
            .locals
            .iter()
            .filter(|(t, l)| self.committed.contains_key(t) && l.results.is_none())
            .count() as u64;
        let uncommitted = self
            .locals
            .keys()
            .filter(|t| !self.committed.contains_key(t))
            .count() as u64;
        NodeReport {
            client: None,
            counters: vec![
                ("janus_executed", std::mem::take(&mut self.executed)),
                ("janus_committed_unexecuted", waiting),
                ("janus_preaccepted_uncommitted", uncommitted),
            ],
        }
    }
}
