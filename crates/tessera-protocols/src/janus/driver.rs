//! One transaction driven through the coordinator's phases, shared by the
//! transaction's own coordinator (Algorithm 1) and a recovery coordinator
//! (Algorithm 6), which differ only where the paper says they do:
//!
//! * a recovery coordinator starts with **Prepare** at its ballot and lets
//!   [`super::recovery::decide`] choose among Accept, PreAccept again and
//!   abandon; the own coordinator starts with PreAccept at ballot 0;
//! * a recovery coordinator's PreAccept never takes the fast path (l. 80),
//!   and its Accept carries the procedure and the abandon flag;
//! * the own coordinator answers its client from the first CommitOk of each
//!   shard; a recovery coordinator has no client and only spreads the
//!   Commit.
//!
//! Either learns a decision made by someone else from an `InquireOk` (a
//! replica's Tx-Done, l. 68), and then only spreads that Commit. The own
//! coordinator rejected by a higher ballot (a recovery coordinator took
//! over: it was suspected) waits for that decision by Inquire (**Learn**);
//! the owner of a rejected recovery coordinator retries later with a
//! higher ballot.

use super::msg::{Ballot, CommitInfo, Dep, Msg, Prepared};
use super::quorum::{choose, fast_path_pays, Path, RoundTrips};
use super::recovery::{decide, Next, ShardReplies};
use crate::depgraph::PieceReply;
use std::sync::Arc;
use tessera_core::ids::{NodeId, ShardId, Time, TxnId};
use tessera_core::node::Ctx;
use tessera_core::topology::Topology;
use tessera_core::txn::{participants, AbortReason, Txn, TxnOutcome};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Prepare,
    PreAccept,
    Accept,
    Commit,
    /// Rejected by a higher ballot: ask the replicas for the decision.
    Learn,
}

/// What a reply or a timer changed, for the driver's owner.
#[derive(Debug, Default)]
pub(super) struct Progress {
    /// The fast (`true`) or slow (`false`) path was taken after PreAccept.
    pub path: Option<bool>,
    /// The client's answer became known (own coordinator only).
    pub outcome: Option<TxnOutcome>,
    /// Nothing is left to do: every replica executed, or the Commit was
    /// resent to the silent ones as often as bounded.
    pub finished: bool,
    /// A replica promised this higher ballot to someone else.
    pub rejected: Option<Ballot>,
}

/// Commit resends to replicas that have not executed a transaction whose
/// client already has its answer (a crashed replica may never answer).
const MAX_LATE_RESENDS: u32 = 6;

/// One transaction through Algorithm 1 or Algorithm 6.
pub(super) struct Driver {
    txn: TxnId,
    proc: Txn,
    /// A recovery coordinator (§3.3) rather than the transaction's own.
    recovery: bool,
    /// Per participating shard, its replicas.
    groups: Vec<Vec<NodeId>>,
    phase: Phase,
    ballot: Ballot,
    /// Per shard, per replica: its Prepare-OK (recovery only).
    prepared: Vec<Vec<Option<Option<Prepared>>>>,
    /// Per shard, per replica: its PreAccept-OK dependencies.
    pre: Vec<Vec<Option<Vec<Dep>>>>,
    /// Per shard, per replica: Accept-OK received.
    accepted: Vec<Vec<bool>>,
    deps: Arc<Vec<Dep>>,
    abandon: bool,
    commit: Option<Arc<CommitInfo>>,
    /// Per shard: the first replica's results.
    results: Vec<Option<Vec<PieceReply>>>,
    /// Per shard, per replica: its CommitOk came (it executed). The client
    /// has its answer at the first per shard; the Commit is still resent to
    /// the others, since a replica that missed both PreAccept and Commit
    /// would otherwise never learn the transaction.
    executed: Vec<Vec<bool>>,
    /// Commit resends once nobody waits for the answer, bounded.
    late_resends: u32,
    retransmit_at: Time,
    rto: Time,
    /// The own coordinator's floor and done floor when it started this
    /// transaction, sent with every PreAccept ([`Msg::PreAccept`]); `None`
    /// for a recovery.
    floors: Option<(TxnId, TxnId)>,
    /// When the PreAccepts first went.
    pre_sent: Time,
}

impl Driver {
    fn new(txn: TxnId, proc: Txn, topology: &Topology, recovery: bool, ballot: Ballot) -> Self {
        let shards: Vec<ShardId> = participants(proc.as_ref());
        let groups: Vec<Vec<NodeId>> = shards
            .iter()
            .map(|s| topology.shards[s.0 as usize].replicas.clone())
            .collect();
        let per_replica = |groups: &[Vec<NodeId>]| -> Vec<Vec<bool>> {
            groups.iter().map(|g| vec![false; g.len()]).collect()
        };
        Driver {
            txn,
            proc,
            recovery,
            prepared: groups.iter().map(|g| vec![None; g.len()]).collect(),
            pre: groups.iter().map(|g| vec![None; g.len()]).collect(),
            accepted: per_replica(&groups),
            executed: per_replica(&groups),
            results: vec![None; groups.len()],
            groups,
            phase: Phase::PreAccept,
            ballot,
            deps: Arc::new(Vec::new()),
            abandon: false,
            commit: None,
            late_resends: 0,
            retransmit_at: 0,
            rto: 0,
            floors: None,
            pre_sent: 0,
        }
    }

    /// The transaction's own coordinator: PreAccept at ballot 0, with the
    /// coordinator's `floor` and `done` floor (a resend carries the same
    /// ones: floors only rise, so an old one is merely behind).
    pub fn start(
        ctx: &mut Ctx<Msg>,
        txn: TxnId,
        proc: Txn,
        topology: &Topology,
        rto: Time,
        (floor, done): (TxnId, TxnId),
    ) -> Self {
        let mut d = Driver::new(txn, proc, topology, false, 0);
        d.floors = Some((floor, done));
        d.enter(ctx, Phase::PreAccept, rto);
        d
    }

    /// A recovery coordinator: Prepare at `ballot` (§3.3, l. 65–67).
    pub fn recover(
        ctx: &mut Ctx<Msg>,
        txn: TxnId,
        proc: Txn,
        topology: &Topology,
        ballot: Ballot,
        rto: Time,
    ) -> Self {
        let mut d = Driver::new(txn, proc, topology, true, ballot);
        d.enter(ctx, Phase::Prepare, rto);
        d
    }

    /// The decision is known and being spread (Algorithm 1, l. 14 on).
    pub fn committing(&self) -> bool {
        self.phase == Phase::Commit
    }

    /// The decision, once known.
    pub fn decision(&self) -> Option<&Arc<super::msg::CommitInfo>> {
        self.commit.as_ref()
    }

    /// The shards the transaction involves.
    pub fn shards(&self) -> Box<[ShardId]> {
        participants(self.proc.as_ref()).into()
    }

    pub fn abandoned(&self) -> bool {
        self.abandon
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
        let txn = self.txn;
        for (s, g) in self.groups.iter().enumerate() {
            for (i, &node) in g.iter().enumerate() {
                let msg = match self.phase {
                    Phase::Prepare if self.prepared[s][i].is_none() => Msg::Prepare {
                        txn,
                        ballot: self.ballot,
                    },
                    Phase::PreAccept if self.pre[s][i].is_none() => Msg::PreAccept {
                        txn,
                        ballot: self.ballot,
                        proc: self.proc.clone(),
                        floor: self.floors.map(|f| f.0),
                        done: self.floors.map(|f| f.1),
                    },
                    Phase::Accept if !self.accepted[s][i] => Msg::Accept {
                        txn,
                        ballot: self.ballot,
                        deps: self.deps.clone(),
                        abandon: self.abandon,
                        // A replica whose PreAccept-OK did not come may
                        // never have pre-accepted: without the procedure
                        // it could not accept, and a shard with another
                        // replica down would have no majority (crash seed
                        // 169: stalled until the down one came back).
                        proc: (self.recovery || self.pre[s][i].is_none())
                            .then(|| self.proc.clone()),
                    },
                    Phase::Commit if !self.executed[s][i] => {
                        Msg::Commit(self.commit.clone().expect("commit phase has its info"))
                    }
                    Phase::Learn => Msg::Inquire {
                        txn,
                        its_shard: true,
                    },
                    _ => continue,
                };
                ctx.send(node, msg);
            }
        }
    }

    fn enter(&mut self, ctx: &mut Ctx<Msg>, phase: Phase, base_rto: Time) {
        if phase == Phase::PreAccept {
            self.pre_sent = ctx.now();
        }
        self.phase = phase;
        self.rto = base_rto;
        self.retransmit_at = ctx.now() + base_rto;
        if phase == Phase::Commit && self.commit.is_none() {
            self.commit = Some(Arc::new(CommitInfo {
                txn: self.txn,
                proc: self.proc.clone(),
                deps: self.deps.as_ref().clone(),
                abandon: self.abandon,
            }));
        }
        self.send(ctx);
    }

    /// The transaction is committed as `info` (a Tx-Done or the answer to
    /// an Inquire): only spread it.
    pub fn learned(&mut self, ctx: &mut Ctx<Msg>, info: Arc<CommitInfo>, rto: Time) {
        if self.phase == Phase::Commit {
            return;
        }
        self.abandon = info.abandon;
        self.deps = Arc::new(info.deps.clone());
        self.commit = Some(info);
        self.enter(ctx, Phase::Commit, rto);
    }

    /// When the PreAccepts first went (a PreAccept-OK's round trip).
    pub fn pre_accept_sent(&self) -> Time {
        self.pre_sent
    }

    /// Algorithm 1, ll. 4–13, with `patient` false once a retransmit period
    /// passed without every replica's reply, or when the missing replies
    /// cannot pay for the wait by `rtts` ([`fast_path_pays`]). A recovery
    /// coordinator's PreAccept never takes the fast path (Algorithm 6,
    /// l. 80).
    fn after_pre_accept(
        &mut self,
        ctx: &mut Ctx<Msg>,
        patient: bool,
        rto: Time,
        rtts: Option<&RoundTrips>,
    ) -> Option<bool> {
        let mut patient = patient && !self.recovery;
        if let (true, Some(rtts)) = (patient, rtts) {
            if choose(&self.pre, true) == Path::Wait {
                patient = fast_path_pays(&self.groups, &self.pre, rtts, self.pre_sent, ctx.now());
            }
        }
        let path = match choose(&self.pre, patient) {
            Path::Fast(deps) if self.recovery => Path::Slow(deps),
            p => p,
        };
        match path {
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

    /// Algorithm 6, l. 71–83, once a Prepare-OK came.
    fn after_prepare(&mut self, ctx: &mut Ctx<Msg>, rto: Time) {
        let oks: Vec<Vec<Option<Prepared>>> = self
            .prepared
            .iter()
            .map(|g| g.iter().flatten().cloned().collect())
            .collect();
        let shards: Vec<ShardReplies<'_>> = oks
            .iter()
            .zip(&self.groups)
            .map(|(oks, g)| ShardReplies {
                replicas: g.len(),
                oks,
            })
            .collect();
        match decide(&shards) {
            Next::Wait => {}
            Next::Accept { deps, abandon } => {
                self.deps = Arc::new(deps);
                self.abandon = abandon;
                self.enter(ctx, Phase::Accept, rto);
            }
            Next::PreAccept => self.enter(ctx, Phase::PreAccept, rto),
            Next::Abandon => {
                self.deps = Arc::new(Vec::new());
                self.abandon = true;
                self.enter(ctx, Phase::Accept, rto);
            }
        }
    }

    /// The client's answer, once every shard's first CommitOk came.
    fn outcome(&self) -> Option<TxnOutcome> {
        if self.results.iter().any(|r| r.is_none()) {
            return None;
        }
        if self.abandon {
            return Some(TxnOutcome::Aborted(AbortReason::Timeout));
        }
        let mut replies: Vec<&PieceReply> = self.results.iter().flatten().flatten().collect();
        // §4: a piece that rolled back made every piece it feeds skip; when
        // nothing was written anywhere, the transaction rolled back. (A
        // user abort beside writes is not honoured: see the module docs.)
        if replies.iter().any(|r| r.user_abort) && replies.iter().all(|r| r.writes.is_empty()) {
            return Some(TxnOutcome::Aborted(AbortReason::User));
        }
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

    /// Nobody waits for the answer any more: the client has it, or there
    /// is no client.
    fn answered(&self) -> bool {
        if self.recovery {
            self.phase == Phase::Commit
        } else {
            self.results.iter().all(|r| r.is_some())
        }
    }

    /// A replica's answer to this driver's request.
    /// `rtts`: the own coordinator's round-trip estimates, which may end
    /// its wait for the fast path early ([`fast_path_pays`]).
    pub fn on_reply(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        msg: Msg,
        rto: Time,
        rtts: Option<&RoundTrips>,
    ) -> Progress {
        let mut p = Progress::default();
        let Some((s, i)) = self.locate(from) else {
            return p;
        };
        match msg {
            Msg::PrepareOk {
                ballot, prepared, ..
            } if self.phase == Phase::Prepare && ballot == self.ballot => {
                self.prepared[s][i] = Some(prepared);
                self.after_prepare(ctx, rto);
            }
            Msg::PreAcceptOk { ballot, deps, .. }
                if self.phase == Phase::PreAccept && ballot == self.ballot =>
            {
                self.pre[s][i] = Some(deps);
                p.path = self.after_pre_accept(ctx, true, rto, rtts);
            }
            Msg::AcceptOk { ballot, .. }
                if self.phase == Phase::Accept && ballot == self.ballot =>
            {
                self.accepted[s][i] = true;
                let majority = self
                    .accepted
                    .iter()
                    .all(|g| g.iter().filter(|a| **a).count() > g.len() / 2);
                if majority {
                    self.enter(ctx, Phase::Commit, rto);
                }
            }
            Msg::PrepareNotOk { ballot, .. }
            | Msg::PreAcceptNotOk { ballot, .. }
            | Msg::AcceptNotOk { ballot, .. }
                if ballot > self.ballot
                    && matches!(
                        self.phase,
                        Phase::Prepare | Phase::PreAccept | Phase::Accept
                    ) =>
            {
                tracing::debug!(txn = ?self.txn, ballot, "rejected by a higher ballot");
                p.rejected = Some(ballot);
                if !self.recovery {
                    self.enter(ctx, Phase::Learn, rto);
                }
            }
            Msg::InquireOk(info) if info.txn == self.txn => self.learned(ctx, info, rto),
            Msg::Forgotten { abandon, .. } => {
                // Committed and executed at every replica of every shard,
                // and forgotten ([`super::gc`]): nothing is left to send.
                // The own coordinator answers from the results it has,
                // and reports the attempt in doubt if a shard's never
                // came (its reads are lost; it is not retried).
                for g in &mut self.executed {
                    g.fill(true);
                }
                p.finished = true;
                if !self.recovery && !self.answered() {
                    self.abandon |= abandon;
                    p.outcome = Some(if self.abandon {
                        TxnOutcome::Aborted(AbortReason::Timeout)
                    } else {
                        TxnOutcome::InDoubt
                    });
                }
            }
            Msg::CommitOk {
                abandon, results, ..
            } if self.phase == Phase::Commit => {
                self.executed[s][i] = true;
                if self.results[s].is_none() {
                    let answered = self.answered();
                    self.abandon |= abandon;
                    self.results[s] = Some(results);
                    if !answered && !self.recovery {
                        p.outcome = self.outcome();
                    }
                }
                p.finished = self.executed.iter().all(|g| g.iter().all(|e| *e));
            }
            _ => {}
        }
        p
    }

    /// Retransmit if due: resend to the replicas that have not answered,
    /// doubling the period up to `8 * rto`. An impatient PreAccept takes the
    /// slow path with a majority.
    pub fn tick(&mut self, ctx: &mut Ctx<Msg>, rto: Time) -> Progress {
        let mut p = Progress::default();
        let now = ctx.now();
        if self.retransmit_at > now {
            return p;
        }
        if self.phase == Phase::PreAccept {
            p.path = self.after_pre_accept(ctx, false, rto, None);
            if p.path.is_some() {
                return p;
            }
        }
        if self.answered() {
            self.late_resends += 1;
            if self.late_resends > MAX_LATE_RESENDS {
                p.finished = true;
                return p;
            }
        }
        self.send(ctx);
        self.rto = (self.rto * 2).min(rto * 8);
        self.retransmit_at = now + self.rto;
        p
    }
}
