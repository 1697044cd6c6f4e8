//! One read-write transaction driven through its two phases (§3.2, Fig. 5).
//!
//! **Start**: every piece whose inputs are ready goes to its server, one
//! request per server, in parallel; an immediate piece's reply brings its
//! output, which may make more pieces ready. **Commit**: once every piece is
//! acknowledged, the union of the start replies' dependency graphs goes to
//! every participant, and the transaction is committed when all reply.
//!
//! The client's coordinator drives its transactions with this; so does a
//! server that recovers a transaction whose coordinator fell silent (§3.5).
//! Every request is resent until answered, and servers answer duplicates
//! with the same result, so two drivers of one transaction are harmless.
//!
//! **User aborts** (§3.1: Rococo allows an abort only where it can end the
//! transaction without undoing anything). When an immediate piece asks to
//! abort, no further piece is sent; once the pieces already sent are
//! acknowledged, the abort is honoured if every one of them was immediate
//! and none wrote: the transaction then commits as a no-op (its vertices
//! must still become COMMITTING, or transactions ordered after it would
//! wait for it forever) and its client hears `Aborted(User)`. Otherwise —
//! a deferrable piece already sent, or an immediate one that wrote — it
//! cannot be undone and runs to its commit, as the paper requires. Both
//! drivers of one transaction see the same replies and decide alike.
//!
//! **Merged pieces** (§4.2): the pieces the offline checker merged
//! ([`super::offline::MergeSet`]) do not go out as start requests. In the
//! start phase the driver runs them by OCC+2PC: *execute* (each server runs
//! its merged pieces on the current data, installing nothing, and returns
//! their outputs, which feed the merged pieces that take them as inputs),
//! then one *commit* request to the 2PC leader (the server of the lowest
//! merged shard), which prepares (validate and lock) at every merged
//! server and decides. On commit each server runs the pieces as a start
//! request of this driver's and replies `StartOk` as usual, so the
//! transaction joins the dependency graph like any other; on a failed
//! validation the leader says `OccRetry` and the driver executes the
//! merged pieces again after a random pause. Pieces that are not merged go
//! out as usual, those fed by a merged piece once its committed reply came.

use super::msg::{Msg, PieceReply, Start, Vertex};
use super::offline::MergeSet;
use rand::Rng;
use std::sync::Arc;
use tessera_core::ids::{NodeId, ShardId, Time, TxnId};
use tessera_core::node::Ctx;
use tessera_core::topology::Topology;
use tessera_core::txn::{participants, AbortReason, PieceKind, Procedure, Txn, TxnOutcome, Value};
use tessera_core::FastMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Start,
    Commit,
}

pub(crate) struct Driver {
    txn: TxnId,
    proc: Txn,
    shards: Vec<(ShardId, NodeId)>,
    phase: Phase,
    /// Per piece: sent yet? acknowledged?
    sent: Vec<bool>,
    received: Vec<bool>,
    unreceived: usize,
    /// Replies of immediate pieces (start phase) and deferred ones (commit).
    replies: Vec<Option<PieceReply>>,
    /// The union of the start replies' graphs.
    deps: FastMap<TxnId, Vertex>,
    commit: Option<Arc<Vec<Vertex>>>,
    /// Per participant: its commit reply came.
    committed: Vec<bool>,
    retransmit_at: Time,
    rto: Time,
    base_rto: Time,
    /// A piece asked to abort: send nothing more, decide once the sent
    /// pieces are acknowledged (see the module doc).
    stopping: bool,
    /// The abort is honoured: the transaction commits as a no-op.
    aborted: bool,
    /// Per piece: runs merged, by OCC+2PC (§4.2); empty when none does.
    merged: Vec<bool>,
    /// The 2PC leader of the merged pieces.
    leader: Option<NodeId>,
    /// Merged pieces: execute request sent? Their tentative outputs.
    exec_sent: Vec<bool>,
    tentative: Vec<Option<PieceReply>>,
    /// The OCC commit request sent to the leader (resent until the start
    /// replies of its pieces come).
    occ_commit: Option<(Start, Vec<Value>)>,
    /// After a failed validation: execute the merged pieces again then.
    occ_retry_at: Option<Time>,
    /// When the driver began, and when its commit phase did (counters).
    began: Time,
    commit_at: Option<Time>,
}

/// A procedure Rococo can run: a piece whose output feeds another must be
/// immediate (§3.1), or its output would not exist before the commit phase.
pub(crate) fn well_formed(proc: &dyn Procedure) -> bool {
    let pieces = proc.pieces();
    pieces.iter().all(|p| {
        p.inputs.iter().all(|&j| {
            pieces
                .get(j as usize)
                .is_some_and(|q| q.kind == PieceKind::Immediate)
        })
    })
}

/// Merge one vertex into an aggregate (union of edges, highest status).
fn aggregate(deps: &mut FastMap<TxnId, Vertex>, v: Vertex) {
    match deps.get_mut(&v.txn) {
        None => {
            deps.insert(v.txn, v);
        }
        Some(a) => {
            for (p, e) in v.parents {
                match a.parents.iter_mut().find(|(q, _)| *q == p) {
                    Some(slot) => slot.1 = slot.1.max(e),
                    None => a.parents.push((p, e)),
                }
            }
            if v.status > a.status {
                a.status = v.status;
                a.scc = v.scc;
            }
        }
    }
}

impl Driver {
    pub fn new(
        txn: TxnId,
        proc: Txn,
        topology: &Topology,
        merges: &MergeSet,
        now: Time,
        rto: Time,
    ) -> Self {
        let n = proc.pieces().len();
        let merged = merges.pieces(proc.as_ref()).unwrap_or_default();
        let leader = proc
            .pieces()
            .iter()
            .zip(&merged)
            .filter(|(_, m)| **m)
            .map(|(p, _)| p.shard)
            .min()
            .map(|s| topology.leader(s));
        let shards: Vec<(ShardId, NodeId)> = participants(proc.as_ref())
            .into_iter()
            .map(|s| (s, topology.leader(s)))
            .collect();
        let parts = shards.len();
        Driver {
            txn,
            proc,
            shards,
            phase: Phase::Start,
            sent: vec![false; n],
            received: vec![false; n],
            unreceived: n,
            replies: vec![None; n],
            deps: tessera_core::fast_map(),
            commit: None,
            committed: vec![false; parts],
            retransmit_at: now + rto,
            rto,
            base_rto: rto,
            stopping: false,
            aborted: false,
            exec_sent: vec![false; merged.len()],
            tentative: vec![None; merged.len()],
            merged,
            leader,
            occ_commit: None,
            occ_retry_at: None,
            began: now,
            commit_at: None,
        }
    }

    /// The procedure driven.
    pub fn proc(&self) -> &Txn {
        &self.proc
    }

    /// How long the start phase took and how long the commit phase has
    /// taken by `now`.
    pub fn phase_times(&self, now: Time) -> (Time, Time) {
        let commit_at = self.commit_at.unwrap_or(now);
        (commit_at - self.began, now - commit_at)
    }

    fn is_merged(&self, i: usize) -> bool {
        self.merged.get(i).copied().unwrap_or(false)
    }

    /// A merged piece's tentative output asked to abort: execute no more.
    fn exec_stopped(&self) -> bool {
        self.tentative.iter().flatten().any(|r| r.user_abort)
    }

    /// Some piece of `shard` was sent: the shard takes part in the commit.
    fn contacted(&self, shard: ShardId) -> bool {
        self.proc
            .pieces()
            .iter()
            .zip(&self.sent)
            .any(|(p, &sent)| sent && p.shard == shard)
    }

    /// The pieces sent so far are all acknowledged: may the requested abort
    /// end the transaction here (every sent piece immediate, none wrote)?
    fn abort_honoured(&self) -> bool {
        let pieces = self.proc.pieces();
        (0..pieces.len()).filter(|&i| self.sent[i]).all(|i| {
            pieces[i].kind == PieceKind::Immediate
                && self.replies[i]
                    .as_ref()
                    .is_some_and(|r| r.writes.is_empty())
        })
    }

    /// A reply answered something outstanding: the path works again, so
    /// the backoff starts over and what is still unanswered is resent after
    /// one base timeout, not after the backed-off one. Without this a
    /// transaction whose start phase dragged on (many failed validations of
    /// its merged pieces, a partition) keeps the capped timeout into its
    /// last steps, and one lost message after its merged pieces committed
    /// leaves its deferrable pieces unsent for `8 × retransmit` while the
    /// committed merged pieces are already visible (§3.5: the transaction
    /// must commit all its pieces, and soon).
    fn progressed(&mut self, now: Time) {
        self.rto = self.base_rto;
        self.retransmit_at = self.retransmit_at.min(now + self.rto);
    }

    /// Send every piece whose inputs are ready (`resend`: those sent and not
    /// yet acknowledged), one request per server; merged pieces go out as
    /// OCC execute requests, then as one commit request to the leader.
    ///
    /// A read-only transaction (an ordered form, see `coordinator`) sends
    /// its pieces fed only by immediate pieces of the same request in that
    /// request, with no inputs: the server runs them as a chain, fed from
    /// its own outputs, so the chain arrives whole and the server can hold
    /// it before any of it runs.
    fn dispatch(&mut self, ctx: &mut Ctx<Msg>, resend: bool) {
        let pieces = self.proc.pieces();
        let executing = self.occ_commit.is_none() && self.occ_retry_at.is_none();
        let exec_stopped = self.exec_stopped();
        let chains = self.proc.read_only();
        for &(shard, node) in &self.shards {
            let (mut ids, mut inputs) = (Vec::new(), Vec::new());
            // Pieces of this request, which a chained piece may follow.
            let mut here = vec![false; pieces.len()];
            let (mut xids, mut xinputs) = (Vec::new(), Vec::new());
            for (i, p) in pieces.iter().enumerate() {
                if p.shard != shard || self.received[i] {
                    continue;
                }
                let merged = self.is_merged(i);
                if merged {
                    if !executing
                        || exec_stopped
                        || self.tentative[i].is_some()
                        || self.exec_sent[i] != resend
                    {
                        continue;
                    }
                } else if self.sent[i] != resend {
                    continue;
                }
                let (replies, tentative) = (&self.replies, &self.tentative);
                // A merged piece takes its merged inputs from their
                // execution; every other input is a committed reply.
                let gathered = p.gather_inputs(|j| {
                    let t = tentative.get(j).and_then(|t| t.as_ref()).filter(|_| merged);
                    t.or(replies[j].as_ref()).map(|r| &r.output)
                });
                let chained = || {
                    chains
                        && !merged
                        && !p.inputs.is_empty()
                        && p.inputs.iter().all(|&j| {
                            here.get(usize::from(j)).copied().unwrap_or(false)
                                && pieces[usize::from(j)].kind == PieceKind::Immediate
                        })
                };
                let ins = match gathered {
                    Some(ins) => ins,
                    None if chained() => Vec::new(),
                    None => continue,
                };
                if merged {
                    self.exec_sent[i] = true;
                    xids.push(i as u16);
                    xinputs.push(ins);
                } else {
                    self.sent[i] = true;
                    here[i] = true;
                    ids.push(i as u16);
                    inputs.push(ins);
                }
            }
            if !ids.is_empty() {
                ctx.send(node, Msg::Start(self.start(ids, inputs)));
            }
            if !xids.is_empty() {
                tracing::trace!(txn = ?self.txn, pieces = ?xids, resend, "merged pieces: execute");
                ctx.send(node, Msg::OccExecute(self.start(xids, xinputs)));
            }
        }
        self.occ_commit(ctx);
    }

    fn start(&self, pieces: Vec<u16>, inputs: Vec<Vec<Value>>) -> Start {
        Start {
            txn: self.txn,
            proc: self.proc.clone(),
            pieces,
            inputs,
        }
    }

    /// Every merged piece still to commit has its tentative output (or a
    /// tentative output asked to abort and the rest were never executed):
    /// ask the leader to commit them (§4.2's OCC+2PC).
    fn occ_commit(&mut self, ctx: &mut Ctx<Msg>) {
        let Some(leader) = self.leader else {
            return;
        };
        if self.occ_commit.is_some() || self.occ_retry_at.is_some() || self.stopping {
            return;
        }
        let todo: Vec<usize> = (0..self.merged.len())
            .filter(|&i| self.merged[i] && !self.received[i])
            .collect();
        let stopped = self.exec_stopped();
        let ready = todo
            .iter()
            .all(|&i| self.tentative[i].is_some() || (stopped && !self.exec_sent[i]));
        let go: Vec<usize> = todo
            .into_iter()
            .filter(|&i| self.tentative[i].is_some())
            .collect();
        if !ready || go.is_empty() {
            return;
        }
        let pieces = self.proc.pieces();
        let (replies, tentative) = (&self.replies, &self.tentative);
        let mut inputs = Vec::with_capacity(go.len());
        for &i in &go {
            let ins = pieces[i].gather_inputs(|j| {
                tentative[j]
                    .as_ref()
                    .or(replies[j].as_ref())
                    .map(|r| &r.output)
            });
            inputs.push(ins.expect("executed with these inputs"));
        }
        let outputs = go
            .iter()
            .map(|&i| self.tentative[i].as_ref().expect("ready").output.clone())
            .collect();
        for &i in &go {
            self.sent[i] = true;
        }
        let req = self.start(go.iter().map(|&i| i as u16).collect(), inputs);
        tracing::trace!(txn = ?self.txn, pieces = ?req.pieces, now = ctx.now(), "merged pieces: commit");
        ctx.send(
            leader,
            Msg::OccCommit {
                req: req.clone(),
                outputs: Vec::clone(&outputs),
            },
        );
        self.occ_commit = Some((req, outputs));
    }

    /// Tentative outputs of merged pieces (OCC execute phase).
    pub fn on_occ_execute_ok(&mut self, ctx: &mut Ctx<Msg>, results: Vec<PieceReply>) {
        if self.phase != Phase::Start || self.occ_commit.is_some() || self.occ_retry_at.is_some() {
            return;
        }
        for r in results {
            let i = r.piece as usize;
            if self.is_merged(i) && self.exec_sent[i] && self.tentative[i].is_none() {
                self.tentative[i] = Some(r);
                self.progressed(ctx.now());
            }
        }
        if !self.stopping {
            self.dispatch(ctx, false);
        }
    }

    /// The leader's validation failed: execute the merged pieces again
    /// after a random pause (two transactions that failed each other's
    /// validation would otherwise collide again).
    pub fn on_occ_retry(&mut self, ctx: &mut Ctx<Msg>) {
        if self.phase != Phase::Start || self.occ_commit.is_none() {
            return;
        }
        self.occ_commit = None;
        self.progressed(ctx.now());
        for i in 0..self.merged.len() {
            if self.merged[i] && !self.received[i] {
                self.sent[i] = false;
                self.exec_sent[i] = false;
                self.tentative[i] = None;
            }
        }
        let pause = ctx.rng().random_range(0..=self.base_rto / 2);
        self.occ_retry_at = Some(ctx.now() + pause);
    }

    fn send_commit(&self, ctx: &mut Ctx<Msg>) {
        let deps = self.commit.clone().expect("commit phase has its graph");
        for (i, &(_, node)) in self.shards.iter().enumerate() {
            if !self.committed[i] {
                ctx.send(
                    node,
                    Msg::Commit {
                        txn: self.txn,
                        deps: deps.clone(),
                    },
                );
            }
        }
    }

    pub fn begin(&mut self, ctx: &mut Ctx<Msg>) {
        self.dispatch(ctx, false);
    }

    pub fn on_start_ok(
        &mut self,
        ctx: &mut Ctx<Msg>,
        immediate: Vec<PieceReply>,
        received: Vec<u16>,
        deps: Vec<Vertex>,
    ) {
        if self.phase != Phase::Start {
            return;
        }
        for r in immediate {
            let i = r.piece as usize;
            if i < self.replies.len() && self.replies[i].is_none() {
                self.replies[i] = Some(r);
            }
        }
        for p in received {
            let i = p as usize;
            if i < self.received.len() && !self.received[i] {
                self.received[i] = true;
                self.unreceived -= 1;
                self.progressed(ctx.now());
            }
        }
        for v in deps {
            aggregate(&mut self.deps, v);
        }
        if !self.stopping && self.replies.iter().flatten().any(|r| r.user_abort) {
            self.stopping = true;
        }
        if self.stopping {
            let waiting = (0..self.sent.len()).any(|i| self.sent[i] && !self.received[i]);
            if waiting {
                return;
            }
            self.stopping = false;
            if self.abort_honoured() {
                self.aborted = true;
                for (i, &(shard, _)) in self.shards.iter().enumerate() {
                    self.committed[i] = !self.contacted(shard);
                }
            } else {
                tracing::warn!(
                    txn = ?self.txn,
                    name = self.proc.name(),
                    "user abort after a deferrable piece was sent or a piece wrote: the transaction commits (Rococo §3.1)"
                );
                // Never stop again: run to the commit as the paper requires.
                self.replies
                    .iter_mut()
                    .flatten()
                    .for_each(|r| r.user_abort = false);
            }
        }
        if self.unreceived > 0 && !self.aborted {
            self.dispatch(ctx, false);
            return;
        }
        // Start phase over: the commit request carries the union.
        self.phase = Phase::Commit;
        let mut deps: Vec<Vertex> = std::mem::take(&mut self.deps).into_values().collect();
        deps.sort_unstable_by_key(|v| v.txn);
        self.commit = Some(Arc::new(deps));
        self.commit_at = Some(ctx.now());
        self.rto = self.base_rto;
        self.retransmit_at = ctx.now() + self.rto;
        self.send_commit(ctx);
    }

    /// A participant's commit reply; the outcome once all have replied.
    /// Like a start reply it restarts the backoff: the commit phase's
    /// resends back off while servers wait for ancestors (nothing lost),
    /// and a participant whose reply was lost must not then wait a capped
    /// timeout for the resend that fetches it.
    pub fn on_commit_ok(
        &mut self,
        now: Time,
        from: NodeId,
        deferred: Vec<PieceReply>,
    ) -> Option<TxnOutcome> {
        if self.phase != Phase::Commit {
            return None;
        }
        let i = self.shards.iter().position(|(_, n)| *n == from)?;
        if self.committed[i] {
            return None;
        }
        self.committed[i] = true;
        self.progressed(now);
        for r in deferred {
            let p = r.piece as usize;
            if p < self.replies.len() && self.replies[p].is_none() {
                self.replies[p] = Some(r);
            }
        }
        if !self.committed.iter().all(|c| *c) {
            return None;
        }
        if self.aborted {
            return Some(TxnOutcome::Aborted(AbortReason::User));
        }
        let mut reads = Vec::new();
        let mut writes = Vec::new();
        let mut outputs = Vec::with_capacity(self.replies.len());
        for r in &self.replies {
            let r = r.as_ref()?;
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

    /// Tell every participant that the transaction is committed (after
    /// [`Self::on_commit_ok`] returned its outcome).
    pub fn send_committed(&self, ctx: &mut Ctx<Msg>) {
        for &(shard, node) in &self.shards {
            if self.contacted(shard) {
                ctx.send(node, Msg::Committed { txn: self.txn });
            }
        }
    }

    /// Resend what is unanswered past its deadline (backing off to `cap`).
    pub fn tick(&mut self, ctx: &mut Ctx<Msg>, cap: Time) {
        let now = ctx.now();
        if self.occ_retry_at.is_some_and(|t| t <= now) {
            self.occ_retry_at = None;
            self.dispatch(ctx, false);
        }
        if self.retransmit_at > now {
            return;
        }
        match self.phase {
            Phase::Start => {
                self.dispatch(ctx, true);
                if let (Some((req, outputs)), Some(leader)) = (&self.occ_commit, self.leader) {
                    let all_in = req.pieces.iter().all(|&p| self.received[p as usize]);
                    if !all_in {
                        ctx.send(
                            leader,
                            Msg::OccCommit {
                                req: req.clone(),
                                outputs: outputs.clone(),
                            },
                        );
                    }
                }
            }
            Phase::Commit => self.send_commit(ctx),
        }
        self.rto = (self.rto * 2).min(cap);
        self.retransmit_at = now + self.rto;
    }
}
