//! The coordinator (a worker of the paper, on a client host): executes
//! pieces at the nearest replicas, runs the lock, validate and write-back
//! rounds at the primaries, and releases results (at once, or at the end of
//! the transaction's epoch). S2PL executes at the primaries, which lock as
//! they run the pieces, and goes straight to the decision and write-back
//! (see [`super::locks`]).
//!
//! In epoch mode the worker does not wait for the release (§3.1): once a
//! transaction's commit decision is taken (locks held, reads validated,
//! timestamp chosen) it sends the write-back, which then runs
//! asynchronously (§4.2: "the third step can run asynchronously and a
//! worker thread does not need to wait") — or a read-only transaction has
//! validated — the coordinator reports it finished ([`Ctx::finished`]) and
//! its client starts the next one. The outcome follows at the epoch's
//! commit, or as an abort if the epoch aborts or the write-back finds its
//! locks gone.
//!
//! Two things keep that next transaction from tripping over this one, as
//! they do in COCO's implementation:
//! * its requests to a primary carry the write-backs sent there and not
//!   yet acknowledged ([`Decided`]), which the primary installs first —
//!   the order one connection per worker gives the paper;
//! * the write-back goes out at the decision: the epoch mode has no
//!   per-transaction durable write (redo logs are forced at the epoch's
//!   end, §6.2). A crash of the coordinator between write-backs is a
//!   failure that aborts the open epochs (§3.2): the restarted coordinator
//!   asks the epoch manager to abort them (**Rejoin**) and presumes no
//!   abort of its earlier transactions before that abort is durable. The
//!   2PC modes force the decision of a distributed transaction before the
//!   write-back, as 2PC does, so that primaries of a crashed coordinator
//!   learn its outcome, after a record standing for its participants'
//!   prepare records; a single-shard one forces nothing (§7.4, see
//!   [`CommitMode::forces_decision`]).

use super::msg::{Decided, Granted, Msg, PieceReply};
use super::tid::{epoch_of, lt_occ_ts, pt_occ_tid};
use super::{Cc, CocoConfig, CommitMode, Isolation};
use bytes::{BufMut, Bytes, BytesMut};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use tessera_core::ids::{Key, NodeId, ShardId, Time, TimerId, TxnId};
use tessera_core::node::{Ctx, Node, NodeReport};
use tessera_core::protocol::{Coordinator, CoordinatorEnv};
use tessera_core::topology::Topology;
use tessera_core::txn::{participants, AbortReason, Attempt, ReadObs, TxnOutcome, Value};
use tessera_core::FastMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Executing,
    Locking,
    Validating,
    /// Waiting for the prepare round's durable write (2PC modes, a
    /// distributed transaction; see [`CommitMode::forces_decision`]).
    Preparing,
    /// Waiting for the commit decision to be durable (2PC modes).
    Deciding,
    WritingBack,
    /// Reported (or parked until its epoch commits): forgotten here.
    Done,
}

/// A request of the current round, resent until answered.
struct Out {
    to: NodeId,
    msg: Msg,
    answered: bool,
}

struct TxnState {
    attempt: Attempt,
    phase: Phase,
    results: Vec<Option<PieceReply>>,
    sent: Vec<bool>,
    out: Vec<Out>,
    /// Primaries asked to lock (told to abort on an abort).
    locked_at: Vec<NodeId>,
    /// Write set and read set per shard (reads: key, TID or wts seen; a
    /// snapshot transaction's also lists the records it writes, §5.3).
    writes: BTreeMap<ShardId, Vec<(Key, Value)>>,
    reads: BTreeMap<ShardId, Vec<(Key, u64)>>,
    /// LT-OCC snapshot transactions: TID_SI, the timestamp the reads are
    /// validated at (§5.3.2).
    snapshot: u64,
    /// The largest epoch a primary reported, and the largest bound.
    epoch: u64,
    bound: u64,
    ts: u64,
    /// Lock and validate in a single round: one primary, or a snapshot
    /// transaction (parallel locking and validation, §5.3.3).
    combined: bool,
    /// The abort floor the primaries answered with (all must agree).
    floor: Option<u64>,
    retransmit_at: Time,
    /// Reported finished to the client host (epoch mode).
    finished: bool,
}

/// A read: the record and the TID (PT-OCC) or wts (LT-OCC) it was seen at.
type Seen = (Key, u64);

/// One primary's part of a round: its shard, writes to lock, reads to
/// validate.
type Request = (ShardId, Vec<(Key, Value)>, Vec<Seen>);

/// A committed transaction whose result waits for its epoch (§3.1).
type Parked = (TxnId, TxnOutcome);

pub struct CocoCoordinator {
    config: CocoConfig,
    topology: Arc<Topology>,
    me: NodeId,
    incarnation: u8,
    txns: FastMap<TxnId, TxnState>,
    open: BTreeSet<TxnId>,
    /// Durable commit decisions not yet fully written back: (ts, epoch).
    decided: FastMap<TxnId, (u64, u64)>,
    /// Epoch mode: write-backs sent to each primary and not yet
    /// acknowledged, carried by later requests to it (see [`Decided`]).
    unacked: BTreeMap<NodeId, Vec<Decided>>,
    /// False from a restart in epoch mode until the epoch manager has
    /// durably aborted the open epochs (**Rejoin**, see the module doc).
    rejoined: bool,
    /// PT-OCC rule (b): the last TID this worker issued.
    last_tid: u64,
    committed_epoch: u64,
    parked: BTreeMap<u64, Vec<Parked>>,
    /// Epoch ranges `[from, to)` the epoch manager aborted (§3.2).
    aborted: Vec<(u64, u64)>,
    /// The highest abort floor heard of, from the manager or a primary.
    floor: u64,
    /// Attempts aborted, by cause (see [`abort_counter`]), and the
    /// barrier's counters.
    aborts: BTreeMap<&'static str, u64>,
    /// The barrier ([`CocoConfig::barrier`]): the epoch being prepared and
    /// since when this host has been stopped, and the attempts submitted
    /// meanwhile, started at its commit.
    stopped: Option<(u64, Time)>,
    held: Vec<Attempt>,
}

/// The counter an abort of `reason` is reported in. COCO's `Timeout`s are
/// epoch aborts (§3.2) and their kin: a transaction whose primaries
/// answered from both sides of an epoch abort, or unacknowledged requests.
fn abort_counter(reason: AbortReason) -> &'static str {
    match reason {
        AbortReason::LockConflict => "aborts_lock_conflict",
        AbortReason::Validation => "aborts_validation",
        AbortReason::Timeout => "aborts_epoch_or_timeout",
        AbortReason::User => "aborts_user",
        AbortReason::Stale => "aborts_stale",
    }
}

const TICK: TimerId = TimerId(1);

impl CocoCoordinator {
    pub fn new(config: CocoConfig, env: CoordinatorEnv) -> Self {
        let mut decided = tessera_core::fast_map();
        for r in &env.recovered {
            if r.len() == 24 {
                let word = |i: usize| u64::from_le_bytes(r[i..i + 8].try_into().expect("8 bytes"));
                decided.insert(TxnId(word(0)), (word(8), word(16)));
            }
        }
        CocoCoordinator {
            config: config.clone(),
            topology: env.topology,
            me: env.me,
            incarnation: env.incarnation,
            txns: tessera_core::fast_map(),
            open: BTreeSet::new(),
            decided,
            unacked: BTreeMap::new(),
            rejoined: config.commit != CommitMode::Epoch || env.incarnation == 0,
            last_tid: 0,
            committed_epoch: 0,
            parked: BTreeMap::new(),
            aborted: Vec::new(),
            floor: 0,
            aborts: BTreeMap::new(),
            stopped: None,
            held: Vec::new(),
        }
    }

    fn primary(&self, shard: ShardId) -> NodeId {
        self.topology.leader(shard)
    }

    /// The epoch manager's node (see [`super::epoch`]).
    fn manager(&self) -> NodeId {
        self.topology.leader(ShardId(0))
    }

    /// The replica that serves reads (§4.1): the primary when it is as near
    /// as any — on this host's site, or no replica is — else a replica on
    /// this host's site. COCO reads a local copy when the node has one and
    /// otherwise the primary; among replicas all equally near, a backup
    /// would only answer staler (its writes come asynchronously) and fail
    /// validation more. Only the primary when backups are not kept up to
    /// date, and for S2PL, whose reads take locks, which only the primary
    /// keeps (§3: 2PL "must always read from the primary replica"; §7.1.2
    /// lets only the OCC variants read the nearest one).
    fn nearest(&self, shard: ShardId) -> NodeId {
        let group = &self.topology.shards[shard.0 as usize].replicas;
        if !self.config.commit.replicates() || self.config.cc == Cc::S2pl {
            return group[0];
        }
        let site_of = |n: NodeId| self.topology.nodes[n.0 as usize].site;
        let site = site_of(self.me);
        let local: Vec<NodeId> = group
            .iter()
            .copied()
            .filter(|n| site_of(*n) == site)
            .collect();
        if local.is_empty() || local.contains(&group[0]) {
            group[0]
        } else {
            local[self.me.0 as usize % local.len()]
        }
    }

    /// The write-backs a request to `to` carries (see [`Decided`]).
    fn decided_at(&self, to: NodeId) -> Vec<Decided> {
        self.unacked.get(&to).cloned().unwrap_or_default()
    }

    /// `txn`'s write-backs need no carrying any more (acknowledged at
    /// `at`, or everywhere when `None`: it ended).
    fn acked(&mut self, txn: TxnId, at: Option<NodeId>) {
        self.unacked.retain(|n, ds| {
            if at.is_none_or(|a| a == *n) {
                ds.retain(|d| d.txn != txn);
            }
            !ds.is_empty()
        });
    }

    fn floor(&self, txn: TxnId) -> TxnId {
        self.open.first().copied().unwrap_or(txn)
    }

    /// Send every piece whose inputs are ready, one Read per shard.
    fn dispatch(&self, ctx: &mut Ctx<Msg>, txn: TxnId, st: &mut TxnState) {
        let proc = st.attempt.txn.clone();
        for shard in participants(&*proc) {
            let mut ids = Vec::new();
            let mut inputs = Vec::new();
            for (i, p) in proc.pieces().iter().enumerate() {
                let ready = p.inputs.iter().all(|&j| st.results[j as usize].is_some());
                if p.shard != shard || st.sent[i] || !ready {
                    continue;
                }
                st.sent[i] = true;
                ids.push(i as u16);
                inputs.push(
                    p.inputs
                        .iter()
                        .map(|&j| {
                            st.results[j as usize]
                                .as_ref()
                                .expect("ready")
                                .output
                                .clone()
                        })
                        .collect(),
                );
            }
            if ids.is_empty() {
                continue;
            }
            let own = st
                .results
                .iter()
                .zip(proc.pieces())
                .filter(|(_, p)| p.shard == shard)
                .filter_map(|(r, _)| r.as_ref())
                .flat_map(|r| r.writes.iter().cloned())
                .collect();
            let to = self.nearest(shard);
            let msg = Msg::Read {
                txn,
                floor: self.floor(txn),
                proc: proc.clone(),
                pieces: ids,
                inputs,
                own,
                decided: self.decided_at(to),
            };
            if self.config.cc == Cc::S2pl && !st.locked_at.contains(&to) {
                // It may lock there even if its answer is lost.
                st.locked_at.push(to);
            }
            ctx.send(to, msg.clone());
            st.out.push(Out {
                to,
                msg,
                answered: false,
            });
        }
    }

    fn on_read_ok(
        &mut self,
        ctx: &mut Ctx<Msg>,
        txn: TxnId,
        results: Vec<PieceReply>,
        locks: Option<Granted>,
    ) {
        let Some(mut st) = self.txns.remove(&txn) else {
            return;
        };
        if st.phase == Phase::Executing {
            if let Some(g) = locks {
                // S2PL: a NO_WAIT conflict aborts; so do locks taken on
                // both sides of an epoch abort.
                if !g.ok {
                    self.abort_txn(ctx, txn, &mut st, AbortReason::LockConflict);
                    return;
                }
                if !self.floor_agrees(&mut st, g.floor) {
                    self.abort_txn(ctx, txn, &mut st, AbortReason::Timeout);
                    return;
                }
                st.epoch = st.epoch.max(g.epoch);
            }
            for r in results {
                let i = r.piece as usize;
                if st.results[i].is_none() {
                    st.results[i] = Some(r);
                }
            }
            for o in &mut st.out {
                if let Msg::Read { pieces, .. } = &o.msg {
                    o.answered = pieces.iter().all(|&p| st.results[p as usize].is_some());
                }
            }
            if st
                .results
                .iter()
                .any(|r| r.as_ref().is_some_and(|r| r.user_abort))
            {
                self.abort_txn(ctx, txn, &mut st, AbortReason::User);
                return;
            }
            if st.results.iter().all(Option::is_some) {
                self.start_commit(ctx, txn, &mut st);
            } else {
                self.dispatch(ctx, txn, &mut st);
            }
        }
        self.keep(txn, st);
    }

    fn keep(&mut self, txn: TxnId, st: TxnState) {
        if st.phase != Phase::Done {
            self.txns.insert(txn, st);
        }
    }

    /// Gather the write and read sets and start the lock (or the single
    /// prepare) round.
    ///
    /// A snapshot transaction validates what it writes as well as what it
    /// reads (first committer wins), and takes one round for both whatever
    /// the number of primaries (§5.3.3).
    fn start_commit(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, st: &mut TxnState) {
        let proc = st.attempt.txn.clone();
        for (r, p) in st.results.iter().zip(proc.pieces()) {
            let r = r.as_ref().expect("all pieces ran");
            let ws = st.writes.entry(p.shard).or_default();
            for (k, v) in &r.writes {
                match ws.iter_mut().find(|(wk, _)| wk == k) {
                    Some(w) => w.1 = v.clone(),
                    None => ws.push((*k, v.clone())),
                }
            }
            let rs = st.reads.entry(p.shard).or_default();
            let seen = r
                .reads
                .iter()
                .map(|o| (o.key, o.wts))
                .chain(r.written.iter().copied());
            for (key, wts) in seen {
                if !rs.iter().any(|(k, _)| *k == key) {
                    rs.push((key, wts));
                }
            }
        }
        st.writes.retain(|_, w| !w.is_empty());
        st.reads.retain(|_, r| !r.is_empty());
        let seen = st.reads.values().flatten().map(|r| r.1).max().unwrap_or(0);
        st.bound = seen;
        st.snapshot = seen;
        st.epoch = st.epoch.max(epoch_of(seen));
        if self.config.cc == Cc::S2pl {
            // Every lock is held: no lock or validation round (§7.1.2).
            self.decide(ctx, txn, st);
            return;
        }
        let shards: BTreeSet<ShardId> = st.writes.keys().chain(st.reads.keys()).copied().collect();
        if shards.len() == 1 || self.config.isolation == Isolation::Snapshot {
            let reqs: Vec<Request> = shards
                .iter()
                .map(|s| {
                    let writes = st.writes.get(s).cloned().unwrap_or_default();
                    let reads = st.reads.get(s).cloned().unwrap_or_default();
                    (*s, writes, reads)
                })
                .collect();
            let phase = if st.writes.is_empty() {
                Phase::Validating
            } else {
                Phase::Locking
            };
            st.combined = true;
            if reqs.is_empty() {
                self.decide(ctx, txn, st);
            } else {
                self.round(ctx, txn, st, phase, reqs);
            }
        } else if !st.writes.is_empty() {
            let reqs = st
                .writes
                .iter()
                .map(|(s, w)| (*s, w.clone(), st.reads_at(*s).0))
                .collect();
            self.round(ctx, txn, st, Phase::Locking, reqs);
        } else {
            self.validate_round(ctx, txn, st);
        }
    }

    fn round(
        &self,
        ctx: &mut Ctx<Msg>,
        txn: TxnId,
        st: &mut TxnState,
        phase: Phase,
        reqs: Vec<Request>,
    ) {
        st.phase = phase;
        st.out.clear();
        let floor = self.floor(txn);
        if reqs.is_empty() {
            return;
        }
        for (shard, writes, reads) in reqs {
            let to = self.primary(shard);
            if !writes.is_empty() {
                st.locked_at.push(to);
            }
            let msg = Msg::Prepare {
                txn,
                floor,
                decided: self.decided_at(to),
                writes,
                reads,
                ts: st.ts_for_validation(&self.config),
                round: phase as u8,
            };
            ctx.send(to, msg.clone());
            st.out.push(Out {
                to,
                msg,
                answered: false,
            });
        }
    }

    fn validate_round(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, st: &mut TxnState) {
        if self.config.cc == Cc::LtOcc {
            st.ts = lt_occ_ts(st.bound, st.bound, st.epoch);
        }
        let reqs: Vec<_> = st
            .reads
            .keys()
            .filter_map(|s| {
                let only_read = st.reads_at(*s).1;
                (!only_read.is_empty()).then_some((*s, Vec::new(), only_read))
            })
            .collect();
        if reqs.is_empty() {
            self.decide(ctx, txn, st);
        } else {
            self.round(ctx, txn, st, Phase::Validating, reqs);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_prepared(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        txn: TxnId,
        round: u8,
        ok: bool,
        epoch: u64,
        bound: u64,
        floor: u64,
    ) {
        let Some(mut st) = self.txns.remove(&txn) else {
            return;
        };
        if !matches!(st.phase, Phase::Locking | Phase::Validating) || round != st.phase as u8 {
            self.keep(txn, st);
            return;
        }
        let Some(o) = st.out.iter_mut().find(|o| o.to == from && !o.answered) else {
            self.keep(txn, st);
            return;
        };
        o.answered = true;
        if !self.floor_agrees(&mut st, floor) {
            self.abort_txn(ctx, txn, &mut st, AbortReason::Timeout);
            return;
        }
        if !ok {
            let reason = if st.phase == Phase::Locking {
                AbortReason::LockConflict
            } else {
                AbortReason::Validation
            };
            for &n in &st.locked_at {
                ctx.send(n, Msg::Abort { txn });
            }
            self.open.remove(&txn);
            self.report_abort(ctx, txn, reason);
            return;
        }
        st.epoch = st.epoch.max(epoch);
        st.bound = st.bound.max(bound);
        if st.out.iter().all(|o| o.answered) {
            if st.phase == Phase::Validating || st.combined || st.reads.is_empty() {
                self.decide(ctx, txn, &mut st);
            } else {
                self.validate_round(ctx, txn, &mut st);
            }
        }
        self.keep(txn, st);
    }

    /// Note a primary's abort floor. False when it answered before an epoch
    /// abort reached it (its data is still to be reverted) or primaries
    /// disagree: what the transaction locked or read may be gone.
    fn floor_agrees(&mut self, st: &mut TxnState, floor: u64) -> bool {
        self.floor = self.floor.max(floor);
        floor >= self.floor && *st.floor.get_or_insert(floor) == floor
    }

    /// Every lock held and every read valid: fix the timestamp and the
    /// epoch, force the prepare round's record and then the decision (2PC
    /// modes, a distributed transaction that writes) and write back.
    fn decide(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, st: &mut TxnState) {
        let epoch = st.epoch.max(epoch_of(self.last_tid)).max(1);
        match self.config.cc {
            Cc::PtOcc | Cc::S2pl => {
                st.ts = pt_occ_tid(st.bound, self.last_tid, epoch);
                self.last_tid = st.ts;
            }
            Cc::LtOcc => {
                if st.ts == 0 {
                    st.ts = lt_occ_ts(st.bound, st.bound, epoch);
                }
            }
        }
        // A writer's epoch is its timestamp's: timestamps grow along every
        // read and overwrite, so then epochs do too, and an epoch abort
        // takes every transaction that depended on it (§3.2). LT-OCC's
        // timestamp already lies in an epoch no earlier than any primary
        // that locked for it; validating primaries hold nothing.
        st.epoch = match self.config.cc {
            Cc::LtOcc if !st.writes.is_empty() => epoch_of(st.ts),
            _ => epoch.max(epoch_of(st.ts)),
        };
        if self.is_aborted(st.epoch) || st.floor.is_some_and(|f| f < self.floor) {
            self.abort_txn(ctx, txn, st, AbortReason::Timeout);
            return;
        }
        if st.writes.is_empty() {
            self.release_reads(ctx, txn, st);
            self.release(ctx, txn, st);
            return;
        }
        st.out.clear();
        if self.config.commit == CommitMode::Epoch {
            // No per-transaction durable write in epoch mode (see the
            // module doc): write back now, then let the worker go on.
            self.write_back(ctx, txn, st);
            self.finish_executing(ctx, txn, st);
            return;
        }
        if !self
            .config
            .commit
            .forces_decision(participants(&*st.attempt.txn).len())
        {
            // One participant: its vote is the outcome (§7.4, see
            // `CommitMode::forces_decision`).
            self.write_back(ctx, txn, st);
            return;
        }
        st.phase = Phase::Preparing;
        ctx.persist(txn.0, prepare_record(txn));
    }

    /// Epoch mode: the worker is free to run its next transaction while
    /// this one's outcome waits for the epoch (see the module doc). The 2PC
    /// modes release results at write-back, so their workers wait.
    fn finish_executing(&self, ctx: &mut Ctx<Msg>, txn: TxnId, st: &mut TxnState) {
        if self.config.commit == CommitMode::Epoch && !st.finished {
            st.finished = true;
            ctx.finished(txn);
        }
    }

    /// S2PL: the primaries the transaction only read drop its read locks
    /// once it has decided (the write-back releases the others).
    fn release_reads(&self, ctx: &mut Ctx<Msg>, txn: TxnId, st: &TxnState) {
        if self.config.cc != Cc::S2pl {
            return;
        }
        let writers: Vec<NodeId> = st.writes.keys().map(|s| self.primary(*s)).collect();
        for &n in st.locked_at.iter().filter(|n| !writers.contains(n)) {
            ctx.send(n, Msg::Release { txn });
        }
    }

    fn write_back(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, st: &mut TxnState) {
        self.release_reads(ctx, txn, st);
        st.phase = Phase::WritingBack;
        for shard in st.writes.keys() {
            let to = self.primary(*shard);
            let msg = Msg::WriteBack {
                txn,
                ts: st.ts,
                epoch: st.epoch,
            };
            if self.config.commit == CommitMode::Epoch {
                self.unacked.entry(to).or_default().push(Decided {
                    txn,
                    ts: st.ts,
                    epoch: st.epoch,
                });
            }
            ctx.send(to, msg.clone());
            st.out.push(Out {
                to,
                msg,
                answered: false,
            });
            // §4.2.3, Fig. 3: the write set goes to the backups from here,
            // with the write-back. In epoch mode each copy is
            // unacknowledged and the primary makes sure at the epoch's end
            // that they have it; under 2PC(Sync) each is answered here
            // (`seq`: the transaction, never 0 as a client host is never
            // node 0) and the transaction waits for all (see
            // `Replication`).
            let acked = self.config.coordinator_replicates_sync();
            if acked || self.config.coordinator_replicates() {
                debug_assert_ne!(txn.0, 0);
                let replicate = Msg::Replicate {
                    seq: if acked { txn.0 } else { 0 },
                    txn,
                    ts: st.ts,
                    epoch: st.epoch,
                    version: txn.version(),
                    writes: st.writes[shard].clone(),
                };
                for &b in &self.topology.shards[shard.0 as usize].replicas[1..] {
                    ctx.send(b, replicate.clone());
                    if acked {
                        st.out.push(Out {
                            to: b,
                            msg: replicate.clone(),
                            answered: false,
                        });
                    }
                }
            }
        }
    }

    fn on_written_back(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId) {
        let Some(mut st) = self.txns.remove(&txn) else {
            return;
        };
        self.acked(txn, Some(from));
        if st.phase == Phase::WritingBack {
            for o in st.out.iter_mut().filter(|o| o.to == from) {
                o.answered = true;
            }
            if st.out.iter().all(|o| o.answered) {
                self.decided.remove(&txn);
                self.release_write_locks(ctx, txn, &st);
                self.release(ctx, txn, &mut st);
            }
        }
        self.keep(txn, st);
    }

    /// 2PC(Sync) with coordinator replication: every replica has the
    /// writes, so the primaries may drop the write locks they kept at
    /// write-back (§7.1.2). Not answered, as in the authors' code (the
    /// result is released now); a primary that misses it replicates on its
    /// own and releases when its backups answer (see `Replication`).
    fn release_write_locks(&self, ctx: &mut Ctx<Msg>, txn: TxnId, st: &TxnState) {
        if !self.config.coordinator_replicates_sync() {
            return;
        }
        for shard in st.writes.keys() {
            ctx.send(self.primary(*shard), Msg::Release { txn });
        }
    }

    /// Report the commit, now or when its epoch commits (epoch mode).
    fn release(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, st: &mut TxnState) {
        if self.is_aborted(st.epoch) {
            self.abort_txn(ctx, txn, st, AbortReason::Timeout);
            return;
        }
        self.open.remove(&txn);
        st.phase = Phase::Done;
        let proc = &st.attempt.txn;
        let mut reads = Vec::new();
        let mut outputs = Vec::with_capacity(st.results.len());
        for r in st.results.iter().flatten() {
            reads.extend(r.reads.iter().map(|o| ReadObs::row(o.key, o.version)));
            outputs.push(r.output.clone());
        }
        debug_assert_eq!(outputs.len(), proc.pieces().len());
        let writes = st.writes.values().flatten().map(|(k, _)| *k).collect();
        let outcome = TxnOutcome::Committed {
            reads,
            writes,
            outputs,
        };
        if self.config.commit == CommitMode::Epoch && st.epoch > self.committed_epoch {
            self.finish_executing(ctx, txn, st);
            self.parked
                .entry(st.epoch)
                .or_default()
                .push((txn, outcome));
        } else {
            ctx.done(txn, outcome);
        }
    }

    fn on_epoch_commit(&mut self, ctx: &mut Ctx<Msg>, epoch: u64, aborted: Vec<(u64, u64)>) {
        for r in aborted {
            self.note_abort(ctx, r.0, r.1);
        }
        self.committed_epoch = self.committed_epoch.max(epoch);
        while let Some(entry) = self.parked.first_entry() {
            if *entry.key() > self.committed_epoch {
                break;
            }
            for (txn, outcome) in entry.remove() {
                ctx.done(txn, outcome);
            }
        }
        if self
            .stopped
            .is_some_and(|(e, _)| e <= self.committed_epoch || self.is_aborted(e))
        {
            self.resume(ctx);
        }
    }

    /// The barrier: the manager prepares `epoch`; start nothing new until
    /// it commits or aborts (§3.1, §7.7). A prepare of a decided epoch (a
    /// late duplicate) stops nothing.
    fn on_epoch_prepare(&mut self, ctx: &mut Ctx<Msg>, epoch: u64) {
        if !self.config.barrier
            || self.config.commit != CommitMode::Epoch
            || epoch <= self.committed_epoch
            || self.is_aborted(epoch)
            || self.stopped.is_some_and(|(e, _)| e >= epoch)
        {
            return;
        }
        let since = self.stopped.map_or(ctx.now(), |(_, t)| t);
        self.stopped = Some((epoch, since));
    }

    /// The barrier lifts: start the attempts held back.
    fn resume(&mut self, ctx: &mut Ctx<Msg>) {
        let Some((_, since)) = self.stopped.take() else {
            return;
        };
        *self.aborts.entry("barrier_stops").or_default() += 1;
        *self.aborts.entry("barrier_stopped_ns").or_default() += ctx.now() - since;
        for attempt in std::mem::take(&mut self.held) {
            self.start(ctx, attempt);
        }
    }

    fn is_aborted(&self, epoch: u64) -> bool {
        self.aborted.iter().any(|&(a, b)| (a..b).contains(&epoch))
    }

    /// Epochs `[epoch, next)` aborted (§3.2): their parked results and the
    /// transactions deciding or writing back in them abort, to be re-run by
    /// their clients; the rest find out when they decide.
    fn on_epoch_abort(&mut self, ctx: &mut Ctx<Msg>, epoch: u64, next: u64) {
        self.note_abort(ctx, epoch, next);
        let mut doomed: Vec<TxnId> = self
            .txns
            .iter()
            .filter(|(_, st)| {
                matches!(
                    st.phase,
                    Phase::Preparing | Phase::Deciding | Phase::WritingBack
                ) && self.is_aborted(st.epoch)
            })
            .map(|(t, _)| *t)
            .collect();
        doomed.sort_unstable();
        for txn in doomed {
            let mut st = self.txns.remove(&txn).expect("listed");
            self.abort_txn(ctx, txn, &mut st, AbortReason::Timeout);
        }
        if self.stopped.is_some_and(|(e, _)| self.is_aborted(e)) {
            self.resume(ctx);
        }
    }

    /// Remember an aborted range and abort its parked results.
    fn note_abort(&mut self, ctx: &mut Ctx<Msg>, epoch: u64, next: u64) {
        if self.aborted.contains(&(epoch, next)) {
            return;
        }
        self.aborted.push((epoch, next));
        self.floor = self.floor.max(next);
        let gone: Vec<u64> = self.parked.range(epoch..next).map(|(e, _)| *e).collect();
        for e in gone {
            for (txn, _) in self.parked.remove(&e).expect("listed") {
                self.report_abort(ctx, txn, AbortReason::Timeout);
            }
        }
    }

    /// End `txn` aborted: release what it locked, report it.
    fn abort_txn(
        &mut self,
        ctx: &mut Ctx<Msg>,
        txn: TxnId,
        st: &mut TxnState,
        reason: AbortReason,
    ) {
        for &n in &st.locked_at {
            ctx.send(n, Msg::Abort { txn });
        }
        self.open.remove(&txn);
        self.decided.remove(&txn);
        self.acked(txn, None);
        st.phase = Phase::Done;
        self.report_abort(ctx, txn, reason);
    }

    fn report_abort(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, reason: AbortReason) {
        *self.aborts.entry(abort_counter(reason)).or_default() += 1;
        ctx.done(txn, TxnOutcome::Aborted(reason));
    }

    fn on_inquire(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId) {
        if let Some(st) = self.txns.get(&txn) {
            if st.phase == Phase::WritingBack {
                let msg = Msg::WriteBack {
                    txn,
                    ts: st.ts,
                    epoch: st.epoch,
                };
                ctx.send(from, msg);
            }
        } else if let Some(&(ts, epoch)) = self.decided.get(&txn) {
            ctx.send(from, Msg::WriteBack { txn, ts, epoch });
        } else if !self.rejoined {
            // Restarted in epoch mode: what it wrote back before the crash
            // is reverted with the open epochs, not presumed aborted here
            // (the primary asks again, or the abort drops its locks).
        } else {
            // Presumed abort: not live and no durable decision.
            ctx.send(from, Msg::Abort { txn });
        }
    }

    fn tick(&mut self, ctx: &mut Ctx<Msg>) {
        let now = ctx.now();
        let rto = self.config.retransmit;
        if !self.rejoined {
            ctx.send(self.manager(), Msg::Rejoin);
        }
        for st in self.txns.values_mut() {
            if now < st.retransmit_at {
                continue;
            }
            st.retransmit_at = now + rto;
            for o in st.out.iter().filter(|o| !o.answered) {
                ctx.send(o.to, o.msg.clone());
            }
        }
        ctx.set_timer(rto / 2, TICK);
    }
}

impl TxnState {
    /// The reads at `shard`, split into those of records the transaction
    /// also writes there and those it only reads. A written record's TID is
    /// checked in the lock round, where it is locked (§4.2.1: "for each
    /// acquired lock, if any record's latest TID does not equal to the
    /// stored TID, the transaction aborts as well"); the validation round
    /// takes "the records that only appear in its read set" (§5.1, §5.2),
    /// and is skipped when there are none. Checking a written record in the
    /// validation round instead cost a distributed transaction a round trip
    /// to every primary it wrote, with all its locks held (TPC-C's remote
    /// Payment and NewOrder write their remote customer and stock rows
    /// only, so the authors' code validates nothing remote).
    fn reads_at(&self, shard: ShardId) -> (Vec<Seen>, Vec<Seen>) {
        let written = self.writes.get(&shard);
        self.reads
            .get(&shard)
            .into_iter()
            .flatten()
            .copied()
            .partition(|(k, _)| written.is_some_and(|w| w.iter().any(|(wk, _)| wk == k)))
    }

    /// The timestamp a Prepare carries: LT-OCC validates at it (and a
    /// single-round serializable primary raises it); PT-OCC ignores it.
    fn ts_for_validation(&self, config: &CocoConfig) -> u64 {
        match (config.cc, config.isolation) {
            (Cc::PtOcc | Cc::S2pl, _) => 0,
            (Cc::LtOcc, Isolation::Snapshot) => self.snapshot,
            (Cc::LtOcc, Isolation::Serializable)
                if self.phase == Phase::Validating && self.ts != 0 =>
            {
                self.ts
            }
            (Cc::LtOcc, Isolation::Serializable) => self.bound,
        }
    }
}

impl CocoCoordinator {
    /// Start executing `attempt` (§4.1).
    fn start(&mut self, ctx: &mut Ctx<Msg>, attempt: Attempt) {
        let txn = attempt.id;
        debug_assert_eq!(txn.node(), self.me);
        debug_assert_eq!(txn.incarnation(), self.incarnation);
        let n = attempt.txn.pieces().len();
        let mut st = TxnState {
            attempt,
            phase: Phase::Executing,
            results: vec![None; n],
            sent: vec![false; n],
            out: Vec::new(),
            locked_at: Vec::new(),
            writes: BTreeMap::new(),
            reads: BTreeMap::new(),
            epoch: 0,
            bound: 0,
            snapshot: 0,
            ts: 0,
            combined: false,
            floor: None,
            retransmit_at: ctx.now() + self.config.retransmit,
            finished: false,
        };
        self.open.insert(txn);
        if n == 0 {
            self.release(ctx, txn, &mut st);
            return;
        }
        self.dispatch(ctx, txn, &mut st);
        self.txns.insert(txn, st);
    }
}

impl Coordinator<Msg> for CocoCoordinator {
    fn submit(&mut self, ctx: &mut Ctx<Msg>, attempt: Attempt) {
        if self.stopped.is_some() {
            *self.aborts.entry("barrier_held").or_default() += 1;
            self.held.push(attempt);
        } else {
            self.start(ctx, attempt);
        }
    }
}

impl Node<Msg> for CocoCoordinator {
    fn take_report(&mut self) -> NodeReport {
        NodeReport {
            client: None,
            counters: std::mem::take(&mut self.aborts).into_iter().collect(),
            ..NodeReport::default()
        }
    }

    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        ctx.set_timer(self.config.retransmit / 2, TICK);
        if !self.rejoined {
            ctx.send(self.manager(), Msg::Rejoin);
        }
    }

    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        match msg {
            Msg::ReadOk {
                txn,
                results,
                locks,
            } => self.on_read_ok(ctx, txn, results, locks),
            Msg::Prepared {
                txn,
                round,
                ok,
                epoch,
                bound,
                floor,
            } => self.on_prepared(ctx, from, txn, round, ok, epoch, bound, floor),
            Msg::WrittenBack { txn } => self.on_written_back(ctx, from, txn),
            // A backup has a 2PC(Sync) transaction's writes (`seq`: the
            // transaction, see `write_back`).
            Msg::Replicated { seq } => self.on_written_back(ctx, from, TxnId(seq)),
            Msg::Inquire { txn } => self.on_inquire(ctx, from, txn),
            Msg::EpochCommit { epoch, aborted } => self.on_epoch_commit(ctx, epoch, aborted),
            Msg::EpochPrepare { epoch } => self.on_epoch_prepare(ctx, epoch),
            Msg::EpochAbort { epoch, next } => self.on_epoch_abort(ctx, epoch, next),
            Msg::EpochStatus { committed, aborted } => {
                // The open epochs of before the restart are durably aborted.
                self.rejoined = true;
                self.on_epoch_commit(ctx, committed, aborted);
            }
            Msg::Abort { txn } => {
                // A primary lost the transaction's locks to an epoch abort.
                if let Some(mut st) = self.txns.remove(&txn) {
                    if st.phase == Phase::WritingBack {
                        self.abort_txn(ctx, txn, &mut st, AbortReason::Timeout);
                    }
                    self.keep(txn, st);
                }
            }
            other => tracing::warn!(?from, msg = ?other, "coordinator got a server's message"),
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<Msg>, id: TimerId) {
        if id == TICK {
            self.tick(ctx);
        }
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<Msg>, token: u64) {
        let txn = TxnId(token);
        let Some(mut st) = self.txns.remove(&txn) else {
            return;
        };
        if st.phase == Phase::Preparing {
            st.phase = Phase::Deciding;
            ctx.persist(txn.0, decision_record(txn, st.ts, st.epoch));
        } else if st.phase == Phase::Deciding {
            self.decided.insert(txn, (st.ts, st.epoch));
            self.write_back(ctx, txn, &mut st);
        }
        self.keep(txn, st);
    }
}

/// The prepare round's durable write of a distributed transaction, forced
/// here for its participants (see [`CommitMode::forces_decision`]): the
/// txn only, never read back (8 bytes, so recovery, which reads the 24-byte
/// decisions, skips it).
fn prepare_record(txn: TxnId) -> Bytes {
    Bytes::copy_from_slice(&txn.0.to_le_bytes())
}

/// The durable commit decision: txn, timestamp, epoch.
fn decision_record(txn: TxnId, ts: u64, epoch: u64) -> Bytes {
    let mut rec = BytesMut::with_capacity(24);
    rec.put_u64_le(txn.0);
    rec.put_u64_le(ts);
    rec.put_u64_le(epoch);
    rec.freeze()
}
