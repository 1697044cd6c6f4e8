//! The coordinator role (Algorithm 1): PreAccept to every replica of every
//! participating shard, in parallel; the fast path to Commit when every
//! shard's replicas all returned identical dependencies, else Accept (ballot
//! 0) with the union from a majority; Commit; the client's answer from the
//! first replica of each shard to reply (the nearest, §3.1).
//!
//! Requests are resent to the replicas that have not answered until the
//! phase completes. A Janus coordinator never aborts for a conflict.

use super::msg::{Ballot, CommitInfo, Dep, Msg};
use super::quorum::{choose, Path};
use super::JanusConfig;
use crate::depgraph::PieceReply;
use std::sync::Arc;
use tessera_core::ids::{NodeId, ShardId, Time, TimerId, TxnId};
use tessera_core::node::{Ctx, Node, NodeReport};
use tessera_core::protocol::{Coordinator, CoordinatorEnv};
use tessera_core::topology::Topology;
use tessera_core::txn::{participants, AbortReason, Attempt, Txn, TxnOutcome};
use tessera_core::FastMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    PreAccept,
    Accept,
    Commit,
}

/// One transaction through Algorithm 1.
struct Driver {
    txn: TxnId,
    proc: Txn,
    /// Per participating shard, its replicas.
    groups: Vec<Vec<NodeId>>,
    phase: Phase,
    ballot: Ballot,
    /// Per shard, per replica: its PreAccept-OK dependencies.
    pre: Vec<Vec<Option<Vec<Dep>>>>,
    /// Per shard, per replica: Accept-OK received.
    accepted: Vec<Vec<bool>>,
    deps: Arc<Vec<Dep>>,
    commit: Option<Arc<CommitInfo>>,
    /// Per shard: the first replica's results.
    results: Vec<Option<Vec<PieceReply>>>,
    /// Per shard, per replica: its CommitOk came (it executed). The client
    /// has its answer at the first per shard; the Commit is still resent to
    /// the others, since a replica that missed both PreAccept and Commit
    /// would otherwise never learn the transaction.
    executed: Vec<Vec<bool>>,
    /// Commit resends after the client's answer, bounded.
    late_resends: u32,
    abandon: bool,
    retransmit_at: Time,
    rto: Time,
}

impl Driver {
    fn new(txn: TxnId, proc: Txn, topology: &Topology, now: Time, rto: Time) -> Self {
        let shards: Vec<ShardId> = participants(proc.as_ref());
        let groups: Vec<Vec<NodeId>> = shards
            .iter()
            .map(|s| topology.shards[s.0 as usize].replicas.clone())
            .collect();
        Driver {
            txn,
            proc,
            pre: groups.iter().map(|g| vec![None; g.len()]).collect(),
            accepted: groups.iter().map(|g| vec![false; g.len()]).collect(),
            results: vec![None; groups.len()],
            executed: groups.iter().map(|g| vec![false; g.len()]).collect(),
            late_resends: 0,
            groups,
            phase: Phase::PreAccept,
            ballot: 0,
            deps: Arc::new(Vec::new()),
            commit: None,
            abandon: false,
            retransmit_at: now + rto,
            rto,
        }
    }

    fn locate(&self, from: NodeId) -> Option<(usize, usize)> {
        self.groups
            .iter()
            .enumerate()
            .find_map(|(s, g)| g.iter().position(|n| *n == from).map(|i| (s, i)))
    }

    /// Send the current phase's request to every replica that has not
    /// answered it.
    fn send(&self, ctx: &mut Ctx<Msg>) {
        for (s, g) in self.groups.iter().enumerate() {
            for (i, &node) in g.iter().enumerate() {
                let msg = match self.phase {
                    Phase::PreAccept if self.pre[s][i].is_none() => Msg::PreAccept {
                        txn: self.txn,
                        ballot: self.ballot,
                        proc: self.proc.clone(),
                    },
                    Phase::Accept if !self.accepted[s][i] => Msg::Accept {
                        txn: self.txn,
                        ballot: self.ballot,
                        deps: self.deps.clone(),
                    },
                    Phase::Commit if !self.executed[s][i] => {
                        Msg::Commit(self.commit.clone().expect("commit phase has its info"))
                    }
                    _ => continue,
                };
                ctx.send(node, msg);
            }
        }
    }

    fn enter(&mut self, ctx: &mut Ctx<Msg>, phase: Phase, base_rto: Time) {
        self.phase = phase;
        self.rto = base_rto;
        self.retransmit_at = ctx.now() + base_rto;
        if phase == Phase::Commit {
            self.commit = Some(Arc::new(CommitInfo {
                txn: self.txn,
                proc: self.proc.clone(),
                deps: self.deps.as_ref().clone(),
                abandon: self.abandon,
            }));
        }
        self.send(ctx);
    }

    /// Algorithm 1, ll. 4–13, with `patient` false once a retransmit period
    /// passed without every replica's reply.
    fn after_pre_accept(&mut self, ctx: &mut Ctx<Msg>, patient: bool, rto: Time) -> Option<bool> {
        match choose(&self.pre, patient) {
            Path::Wait => None,
            Path::Fast(deps) => {
                self.deps = Arc::new(deps);
                self.enter(ctx, Phase::Commit, rto);
                Some(true)
            }
            Path::Slow(deps) => {
                self.deps = Arc::new(deps);
                self.enter(ctx, Phase::Accept, rto);
                Some(false)
            }
        }
    }

    fn outcome(&self) -> Option<TxnOutcome> {
        if self.results.iter().any(|r| r.is_none()) {
            return None;
        }
        if self.abandon {
            return Some(TxnOutcome::Aborted(AbortReason::Timeout));
        }
        let mut replies: Vec<&PieceReply> = self.results.iter().flatten().flatten().collect();
        replies.sort_unstable_by_key(|r| r.piece);
        let mut reads = Vec::new();
        let mut writes = Vec::new();
        let mut outputs = Vec::with_capacity(replies.len());
        for r in replies {
            reads.extend_from_slice(&r.reads);
            writes.extend_from_slice(&r.writes);
            outputs.push(r.output.clone());
        }
        Some(TxnOutcome::Committed {
            reads,
            writes,
            outputs,
        })
    }
}

/// The coordinator role of [`super::Janus`].
pub struct JanusCoordinator {
    cfg: JanusConfig,
    topology: Arc<Topology>,
    txns: FastMap<TxnId, Driver>,
    /// Transactions that took the fast path and the slow path since the
    /// last report.
    fast: u64,
    slow: u64,
}

const TICK: TimerId = TimerId(1);

/// Commit resends to replicas that have not executed a transaction whose
/// client already has its answer (a crashed replica may never answer).
const MAX_LATE_RESENDS: u32 = 6;

impl JanusCoordinator {
    pub fn new(cfg: JanusConfig, env: CoordinatorEnv) -> Self {
        JanusCoordinator {
            cfg,
            topology: env.topology,
            txns: tessera_core::fast_map(),
            fast: 0,
            slow: 0,
        }
    }

    fn count(&mut self, fast: Option<bool>) {
        match fast {
            Some(true) => self.fast += 1,
            Some(false) => self.slow += 1,
            None => {}
        }
    }

    fn on_reply(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        let rto = self.cfg.retransmit;
        let txn = match &msg {
            Msg::PreAcceptOk { txn, .. }
            | Msg::PreAcceptNotOk { txn, .. }
            | Msg::AcceptOk { txn, .. }
            | Msg::AcceptNotOk { txn, .. }
            | Msg::CommitOk { txn, .. } => *txn,
            _ => {
                tracing::warn!(?from, "coordinator got a server's message");
                return;
            }
        };
        let Some(d) = self.txns.get_mut(&txn) else {
            return;
        };
        let Some((s, i)) = d.locate(from) else {
            return;
        };
        let mut took = None;
        match msg {
            Msg::PreAcceptOk { ballot, deps, .. }
                if d.phase == Phase::PreAccept && ballot == d.ballot =>
            {
                d.pre[s][i] = Some(deps);
                took = d.after_pre_accept(ctx, true, rto);
            }
            Msg::AcceptOk { ballot, .. } if d.phase == Phase::Accept && ballot == d.ballot => {
                d.accepted[s][i] = true;
                let majority = d
                    .accepted
                    .iter()
                    .all(|g| g.iter().filter(|a| **a).count() > g.len() / 2);
                if majority {
                    d.enter(ctx, Phase::Commit, rto);
                }
            }
            Msg::PreAcceptNotOk { ballot, .. } | Msg::AcceptNotOk { ballot, .. } => {
                // Only a recovery coordinator (§3.3) uses higher ballots, and
                // this slice has none: keep resending until committed.
                tracing::debug!(?txn, ballot, "rejected by a higher ballot");
            }
            Msg::CommitOk {
                abandon, results, ..
            } if d.phase == Phase::Commit => {
                d.executed[s][i] = true;
                let answered = d.outcome().is_some();
                if d.results[s].is_none() {
                    d.abandon |= abandon;
                    d.results[s] = Some(results);
                }
                if !answered {
                    if let Some(outcome) = d.outcome() {
                        ctx.done(txn, outcome);
                    }
                }
                if d.executed.iter().all(|g| g.iter().all(|e| *e)) {
                    self.txns.remove(&txn);
                }
            }
            _ => {}
        }
        self.count(took);
    }

    fn tick(&mut self, ctx: &mut Ctx<Msg>) {
        let now = ctx.now();
        let rto = self.cfg.retransmit;
        let cap = rto * 8;
        let mut ids: Vec<TxnId> = self
            .txns
            .iter()
            .filter(|(_, d)| d.retransmit_at <= now)
            .map(|(t, _)| *t)
            .collect();
        ids.sort_unstable();
        let mut took = Vec::new();
        for t in ids {
            let d = self.txns.get_mut(&t).expect("listed");
            if d.phase == Phase::PreAccept {
                if let Some(fast) = d.after_pre_accept(ctx, false, rto) {
                    took.push(fast);
                    continue;
                }
            }
            if d.outcome().is_some() {
                d.late_resends += 1;
                if d.late_resends > MAX_LATE_RESENDS {
                    self.txns.remove(&t);
                    continue;
                }
            }
            d.send(ctx);
            d.rto = (d.rto * 2).min(cap);
            d.retransmit_at = now + d.rto;
        }
        for f in took {
            self.count(Some(f));
        }
        ctx.set_timer(self.cfg.retransmit / 2, TICK);
    }
}

impl Coordinator<Msg> for JanusCoordinator {
    fn submit(&mut self, ctx: &mut Ctx<Msg>, attempt: Attempt) {
        let txn = attempt.id;
        let proc = attempt.txn;
        if proc.pieces().iter().any(|p| !p.inputs.is_empty()) {
            tracing::error!(
                name = proc.name(),
                "a piece takes another's output: Janus runs one-shot transactions (§3)"
            );
            ctx.done(txn, TxnOutcome::Aborted(AbortReason::User));
            return;
        }
        let d = Driver::new(txn, proc, &self.topology, ctx.now(), self.cfg.retransmit);
        d.send(ctx);
        self.txns.insert(txn, d);
    }
}

impl Node<Msg> for JanusCoordinator {
    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        ctx.set_timer(self.cfg.retransmit / 2, TICK);
    }

    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        self.on_reply(ctx, from, msg);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<Msg>, id: TimerId) {
        if id == TICK {
            self.tick(ctx);
        }
    }

    fn take_report(&mut self) -> NodeReport {
        NodeReport {
            client: None,
            counters: vec![
                ("janus_fast_path", std::mem::take(&mut self.fast)),
                ("janus_slow_path", std::mem::take(&mut self.slow)),
            ],
        }
    }
}
