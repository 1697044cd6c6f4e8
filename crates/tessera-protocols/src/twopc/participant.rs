//! The participant: a shard's server role in 2PC over pieces.
//!
//! It executes pieces against the shard's [`Store`] under a
//! [`ConcurrencyControl`], buffers their writes until commit, and answers the
//! coordinator. Live transactions have their state in one map; a finished
//! transaction leaves a tombstone (its outcome) in [`Tombstones`] until its
//! coordinator's floor passes it, so that duplicated or late messages are
//! answered, never re-executed.
//!
//! Prepare and decision records go through a [`ParticipantLog`] before the
//! participant votes or acknowledges (see [`super::log`]): once durable in
//! the node's write-ahead log when unreplicated ([`super::WalLog`]), once
//! chosen when the shard is a Paxos group. Every replica applies the
//! records that come back the same way, so followers hold the leader's
//! store and prepared set, a new leader re-takes the locks of the prepared
//! transactions it inherits, and a restarted participant rebuilds itself
//! from the records it replays.
//!
//! A participant that lost a transaction's state (a crash, a change of
//! leader) cannot run its later pieces: [`first_contact_ok`] refuses an
//! Execute that reaches an unknown transaction without the pieces every
//! first Execute carries.

use super::cc::{Admit, ConcurrencyControl, Priority};
use super::image;
use super::log::{LogEvent, LogRecord, ParticipantLog, Serving};
use super::msg::{Execute, Msg, PieceReply};
use super::Timeouts;
use crate::tombstones::Tombstones;
use std::collections::VecDeque;
use tessera_core::ids::{Key, NodeId, ShardId, Time, TimerId, TxnId, Version};
use tessera_core::node::{Ctx, Node};
use tessera_core::protocol::ServerEnv;
use tessera_core::storage::Store;
use tessera_core::txn::{AbortReason, PieceSpec, Procedure, ReadObs, Txn, Value};
use tessera_core::FastMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Active,
    /// Write set locked in a lock round; reads not yet validated.
    Locked,
    Prepared,
    Committed,
    Aborted(AbortReason),
}

struct TxnState {
    coord: NodeId,
    prio: Priority,
    proc: Option<Txn>,
    phase: Phase,
    /// Replies of the pieces run so far (resent on a duplicate Execute).
    done: Vec<PieceReply>,
    /// Pieces admitted by nobody yet, with their inputs.
    waiting: VecDeque<(u16, Vec<Value>)>,
    /// Reads of data this transaction did not write itself: (key, version).
    reads: Vec<(Key, Version)>,
    /// Buffered writes, last value per key: keys and values apart, so the
    /// concurrency control gets the key set as a slice without copying it.
    write_keys: Vec<Key>,
    write_values: Vec<Value>,
    last_heard: Time,
    /// When we last asked the coordinator about this transaction.
    inquired_at: Time,
    /// Its Prepare record is back from the log.
    logged: bool,
    /// The record of this transaction appended and not yet back.
    awaiting: Awaiting,
    /// Whom to answer when the awaited record is back.
    reply_to: Option<NodeId>,
    /// Prepared by CommitOnePhase (answered with OnePhaseDone).
    one_phase: bool,
    /// The coordinator asked to commit in one phase once every piece here
    /// ran (a one-shot Execute, answered by an ExecuteOk with `committed`).
    one_shot: bool,
}

/// What a finished transaction leaves behind (its tombstone).
#[derive(Debug)]
struct Ended {
    phase: Phase,
    /// A one-shot transaction's piece replies: its coordinator may have
    /// lost the only message that carried them, and asks again with a
    /// duplicate Execute.
    replies: Vec<PieceReply>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Awaiting {
    Nothing,
    Prepare,
    Commit,
    Abort,
}

impl TxnState {
    fn new(coord: NodeId, prio: Priority, phase: Phase, now: Time) -> Self {
        TxnState {
            coord,
            prio,
            proc: None,
            phase,
            done: Vec::new(),
            waiting: VecDeque::new(),
            reads: Vec::new(),
            write_keys: Vec::new(),
            write_values: Vec::new(),
            last_heard: now,
            inquired_at: now,
            logged: false,
            awaiting: Awaiting::Nothing,
            reply_to: None,
            one_phase: false,
            one_shot: false,
        }
    }
}

/// An answer to a coordinator: now, or when a record is back from the log.
enum Answer {
    Now(bool),
    Later,
}

/// The server role of [`super::TwoPc`].
pub struct Participant<C, L = super::WalLog> {
    cc: C,
    log: L,
    store: Store,
    timeouts: Timeouts,
    txns: FastMap<TxnId, TxnState>,
    /// Outcomes of finished transactions, so that duplicated or late
    /// messages are answered, never re-executed. Kept apart from `txns` so
    /// that the periodic sweep visits live transactions only.
    ended: Tombstones<Ended>,
    /// Transactions granted locks by a release, to resume.
    granted: Vec<TxnId>,
    wounded: Vec<TxnId>,
    /// The newest incarnation heard from, per coordinator node, while this
    /// replica serves (see [`Participant::coordinator_restarted`]).
    incarnations: FastMap<NodeId, u8>,
    shard: ShardId,
    /// Committed transactions whose Commit record is still on its way, with
    /// the coordinator to acknowledge (an [in-order](ParticipantLog::in_order)
    /// log's early installs).
    acks: FastMap<TxnId, NodeId>,
    /// Aborts carried out here (counter `twopc_participant_aborts`).
    aborts: u64,
}

const SWEEP: TimerId = TimerId(1);

impl<C: ConcurrencyControl, L: ParticipantLog> Participant<C, L> {
    pub fn new(cc: C, log: L, timeouts: Timeouts, env: ServerEnv) -> Self {
        let ended = Tombstones::new(timeouts.tombstone);
        let mut p = Participant {
            cc,
            log,
            store: env.store,
            timeouts,
            txns: tessera_core::fast_map(),
            ended,
            granted: Vec::new(),
            wounded: Vec::new(),
            incarnations: tessera_core::fast_map(),
            shard: env.shard,
            acks: tessera_core::fast_map(),
            aborts: 0,
        };
        p.recover();
        p
    }

    /// Rebuild from what the log replayed: restore its snapshot and apply
    /// its records, as a follower applies records it did not append.
    fn recover(&mut self) {
        let r = self.log.replay();
        if let Some(snapshot) = r.snapshot {
            self.restore(0, snapshot);
        }
        for rec in r.records {
            let reply = self.apply(0, rec);
            debug_assert!(reply.is_none(), "a replayed record answered someone");
        }
        self.granted.clear();
        if !self.txns.is_empty() || !self.ended.is_empty() {
            tracing::info!(
                prepared = self.txns.len(),
                ended = self.ended.len(),
                "participant recovered"
            );
        }
    }

    fn sweep_period(&self) -> Time {
        (self.timeouts.inquire.min(self.timeouts.participant) / 4).max(1)
    }

    fn on_execute(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, req: Execute) {
        let Execute {
            txn,
            since,
            proc,
            floor,
            pieces,
            inputs,
            commit,
        } = req;
        let now = ctx.now();
        self.ended.raise_floor(floor);
        self.coordinator_restarted(ctx, txn);
        if !self.txns.contains_key(&txn) {
            if self.ended.below_floor(txn) {
                return; // stale: the coordinator is done with it
            }
            if self.replaced(txn) && !self.ended.contains(txn) {
                // Its coordinator restarted: the transaction decides
                // nothing any more, and its tombstone may have expired, so
                // it must not run (again).
                let reason = AbortReason::Timeout;
                ctx.send(from, Msg::ExecuteFailed { txn, reason });
                return;
            }
        }
        match self.ended.get(txn) {
            Some(Ended {
                phase: Phase::Aborted(reason),
                ..
            }) => {
                let reason = *reason;
                ctx.send(from, Msg::ExecuteFailed { txn, reason });
                return;
            }
            // A one-shot transaction committed here and its answer was
            // lost; without replies (this participant restarted since)
            // the coordinator can only report it in doubt.
            Some(Ended {
                phase: Phase::Committed,
                replies,
            }) if commit => {
                let results = replies.clone();
                let committed = true;
                ctx.send(
                    from,
                    Msg::ExecuteOk {
                        txn,
                        results,
                        committed,
                    },
                );
                return;
            }
            Some(_) => return, // a late duplicate
            None => {}
        }
        if !self.txns.contains_key(&txn) && !first_contact_ok(proc.as_ref(), self.shard, &pieces) {
            let reason = AbortReason::Timeout;
            self.tombstone(now, txn);
            ctx.send(from, Msg::ExecuteFailed { txn, reason });
            return;
        }
        let st = self
            .txns
            .entry(txn)
            .or_insert_with(|| TxnState::new(from, Priority { since, txn }, Phase::Active, now));
        st.last_heard = now;
        if st.phase != Phase::Active {
            return; // a late duplicate
        }
        if st.proc.is_none() {
            st.proc = Some(proc);
        }
        st.one_shot |= commit;
        let mut resend = Vec::new();
        let mut queued = false;
        for (piece, inputs) in pieces.into_iter().zip(inputs) {
            if let Some(r) = st.done.iter().find(|r| r.piece == piece) {
                resend.push(r.clone());
            } else if !st.waiting.iter().any(|(p, _)| *p == piece) {
                st.waiting.push_back((piece, inputs));
            } else {
                queued = true;
            }
        }
        if queued {
            // A resend of a piece that waits for locks: say we are alive.
            ctx.send(from, Msg::Busy { txn });
        }
        if !resend.is_empty() {
            ctx.send(
                from,
                Msg::ExecuteOk {
                    txn,
                    results: resend,
                    committed: false,
                },
            );
        }
        self.run_waiting(ctx, txn);
        self.resume_granted(ctx);
    }

    /// `txn`'s coordinator incarnation has been replaced by a newer one.
    fn replaced(&self, txn: TxnId) -> bool {
        self.incarnations
            .get(&txn.node())
            .is_some_and(|&seen| older(txn.incarnation(), seen))
    }

    /// Every transaction id names its coordinator's node and incarnation, so
    /// the first request from a newer incarnation says that the node
    /// restarted and lost what the older ones were doing. Their transactions
    /// still live here hold locks that nobody will release soon: an
    /// unprepared one would wait for `Timeouts::participant`, and a prepared
    /// one for the next inquiry sweep, while every transaction that conflicts
    /// on a hot row aborts or waits. So abort the unprepared ones now (2PC
    /// lets a participant abort on its own until it votes yes, and the new
    /// incarnation presumes abort for them anyway) and ask about the prepared
    /// ones at once (the new incarnation answers from its log).
    ///
    /// Only the serving replica gets here (requests reach no other): the
    /// unprepared orphans were never in the log, and a prepared one ends
    /// through the log as the coordinator's answer says, so followers
    /// apply the same outcome. A new leader starts with no incarnations
    /// known and learns them from the requests it serves.
    fn coordinator_restarted(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let (node, inc) = (txn.node(), txn.incarnation());
        if self
            .incarnations
            .get(&node)
            .is_some_and(|&seen| seen == inc || older(inc, seen))
        {
            return; // the same incarnation, or a late message of an older one
        }
        self.incarnations.insert(node, inc);
        let now = ctx.now();
        let mut orphans: Vec<(TxnId, bool)> = self
            .txns
            .iter()
            .filter(|(t, _)| t.node() == node && older(t.incarnation(), inc))
            .map(|(t, st)| (*t, st.phase == Phase::Prepared))
            .collect();
        orphans.sort_unstable();
        for (orphan, prepared) in orphans {
            if prepared {
                let st = self.txns.get_mut(&orphan).expect("listed");
                st.inquired_at = now;
                ctx.send(st.coord, Msg::Inquire { txn: orphan });
            } else {
                tracing::debug!(txn = ?orphan, "coordinator restarted: orphan aborted");
                self.abort_local(ctx, orphan, AbortReason::Timeout, false);
            }
        }
    }

    /// Admit and run the transaction's waiting pieces in order until one
    /// must wait; reply with what ran.
    fn run_waiting(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let mut ran = 0;
        loop {
            let Some(st) = self.txns.get_mut(&txn) else {
                return;
            };
            if st.phase != Phase::Active {
                return;
            }
            let proc = st
                .proc
                .clone()
                .expect("an active transaction has its procedure");
            let Some((piece, inputs)) = st.waiting.front_mut() else {
                break;
            };
            let wanted = &proc.pieces()[*piece as usize].inputs;
            if inputs.len() != wanted.len() {
                // Fed by pieces run here (see `Execute::inputs`). None runs
                // after a user abort: the coordinator aborts anyway, and a
                // rolled-back piece's output is no input.
                if st.done.iter().any(|r| r.user_abort) {
                    break;
                }
                let done = &st.done;
                let output = |j: usize| {
                    done.iter()
                        .find(|r| r.piece as usize == j)
                        .map(|r| &r.output)
                };
                match proc.pieces()[*piece as usize].gather_inputs(output) {
                    Some(ins) => *inputs = ins,
                    None => {
                        tracing::warn!(?txn, piece, "inputs from pieces that did not run here");
                        self.abort_local(ctx, txn, AbortReason::Validation, true);
                        return;
                    }
                }
            }
            let (piece, inputs) = st.waiting.front().expect("front exists");
            let spec = proc.resolve(*piece as usize, inputs);
            let admit = self.cc.admit(
                &mut self.store,
                st.prio,
                &spec.reads,
                &spec.writes,
                &mut self.wounded,
            );
            let wounded = std::mem::take(&mut self.wounded);
            for w in &wounded {
                self.abort_local(ctx, *w, AbortReason::LockConflict, true);
            }
            self.wounded = wounded;
            self.wounded.clear();
            match admit {
                Admit::Go => {
                    let st = self.txns.get_mut(&txn).expect("present");
                    let (piece, inputs) = st.waiting.pop_front().expect("front exists");
                    let reply = execute_piece(&self.store, st, &proc, &spec, piece, &inputs);
                    st.done.push(reply);
                    ran += 1;
                }
                Admit::Wait => break,
                Admit::Abort(reason) => {
                    self.abort_local(ctx, txn, reason, true);
                    return;
                }
            }
        }
        let st = &self.txns[&txn];
        let coord = st.coord;
        if st.one_shot && st.waiting.is_empty() {
            let proc = st
                .proc
                .as_ref()
                .expect("an active transaction has its procedure");
            let here = proc
                .pieces()
                .iter()
                .filter(|p| p.shard == self.shard)
                .count();
            if st.done.len() == here && !st.done.iter().any(|r| r.user_abort) {
                // Every piece ran: commit in one phase now. The answer
                // (with every reply) goes when the record is back.
                if let Answer::Now(false) = self.prepare(ctx, coord, txn, true) {
                    let reason = AbortReason::Validation;
                    ctx.send(coord, Msg::ExecuteFailed { txn, reason });
                }
                return;
            }
        }
        if ran > 0 {
            let results = st.done[st.done.len() - ran..].to_vec();
            let committed = false;
            ctx.send(
                coord,
                Msg::ExecuteOk {
                    txn,
                    results,
                    committed,
                },
            );
        }
    }

    fn resume_granted(&mut self, ctx: &mut Ctx<Msg>) {
        while let Some(t) = self.granted.pop() {
            self.run_waiting(ctx, t);
        }
    }

    /// Abort `txn` here (wounded, conflicted, timed out, or told to) and,
    /// when `notify`, tell its coordinator.
    fn abort_local(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, reason: AbortReason, notify: bool) {
        let Some(st) = self.txns.get_mut(&txn) else {
            return;
        };
        if !matches!(st.phase, Phase::Active | Phase::Locked | Phase::Prepared) {
            return;
        }
        st.phase = Phase::Aborted(reason);
        st.waiting.clear();
        let coord = st.coord;
        self.cc
            .release(&mut self.store, txn, &st.write_keys, &mut self.granted);
        self.charge_abort(ctx);
        self.finish(ctx.now(), txn);
        if notify {
            ctx.send(coord, Msg::ExecuteFailed { txn, reason });
        }
    }

    /// The concurrency control's CPU cost of an abort, counted as well.
    fn charge_abort(&mut self, ctx: &mut Ctx<Msg>) {
        self.aborts += 1;
        let cost = self.cc.abort_cpu();
        if cost > 0 {
            ctx.charge(cost);
        }
    }

    /// Move a transaction whose phase is now final to the tombstones.
    fn finish(&mut self, now: Time, txn: TxnId) {
        if let Some(st) = self.txns.remove(&txn) {
            debug_assert!(matches!(st.phase, Phase::Committed | Phase::Aborted(_)));
            let replies = if st.one_shot && st.phase == Phase::Committed {
                st.done
            } else {
                Vec::new()
            };
            let phase = st.phase;
            self.ended.insert(txn, Ended { phase, replies }, now);
        }
    }

    /// Remember that `txn` is aborted here although it never ran, so that a
    /// late Execute (overtaken by this message) does not run it.
    fn tombstone(&mut self, now: Time, txn: TxnId) {
        let ended = Ended {
            phase: Phase::Aborted(AbortReason::Timeout),
            replies: Vec::new(),
        };
        self.ended.insert(txn, ended, now);
    }

    /// A lock or prepare round reached `txn`. `Err(answer)` when the
    /// transaction has ended here (yes iff committed), or never ran here: it
    /// is then tombstoned and the answer is no.
    fn round_reached(&mut self, now: Time, txn: TxnId) -> Result<(), bool> {
        if let Some(e) = self.ended.get(txn) {
            return Err(e.phase == Phase::Committed);
        }
        match self.txns.get_mut(&txn) {
            Some(st) => {
                st.last_heard = now;
                Ok(())
            }
            None => {
                self.tombstone(now, txn);
                Err(false)
            }
        }
    }

    /// 2PC phase one (or, with `one_phase`, the only participant's
    /// prepare and commit). A transaction that validates is prepared at
    /// once, and its Prepare record appended: the yes answer goes to `from`
    /// when the record is back from the log.
    fn prepare(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId, one_phase: bool) -> Answer {
        let now = ctx.now();
        if let Err(answer) = self.round_reached(now, txn) {
            return Answer::Now(answer);
        }
        let st = self.txns.get_mut(&txn).expect("live");
        match st.phase {
            Phase::Prepared if st.logged && !one_phase => return Answer::Now(true),
            Phase::Prepared => {
                if st.awaiting == Awaiting::Prepare {
                    st.reply_to = Some(from);
                    // A resend while the record is on its way: alive.
                    ctx.send(from, Msg::Busy { txn });
                }
                return Answer::Later;
            }
            Phase::Committed => return Answer::Now(true),
            Phase::Aborted(_) => return Answer::Now(false),
            Phase::Active | Phase::Locked => {}
        }
        let ok = st.waiting.is_empty()
            && self
                .cc
                .prepare(&mut self.store, txn, &st.reads, &st.write_keys);
        if !ok {
            st.phase = Phase::Aborted(AbortReason::Validation);
            st.waiting.clear();
            self.cc
                .release(&mut self.store, txn, &st.write_keys, &mut self.granted);
            self.finish(now, txn);
            return Answer::Now(false);
        }
        st.phase = Phase::Prepared;
        st.one_phase = one_phase;
        st.awaiting = Awaiting::Prepare;
        st.reply_to = Some(from);
        let writes = if self.log.records_writes() {
            let values = st.write_values.iter().cloned();
            st.write_keys.iter().copied().zip(values).collect()
        } else {
            Vec::new()
        };
        let rec = LogRecord::Prepare {
            txn,
            coord: st.coord,
            writes,
            one_phase,
        };
        self.log.append(ctx, rec);
        Answer::Later
    }

    /// The lock round (OCC with several participants).
    fn lock(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) -> bool {
        let now = ctx.now();
        if let Err(answer) = self.round_reached(now, txn) {
            return answer;
        }
        let st = self.txns.get_mut(&txn).expect("live");
        match st.phase {
            Phase::Locked | Phase::Prepared | Phase::Committed => return true,
            Phase::Aborted(_) => return false,
            Phase::Active => {}
        }
        if st.waiting.is_empty() && self.cc.lock(&mut self.store, txn, &st.write_keys) {
            st.phase = Phase::Locked;
            true
        } else {
            self.abort_local(ctx, txn, AbortReason::LockConflict, false);
            false
        }
    }

    /// 2PC phase two: append the Commit record; the Ack goes to `from`
    /// when it is back. Acknowledge at once a transaction known committed
    /// here, or one this participant does not know when its state is the
    /// shard's only copy (then it finished long ago). A replica of a
    /// replicated shard that does not know it stays silent: it may be a
    /// deposed leader that has not heard of the transaction, and an ack
    /// from it would let the coordinator forget a decision the real leader
    /// still needs.
    ///
    /// With an [in-order](ParticipantLog::in_order) log the writes are
    /// installed and the locks released at once (the decision is durable at
    /// the coordinator, and every record appended later is safe only after
    /// this one); only the Ack waits for the record.
    fn commit(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId) -> Answer {
        if let Some(to) = self.acks.get_mut(&txn) {
            *to = from;
            ctx.send(from, Msg::Busy { txn });
            return Answer::Later;
        }
        let Some(st) = self.txns.get_mut(&txn) else {
            return match self.ended.get(txn).map(|e| e.phase) {
                Some(Phase::Committed) => Answer::Now(true),
                Some(_) => {
                    tracing::warn!(?txn, "commit for a transaction aborted here");
                    Answer::Now(self.log.single_copy())
                }
                None => Answer::Now(self.log.single_copy()),
            };
        };
        if st.phase != Phase::Prepared || !st.logged {
            tracing::warn!(?txn, phase = ?st.phase, "commit for a transaction that is not prepared");
            return Answer::Now(self.log.single_copy());
        }
        if self.log.in_order() {
            self.install(ctx.now(), txn);
            self.acks.insert(txn, from);
            self.log.append(ctx, LogRecord::Commit { txn });
            return Answer::Later;
        }
        st.reply_to = Some(from);
        if st.awaiting == Awaiting::Commit {
            ctx.send(from, Msg::Busy { txn });
        } else {
            st.awaiting = Awaiting::Commit;
            self.log.append(ctx, LogRecord::Commit { txn });
        }
        Answer::Later
    }

    /// The coordinator's abort. A prepared transaction (its Prepare record
    /// possibly still on its way) aborts through the log, after that
    /// record; any other aborts here and now.
    fn abort(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        match self.txns.get_mut(&txn) {
            Some(st)
                if st.phase == Phase::Prepared
                    && st.awaiting != Awaiting::Abort
                    && st.awaiting != Awaiting::Commit =>
            {
                st.awaiting = Awaiting::Abort;
                st.reply_to = None;
                self.charge_abort(ctx);
                self.log.append(ctx, LogRecord::Abort { txn });
            }
            Some(st) if st.phase == Phase::Prepared => {}
            Some(_) => self.abort_local(ctx, txn, AbortReason::Validation, false),
            None if !self.ended.contains(txn) => self.tombstone(ctx.now(), txn),
            None => {}
        }
    }

    /// Install a prepared transaction's writes and end it.
    fn install(&mut self, now: Time, txn: TxnId) {
        let Some(st) = self.txns.get_mut(&txn) else {
            return;
        };
        st.phase = Phase::Committed;
        for (&k, v) in st.write_keys.iter().zip(st.write_values.drain(..)) {
            self.store.install(k, v, txn.version());
        }
        self.cc
            .release(&mut self.store, txn, &st.write_keys, &mut self.granted);
        self.finish(now, txn);
    }

    // ----- records back from the log -----

    /// Act on everything the log has for us, then resume what it freed.
    fn drain_log(&mut self, ctx: &mut Ctx<Msg>) {
        while let Some(ev) = self.log.poll() {
            match ev {
                LogEvent::Chosen(rec) => {
                    if let Some((to, msg)) = self.apply(ctx.now(), rec) {
                        ctx.send(to, msg);
                    }
                }
                LogEvent::Leading => self.leading(ctx),
                LogEvent::Following { leader } => self.following(ctx, leader),
                LogEvent::Restore(data) => self.restore(ctx.now(), data),
                LogEvent::SnapshotDue => {
                    let data = self.image(false);
                    self.log.compact(ctx, data);
                }
            }
        }
        self.resume_granted(ctx);
    }

    /// Apply a record that is back from the log. On the replica that
    /// appended it, finish what the record stood for and return the answer
    /// to send; on the others (followers, or a participant replaying its
    /// log), rebuild the same state from the record.
    fn apply(&mut self, now: Time, rec: LogRecord) -> Option<(NodeId, Msg)> {
        match rec {
            LogRecord::Prepare {
                txn,
                coord,
                writes,
                one_phase,
            } => {
                let mine = self
                    .txns
                    .get(&txn)
                    .is_some_and(|st| st.phase == Phase::Prepared && !st.logged);
                if !mine {
                    // The log overrides what this replica decided alone: a
                    // stale leader may have aborted (or refused) the
                    // transaction that the real leader prepared. Only a
                    // commit comes from the log itself (a duplicate).
                    match self.ended.get(txn).map(|e| e.phase) {
                        Some(Phase::Committed) => return None,
                        Some(_) => self.ended.remove(txn),
                        None => {}
                    }
                    if let Some(old) = self.txns.remove(&txn) {
                        self.cc
                            .release(&mut self.store, txn, &old.write_keys, &mut self.granted);
                    }
                    let prio = Priority { since: 0, txn };
                    let mut st = TxnState::new(coord, prio, Phase::Prepared, now);
                    (st.write_keys, st.write_values) = writes.into_iter().unzip();
                    st.logged = true;
                    if self.log.serving() == Serving::Yes {
                        self.cc.relock(&mut self.store, txn, &st.write_keys);
                    }
                    self.txns.insert(txn, st);
                    if one_phase {
                        self.install(now, txn);
                    }
                    return None;
                }
                let st = self.txns.get_mut(&txn).expect("mine");
                st.logged = true;
                st.awaiting = Awaiting::Nothing;
                let to = st.reply_to.take();
                let msg = if one_phase && st.one_shot {
                    Msg::ExecuteOk {
                        txn,
                        results: st.done.clone(),
                        committed: true,
                    }
                } else if one_phase {
                    Msg::OnePhaseDone {
                        txn,
                        committed: true,
                    }
                } else {
                    Msg::Vote { txn, yes: true }
                };
                if one_phase {
                    self.install(now, txn);
                }
                to.map(|to| (to, msg))
            }
            LogRecord::Commit { txn } => {
                let Some(st) = self.txns.get_mut(&txn) else {
                    // Installed when appended (an in-order log), or applied
                    // before (a duplicate record).
                    return self.acks.remove(&txn).map(|to| (to, Msg::Ack { txn }));
                };
                let to = st.reply_to.take();
                self.install(now, txn);
                to.map(|to| (to, Msg::Ack { txn }))
            }
            LogRecord::Abort { txn } => {
                if let Some(st) = self.txns.get_mut(&txn) {
                    st.phase = Phase::Aborted(AbortReason::Validation);
                    self.cc
                        .release(&mut self.store, txn, &st.write_keys, &mut self.granted);
                    self.finish(now, txn);
                }
                None
            }
        }
    }

    /// This replica took over: the transactions it holds are the prepared
    /// ones of the log. Take their write locks again (strict 2PL's read
    /// locks are not needed past the lock point, and OCC's reads were
    /// validated), and hear from their coordinators afresh.
    fn leading(&mut self, ctx: &mut Ctx<Msg>) {
        let now = ctx.now();
        let mut ids: Vec<TxnId> = self.txns.keys().copied().collect();
        ids.sort_unstable();
        for txn in ids {
            let st = self.txns.get_mut(&txn).expect("listed");
            debug_assert!(st.logged, "a follower holds only logged transactions");
            st.last_heard = now;
            st.inquired_at = now;
            self.cc.relock(&mut self.store, txn, &st.write_keys);
        }
    }

    /// This replica stopped leading: drop every lock, forget transactions
    /// the log does not know as prepared (telling the coordinators of those
    /// still executing), and keep the prepared ones as a follower does.
    fn following(&mut self, ctx: &mut Ctx<Msg>, leader: Option<NodeId>) {
        tracing::debug!(?leader, "participant: no longer the leader");
        let mut ids: Vec<TxnId> = self.txns.keys().copied().collect();
        ids.sort_unstable();
        for txn in ids {
            let st = self.txns.get_mut(&txn).expect("listed");
            self.cc
                .release(&mut self.store, txn, &st.write_keys, &mut self.granted);
            st.reply_to = None;
            st.awaiting = Awaiting::Nothing;
            if st.logged {
                continue;
            }
            // A Prepare record still on its way may yet be chosen: then it
            // comes back and rebuilds the transaction like any follower's.
            let st = self.txns.remove(&txn).expect("listed");
            if matches!(st.phase, Phase::Active | Phase::Locked) {
                ctx.send(
                    st.coord,
                    Msg::ExecuteFailed {
                        txn,
                        reason: AbortReason::LockConflict,
                    },
                );
            }
        }
        self.granted.clear();
    }

    /// The participant's [image](super::image): the store, the prepared
    /// transactions and the commits still remembered. With `appended`
    /// false, as of the last record handed out (a Paxos log's compaction:
    /// a record still on its way may never be chosen). With `appended`
    /// true, as of every record appended (a write-ahead log's checkpoint,
    /// written once they are all durable): a Prepare on its way counts as
    /// prepared, a one-phase commit on its way as installed.
    fn image(&self, appended: bool) -> bytes::Bytes {
        let mut installed = Vec::new();
        let mut prepared = Vec::new();
        let mut committed: Vec<TxnId> = self
            .ended
            .iter()
            .filter(|(_, e)| e.phase == Phase::Committed)
            .map(|(t, _)| t)
            .collect();
        for (txn, st) in &self.txns {
            let on_its_way =
                appended && st.phase == Phase::Prepared && st.awaiting == Awaiting::Prepare;
            if on_its_way && st.one_phase {
                installed.push((*txn, &st.write_keys[..], &st.write_values[..]));
                committed.push(*txn);
            } else if st.logged || on_its_way {
                prepared.push((*txn, st.coord, &st.write_keys[..], &st.write_values[..]));
            }
        }
        image::encode(&self.store, &installed, prepared, committed)
    }

    /// Replace the applied state by an image (a replica too far behind, or
    /// a participant replaying its log from a checkpoint). A serving
    /// replica re-takes the prepared transactions' write locks.
    fn restore(&mut self, now: Time, data: bytes::Bytes) {
        let img = match image::decode(&data) {
            Ok(img) => img,
            Err(e) => {
                tracing::error!(error = %e, "participant: unreadable snapshot");
                return;
            }
        };
        for (txn, st) in self.txns.drain() {
            self.cc
                .release(&mut self.store, txn, &st.write_keys, &mut self.granted);
        }
        self.granted.clear();
        self.store = img.store;
        let serving = self.log.serving() == Serving::Yes;
        for p in img.prepared {
            let prio = Priority {
                since: 0,
                txn: p.txn,
            };
            let mut st = TxnState::new(p.coord, prio, Phase::Prepared, now);
            (st.write_keys, st.write_values) = p.writes.into_iter().unzip();
            st.logged = true;
            if serving {
                self.cc.relock(&mut self.store, p.txn, &st.write_keys);
            }
            self.txns.insert(p.txn, st);
        }
        for t in img.committed {
            let ended = Ended {
                phase: Phase::Committed,
                replies: Vec::new(),
            };
            self.ended.insert(t, ended, now);
        }
    }

    fn sweep(&mut self, ctx: &mut Ctx<Msg>) {
        let now = ctx.now();
        self.ended.sweep(now);
        let period = self.sweep_period();
        ctx.set_timer(period, SWEEP);
        if self.log.serving() != Serving::Yes {
            return; // followers hold what the log says; its leader decides
        }
        let mut silent = Vec::new();
        let mut ask = Vec::new();
        for (txn, st) in self.txns.iter_mut() {
            let quiet = now - st.last_heard.max(st.inquired_at) > self.timeouts.inquire;
            match st.phase {
                Phase::Active | Phase::Locked
                    if now - st.last_heard > self.timeouts.participant =>
                {
                    silent.push(*txn);
                }
                // Ask a quiet coordinator early: one that restarted has
                // forgotten the transaction and answers Abort at once, so
                // its locks are freed without waiting for the timeout.
                _ if quiet => {
                    st.inquired_at = now;
                    ask.push((*txn, st.coord));
                }
                _ => {}
            }
        }
        ask.sort_unstable();
        for (txn, coord) in ask {
            ctx.send(coord, Msg::Inquire { txn });
        }
        silent.sort_unstable();
        for txn in silent {
            self.abort_local(ctx, txn, AbortReason::Timeout, true);
        }
        self.resume_granted(ctx);
    }
}

/// Is incarnation `a` older than `b`? Incarnations are a `u8` that wraps:
/// `a` is older when `b - a` (mod 256) is in 1..=127.
fn older(a: u8, b: u8) -> bool {
    (b.wrapping_sub(a) as i8) > 0
}

/// May an Execute that reaches `txn` for the first time here start it? It
/// must carry every input-free piece of this shard: the coordinator sends
/// all of them in its first Execute (they are ready at once), so one that
/// lacks some is a later round for a transaction whose state this
/// participant lost (a crash, a change of leader); running it would commit
/// half the transaction's writes here.
fn first_contact_ok(proc: &dyn Procedure, shard: ShardId, pieces: &[u16]) -> bool {
    proc.pieces()
        .iter()
        .enumerate()
        .filter(|(_, p)| p.shard == shard && p.inputs.is_empty())
        .all(|(i, _)| pieces.contains(&(i as u16)))
}

/// Run one piece on the store and this transaction's own buffered writes.
fn execute_piece(
    store: &Store,
    st: &mut TxnState,
    proc: &Txn,
    spec: &PieceSpec,
    piece: u16,
    inputs: &[Value],
) -> PieceReply {
    let mut obs = Vec::with_capacity(spec.reads.len());
    let res = {
        // Most pieces read a handful of keys: keep their values on the stack.
        const INLINE: usize = 16;
        let mut inline: [Option<&Value>; INLINE] = [None; INLINE];
        let mut heap: Vec<Option<&Value>>;
        let n = spec.reads.len();
        let values: &mut [Option<&Value>] = if n <= INLINE {
            &mut inline[..n]
        } else {
            heap = vec![None; n];
            &mut heap
        };
        for (slot, a) in values.iter_mut().zip(&spec.reads) {
            if let Some(i) = st.write_keys.iter().position(|k| *k == a.key) {
                *slot = Some(&st.write_values[i]);
                continue;
            }
            let (value, version) = match store.get(a.key) {
                Some(r) => (Some(&r.value), r.meta.version),
                None => (None, Version::INITIAL),
            };
            *slot = value;
            obs.push(ReadObs::row(a.key, version));
        }
        proc.execute(piece as usize, values, inputs)
    };
    st.reads.extend(obs.iter().map(|o| (o.key, o.version)));
    let mut written = Vec::with_capacity(res.writes.len());
    for (k, v) in res.writes {
        debug_assert!(
            spec.writes.iter().any(|a| a.key == k),
            "{} piece {piece} wrote undeclared key {k}",
            proc.name()
        );
        match st.write_keys.iter().position(|wk| *wk == k) {
            Some(i) => st.write_values[i] = v,
            None => {
                st.write_keys.push(k);
                st.write_values.push(v);
            }
        }
        written.push(k);
    }
    PieceReply {
        piece,
        reads: obs,
        writes: written,
        output: res.output,
        user_abort: res.user_abort,
    }
}

impl<C: ConcurrencyControl, L: ParticipantLog> Participant<C, L> {
    /// A coordinator's request: handle it if this replica serves, else
    /// redirect the coordinator (or drop it while taking over).
    fn on_request(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        match self.log.serving() {
            Serving::Yes => {}
            Serving::NotYet => {
                // Taking over: the coordinator should wait for us.
                if let Some(txn) = msg.txn() {
                    ctx.send(from, Msg::Busy { txn });
                }
                return;
            }
            Serving::Elsewhere(leader) => {
                if !matches!(msg, Msg::Abort { .. }) {
                    if let Some(txn) = msg.txn() {
                        ctx.send(from, Msg::NotLeader { txn, leader });
                    }
                }
                return;
            }
        }
        match msg {
            Msg::Execute(req) => self.on_execute(ctx, from, req),
            Msg::Lock { txn } => {
                let ok = self.lock(ctx, txn);
                ctx.send(from, Msg::Locked { txn, ok });
            }
            Msg::Prepare { txn } => {
                if let Answer::Now(yes) = self.prepare(ctx, from, txn, false) {
                    ctx.send(from, Msg::Vote { txn, yes });
                }
            }
            Msg::CommitOnePhase { txn } => {
                if let Answer::Now(committed) = self.prepare(ctx, from, txn, true) {
                    ctx.send(from, Msg::OnePhaseDone { txn, committed });
                }
            }
            Msg::Commit { txn } => {
                if let Answer::Now(true) = self.commit(ctx, from, txn) {
                    ctx.send(from, Msg::Ack { txn });
                }
            }
            // The coordinator decided: no need to tell it.
            Msg::Abort { txn } => self.abort(ctx, txn),
            _ => unreachable!("only requests are passed here"),
        }
    }
}

impl<C: ConcurrencyControl, L: ParticipantLog> Node<Msg> for Participant<C, L> {
    fn take_report(&mut self) -> tessera_core::node::NodeReport {
        tessera_core::node::NodeReport {
            client: None,
            counters: vec![("twopc_participant_aborts", std::mem::take(&mut self.aborts))],
            ..Default::default()
        }
    }

    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        let period = self.sweep_period();
        ctx.set_timer(period, SWEEP);
        self.log.start(ctx);
        self.drain_log(ctx);
    }

    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Paxos(m) => self.log.on_message(ctx, from, m),
            Msg::Execute(_)
            | Msg::Lock { .. }
            | Msg::Prepare { .. }
            | Msg::CommitOnePhase { .. }
            | Msg::Commit { .. }
            | Msg::Abort { .. } => self.on_request(ctx, from, msg),
            Msg::ExecuteOk { .. }
            | Msg::ExecuteFailed { .. }
            | Msg::Locked { .. }
            | Msg::Vote { .. }
            | Msg::OnePhaseDone { .. }
            | Msg::Ack { .. }
            | Msg::Inquire { .. }
            | Msg::NotLeader { .. }
            | Msg::Busy { .. } => {
                tracing::warn!(?from, ?msg, "participant got a coordinator's message");
            }
        }
        self.drain_log(ctx);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<Msg>, id: TimerId) {
        if id == SWEEP {
            self.sweep(ctx);
        } else {
            self.log.on_timer(ctx, id);
        }
        self.drain_log(ctx);
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<Msg>, token: u64) {
        self.log.on_persisted(ctx, token);
        self.drain_log(ctx);
    }

    fn store(&self) -> Option<&Store> {
        Some(&self.store)
    }

    /// The runtime's checkpoint, if the log lives in the node's
    /// write-ahead log.
    fn snapshot(&self) -> Option<bytes::Bytes> {
        self.log.checkpoint(&|appended| self.image(appended))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::occ::{Occ, OccConfig};
    use crate::twopc::WalLog;
    use rand::SeedableRng;
    use std::sync::Arc;
    use tessera_core::ids::ShardId;
    use tessera_core::node::Effect;
    use tessera_core::topology::Topology;
    use tessera_core::txn::{Access, PieceKind, PieceResult, PieceSpec, Procedure};

    /// One piece on shard 0 that overwrites key 7.
    #[derive(Debug)]
    struct Put(Vec<PieceSpec>);

    impl Put {
        fn txn() -> Txn {
            let key = Key::new(0, 7);
            Arc::new(Put(vec![PieceSpec {
                shard: ShardId(0),
                reads: vec![Access::all(key)],
                writes: vec![Access::all(key)],
                kind: PieceKind::Immediate,
                inputs: Vec::new(),
                dynamic: false,
            }]))
        }
    }

    impl Procedure for Put {
        fn name(&self) -> &'static str {
            "put"
        }
        fn pieces(&self) -> &[PieceSpec] {
            &self.0
        }
        fn execute(&self, _: usize, _: &[Option<&Value>], _: &[Value]) -> PieceResult {
            PieceResult {
                writes: vec![(Key::new(0, 7), Value::from_static(b"x"))],
                ..PieceResult::default()
            }
        }
    }

    /// Piece 0 reads key 7 and outputs its value (or "none"); piece 1,
    /// fed by piece 0, writes that output to key 8.
    #[derive(Debug)]
    struct Copy(Vec<PieceSpec>);

    impl Copy {
        fn txn() -> Txn {
            let piece = |row, reads: bool, inputs: Vec<u16>| PieceSpec {
                shard: ShardId(0),
                reads: if reads {
                    vec![Access::all(Key::new(0, row))]
                } else {
                    Vec::new()
                },
                writes: if reads {
                    Vec::new()
                } else {
                    vec![Access::all(Key::new(0, row))]
                },
                kind: PieceKind::Immediate,
                inputs,
                dynamic: false,
            };
            Arc::new(Copy(vec![piece(7, true, vec![]), piece(8, false, vec![0])]))
        }
    }

    impl Procedure for Copy {
        fn name(&self) -> &'static str {
            "copy"
        }
        fn pieces(&self) -> &[PieceSpec] {
            &self.0
        }
        fn execute(&self, piece: usize, reads: &[Option<&Value>], inputs: &[Value]) -> PieceResult {
            match piece {
                0 => PieceResult {
                    output: reads[0].cloned().unwrap_or(Value::from_static(b"none")),
                    ..PieceResult::default()
                },
                _ => PieceResult {
                    writes: vec![(Key::new(0, 8), inputs[0].clone())],
                    ..PieceResult::default()
                },
            }
        }
    }

    /// A piece fed by a piece of the same shard comes in the same Execute
    /// without its inputs: the participant feeds it the output it produced.
    #[test]
    fn a_chained_piece_takes_its_input_from_the_piece_run_here() {
        let mut h = Harness::new();
        let t1 = TxnId::new(NodeId(1), 0, 1);
        h.deliver(one_shot(t1, t1));
        let t2 = TxnId::new(NodeId(1), 0, 2);
        let answer = h.deliver(Msg::Execute(Execute {
            txn: t2,
            since: 0,
            proc: Copy::txn(),
            floor: t2,
            pieces: vec![0, 1],
            inputs: vec![Vec::new(), Vec::new()],
            commit: true,
        }));
        assert!(
            matches!(&answer[..], [Msg::ExecuteOk { results, committed: true, .. }] if results.len() == 2),
            "{answer:?}"
        );
        let copied = h.p.store.get(Key::new(0, 8)).expect("written");
        assert_eq!(&copied.value[..], b"x");
    }

    struct Harness<C = Occ> {
        p: Participant<C, WalLog>,
        rng: rand::rngs::SmallRng,
        now: Time,
        /// The node's durable records, in order.
        disk: Vec<bytes::Bytes>,
        /// Persists not completed yet (when `hold`).
        held: Vec<u64>,
        hold: bool,
    }

    impl Harness {
        fn new() -> Self {
            Self::restarted(Vec::new())
        }

        /// A participant restarted on these durable records.
        fn restarted(disk: Vec<bytes::Bytes>) -> Self {
            Harness::with(Occ::new(&OccConfig::default()), disk)
        }
    }

    impl<C: ConcurrencyControl> Harness<C> {
        /// A participant under `cc`, started on these durable records.
        fn with(cc: C, disk: Vec<bytes::Bytes>) -> Self {
            let env = ServerEnv {
                me: NodeId(0),
                shard: ShardId(0),
                replica: 0,
                topology: Arc::new(Topology::new(1, 1, 1)),
                store: Store::new(),
                recovered: disk.clone(),
                durable: true,
                codec: Default::default(),
            };
            let p = Participant::new(cc, WalLog::open(&(), &env), Timeouts::default(), env);
            let mut h = Harness {
                p,
                rng: rand::rngs::SmallRng::seed_from_u64(1),
                now: 0,
                disk,
                held: Vec::new(),
                hold: false,
            };
            let mut effects = Vec::new();
            let mut ctx = Ctx::new(h.now, NodeId(0), &mut h.rng, &mut effects);
            h.p.on_start(&mut ctx);
            h
        }

        /// Deliver `msg` from the coordinator (node 1); the messages sent
        /// back. Log records are durable at once, as on `local`, unless
        /// `hold`.
        fn deliver(&mut self, msg: Msg) -> Vec<Msg> {
            let mut effects = Vec::new();
            let mut ctx = Ctx::new(self.now, NodeId(0), &mut self.rng, &mut effects);
            self.p.on_message(&mut ctx, NodeId(1), msg);
            self.settle(effects)
        }

        /// Complete the held persists, in order.
        fn flush(&mut self) -> Vec<Msg> {
            let mut effects = Vec::new();
            for token in std::mem::take(&mut self.held) {
                let mut ctx = Ctx::new(self.now, NodeId(0), &mut self.rng, &mut effects);
                self.p.on_persisted(&mut ctx, token);
            }
            self.settle(effects)
        }

        fn settle(&mut self, mut effects: Vec<Effect<Msg>>) -> Vec<Msg> {
            let mut sent = Vec::new();
            while !effects.is_empty() {
                for e in std::mem::take(&mut effects) {
                    match e {
                        Effect::Send { msg, .. } => sent.push(msg),
                        Effect::Persist { token, record } => {
                            self.disk.push(record);
                            if self.hold {
                                self.held.push(token);
                                continue;
                            }
                            let mut more = Vec::new();
                            let mut ctx = Ctx::new(self.now, NodeId(0), &mut self.rng, &mut more);
                            self.p.on_persisted(&mut ctx, token);
                            effects.extend(more);
                        }
                        _ => {}
                    }
                }
            }
            sent
        }

        fn version_of_7(&self) -> Option<Version> {
            self.p.store.get(Key::new(0, 7)).map(|r| r.meta.version)
        }
    }

    fn execute(txn: TxnId, floor: TxnId) -> Msg {
        Msg::Execute(Execute {
            txn,
            since: 0,
            proc: Put::txn(),
            floor,
            pieces: vec![0],
            inputs: vec![Vec::new()],
            commit: false,
        })
    }

    /// The last Execute of a one-participant transaction, asking it to
    /// commit once its pieces ran.
    fn one_shot(txn: TxnId, floor: TxnId) -> Msg {
        let Msg::Execute(mut e) = execute(txn, floor) else {
            unreachable!()
        };
        e.commit = true;
        Msg::Execute(e)
    }

    /// One-shot: one answer carries the replies and the commit, after the
    /// record is durable; a duplicate gets the same replies (the answer
    /// may have been lost), and after a restart, which loses them, the
    /// bare commit.
    #[test]
    fn a_one_shot_execute_commits_and_answers_once() {
        let mut h = Harness::new();
        h.hold = true;
        let t1 = TxnId::new(NodeId(1), 0, 1);
        assert!(
            h.deliver(one_shot(t1, t1)).is_empty(),
            "answered before durable"
        );
        assert_ne!(h.version_of_7(), Some(t1.version()));
        let answer = h.flush();
        assert!(
            matches!(&answer[..], [Msg::ExecuteOk { results, committed: true, .. }]
                if results.len() == 1 && results[0].writes == [Key::new(0, 7)]),
            "{answer:?}"
        );
        assert_eq!(h.version_of_7(), Some(t1.version()));
        h.hold = false;
        let again = h.deliver(one_shot(t1, t1));
        assert!(
            matches!(&again[..], [Msg::ExecuteOk { results, committed: true, .. }] if results.len() == 1),
            "{again:?}"
        );

        let mut r = Harness::restarted(h.disk.clone());
        let lost = r.deliver(one_shot(t1, t1));
        assert!(
            matches!(&lost[..], [Msg::ExecuteOk { results, committed: true, .. }] if results.is_empty()),
            "{lost:?}"
        );
        assert_eq!(r.version_of_7(), Some(t1.version()));
    }

    /// A one-shot transaction that reads a record another transaction has
    /// locked (prepared, awaiting its decision) fails validation: the
    /// answer is an ExecuteFailed, and nothing is installed.
    #[test]
    fn a_one_shot_execute_that_fails_validation_says_so() {
        let mut h = Harness::new();
        let t1 = TxnId::new(NodeId(1), 0, 1);
        let t2 = TxnId::new(NodeId(1), 0, 2);
        assert!(matches!(
            h.deliver(execute(t1, t1))[..],
            [Msg::ExecuteOk { .. }]
        ));
        assert!(matches!(
            h.deliver(Msg::Prepare { txn: t1 })[..],
            [Msg::Vote { yes: true, .. }]
        ));
        assert!(matches!(
            h.deliver(one_shot(t2, t1))[..],
            [Msg::ExecuteFailed {
                reason: AbortReason::Validation,
                ..
            }]
        ));
        assert_ne!(h.version_of_7(), Some(t2.version()));
        assert!(matches!(
            h.deliver(Msg::Commit { txn: t1 })[..],
            [Msg::Ack { .. }]
        ));
        assert_eq!(h.version_of_7(), Some(t1.version()));
    }

    #[test]
    fn tombstones_last_until_the_floor_passes_them() {
        let mut h = Harness::new();
        let t1 = TxnId::new(NodeId(1), 0, 1);
        let t2 = TxnId::new(NodeId(1), 0, 2);
        assert!(matches!(
            h.deliver(execute(t1, t1))[..],
            [Msg::ExecuteOk { .. }]
        ));
        assert!(matches!(
            h.deliver(Msg::CommitOnePhase { txn: t1 })[..],
            [Msg::OnePhaseDone {
                committed: true,
                ..
            }]
        ));
        // A duplicate while t1 is still the floor: answered from the
        // tombstone, not re-executed.
        assert!(h.deliver(execute(t1, t1)).is_empty());
        assert!(h.p.ended.contains(t1));
        assert!(!h.p.txns.contains_key(&t1));

        // t2 raises the floor past t1: the tombstone goes at the next
        // sweep, and a late duplicate of t1 is still not re-executed.
        assert!(matches!(
            h.deliver(execute(t2, t2))[..],
            [Msg::ExecuteOk { .. }]
        ));
        let mut effects = Vec::new();
        let mut ctx = Ctx::new(h.now, NodeId(0), &mut h.rng, &mut effects);
        h.p.sweep(&mut ctx);
        assert!(!h.p.ended.contains(t1), "tombstone below the floor kept");
        assert!(h.deliver(execute(t1, t1)).is_empty());
        assert!(!h.p.txns.contains_key(&t1), "stale Execute re-ran t1");
        assert_eq!(
            h.p.store.get(Key::new(0, 7)).unwrap().meta.version,
            t1.version()
        );
    }

    /// The duplicated Payment of a `tcp` run (2026-11-25): a one-shot
    /// transaction committed here; its coordinator, stalled for longer than
    /// the tombstone's age, resent the Execute before reading the answer
    /// waiting for it. However late the copy, it must not run again while
    /// that coordinator lives (its floor still below the transaction).
    #[test]
    fn a_late_copy_never_reruns_a_transaction_of_a_live_coordinator() {
        let mut h = Harness::new();
        let t0 = TxnId::new(NodeId(1), 0, 0);
        let t1 = TxnId::new(NodeId(1), 0, 1);
        assert!(matches!(
            h.deliver(one_shot(t1, t0))[..],
            [Msg::ExecuteOk {
                committed: true,
                ..
            }]
        ));
        h.now = 10 * Timeouts::default().tombstone;
        let mut effects = Vec::new();
        let mut ctx = Ctx::new(h.now, NodeId(0), &mut h.rng, &mut effects);
        h.p.sweep(&mut ctx);
        let t2 = TxnId::new(NodeId(1), 0, 2);
        h.deliver(one_shot(t2, t0));
        assert_eq!(h.version_of_7(), Some(t2.version()));
        let again = h.deliver(one_shot(t1, t0));
        assert!(
            matches!(
                &again[..],
                [Msg::ExecuteOk {
                    committed: true,
                    ..
                }]
            ),
            "{again:?}"
        );
        assert_eq!(h.version_of_7(), Some(t2.version()), "t1 ran again");
    }

    /// A coordinator that restarted never decides its earlier
    /// incarnation's transactions: their tombstones expire by age, and a
    /// straggler of that incarnation is stale, not a new transaction.
    #[test]
    fn a_replaced_incarnations_tombstones_expire_and_its_stragglers_are_stale() {
        let mut h = Harness::new();
        let t1 = TxnId::new(NodeId(1), 0, 1);
        h.deliver(execute(t1, t1));
        h.deliver(Msg::Abort { txn: t1 });
        assert!(h.p.ended.contains(t1));
        let n1 = TxnId::new(NodeId(1), 1, 1);
        h.deliver(one_shot(n1, n1));
        h.now = Timeouts::default().tombstone + 1;
        let mut effects = Vec::new();
        let mut ctx = Ctx::new(h.now, NodeId(0), &mut h.rng, &mut effects);
        h.p.sweep(&mut ctx);
        assert!(!h.p.ended.contains(t1));
        assert!(matches!(
            h.deliver(execute(t1, t1))[..],
            [Msg::ExecuteFailed { .. }]
        ));
        assert!(!h.p.txns.contains_key(&t1), "a straggler ran");
        assert_eq!(h.version_of_7(), Some(n1.version()));
    }

    /// A prepared transaction and a one-phase commit survive a restart,
    /// from the log's records and from a checkpoint alike: the first is
    /// prepared again (its write lock re-taken) and commits when told, the
    /// second is remembered as committed.
    #[test]
    fn a_restarted_participant_replays_its_wal() {
        let mut h = Harness::new();
        let t1 = TxnId::new(NodeId(1), 0, 1);
        let t2 = TxnId::new(NodeId(1), 0, 2);
        h.deliver(execute(t1, t1));
        assert!(matches!(
            h.deliver(Msg::CommitOnePhase { txn: t1 })[..],
            [Msg::OnePhaseDone {
                committed: true,
                ..
            }]
        ));
        h.deliver(execute(t2, t1));
        assert!(matches!(
            h.deliver(Msg::Prepare { txn: t2 })[..],
            [Msg::Vote { yes: true, .. }]
        ));
        let checkpoint = h.p.snapshot().expect("a WAL participant checkpoints");
        for disk in [h.disk.clone(), vec![checkpoint]] {
            let mut r = Harness::restarted(disk);
            assert_eq!(r.version_of_7(), Some(t1.version()), "t1 installed");
            assert!(r
                .p
                .txns
                .get(&t2)
                .is_some_and(|s| s.phase == Phase::Prepared));
            // t2 holds its write lock: a newcomer cannot lock key 7.
            let t3 = TxnId::new(NodeId(1), 0, 3);
            r.deliver(execute(t3, t1));
            assert!(matches!(
                r.deliver(Msg::Lock { txn: t3 })[..],
                [Msg::Locked { ok: false, .. }]
            ));
            // A retransmitted one-phase commit of t1 is answered committed.
            assert!(matches!(
                r.deliver(Msg::CommitOnePhase { txn: t1 })[..],
                [Msg::OnePhaseDone {
                    committed: true,
                    ..
                }]
            ));
            assert!(matches!(
                r.deliver(Msg::Commit { txn: t2 })[..],
                [Msg::Ack { .. }]
            ));
            assert_eq!(r.version_of_7(), Some(t2.version()));
        }
    }

    /// The WAL is in order: a commit is installed (and its locks released)
    /// at once, but the Ack waits for its record; so does a yes vote.
    #[test]
    fn votes_and_acks_wait_for_the_disk() {
        let mut h = Harness::new();
        h.hold = true;
        let t1 = TxnId::new(NodeId(1), 0, 1);
        h.deliver(execute(t1, t1));
        assert!(h.deliver(Msg::Prepare { txn: t1 }).is_empty());
        assert!(matches!(h.flush()[..], [Msg::Vote { yes: true, .. }]));
        assert!(h.deliver(Msg::Commit { txn: t1 }).is_empty());
        assert_eq!(h.version_of_7(), Some(t1.version()), "installed at once");
        // A resent Commit while the record is on its way: alive, no Ack.
        assert!(matches!(
            h.deliver(Msg::Commit { txn: t1 })[..],
            [Msg::Busy { .. }]
        ));
        assert!(matches!(h.flush()[..], [Msg::Ack { .. }]));
        assert!(matches!(
            h.deliver(Msg::Commit { txn: t1 })[..],
            [Msg::Ack { .. }]
        ));
    }

    /// Regression (TPC-C tiny, 2pl-nowait, faulty seeds 9/95/291): a client
    /// host crashed while its transaction held the district row here; until
    /// something released it, every NewOrder and Payment hit a NO_WAIT
    /// conflict. The restarted host's first Execute (a newer incarnation)
    /// must abort the orphan and free its locks at once, ask about a
    /// prepared orphan, and a late Execute of the old incarnation must not
    /// count as a restart.
    #[test]
    fn a_newer_coordinator_incarnation_frees_its_orphans_locks() {
        use crate::twopl::{Policy, TwoPl, TwoPlConfig, Wound};
        let mut h = Harness::with(
            TwoPl::new(&TwoPlConfig {
                policy: Policy::NoWait,
                wound: Wound::Textbook,
                abort_cpu: 0,
            }),
            Vec::new(),
        );
        let old = TxnId::new(NodeId(1), 0, 5);
        assert!(matches!(
            h.deliver(execute(old, old))[..],
            [Msg::ExecuteOk { .. }]
        ));
        // Another transaction of the same incarnation conflicts: the lock
        // is held.
        let rival = TxnId::new(NodeId(1), 0, 6);
        assert!(matches!(
            h.deliver(execute(rival, old))[..],
            [Msg::ExecuteFailed { .. }]
        ));
        let new = TxnId::new(NodeId(1), 1, 1);
        assert!(
            matches!(h.deliver(execute(new, new))[..], [Msg::ExecuteOk { .. }]),
            "the orphan's lock blocked the restarted coordinator"
        );
        assert_eq!(
            h.p.ended.get(old).map(|e| e.phase),
            Some(Phase::Aborted(AbortReason::Timeout))
        );
        // A late request of the old incarnation is no restart: it conflicts
        // with the new transaction and leaves it alone.
        let late = TxnId::new(NodeId(1), 0, 7);
        assert!(matches!(
            h.deliver(execute(late, late))[..],
            [Msg::ExecuteFailed { .. }]
        ));
        assert!(h.p.txns.contains_key(&new));

        // A prepared orphan is asked about at once, not aborted.
        assert!(matches!(
            h.deliver(Msg::Prepare { txn: new })[..],
            [Msg::Vote { yes: true, .. }]
        ));
        let newer = TxnId::new(NodeId(1), 2, 1);
        let sent = h.deliver(execute(newer, newer));
        assert!(
            sent.iter()
                .any(|m| matches!(m, Msg::Inquire { txn } if *txn == new)),
            "{sent:?}"
        );
        assert_eq!(h.p.txns[&new].phase, Phase::Prepared);
    }

    /// Incarnations wrap around: 0 is newer than 255, 255 older than 0.
    #[test]
    fn incarnations_compare_across_the_wrap() {
        assert!(older(0, 1));
        assert!(older(255, 0));
        assert!(!older(0, 255));
        assert!(!older(3, 3));
        assert!(!older(1, 0));
    }
}
