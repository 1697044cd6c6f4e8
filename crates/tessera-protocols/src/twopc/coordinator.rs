//! The 2PC coordinator: dispatch pieces, collect votes, decide, tell.

use super::msg::{Execute, Msg, PieceReply};
use super::Timeouts;
use bytes::Bytes;
use std::collections::BTreeSet;
use std::sync::Arc;
use tessera_core::ids::{NodeId, ShardId, Time, TimerId, TxnId};
use tessera_core::node::{Ctx, Node};
use tessera_core::protocol::{Coordinator, CoordinatorEnv};
use tessera_core::topology::{Role, Topology};
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
    /// Participant shards, sorted.
    shards: Vec<ShardId>,
    /// Per piece: dispatched yet?
    sent: Vec<bool>,
    results: Vec<Option<PieceReply>>,
    remaining: usize,
    /// Per participant: answered the current phase?
    answered: Vec<bool>,
    retransmit_at: Time,
    rto: Time,
    /// When the current phase's requests first went out.
    phase_at: Time,
    /// Some participant shard is a replica group of more than one.
    replicated: bool,
}

impl TxnState {
    /// Commit in one phase at the only participant — unless its shard is
    /// replicated: a deposed leader that does not know it yet answers "no"
    /// (or fails the transaction) from stale state, which is harmless when
    /// the coordinator decides, but not when the participant decides, as
    /// in a one-phase commit, and the real leader commits.
    fn one_phase(&self) -> bool {
        self.shards.len() == 1 && !self.replicated
    }
}

/// The coordinator role of [`super::TwoPc`].
pub struct TwoPcCoordinator {
    timeouts: Timeouts,
    /// Lock every write set before any participant validates (OCC).
    lock_round: bool,
    /// Send the client's rank as the Execute's `since`, not the age.
    rank_by_client: bool,
    topology: Arc<Topology>,
    me: NodeId,
    incarnation: u8,
    txns: FastMap<TxnId, TxnState>,
    /// The ids in `txns`, ordered: the first is the floor sent with Execute.
    open: BTreeSet<TxnId>,
    /// Transactions whose commit decision is durable (recovered or made).
    decided: FastSet<TxnId>,
    /// The replica of each shard believed to lead it (replicated shards
    /// move their leader; see [`Msg::NotLeader`]), and when we last changed
    /// our mind about it.
    leaders: Vec<NodeId>,
    moved_at: Vec<Time>,
    /// Per shard, when a request went to its believed leader a second time
    /// without a word from it since (cleared by any answer).
    unanswered_since: Vec<Option<Time>>,
    /// Per shard, the replica we last gave up on for its silence, and when:
    /// a follower's stale hint naming it is not believed for a while.
    suspected: Vec<Option<(NodeId, Time)>>,
}

const TICK: TimerId = TimerId(1);

impl TwoPcCoordinator {
    /// `rank_by_client`: see [`super::ConcurrencyControl::rank_by_client`].
    pub fn new(
        timeouts: Timeouts,
        lock_round: bool,
        rank_by_client: bool,
        env: CoordinatorEnv,
    ) -> Self {
        let mut decided = tessera_core::fast_set();
        for r in &env.recovered {
            if let Ok(b) = <[u8; 8]>::try_from(&r[..]) {
                decided.insert(TxnId(u64::from_le_bytes(b)));
            }
        }
        let leaders: Vec<NodeId> = env.topology.shards.iter().map(|g| g.leader()).collect();
        TwoPcCoordinator {
            timeouts,
            lock_round,
            rank_by_client,
            moved_at: vec![0; leaders.len()],
            unanswered_since: vec![None; leaders.len()],
            suspected: vec![None; leaders.len()],
            leaders,
            topology: env.topology,
            me: env.me,
            incarnation: env.incarnation,
            txns: tessera_core::fast_map(),
            open: BTreeSet::new(),
            decided,
        }
    }

    /// Shards of `st` whose believed leader owes an answer in the
    /// current phase.
    fn silent_shards(st: &TxnState) -> impl Iterator<Item = ShardId> + '_ {
        let pieces = st.attempt.txn.pieces();
        st.shards
            .iter()
            .enumerate()
            .filter(move |&(i, shard)| match st.phase {
                Phase::Executing => pieces
                    .iter()
                    .enumerate()
                    .any(|(p, spec)| spec.shard == *shard && st.sent[p] && st.results[p].is_none()),
                Phase::Deciding => false,
                _ => !st.answered[i],
            })
            .map(|(_, s)| *s)
    }

    /// Believe that `to` leads `shard`.
    fn move_leader(&mut self, now: Time, shard: ShardId, to: NodeId) {
        let s = shard.0 as usize;
        if self.leaders[s] != to {
            self.leaders[s] = to;
            self.moved_at[s] = now;
            self.unanswered_since[s] = None;
        }
    }

    /// The replica after `node` in `shard`'s group, skipping one we gave
    /// up on recently when there is a choice.
    fn next_replica(&self, now: Time, shard: ShardId, node: NodeId) -> NodeId {
        let group = &self.topology.shards[shard.0 as usize].replicas;
        let i = group.iter().position(|&g| g == node).unwrap_or(0);
        let next = group[(i + 1) % group.len()];
        if self.distrusted(now, shard, next) && group.len() > 2 {
            group[(i + 2) % group.len()]
        } else {
            next
        }
    }

    /// We gave up on `node` as `shard`'s leader a short while ago.
    fn distrusted(&self, now: Time, shard: ShardId, node: NodeId) -> bool {
        self.suspected[shard.0 as usize]
            .is_some_and(|(n, at)| n == node && now < at + 2 * self.timeouts.retransmit)
    }

    /// Replicated shards whose believed leader has not answered a resent
    /// request within half a retransmission timeout (many round trips),
    /// nor anything else since: it may have failed, so try the next
    /// replica. Returns the shards moved.
    fn suspect_silent_leaders(&mut self, now: Time) -> Vec<ShardId> {
        let patience = self.timeouts.retransmit / 2;
        let mut moved = Vec::new();
        for s in 0..self.leaders.len() {
            let shard = ShardId(s as u32);
            let replicated = self.topology.shards[s].replicas.len() > 1;
            let silent = self.unanswered_since[s].is_some_and(|t| now >= t + patience);
            if replicated && silent {
                let old = self.leaders[s];
                self.suspected[s] = Some((old, now));
                let next = self.next_replica(now, shard, old);
                self.move_leader(now, shard, next);
                moved.push(shard);
            }
        }
        moved
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

    /// Send every piece whose inputs are ready, one Execute per shard; on a
    /// resend, the pieces sent and unanswered, to `to` (or every shard's
    /// believed leader).
    fn dispatch(
        ctx: &mut Ctx<Msg>,
        leaders: &[NodeId],
        floor: TxnId,
        txn: TxnId,
        st: &mut TxnState,
        resend: bool,
        to: Option<NodeId>,
    ) {
        let proc = st.attempt.txn.clone();
        let pieces = proc.pieces();
        for &shard in &st.shards {
            let node = leaders[shard.0 as usize];
            if to.is_some_and(|n| n != node) {
                continue;
            }
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
                let ins = match p.gather_inputs(|j| results[j].as_ref().map(|r| &r.output)) {
                    Some(ins) => ins,
                    // Fed only by pieces of this shard that go in this
                    // same Execute (or ran there already): the participant
                    // runs them first and takes the outputs itself, which
                    // saves a round trip per step of the chain.
                    None if p.inputs.iter().all(|&j| {
                        let j = j as usize;
                        pieces[j].shard == shard
                            && (results[j].is_some() || ids.contains(&(j as u16)))
                    }) =>
                    {
                        Vec::new()
                    }
                    None => continue,
                };
                st.sent[i] = true;
                ids.push(i as u16);
                inputs.push(ins);
            }
            if !ids.is_empty() {
                // The last pieces of a one-participant transaction: the
                // participant may commit right after running them, which
                // saves the CommitOnePhase round trip (two of four
                // messages per transaction).
                let commit = st.one_phase() && st.sent.iter().all(|s| *s);
                ctx.send(
                    node,
                    Msg::Execute(Execute {
                        txn,
                        since: st.attempt.since,
                        proc: proc.clone(),
                        floor,
                        pieces: ids,
                        inputs,
                        commit,
                    }),
                );
            }
        }
    }

    /// The believed leaders of the participant shards that have not
    /// answered the current phase, or only `to` among them.
    fn unanswered<'a>(
        leaders: &'a [NodeId],
        st: &'a TxnState,
        to: Option<NodeId>,
    ) -> impl Iterator<Item = NodeId> + 'a {
        st.shards
            .iter()
            .zip(&st.answered)
            .filter(|(_, answered)| !**answered)
            .map(|(shard, _)| leaders[shard.0 as usize])
            .filter(move |node| to.is_none_or(|n| n == *node))
    }

    /// Ask for votes (or commit in one phase at the only participant).
    fn send_prepare(
        ctx: &mut Ctx<Msg>,
        leaders: &[NodeId],
        txn: TxnId,
        st: &TxnState,
        to: Option<NodeId>,
    ) {
        for node in Self::unanswered(leaders, st, to) {
            let msg = if st.one_phase() {
                Msg::CommitOnePhase { txn }
            } else {
                Msg::Prepare { txn }
            };
            ctx.send(node, msg);
        }
    }

    /// Ask the participants that write to lock (the lock round).
    fn send_lock(
        ctx: &mut Ctx<Msg>,
        leaders: &[NodeId],
        txn: TxnId,
        st: &TxnState,
        to: Option<NodeId>,
    ) {
        for node in Self::unanswered(leaders, st, to) {
            ctx.send(node, Msg::Lock { txn });
        }
    }

    fn send_commit(
        ctx: &mut Ctx<Msg>,
        leaders: &[NodeId],
        txn: TxnId,
        st: &TxnState,
        to: Option<NodeId>,
    ) {
        for node in Self::unanswered(leaders, st, to) {
            ctx.send(node, Msg::Commit { txn });
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
        for &shard in &st.shards {
            let node = self.leaders[shard.0 as usize];
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

    /// The outcome reported for a committed transaction, built from its
    /// piece replies (moved, not copied: a one-piece transaction's reads
    /// and writes become the outcome's as they are).
    fn committed_outcome(results: Vec<Option<PieceReply>>) -> TxnOutcome {
        let mut reads = Vec::new();
        let mut writes = Vec::new();
        let mut outputs = Vec::with_capacity(results.len());
        for r in results.into_iter().flatten() {
            if reads.is_empty() {
                reads = r.reads;
            } else {
                reads.extend_from_slice(&r.reads);
            }
            if writes.is_empty() {
                writes = r.writes;
            } else {
                writes.extend_from_slice(&r.writes);
            }
            outputs.push(r.output);
        }
        TxnOutcome::Committed {
            reads,
            writes,
            outputs,
        }
    }

    fn on_execute_ok(
        &mut self,
        ctx: &mut Ctx<Msg>,
        txn: TxnId,
        results: Vec<PieceReply>,
        committed: bool,
    ) {
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
        if committed {
            // A one-shot Execute committed. Without every reply (the
            // participant restarted and lost them) we cannot say what it
            // read.
            let st = self.forget(txn).expect("present");
            let outcome = if st.remaining == 0 {
                Self::committed_outcome(st.results)
            } else {
                TxnOutcome::InDoubt
            };
            ctx.done(txn, outcome);
            return;
        }
        let now = ctx.now();
        let leaders = &self.leaders;
        if st.remaining > 0 {
            Self::dispatch(
                ctx,
                leaders,
                Self::floor(&self.open, txn),
                txn,
                st,
                false,
                None,
            );
        } else if self.lock_round && !st.one_phase() {
            st.phase = Phase::Locking;
            // Only participants that buffered writes have anything to lock.
            for (i, shard) in st.shards.iter().enumerate() {
                st.answered[i] = !st.results.iter().flatten().any(|r| {
                    !r.writes.is_empty()
                        && st.attempt.txn.pieces()[r.piece as usize].shard == *shard
                });
            }
            if st.answered.iter().all(|a| *a) {
                st.phase = Phase::Preparing;
                st.answered.iter_mut().for_each(|a| *a = false);
                Self::send_prepare(ctx, leaders, txn, st, None);
            } else {
                Self::send_lock(ctx, leaders, txn, st, None);
            }
        } else {
            st.phase = Phase::Preparing;
            st.answered.iter_mut().for_each(|a| *a = false);
            Self::send_prepare(ctx, leaders, txn, st, None);
        }
        st.rto = self.timeouts.retransmit;
        st.retransmit_at = now + st.rto;
        st.phase_at = now;
    }

    fn on_locked(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId, ok: bool) {
        let shard = shard_of(&self.topology, from);
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
        let Some(i) = index_of(st, shard) else {
            return;
        };
        st.answered[i] = true;
        if st.answered.iter().all(|a| *a) {
            st.phase = Phase::Preparing;
            st.answered.iter_mut().for_each(|a| *a = false);
            st.rto = self.timeouts.retransmit;
            st.retransmit_at = ctx.now() + st.rto;
            st.phase_at = ctx.now();
            Self::send_prepare(ctx, &self.leaders, txn, st, None);
        }
    }

    fn on_vote(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId, yes: bool) {
        let shard = shard_of(&self.topology, from);
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
        let Some(i) = index_of(st, shard) else {
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
            ctx.done(txn, Self::committed_outcome(st.results));
        } else {
            ctx.done(txn, TxnOutcome::Aborted(AbortReason::Validation));
        }
    }

    fn on_ack(&mut self, from: NodeId, txn: TxnId) {
        let shard = shard_of(&self.topology, from);
        let Some(st) = self.txns.get_mut(&txn) else {
            return;
        };
        if st.phase != Phase::Committed {
            return;
        }
        if let Some(i) = index_of(st, shard) {
            st.answered[i] = true;
        }
        if st.answered.iter().all(|a| *a) {
            // Everyone committed: no participant will inquire any more.
            self.forget(txn);
            self.decided.remove(&txn);
        }
    }

    fn on_inquire(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId) {
        let floor = Self::floor(&self.open, txn);
        if let Some(st) = self.txns.get_mut(&txn) {
            // Still working on it: the asker holds the transaction's locks
            // and has heard nothing for a while, so what it was last sent (or
            // its answer) was lost. Resend it now rather than at the next
            // backed-off retransmission, which may be `8 x retransmit` away:
            // until then every transaction that conflicts on those locks
            // aborts (NO_WAIT) or waits, and a hot row stalls the shard.
            // Only to the asker, and only if we believe it leads its shard
            // (a deposed leader's question is answered by the retransmission
            // to the real one).
            Self::resend(ctx, &self.leaders, floor, txn, st, Some(from));
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

    /// Send the current phase's message again where it is unanswered, to
    /// `to` only (an Inquire's asker) or to every shard's believed leader
    /// (the periodic retransmission, a leader change).
    fn resend(
        ctx: &mut Ctx<Msg>,
        leaders: &[NodeId],
        floor: TxnId,
        txn: TxnId,
        st: &mut TxnState,
        to: Option<NodeId>,
    ) {
        match st.phase {
            Phase::Executing => Self::dispatch(ctx, leaders, floor, txn, st, true, to),
            Phase::Locking => Self::send_lock(ctx, leaders, txn, st, to),
            Phase::Preparing => Self::send_prepare(ctx, leaders, txn, st, to),
            Phase::Committed => Self::send_commit(ctx, leaders, txn, st, to),
            // The decision is being logged; it goes out when durable.
            Phase::Deciding => {}
        }
    }

    /// A replica of a shard says it does not lead. Believe its hint
    /// (unless it names a replica we gave up on for its silence a moment
    /// ago: a follower that has not noticed the failure yet), else try the
    /// next replica; resend at once, at most once per `retransmit / 20` per
    /// shard so that stale hints cannot make requests ping-pong.
    fn on_not_leader(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        txn: TxnId,
        leader: Option<NodeId>,
    ) {
        let now = ctx.now();
        let Some(shard) = shard_of(&self.topology, from) else {
            return;
        };
        let s = shard.0 as usize;
        let floor = Self::floor(&self.open, txn);
        if self.leaders[s] != from {
            // We left `from` already (another transaction's answer moved
            // us), but this request went to it: send it to the replica we
            // now believe in at once, not at its next retransmission (up to
            // 8 x `retransmit` away; a transaction prepared elsewhere holds
            // its locks all that time).
            let to = self.leaders[s];
            if let Some(st) = self.txns.get_mut(&txn) {
                Self::resend(ctx, &self.leaders, floor, txn, st, Some(to));
            }
            return;
        }
        if now < self.moved_at[s] + self.timeouts.retransmit / 20 {
            return; // we just moved
        }
        let group = &self.topology.shards[s].replicas;
        let next = match leader.filter(|h| group.contains(h) && *h != from) {
            Some(h) if !self.distrusted(now, shard, h) => h,
            _ => self.next_replica(now, shard, from),
        };
        self.move_leader(now, shard, next);
        if let Some(st) = self.txns.get_mut(&txn) {
            Self::resend(ctx, &self.leaders, floor, txn, st, None);
        }
    }

    /// Resend what is unanswered past its deadline, and at once what
    /// waits on a shard whose leader we stopped believing in.
    fn tick(&mut self, ctx: &mut Ctx<Msg>) {
        let now = ctx.now();
        let cap = self.timeouts.retransmit * 8;
        let moved = self.suspect_silent_leaders(now);
        let mut due: Vec<TxnId> = self
            .txns
            .iter()
            .filter(|(_, st)| {
                st.retransmit_at <= now
                    || (!moved.is_empty() && Self::silent_shards(st).any(|s| moved.contains(&s)))
            })
            .filter(|(_, st)| st.phase != Phase::Deciding)
            .map(|(t, _)| *t)
            .collect();
        due.sort_unstable();
        for txn in due {
            let floor = Self::floor(&self.open, txn);
            let st = self.txns.get_mut(&txn).expect("listed");
            for shard in Self::silent_shards(st) {
                let since = &mut self.unanswered_since[shard.0 as usize];
                since.get_or_insert(now);
            }
            Self::resend(ctx, &self.leaders, floor, txn, st, None);
            st.rto = if st.retransmit_at <= now {
                (st.rto * 2).min(cap)
            } else {
                self.timeouts.retransmit
            };
            st.retransmit_at = now + st.rto;
        }
        ctx.set_timer(self.timeouts.retransmit / 2, TICK);
    }
}

/// The shard replica `node` serves, if it is a server.
fn shard_of(topology: &Topology, node: NodeId) -> Option<ShardId> {
    match topology.nodes.get(node.0 as usize)?.role {
        Role::Server { shard, .. } => Some(shard),
        _ => None,
    }
}

/// The index of `shard` among the transaction's participants.
fn index_of(st: &TxnState, shard: Option<ShardId>) -> Option<usize> {
    st.shards.iter().position(|s| Some(*s) == shard)
}

impl Coordinator<Msg> for TwoPcCoordinator {
    fn submit(&mut self, ctx: &mut Ctx<Msg>, mut attempt: Attempt) {
        if self.rank_by_client {
            attempt.since = attempt.client.into();
        }
        let txn = attempt.id;
        debug_assert_eq!(txn.node(), self.me);
        debug_assert_eq!(txn.incarnation(), self.incarnation);
        let n = attempt.txn.pieces().len();
        let shards = participants(attempt.txn.as_ref())
            .into_iter()
            .collect::<Vec<_>>();
        let parts = shards.len();
        let replicated = shards
            .iter()
            .any(|s| self.topology.shards[s.0 as usize].replicas.len() > 1);
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
            phase_at: ctx.now(),
            replicated,
        };
        self.open.insert(txn);
        let floor = Self::floor(&self.open, txn);
        Self::dispatch(ctx, &self.leaders, floor, txn, &mut st, false, None);
        self.txns.insert(txn, st);
    }
}

impl Node<Msg> for TwoPcCoordinator {
    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        ctx.set_timer(self.timeouts.retransmit / 2, TICK);
    }

    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        if !matches!(msg, Msg::NotLeader { .. } | Msg::Inquire { .. }) {
            if let Some(shard) = shard_of(&self.topology, from) {
                if self.leaders[shard.0 as usize] == from {
                    self.unanswered_since[shard.0 as usize] = None;
                }
            }
        }
        match msg {
            Msg::ExecuteOk {
                txn,
                results,
                committed,
            } => self.on_execute_ok(ctx, txn, results, committed),
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
            Msg::NotLeader { txn, leader } => self.on_not_leader(ctx, from, txn, leader),
            // Alive, and holding the request (see `on_message`'s start).
            Msg::Busy { .. } => {}
            Msg::Execute(_)
            | Msg::Lock { .. }
            | Msg::Prepare { .. }
            | Msg::CommitOnePhase { .. }
            | Msg::Commit { .. }
            | Msg::Abort { .. }
            | Msg::Paxos(_) => {
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
        st.phase_at = ctx.now();
        Self::send_commit(ctx, &self.leaders, txn, st, None);
        let outcome = Self::committed_outcome(std::mem::take(&mut st.results));
        ctx.done(txn, outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use tessera_core::ids::{Key, ShardId};
    use tessera_core::node::Effect;
    use tessera_core::txn::{Access, PieceKind, PieceResult, PieceSpec, Procedure, Txn, Value};

    /// Two rounds at shard 0: piece 1 takes piece 0's output.
    #[derive(Debug)]
    struct TwoRounds(Vec<PieceSpec>);

    impl Procedure for TwoRounds {
        fn name(&self) -> &'static str {
            "two-rounds"
        }
        fn pieces(&self) -> &[PieceSpec] {
            &self.0
        }
        fn execute(&self, _: usize, _: &[Option<&Value>], _: &[Value]) -> PieceResult {
            PieceResult::default()
        }
    }

    fn two_rounds() -> Txn {
        chain(ShardId(0))
    }

    /// Piece 0 at shard 0, then piece 1 at `second`, fed by piece 0.
    fn chain(second: ShardId) -> Txn {
        let piece = |row, inputs: Vec<u16>| PieceSpec {
            shard: if inputs.is_empty() {
                ShardId(0)
            } else {
                second
            },
            reads: vec![Access::all(Key::new(0, row))],
            writes: vec![Access::all(Key::new(0, row))],
            kind: PieceKind::Immediate,
            inputs,
            dynamic: false,
        };
        Arc::new(TwoRounds(vec![piece(1, vec![]), piece(2, vec![0])]))
    }

    fn sent(effects: Vec<Effect<Msg>>) -> Vec<(NodeId, Msg)> {
        effects
            .into_iter()
            .filter_map(|e| match e {
                Effect::Send { to, msg } => Some((to, msg)),
                _ => None,
            })
            .collect()
    }

    fn reply(piece: u16) -> PieceReply {
        PieceReply {
            piece,
            reads: Vec::new(),
            writes: Vec::new(),
            output: Value::from_static(b"o"),
            user_abort: false,
        }
    }

    /// A fresh coordinator (incarnation 0, no lock round) on `me`.
    fn coordinator(me: NodeId, topology: Arc<Topology>) -> TwoPcCoordinator {
        let env = CoordinatorEnv {
            me,
            topology,
            incarnation: 0,
            recovered: Vec::new(),
        };
        TwoPcCoordinator::new(Timeouts::default(), false, false, env)
    }

    /// Regression (TPC-C tiny, 2pl-nowait, faulty seeds 9 and 95): the
    /// second round's Execute (or its reply) was lost while the first
    /// round's locks were held; the coordinator's backed-off retransmission
    /// came too late and it ignored the participant's Inquire, so the hot
    /// row stayed locked. An Inquire about a running transaction must
    /// resend what the asker lacks, and only to the asker. (The second
    /// round goes to another shard: one shard runs a chain by itself.)
    #[test]
    fn an_inquire_about_a_running_transaction_resends_the_lost_round() {
        let topology = Arc::new(Topology::new(2, 1, 1));
        let me = topology.client_hosts().next().expect("a client host").id;
        let (first_server, server) = (topology.leader(ShardId(0)), topology.leader(ShardId(1)));
        let mut c = coordinator(me, topology);
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let txn = TxnId::new(me, 0, 1);
        let mut step = |f: &mut dyn FnMut(&mut TwoPcCoordinator, &mut Ctx<Msg>)| {
            let mut effects = Vec::new();
            f(&mut c, &mut Ctx::new(1, me, &mut rng, &mut effects));
            sent(effects)
        };
        let first = step(&mut |c, ctx| {
            c.submit(
                ctx,
                Attempt {
                    id: txn,
                    txn: chain(ShardId(1)),
                    since: 0,
                    client: 0,
                },
            )
        });
        assert!(
            matches!(&first[..], [(to, Msg::Execute(e))] if *to == first_server && e.pieces == [0])
        );
        // Round two goes out (and is lost).
        let second = step(&mut |c, ctx| {
            c.on_message(
                ctx,
                first_server,
                Msg::ExecuteOk {
                    txn,
                    results: vec![reply(0)],
                    committed: false,
                },
            )
        });
        assert!(matches!(&second[..], [(to, Msg::Execute(e))] if *to == server && e.pieces == [1]));
        let nudged = step(&mut |c, ctx| c.on_message(ctx, server, Msg::Inquire { txn }));
        assert!(
            matches!(&nudged[..], [(to, Msg::Execute(e))] if *to == server && e.pieces == [1]),
            "{nudged:?}"
        );
        // Another node asking gets nothing resent to it.
        let other = NodeId(server.0 + 7);
        assert!(step(&mut |c, ctx| c.on_message(ctx, other, Msg::Inquire { txn })).is_empty());
    }

    /// A one-participant transaction goes out in one Execute, its chained
    /// piece included (the participant feeds it), asking it to commit
    /// (one-shot); the commit with every reply completes the attempt, and
    /// a commit without them (a participant that restarted since) is
    /// reported in doubt rather than as a commit with unknown reads.
    #[test]
    fn a_one_shot_commit_completes_the_attempt_or_leaves_it_in_doubt() {
        let topology = Arc::new(Topology::new(1, 1, 1));
        let me = topology.client_hosts().next().expect("a client host").id;
        let server = topology.leader(ShardId(0));
        let mut c = coordinator(me, topology);
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let mut step = |f: &mut dyn FnMut(&mut TwoPcCoordinator, &mut Ctx<Msg>)| {
            let mut effects = Vec::new();
            f(&mut c, &mut Ctx::new(1, me, &mut rng, &mut effects));
            effects
        };
        for (seq, replies, in_doubt) in [(1, vec![reply(0), reply(1)], false), (2, vec![], true)] {
            let txn = TxnId::new(me, 0, seq);
            let attempt = Attempt {
                id: txn,
                txn: two_rounds(),
                since: 0,
                client: 0,
            };
            let first = sent(step(&mut |c, ctx| c.submit(ctx, attempt.clone())));
            assert!(matches!(&first[..], [(_, Msg::Execute(e))]
                if e.commit && e.pieces == [0, 1] && e.inputs[1].is_empty()));
            let done = step(&mut |c, ctx| {
                let results = replies.clone();
                let committed = true;
                let ok = Msg::ExecuteOk {
                    txn,
                    results,
                    committed,
                };
                c.on_message(ctx, server, ok)
            });
            let outcome = done.iter().find_map(|e| match e {
                Effect::Done { txn: t, outcome } if *t == txn => Some(outcome),
                _ => None,
            });
            match outcome {
                Some(TxnOutcome::InDoubt) => assert!(in_doubt),
                Some(TxnOutcome::Committed { outputs, .. }) => {
                    assert!(!in_doubt);
                    assert_eq!(outputs.len(), 2);
                }
                other => panic!("{other:?}"),
            }
            assert!(!sent(done)
                .iter()
                .any(|(_, m)| matches!(m, Msg::CommitOnePhase { .. })));
        }
    }
}
