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

use super::msg::{Msg, PieceReply, Start, Vertex};
use std::sync::Arc;
use tessera_core::ids::{NodeId, ShardId, Time, TxnId};
use tessera_core::node::Ctx;
use tessera_core::topology::Topology;
use tessera_core::txn::{participants, AbortReason, PieceKind, Procedure, Txn, TxnOutcome};
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
    pub fn new(txn: TxnId, proc: Txn, topology: &Topology, now: Time, rto: Time) -> Self {
        let n = proc.pieces().len();
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
        }
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

    /// Send every piece whose inputs are ready (`resend`: those sent and not
    /// yet acknowledged), one request per server.
    fn dispatch(&mut self, ctx: &mut Ctx<Msg>, resend: bool) {
        let pieces = self.proc.pieces();
        for &(shard, node) in &self.shards {
            let mut ids = Vec::new();
            let mut inputs = Vec::new();
            for (i, p) in pieces.iter().enumerate() {
                if p.shard != shard || self.received[i] || self.sent[i] != resend {
                    continue;
                }
                let replies = &self.replies;
                let Some(ins) = p.gather_inputs(|j| replies[j].as_ref().map(|r| &r.output)) else {
                    continue;
                };
                self.sent[i] = true;
                ids.push(i as u16);
                inputs.push(ins);
            }
            if !ids.is_empty() {
                ctx.send(
                    node,
                    Msg::Start(Start {
                        txn: self.txn,
                        proc: self.proc.clone(),
                        pieces: ids,
                        inputs,
                    }),
                );
            }
        }
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
        self.rto = self.base_rto;
        self.retransmit_at = ctx.now() + self.rto;
        self.send_commit(ctx);
    }

    /// A participant's commit reply; the outcome once all have replied.
    pub fn on_commit_ok(&mut self, from: NodeId, deferred: Vec<PieceReply>) -> Option<TxnOutcome> {
        if self.phase != Phase::Commit {
            return None;
        }
        let i = self.shards.iter().position(|(_, n)| *n == from)?;
        if self.committed[i] {
            return None;
        }
        self.committed[i] = true;
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
        if self.retransmit_at > now {
            return;
        }
        match self.phase {
            Phase::Start => self.dispatch(ctx, true),
            Phase::Commit => self.send_commit(ctx),
        }
        self.rto = (self.rto * 2).min(cap);
        self.retransmit_at = now + self.rto;
    }
}
