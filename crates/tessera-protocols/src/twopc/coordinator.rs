//! The 2PC coordinator: dispatch pieces, collect votes, decide, tell.

use super::msg::{Execute, Msg, PieceReply};
use super::Timeouts;
use bytes::Bytes;
use std::collections::BTreeSet;
use std::sync::Arc;
use tessera_core::ids::{NodeId, ShardId, Time, TimerId, TxnId};
use tessera_core::node::{Ctx, Node};
use tessera_core::protocol::{Coordinator, CoordinatorEnv};
use tessera_core::topology::Topology;
use tessera_core::txn::{participants, AbortReason, Attempt, TxnOutcome};
use tessera_core::{FastMap, FastSet};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Executing,
    /// Write locks requested from the participants that write (protocols
    /// with a lock round).
    Locking,
    /// Votes requested (or the one-phase commit sent).
    Preparing,
    /// All voted yes; waiting for the decision to be durable.
    Deciding,
    /// Commit sent; waiting for acknowledgements.
    Committed,
}

struct TxnState {
    attempt: Attempt,
    phase: Phase,
    /// Participant shards and their leaders, sorted by shard.
    shards: Vec<(ShardId, NodeId)>,
    /// Per piece: dispatched yet?
    sent: Vec<bool>,
    results: Vec<Option<PieceReply>>,
    remaining: usize,
    /// Per participant: answered the current phase?
    answered: Vec<bool>,
    retransmit_at: Time,
    rto: Time,
}

impl TxnState {
    fn one_phase(&self) -> bool {
        self.shards.len() == 1
    }
}

/// The coordinator role of [`super::TwoPc`].
pub struct TwoPcCoordinator {
    timeouts: Timeouts,
    /// Lock every write set before any participant validates (OCC).
    lock_round: bool,
    topology: Arc<Topology>,
    me: NodeId,
    incarnation: u8,
    txns: FastMap<TxnId, TxnState>,
    /// The ids in `txns`, ordered: the first is the floor sent with Execute.
    open: BTreeSet<TxnId>,
    /// Transactions whose commit decision is durable (recovered or made).
    decided: FastSet<TxnId>,
}

const TICK: TimerId = TimerId(1);

impl TwoPcCoordinator {
    pub fn new(timeouts: Timeouts, lock_round: bool, env: CoordinatorEnv) -> Self {
        let mut decided = tessera_core::fast_set();
        for r in &env.recovered {
            if let Ok(b) = <[u8; 8]>::try_from(&r[..]) {
                decided.insert(TxnId(u64::from_le_bytes(b)));
            }
        }
        TwoPcCoordinator {
            timeouts,
            lock_round,
            topology: env.topology,
            me: env.me,
            incarnation: env.incarnation,
            txns: tessera_core::fast_map(),
            open: BTreeSet::new(),
            decided,
        }
    }

    fn leader_index(st: &TxnState, node: NodeId) -> Option<usize> {
        st.shards.iter().position(|(_, n)| *n == node)
    }

    /// Forget a finished transaction (it no longer holds the floor down).
    fn forget(&mut self, txn: TxnId) -> Option<TxnState> {
        self.open.remove(&txn);
        self.txns.remove(&txn)
    }

    /// The oldest transaction still open here.
    fn floor(open: &BTreeSet<TxnId>, txn: TxnId) -> TxnId {
        open.first().copied().unwrap_or(txn)
    }

    /// Send every piece whose inputs are ready, one Execute per shard.
    fn dispatch(ctx: &mut Ctx<Msg>, floor: TxnId, txn: TxnId, st: &mut TxnState, resend: bool) {
        let proc = st.attempt.txn.clone();
        let pieces = proc.pieces();
        for &(shard, node) in &st.shards {
            let mut ids = Vec::new();
            let mut inputs = Vec::new();
            for (i, p) in pieces.iter().enumerate() {
                if p.shard != shard || st.results[i].is_some() {
                    continue;
                }
                let due = if resend { st.sent[i] } else { !st.sent[i] };
                if !due {
                    continue;
                }
                let results = &st.results;
                let Some(ins) = p.gather_inputs(|j| results[j].as_ref().map(|r| &r.output)) else {
                    continue;
                };
                st.sent[i] = true;
                ids.push(i as u16);
                inputs.push(ins);
            }
            if !ids.is_empty() {
                ctx.send(
                    node,
                    Msg::Execute(Execute {
                        txn,
                        since: st.attempt.since,
                        proc: proc.clone(),
                        floor,
                        pieces: ids,
                        inputs,
                    }),
                );
            }
        }
    }

    /// Ask for votes (or commit in one phase at the only participant).
    fn send_prepare(ctx: &mut Ctx<Msg>, txn: TxnId, st: &TxnState) {
        for (i, &(_, node)) in st.shards.iter().enumerate() {
            if st.answered[i] {
                continue;
            }
            let msg = if st.one_phase() {
                Msg::CommitOnePhase { txn }
            } else {
                Msg::Prepare { txn }
            };
            ctx.send(node, msg);
        }
    }

    /// Ask the participants that write to lock (the lock round).
    fn send_lock(ctx: &mut Ctx<Msg>, txn: TxnId, st: &TxnState) {
        for (i, &(_, node)) in st.shards.iter().enumerate() {
            if !st.answered[i] {
                ctx.send(node, Msg::Lock { txn });
            }
        }
    }

    fn send_commit(ctx: &mut Ctx<Msg>, txn: TxnId, st: &TxnState) {
        for (i, &(_, node)) in st.shards.iter().enumerate() {
            if !st.answered[i] {
                ctx.send(node, Msg::Commit { txn });
            }
        }
    }

    fn abort(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, reason: AbortReason) {
        let Some(st) = self.forget(txn) else {
            return;
        };
        debug_assert!(matches!(
            st.phase,
            Phase::Executing | Phase::Locking | Phase::Preparing
        ));
        for &(shard, node) in &st.shards {
            let contacted = st
                .attempt
                .txn
                .pieces()
                .iter()
                .zip(&st.sent)
                .any(|(p, s)| *s && p.shard == shard);
            if contacted {
                ctx.send(node, Msg::Abort { txn });
            }
        }
        ctx.done(txn, TxnOutcome::Aborted(reason));
    }

    fn committed_outcome(st: &TxnState) -> TxnOutcome {
        let mut reads = Vec::new();
        let mut writes = Vec::new();
        let mut outputs = Vec::with_capacity(st.results.len());
        for r in st.results.iter().flatten() {
            reads.extend_from_slice(&r.reads);
            writes.extend_from_slice(&r.writes);
            outputs.push(r.output.clone());
        }
        TxnOutcome::Committed {
            reads,
            writes,
            outputs,
        }
    }

    fn on_execute_ok(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, results: Vec<PieceReply>) {
        let Some(st) = self.txns.get_mut(&txn) else {
            return;
        };
        if st.phase != Phase::Executing {
            return;
        }
        let mut user_abort = false;
        for r in results {
            let i = r.piece as usize;
            if i < st.results.len() && st.results[i].is_none() {
                user_abort |= r.user_abort;
                st.results[i] = Some(r);
                st.remaining -= 1;
            }
        }
        if user_abort {
            self.abort(ctx, txn, AbortReason::User);
            return;
        }
        let now = ctx.now();
        if st.remaining > 0 {
            Self::dispatch(ctx, Self::floor(&self.open, txn), txn, st, false);
        } else if self.lock_round && !st.one_phase() {
            st.phase = Phase::Locking;
            // Only participants that buffered writes have anything to lock.
            for (i, (shard, _)) in st.shards.iter().enumerate() {
                st.answered[i] = !st.results.iter().flatten().any(|r| {
                    !r.writes.is_empty()
                        && st.attempt.txn.pieces()[r.piece as usize].shard == *shard
                });
            }
            if st.answered.iter().all(|a| *a) {
                st.phase = Phase::Preparing;
                st.answered.iter_mut().for_each(|a| *a = false);
                Self::send_prepare(ctx, txn, st);
            } else {
                Self::send_lock(ctx, txn, st);
            }
        } else {
            st.phase = Phase::Preparing;
            st.answered.iter_mut().for_each(|a| *a = false);
            Self::send_prepare(ctx, txn, st);
        }
        st.rto = self.timeouts.retransmit;
        st.retransmit_at = now + st.rto;
    }

    fn on_locked(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId, ok: bool) {
        let Some(st) = self.txns.get_mut(&txn) else {
            return;
        };
        if st.phase != Phase::Locking {
            return;
        }
        if !ok {
            self.abort(ctx, txn, AbortReason::LockConflict);
            return;
        }
        let Some(i) = Self::leader_index(st, from) else {
            return;
        };
        st.answered[i] = true;
        if st.answered.iter().all(|a| *a) {
            st.phase = Phase::Preparing;
            st.answered.iter_mut().for_each(|a| *a = false);
            st.rto = self.timeouts.retransmit;
            st.retransmit_at = ctx.now() + st.rto;
            Self::send_prepare(ctx, txn, st);
        }
    }

    fn on_vote(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId, yes: bool) {
        let Some(st) = self.txns.get_mut(&txn) else {
            return;
        };
        if st.phase != Phase::Preparing || st.one_phase() {
            return;
        }
        if !yes {
            self.abort(ctx, txn, AbortReason::Validation);
            return;
        }
        let Some(i) = Self::leader_index(st, from) else {
            return;
        };
        st.answered[i] = true;
        if st.answered.iter().all(|a| *a) {
            // Presumed abort: only a commit decision is logged, and it is
            // durable before anyone hears of it.
            st.phase = Phase::Deciding;
            ctx.persist(txn.0, Bytes::copy_from_slice(&txn.0.to_le_bytes()));
        }
    }

    fn on_one_phase_done(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, committed: bool) {
        let Some(st) = self.txns.get(&txn) else {
            return;
        };
        if st.phase != Phase::Preparing || !st.one_phase() {
            return;
        }
        let st = self.forget(txn).expect("present");
        if committed {
            ctx.done(txn, Self::committed_outcome(&st));
        } else {
            ctx.done(txn, TxnOutcome::Aborted(AbortReason::Validation));
        }
    }

    fn on_ack(&mut self, from: NodeId, txn: TxnId) {
        let Some(st) = self.txns.get_mut(&txn) else {
            return;
        };
        if st.phase != Phase::Committed {
            return;
        }
        if let Some(i) = Self::leader_index(st, from) {
            st.answered[i] = true;
        }
        if st.answered.iter().all(|a| *a) {
            // Everyone committed: no participant will inquire any more.
            self.forget(txn);
            self.decided.remove(&txn);
        }
    }

    fn on_inquire(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId) {
        if let Some(st) = self.txns.get(&txn) {
            if st.phase == Phase::Committed {
                ctx.send(from, Msg::Commit { txn });
            }
            // Undecided: the decision will come.
            return;
        }
        // Unknown here, so never committed and never going to be: either it
        // ended (aborted, or committed and acknowledged by everyone — then
        // the asker is not waiting for a decision) or it belongs to an
        // earlier incarnation of this node, which never decides anything
        // again. Presumed abort answers both.
        if self.decided.contains(&txn) {
            ctx.send(from, Msg::Commit { txn });
        } else {
            ctx.send(from, Msg::Abort { txn });
        }
    }

    /// Resend what is unanswered past its deadline.
    fn tick(&mut self, ctx: &mut Ctx<Msg>) {
        let now = ctx.now();
        let cap = self.timeouts.retransmit * 8;
        let mut due: Vec<TxnId> = self
            .txns
            .iter()
            .filter(|(_, st)| st.retransmit_at <= now && st.phase != Phase::Deciding)
            .map(|(t, _)| *t)
            .collect();
        due.sort_unstable();
        for txn in due {
            let st = self.txns.get_mut(&txn).expect("listed");
            match st.phase {
                Phase::Executing => {
                    Self::dispatch(ctx, Self::floor(&self.open, txn), txn, st, true)
                }
                Phase::Locking => Self::send_lock(ctx, txn, st),
                Phase::Preparing => Self::send_prepare(ctx, txn, st),
                Phase::Committed => Self::send_commit(ctx, txn, st),
                Phase::Deciding => {}
            }
            st.rto = (st.rto * 2).min(cap);
            st.retransmit_at = now + st.rto;
        }
        ctx.set_timer(self.timeouts.retransmit / 2, TICK);
    }
}

impl Coordinator<Msg> for TwoPcCoordinator {
    fn submit(&mut self, ctx: &mut Ctx<Msg>, attempt: Attempt) {
        let txn = attempt.id;
        debug_assert_eq!(txn.node(), self.me);
        debug_assert_eq!(txn.incarnation(), self.incarnation);
        let n = attempt.txn.pieces().len();
        let shards = participants(attempt.txn.as_ref())
            .into_iter()
            .map(|s| (s, self.topology.leader(s)))
            .collect::<Vec<_>>();
        let parts = shards.len();
        let mut st = TxnState {
            attempt,
            phase: Phase::Executing,
            shards,
            sent: vec![false; n],
            results: vec![None; n],
            remaining: n,
            answered: vec![false; parts],
            retransmit_at: ctx.now() + self.timeouts.retransmit,
            rto: self.timeouts.retransmit,
        };
        self.open.insert(txn);
        Self::dispatch(ctx, Self::floor(&self.open, txn), txn, &mut st, false);
        self.txns.insert(txn, st);
    }
}

impl Node<Msg> for TwoPcCoordinator {
    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        ctx.set_timer(self.timeouts.retransmit / 2, TICK);
    }

    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        match msg {
            Msg::ExecuteOk { txn, results } => self.on_execute_ok(ctx, txn, results),
            Msg::ExecuteFailed { txn, reason } => {
                let undecided = self.txns.get(&txn).is_some_and(|st| {
                    matches!(
                        st.phase,
                        Phase::Executing | Phase::Locking | Phase::Preparing
                    )
                });
                if undecided {
                    self.abort(ctx, txn, reason);
                }
            }
            Msg::Locked { txn, ok } => self.on_locked(ctx, from, txn, ok),
            Msg::Vote { txn, yes } => self.on_vote(ctx, from, txn, yes),
            Msg::OnePhaseDone { txn, committed } => self.on_one_phase_done(ctx, txn, committed),
            Msg::Ack { txn } => self.on_ack(from, txn),
            Msg::Inquire { txn } => self.on_inquire(ctx, from, txn),
            Msg::Execute(_)
            | Msg::Lock { .. }
            | Msg::Prepare { .. }
            | Msg::CommitOnePhase { .. }
            | Msg::Commit { .. }
            | Msg::Abort { .. } => {
                tracing::warn!(?from, ?msg, "coordinator got a participant's message");
            }
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<Msg>, id: TimerId) {
        if id == TICK {
            self.tick(ctx);
        }
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<Msg>, token: u64) {
        let txn = TxnId(token);
        self.decided.insert(txn);
        let Some(st) = self.txns.get_mut(&txn) else {
            return;
        };
        if st.phase != Phase::Deciding {
            return;
        }
        st.phase = Phase::Committed;
        st.answered.iter_mut().for_each(|a| *a = false);
        st.rto = self.timeouts.retransmit;
        st.retransmit_at = ctx.now() + st.rto;
        Self::send_commit(ctx, txn, st);
        let outcome = Self::committed_outcome(st);
        ctx.done(txn, outcome);
    }
}
