//! A TAPIR replica: the shard's versioned store, the prepared list, and
//! TAPIR-OCC-CHECK (TAPIR Fig. 8), behind IR's operations.
//!
//! Every replica validates on its own (there is no leader). A record's
//! `version` is its writer's id (what clients and the history see); its
//! `wts` word is the writer's commit timestamp, its `rts` word the highest
//! timestamp of a committed reader. Commits arrive in any order (IR's
//! inconsistent operations): a write older than the installed one is
//! dropped (Thomas' write rule), so replicas that applied the same commits
//! hold the same data whatever the order.
//!
//! Each answer is made durable before it is sent (IR's record), so a
//! replica that crashes and restarts still honours the votes it gave.
//!
//! # Views (IR §3.2.2)
//! A replica answers clients only in the NORMAL status of its view. A
//! replica that restarts after a crash replays its record and asks for a
//! view change (StartViewChange for its last view + 1); it answers nobody
//! until the new view starts, because its record misses what happened
//! while it was down. Every replica that learns of a higher view stops
//! answering and sends its record to that view's leader (replica
//! `view mod n`) in DoViewChange. The leader merges the first f+1 records
//! it holds (IR-MERGE-RECORDS with TAPIR's merge, [`merge`]) into the
//! master record and sends it in StartView; replicas adopt it and resume.
//! A view change that does not finish within [`TapirConfig::view_timeout`]
//! (its leader is down) moves on to the next view.

use super::msg::{Footprint, Msg, OpState, RecordOp, Vote};
use super::TapirConfig;
use crate::paxos::codec::{get_bytes, get_u32, get_u64, get_u8, put_bytes, put_u32, put_u64};
use crate::paxos::codec::{put_u8, DecodeError};
use crate::tombstones::Tombstones;
use crate::twopc::log::{get_key, put_key};
use bytes::Bytes;
use std::collections::{BTreeMap, VecDeque};
use tessera_core::ids::{Key, NodeId, Time, TimerId, TxnId, Version};
use tessera_core::node::{Ctx, Node, NodeReport};
use tessera_core::protocol::ServerEnv;
use tessera_core::storage::Store;
use tessera_core::FastMap;

/// A change of replica state, as made durable and replayed at restart.
enum Record {
    /// The transaction's vote (a consensus operation's result), adopted
    /// from a Finalize when `finalized`.
    Vote {
        txn: TxnId,
        ts: u64,
        vote: Vote,
        finalized: bool,
        footprint: Footprint,
    },
    Commit {
        txn: TxnId,
        ts: u64,
        footprint: Footprint,
    },
    Abort {
        txn: TxnId,
    },
    /// A tentative vote the master record of a view change dropped.
    Forget {
        txn: TxnId,
    },
    /// The replica entered `view` (TxnId unused: the view rides in it).
    View {
        view: u64,
    },
}

const TAG: u8 = 0x7A;

fn put_footprint(out: &mut Vec<u8>, f: &Footprint) {
    put_u32(out, f.reads.len() as u32);
    for (k, v) in &f.reads {
        put_key(out, *k);
        put_u64(out, v.0);
    }
    put_u32(out, f.writes.len() as u32);
    for (k, v) in &f.writes {
        put_key(out, *k);
        put_bytes(out, v);
    }
}

fn get_footprint(r: &mut &[u8]) -> Result<Footprint, DecodeError> {
    let mut f = Footprint::default();
    for _ in 0..get_u32(r)? {
        let k = get_key(r)?;
        f.reads.push((k, Version(get_u64(r)?)));
    }
    for _ in 0..get_u32(r)? {
        let k = get_key(r)?;
        f.writes.push((k, get_bytes(r)?));
    }
    Ok(f)
}

fn put_vote(out: &mut Vec<u8>, v: Vote) {
    let (tag, ts) = match v {
        Vote::Ok => (0, 0),
        Vote::Abort => (1, 0),
        Vote::Abstain => (2, 0),
        Vote::Retry(ts) => (3, ts),
    };
    put_u8(out, tag);
    put_u64(out, ts);
}

fn get_vote(r: &mut &[u8]) -> Result<Vote, DecodeError> {
    let tag = get_u8(r)?;
    let ts = get_u64(r)?;
    Ok(match tag {
        0 => Vote::Ok,
        1 => Vote::Abort,
        2 => Vote::Abstain,
        3 => Vote::Retry(ts),
        tag => return Err(DecodeError::Tag { what: "vote", tag }),
    })
}

impl Record {
    /// Append this record's encoding to `out`; records are self-delimiting,
    /// so a flush carries several back to back.
    fn encode_into(&self, out: &mut Vec<u8>) {
        out.push(TAG);
        match self {
            Record::Vote {
                txn,
                ts,
                vote,
                finalized,
                footprint,
            } => {
                put_u8(out, 1);
                put_u64(out, txn.0);
                put_u64(out, *ts);
                put_vote(out, *vote);
                put_u8(out, *finalized as u8);
                put_footprint(out, footprint);
            }
            Record::Commit { txn, ts, footprint } => {
                put_u8(out, 2);
                put_u64(out, txn.0);
                put_u64(out, *ts);
                put_footprint(out, footprint);
            }
            Record::Abort { txn } => {
                put_u8(out, 3);
                put_u64(out, txn.0);
            }
            Record::Forget { txn } => {
                put_u8(out, 4);
                put_u64(out, txn.0);
            }
            Record::View { view } => {
                put_u8(out, 5);
                put_u64(out, *view);
            }
        }
    }

    /// The records of one flush, in the order they were issued.
    fn decode_all(mut input: &[u8]) -> Result<Vec<Self>, DecodeError> {
        let mut out = Vec::new();
        while !input.is_empty() {
            out.push(Self::decode(&mut input)?);
        }
        Ok(out)
    }

    fn decode(r: &mut &[u8]) -> Result<Self, DecodeError> {
        let tag = get_u8(r)?;
        if tag != TAG {
            return Err(DecodeError::Tag {
                what: "tapir record tag",
                tag,
            });
        }
        let kind = get_u8(r)?;
        let txn = TxnId(get_u64(r)?);
        Ok(match kind {
            1 => {
                let ts = get_u64(r)?;
                let vote = get_vote(r)?;
                let finalized = get_u8(r)? != 0;
                Record::Vote {
                    txn,
                    ts,
                    vote,
                    finalized,
                    footprint: get_footprint(r)?,
                }
            }
            2 => {
                let ts = get_u64(r)?;
                Record::Commit {
                    txn,
                    ts,
                    footprint: get_footprint(r)?,
                }
            }
            3 => Record::Abort { txn },
            4 => Record::Forget { txn },
            5 => Record::View { view: txn.0 },
            tag => {
                return Err(DecodeError::Tag {
                    what: "tapir record",
                    tag,
                })
            }
        })
    }
}

/// A live consensus operation of the record: the vote, and whether it is
/// final (adopted from the client's Finalize or from a master record).
struct Live {
    ts: u64,
    footprint: Footprint,
    vote: Vote,
    finalized: bool,
}

/// How a transaction ended here. Commits keep their timestamp and
/// footprint while the tombstone lasts: they are IR inconsistent operations
/// that a view change hands to replicas that missed them.
enum Ended {
    Committed { ts: u64, footprint: Footprint },
    Aborted,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Normal,
    /// Between StartViewChange and StartView (IR's VIEW-CHANGING; a
    /// restarted replica starts here: IR's RECOVERING).
    ViewChanging,
}

/// The server role of [`super::Tapir`].
pub struct TapirReplica {
    store: Store,
    group: Vec<NodeId>,
    /// This replica's index in `group`.
    index: usize,
    view_timeout: Time,
    retransmit: Time,
    /// Transactions prepared here (TAPIR's prepared list).
    prepared: FastMap<TxnId, Footprint>,
    /// Prepared reads and writes per key: (timestamp, transaction).
    prepared_reads: FastMap<Key, Vec<(u64, TxnId)>>,
    prepared_writes: FastMap<Key, Vec<(u64, TxnId)>>,
    /// IR's record of consensus operations of transactions still live, to
    /// answer duplicates the same way and to hand to a view change.
    record: FastMap<TxnId, Live>,
    /// Committed or aborted transactions (IR's inconsistent operations).
    ended: Tombstones<Ended>,
    view: u64,
    status: Status,
    /// Since when the current view change runs; when its messages go out
    /// again.
    changing_since: Time,
    resend_at: Time,
    /// As the leader of a changing view: the records received, by replica.
    records: Vec<Option<Vec<RecordOp>>>,
    /// Records issued, handed to the disk, and durable (numbered from 1;
    /// a flush's token is its last record's number); replies waiting for
    /// durability.
    issued: u64,
    written: u64,
    durable: u64,
    /// Encoded records issued while a flush was running: they go to the
    /// disk together in the next one (group commit).
    batch: Vec<u8>,
    waiting: VecDeque<(u64, NodeId, Msg)>,
    /// Counters for the results row: views this replica started as their
    /// leader, prepares its merges re-decided, and StartViews adopted
    /// after a restart (recoveries).
    views_started: u64,
    redecided: u64,
    recoveries: u64,
    restarted: bool,
}

const SWEEP: TimerId = TimerId(1);
const VIEW: TimerId = TimerId(2);
const SWEEP_EVERY: Time = 100 * tessera_core::ids::MS;

/// IR-MERGE-RECORDS (IR §3.2.2) with TAPIR's merge (TAPIR §5.2.3), on the
/// records of f+1 replicas. Returns the master record's settled part and
/// the tentative operations left to re-decide (IR's `u`), in timestamp
/// order.
///
/// * An outcome (inconsistent operation) in any record is kept; a Commit
///   wins over everything else for its transaction.
/// * A finalized consensus result in any record is kept: the client may
///   have counted it (f+1 confirms meet any f+1 records).
/// * A tentative result held by at least ⌈f/2⌉+1 of the records (IR's `d`)
///   is kept as is, finalized: a fast quorum of ⌈3f/2⌉+1 matching replies
///   leaves at least that many in any f+1 records, so the client may have
///   decided on it. Unlike TAPIR-MERGE we do not re-run TAPIR-OCC-CHECK on
///   a kept PREPARE-OK: a transaction committed on the fast path can fail
///   that check once a later writer of its read set commits, and changing
///   its result would contradict the client.
/// * The other tentative operations (`u`) cannot have been decided on the
///   fast path; the leader re-decides them with TAPIR-OCC-CHECK, one at a
///   time in (timestamp, transaction) order, so that of two conflicting
///   prepares the earlier one wins on every replica.
pub(super) fn merge(records: &[Vec<RecordOp>], f: usize) -> (Vec<RecordOp>, Vec<RecordOp>) {
    let mut by_txn: BTreeMap<TxnId, Vec<&RecordOp>> = BTreeMap::new();
    for op in records.iter().flatten() {
        by_txn.entry(op.txn).or_default().push(op);
    }
    let majority = f.div_ceil(2) + 1;
    let mut settled = Vec::new();
    let mut undecided = Vec::new();
    for ops in by_txn.into_values() {
        let find = |want: fn(&OpState) -> bool| ops.iter().find(|op| want(&op.state));
        let pick = find(|s| *s == OpState::Committed)
            .or_else(|| find(|s| *s == OpState::Aborted))
            .or_else(|| find(|s| matches!(s, OpState::Finalized(_))));
        if let Some(op) = pick {
            settled.push((*op).clone());
            continue;
        }
        let mut counts: Vec<(Vote, usize)> = Vec::new();
        for op in &ops {
            if let OpState::Tentative(v) = op.state {
                match counts.iter_mut().find(|(c, _)| *c == v) {
                    Some((_, n)) => *n += 1,
                    None => counts.push((v, 1)),
                }
            }
        }
        let op = ops[0];
        match counts.iter().find(|(_, n)| *n >= majority) {
            Some((v, _)) => settled.push(RecordOp {
                state: OpState::Finalized(*v),
                ..op.clone()
            }),
            None => undecided.push(op.clone()),
        }
    }
    undecided.sort_by_key(|op| (op.ts, op.txn));
    (settled, undecided)
}

impl TapirReplica {
    pub fn new(cfg: &TapirConfig, env: ServerEnv) -> Self {
        let group = env.topology.shards[env.shard.0 as usize].replicas.clone();
        let restarted = !env.recovered.is_empty();
        let mut r = TapirReplica {
            store: env.store,
            index: env.replica as usize,
            records: vec![None; group.len()],
            group,
            view_timeout: cfg.view_timeout,
            retransmit: cfg.retransmit,
            prepared: tessera_core::fast_map(),
            prepared_reads: tessera_core::fast_map(),
            prepared_writes: tessera_core::fast_map(),
            record: tessera_core::fast_map(),
            ended: Tombstones::new(cfg.keep),
            view: 0,
            status: Status::Normal,
            changing_since: 0,
            resend_at: 0,
            issued: 0,
            written: 0,
            durable: 0,
            batch: Vec::new(),
            waiting: VecDeque::new(),
            views_started: 0,
            redecided: 0,
            recoveries: 0,
            restarted,
        };
        for flush in &env.recovered {
            match Record::decode_all(flush) {
                Ok(recs) => recs.into_iter().for_each(|rec| r.apply(rec, 0)),
                Err(e) => tracing::error!(error = %e, "tapir: unreadable record"),
            }
        }
        if restarted {
            // IR's RECOVERING: silent until a view change hands us what we
            // missed (on_start asks for it).
            r.status = Status::ViewChanging;
        }
        r
    }

    /// The view this replica is in (or changing to).
    pub fn view(&self) -> u64 {
        self.view
    }

    /// Whether the replica answers clients (IR's NORMAL status).
    pub fn is_normal(&self) -> bool {
        self.status == Status::Normal
    }

    fn f(&self) -> usize {
        (self.group.len() - 1) / 2
    }

    fn leader_of(&self, view: u64) -> usize {
        (view % self.group.len() as u64) as usize
    }

    /// TAPIR-OCC-CHECK (TAPIR Fig. 8), adapted to one stored version per
    /// key: a stale read aborts; a read of a key with a prepared write
    /// abstains; a write below a prepared read's timestamp, or not above
    /// the installed version's or its readers' timestamps, asks to retry.
    fn occ_check(&self, txn: TxnId, ts: u64, f: &Footprint) -> Vote {
        let others = |m: &FastMap<Key, Vec<(u64, TxnId)>>, k: &Key| {
            m.get(k)
                .into_iter()
                .flatten()
                .filter(|(_, t)| *t != txn)
                .map(|(ts, _)| *ts)
                .collect::<Vec<u64>>()
        };
        for (k, seen) in &f.reads {
            let current = self
                .store
                .get(*k)
                .map_or(Version::INITIAL, |r| r.meta.version);
            if current != *seen {
                return Vote::Abort;
            }
            if !others(&self.prepared_writes, k).is_empty() {
                return Vote::Abstain;
            }
        }
        for (k, _) in &f.writes {
            if let Some(&max) = others(&self.prepared_reads, k).iter().max() {
                if ts < max {
                    return Vote::Retry(max);
                }
            }
            if !others(&self.prepared_writes, k).is_empty() {
                return Vote::Abstain;
            }
            if let Some(r) = self.store.get(*k) {
                let floor = r.meta.wts.max(r.meta.rts);
                if ts <= floor {
                    return Vote::Retry(floor);
                }
            }
        }
        Vote::Ok
    }

    fn add_prepared(&mut self, txn: TxnId, ts: u64, footprint: &Footprint) {
        if self.prepared.contains_key(&txn) {
            return;
        }
        for (k, _) in &footprint.reads {
            self.prepared_reads.entry(*k).or_default().push((ts, txn));
        }
        for (k, _) in &footprint.writes {
            self.prepared_writes.entry(*k).or_default().push((ts, txn));
        }
        self.prepared.insert(txn, footprint.clone());
    }

    fn remove_prepared(&mut self, txn: TxnId) {
        let Some(f) = self.prepared.remove(&txn) else {
            return;
        };
        let drop = |m: &mut FastMap<Key, Vec<(u64, TxnId)>>, k: &Key| {
            if let Some(v) = m.get_mut(k) {
                v.retain(|(_, t)| *t != txn);
                if v.is_empty() {
                    m.remove(k);
                }
            }
        };
        for (k, _) in &f.reads {
            drop(&mut self.prepared_reads, k);
        }
        for (k, _) in &f.writes {
            drop(&mut self.prepared_writes, k);
        }
    }

    /// Apply a record (live, or replayed at restart).
    fn apply(&mut self, rec: Record, now: Time) {
        match rec {
            Record::Vote {
                txn,
                ts,
                vote,
                finalized,
                footprint,
            } => {
                if vote == Vote::Ok {
                    self.add_prepared(txn, ts, &footprint);
                } else {
                    self.remove_prepared(txn);
                }
                let live = Live {
                    ts,
                    footprint,
                    vote,
                    finalized,
                };
                self.record.insert(txn, live);
            }
            Record::Commit { txn, ts, footprint } => {
                self.remove_prepared(txn);
                self.record.remove(&txn);
                for (k, v) in &footprint.writes {
                    let newer = self.store.get(*k).is_none_or(|r| ts > r.meta.wts);
                    if newer {
                        self.store.install(*k, v.clone(), txn.version());
                        self.store.get_mut(*k).expect("installed").meta.wts = ts;
                    }
                }
                for (k, _) in &footprint.reads {
                    if let Some(r) = self.store.get_mut(*k) {
                        r.meta.rts = r.meta.rts.max(ts);
                    }
                }
                self.ended
                    .insert(txn, Ended::Committed { ts, footprint }, now);
            }
            Record::Abort { txn } => {
                self.remove_prepared(txn);
                self.record.remove(&txn);
                self.ended.insert(txn, Ended::Aborted, now);
            }
            Record::Forget { txn } => {
                self.remove_prepared(txn);
                self.record.remove(&txn);
            }
            Record::View { view } => self.view = self.view.max(view),
        }
    }

    /// Make `rec` durable and apply it. It goes to the disk at once if no
    /// flush is running, else with the records issued meanwhile when that
    /// one ends ([`Self::flush`]).
    fn log_only(&mut self, ctx: &mut Ctx<Msg>, rec: Record) {
        self.issued += 1;
        rec.encode_into(&mut self.batch);
        self.apply(rec, ctx.now());
        if self.written == self.durable {
            self.flush(ctx);
        }
    }

    /// Hand the batched records to the disk as one write (group commit):
    /// one flush and one completion however many records it carries, as a
    /// log device that commits in groups has. Records written one by one
    /// cost the replica an event each to complete (two per replica and
    /// transaction, Prepare and Commit), which the layered baselines'
    /// batched Paxos log does not pay.
    fn flush(&mut self, ctx: &mut Ctx<Msg>) {
        if self.batch.is_empty() {
            return;
        }
        self.written = self.issued;
        ctx.persist(self.written, Bytes::from(std::mem::take(&mut self.batch)));
    }

    /// Make `rec` durable, apply it, and send `reply` to `to` once it is.
    fn log(&mut self, ctx: &mut Ctx<Msg>, rec: Record, to: NodeId, reply: Msg) {
        self.log_only(ctx, rec);
        self.waiting.push_back((self.issued, to, reply));
    }

    fn on_prepare(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId, ts: u64, f: Footprint) {
        let view = self.view;
        if let Some(ended) = self.ended.get(txn) {
            let vote = match ended {
                Ended::Committed { .. } => Vote::Ok,
                Ended::Aborted => Vote::Abort,
            };
            self.after_durable(ctx, from, Msg::PrepareReply { txn, vote, view });
            return;
        }
        if let Some(live) = self.record.get(&txn) {
            // A duplicate: the same answer, once it is durable.
            let vote = live.vote;
            self.after_durable(ctx, from, Msg::PrepareReply { txn, vote, view });
            return;
        }
        let vote = self.occ_check(txn, ts, &f);
        let rec = Record::Vote {
            txn,
            ts,
            vote,
            finalized: false,
            footprint: f,
        };
        self.log(ctx, rec, from, Msg::PrepareReply { txn, vote, view });
    }

    /// IR's Finalize: adopt the client's result, unless a view change's
    /// merge already finalized one; answer with the result that stands.
    fn on_finalize(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        txn: TxnId,
        ts: u64,
        vote: Vote,
        f: Footprint,
    ) {
        let view = self.view;
        let standing = match (self.ended.get(txn), self.record.get(&txn)) {
            (Some(Ended::Committed { .. }), _) => Some(Vote::Ok),
            (Some(Ended::Aborted), _) => Some(Vote::Abort),
            (None, Some(live)) if live.finalized => Some(live.vote),
            _ => None,
        };
        if let Some(vote) = standing {
            self.after_durable(ctx, from, Msg::Confirm { txn, vote, view });
            return;
        }
        let rec = Record::Vote {
            txn,
            ts,
            vote,
            finalized: true,
            footprint: f,
        };
        self.log(ctx, rec, from, Msg::Confirm { txn, vote, view });
    }

    /// Answer from state that may not be durable yet (records apply when
    /// issued): send once every record issued so far is.
    fn after_durable(&mut self, ctx: &mut Ctx<Msg>, to: NodeId, msg: Msg) {
        if self.durable >= self.issued {
            ctx.send(to, msg);
        } else {
            self.waiting.push_back((self.issued, to, msg));
        }
    }

    /// This replica's IR record: live consensus operations and the
    /// outcomes it still remembers.
    fn ir_record(&self) -> Vec<RecordOp> {
        let mut out: Vec<RecordOp> = self
            .record
            .iter()
            .map(|(txn, l)| RecordOp {
                txn: *txn,
                ts: l.ts,
                footprint: l.footprint.clone(),
                state: if l.finalized {
                    OpState::Finalized(l.vote)
                } else {
                    OpState::Tentative(l.vote)
                },
            })
            .collect();
        out.extend(self.ended.iter().map(|(txn, e)| match e {
            Ended::Committed { ts, footprint } => RecordOp {
                txn,
                ts: *ts,
                footprint: footprint.clone(),
                state: OpState::Committed,
            },
            Ended::Aborted => RecordOp {
                txn,
                ts: 0,
                footprint: Footprint::default(),
                state: OpState::Aborted,
            },
        }));
        out.sort_by_key(|op| op.txn);
        out
    }

    /// The master record this leader hands to a replica that joins its
    /// (already started) view late: outcomes and finalized results, the
    /// part of its record that binds every replica.
    fn settled_record(&self) -> Vec<RecordOp> {
        let mut out = self.ir_record();
        out.retain(|op| !matches!(op.state, OpState::Tentative(_)));
        out
    }

    fn broadcast(&self, ctx: &mut Ctx<Msg>, msg: Msg) {
        for (i, &node) in self.group.iter().enumerate() {
            if i != self.index {
                ctx.send(node, msg.clone());
            }
        }
    }

    /// Stop answering and move to `view`: tell the others, and hand this
    /// replica's record to the view's leader (IR §3.2.2).
    fn start_view_change(&mut self, ctx: &mut Ctx<Msg>, view: u64) {
        self.status = Status::ViewChanging;
        self.view = view;
        self.changing_since = ctx.now();
        self.records = vec![None; self.group.len()];
        self.log_only(ctx, Record::View { view });
        self.broadcast(ctx, Msg::StartViewChange { view });
        self.send_do_view_change(ctx);
    }

    fn send_do_view_change(&mut self, ctx: &mut Ctx<Msg>) {
        self.resend_at = ctx.now() + self.retransmit;
        let leader = self.leader_of(self.view);
        let record = self.ir_record();
        if leader == self.index {
            self.on_do_view_change(ctx, self.index, self.view, record);
        } else {
            let view = self.view;
            ctx.send(self.group[leader], Msg::DoViewChange { view, record });
        }
    }

    fn on_start_view_change(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, view: u64) {
        if view > self.view {
            self.start_view_change(ctx, view);
        } else if view < self.view && self.status == Status::Normal {
            // The sender is behind (it missed views while down): point it
            // at ours; a leader in this view answers its DoViewChange with
            // StartView.
            let view = self.view;
            ctx.send(from, Msg::StartViewChange { view });
        }
    }

    fn on_do_view_change(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: usize,
        view: u64,
        record: Vec<RecordOp>,
    ) {
        if view > self.view {
            self.start_view_change(ctx, view);
        }
        if view != self.view || self.leader_of(view) != self.index {
            return;
        }
        match self.status {
            Status::Normal => {
                // A replica that joins the started view late.
                let record = self.settled_record();
                ctx.send(self.group[from], Msg::StartView { view, record });
            }
            Status::ViewChanging => {
                self.records[from] = Some(record);
                if self.records.iter().flatten().count() > self.f() {
                    self.finish_view_change(ctx);
                }
            }
        }
    }

    /// The leader holds f+1 records: merge them into the master record,
    /// re-decide the undecided prepares against the merged state, start
    /// the view and send the master record to the others.
    fn finish_view_change(&mut self, ctx: &mut Ctx<Msg>) {
        let records: Vec<Vec<RecordOp>> =
            self.records.iter_mut().filter_map(Option::take).collect();
        let (mut master, undecided) = merge(&records, self.f());
        self.adopt(ctx, &master);
        self.views_started += 1;
        self.redecided += undecided.len() as u64;
        for mut op in undecided {
            let vote = self.occ_check(op.txn, op.ts, &op.footprint);
            self.log_only(
                ctx,
                Record::Vote {
                    txn: op.txn,
                    ts: op.ts,
                    vote,
                    finalized: true,
                    footprint: op.footprint.clone(),
                },
            );
            op.state = OpState::Finalized(vote);
            master.push(op);
        }
        self.back_to_normal();
        let view = self.view;
        self.broadcast(
            ctx,
            Msg::StartView {
                view,
                record: master,
            },
        );
    }

    fn back_to_normal(&mut self) {
        self.status = Status::Normal;
        if std::mem::take(&mut self.restarted) {
            self.recoveries += 1;
        }
    }

    fn on_start_view(&mut self, ctx: &mut Ctx<Msg>, view: u64, record: Vec<RecordOp>) {
        let joins = view > self.view || (view == self.view && self.status == Status::ViewChanging);
        if !joins {
            return;
        }
        if view > self.view {
            self.log_only(ctx, Record::View { view });
        }
        self.adopt(ctx, &record);
        self.back_to_normal();
    }

    /// Replace this replica's record by the master record: apply the
    /// outcomes it missed, take the finalized results, and drop tentative
    /// votes the master record does not hold (they count for nothing in
    /// the new view; the client asks again).
    fn adopt(&mut self, ctx: &mut Ctx<Msg>, master: &[RecordOp]) {
        let mut listed: FastMap<TxnId, ()> = tessera_core::fast_map();
        for op in master {
            listed.insert(op.txn, ());
            let ended = self.ended.get(op.txn);
            let rec = match op.state {
                OpState::Committed if !matches!(ended, Some(Ended::Committed { .. })) => {
                    Record::Commit {
                        txn: op.txn,
                        ts: op.ts,
                        footprint: op.footprint.clone(),
                    }
                }
                OpState::Aborted if ended.is_none() => Record::Abort { txn: op.txn },
                OpState::Finalized(vote) if ended.is_none() => {
                    let same = self
                        .record
                        .get(&op.txn)
                        .is_some_and(|l| l.finalized && l.vote == vote);
                    if same {
                        continue;
                    }
                    Record::Vote {
                        txn: op.txn,
                        ts: op.ts,
                        vote,
                        finalized: true,
                        footprint: op.footprint.clone(),
                    }
                }
                _ => continue,
            };
            self.log_only(ctx, rec);
        }
        let mut dropped: Vec<TxnId> = self
            .record
            .iter()
            .filter(|(txn, l)| !l.finalized && !listed.contains_key(txn))
            .map(|(txn, _)| *txn)
            .collect();
        dropped.sort_unstable();
        for txn in dropped {
            self.log_only(ctx, Record::Forget { txn });
        }
    }

    /// A view change that does not end in time (its leader is down) moves
    /// to the next view; otherwise its messages go out again.
    fn view_tick(&mut self, ctx: &mut Ctx<Msg>) {
        if self.status == Status::ViewChanging {
            let now = ctx.now();
            if now >= self.changing_since + self.view_timeout {
                self.start_view_change(ctx, self.view + 1);
            } else if now >= self.resend_at {
                let view = self.view;
                self.broadcast(ctx, Msg::StartViewChange { view });
                self.send_do_view_change(ctx);
            }
        }
        ctx.set_timer(self.retransmit / 2, VIEW);
    }
}

impl Node<Msg> for TapirReplica {
    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        ctx.set_timer(SWEEP_EVERY, SWEEP);
        ctx.set_timer(self.retransmit / 2, VIEW);
        if self.status == Status::ViewChanging {
            // Restarted: recover through a view change.
            self.start_view_change(ctx, self.view + 1);
        } else {
            // A durable mark, so that a restart is told from a first start.
            self.log_only(ctx, Record::View { view: self.view });
        }
    }

    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        match msg {
            Msg::StartViewChange { view } => return self.on_start_view_change(ctx, from, view),
            Msg::DoViewChange { view, record } => {
                if let Some(i) = self.group.iter().position(|&n| n == from) {
                    self.on_do_view_change(ctx, i, view, record);
                }
                return;
            }
            Msg::StartView { view, record } => return self.on_start_view(ctx, view, record),
            _ if self.status != Status::Normal => return,
            _ => {}
        }
        match msg {
            Msg::Read { txn, piece, keys } => {
                let values = keys
                    .iter()
                    .map(|k| match self.store.get(*k) {
                        Some(r) => (Some(r.value.clone()), r.meta.version),
                        None => (None, Version::INITIAL),
                    })
                    .collect();
                ctx.send(from, Msg::ReadReply { txn, piece, values });
            }
            Msg::Prepare { txn, ts, footprint } => self.on_prepare(ctx, from, txn, ts, footprint),
            Msg::Finalize {
                txn,
                ts,
                vote,
                footprint,
            } => self.on_finalize(ctx, from, txn, ts, vote, footprint),
            Msg::Commit { txn, ts, footprint } => {
                if matches!(self.ended.get(txn), Some(Ended::Committed { .. })) {
                    self.after_durable(ctx, from, Msg::Done { txn });
                } else {
                    let rec = Record::Commit { txn, ts, footprint };
                    self.log(ctx, rec, from, Msg::Done { txn });
                }
            }
            Msg::Abort { txn } => {
                if self.ended.contains(txn) {
                    self.after_durable(ctx, from, Msg::Done { txn });
                } else {
                    self.log(ctx, Record::Abort { txn }, from, Msg::Done { txn });
                }
            }
            Msg::ReadReply { .. }
            | Msg::PrepareReply { .. }
            | Msg::Confirm { .. }
            | Msg::Done { .. } => {
                tracing::warn!(?from, "tapir: a replica got a client's message");
            }
            Msg::StartViewChange { .. } | Msg::DoViewChange { .. } | Msg::StartView { .. } => {
                unreachable!("handled above")
            }
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<Msg>, id: TimerId) {
        match id {
            SWEEP => {
                self.ended.sweep(ctx.now());
                ctx.set_timer(SWEEP_EVERY, SWEEP);
            }
            VIEW => self.view_tick(ctx),
            _ => {}
        }
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<Msg>, token: u64) {
        self.durable = self.durable.max(token);
        if self.written == self.durable {
            self.flush(ctx);
        }
        while let Some((t, _, _)) = self.waiting.front() {
            if *t > self.durable {
                break;
            }
            let (_, to, msg) = self.waiting.pop_front().expect("peeked");
            ctx.send(to, msg);
        }
    }

    fn take_report(&mut self) -> NodeReport {
        NodeReport {
            client: None,
            counters: vec![
                (
                    "tapir_views_started",
                    std::mem::take(&mut self.views_started),
                ),
                ("tapir_merge_redecided", std::mem::take(&mut self.redecided)),
                ("tapir_recoveries", std::mem::take(&mut self.recoveries)),
            ],
            ..NodeReport::default()
        }
    }

    fn store(&self) -> Option<&Store> {
        Some(&self.store)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use std::sync::Arc;
    use tessera_core::ids::ShardId;
    use tessera_core::node::Effect;
    use tessera_core::topology::Topology;

    const K: Key = Key::new(0, 7);

    fn txn(seq: u32) -> TxnId {
        TxnId::new(NodeId(9), 0, seq)
    }

    fn writes_k(value: &'static [u8]) -> Footprint {
        Footprint {
            reads: Vec::new(),
            writes: vec![(K, Bytes::from_static(value))],
        }
    }

    fn op(seq: u32, ts: u64, state: OpState) -> RecordOp {
        RecordOp {
            txn: txn(seq),
            ts,
            footprint: writes_k(b"v"),
            state,
        }
    }

    fn state_of(ops: &[RecordOp], seq: u32) -> Option<OpState> {
        ops.iter().find(|o| o.txn == txn(seq)).map(|o| o.state)
    }

    #[test]
    fn merge_keeps_a_tentative_result_held_by_a_majority_of_the_records() {
        // f = 1: a fast quorum is all three, so both of any two records
        // hold a fast-path result; one record alone is not enough.
        let a = vec![
            op(1, 10, OpState::Tentative(Vote::Ok)),
            op(2, 11, OpState::Tentative(Vote::Ok)),
        ];
        let b = vec![op(1, 10, OpState::Tentative(Vote::Ok))];
        let (settled, undecided) = merge(&[a, b], 1);
        assert_eq!(state_of(&settled, 1), Some(OpState::Finalized(Vote::Ok)));
        assert_eq!(state_of(&settled, 2), None);
        assert_eq!(state_of(&undecided, 2), Some(OpState::Tentative(Vote::Ok)));
        // f = 2: ⌈f/2⌉+1 = 2 of the 3 records suffice.
        let r = |v| vec![op(3, 5, OpState::Tentative(v))];
        let (settled, undecided) = merge(&[r(Vote::Abstain), r(Vote::Ok), r(Vote::Ok)], 2);
        assert_eq!(state_of(&settled, 3), Some(OpState::Finalized(Vote::Ok)));
        assert!(undecided.is_empty());
        let (settled, undecided) = merge(&[r(Vote::Abstain), r(Vote::Ok), Vec::new()], 2);
        assert!(settled.is_empty());
        assert_eq!(undecided.len(), 1);
    }

    #[test]
    fn merge_keeps_outcomes_and_finalized_results_over_tentative_votes() {
        let a = vec![
            op(1, 10, OpState::Committed),
            op(2, 11, OpState::Aborted),
            op(3, 12, OpState::Finalized(Vote::Abstain)),
        ];
        let b = vec![
            op(1, 10, OpState::Tentative(Vote::Abstain)),
            op(2, 11, OpState::Finalized(Vote::Ok)),
            op(3, 12, OpState::Tentative(Vote::Ok)),
        ];
        for records in [vec![a.clone(), b.clone()], vec![b, a]] {
            let (settled, undecided) = merge(&records, 1);
            assert!(undecided.is_empty());
            assert_eq!(state_of(&settled, 1), Some(OpState::Committed));
            assert_eq!(state_of(&settled, 2), Some(OpState::Aborted));
            assert_eq!(
                state_of(&settled, 3),
                Some(OpState::Finalized(Vote::Abstain))
            );
        }
    }

    /// One replica of shard 0 in a group of three, driven by hand.
    struct One {
        r: TapirReplica,
        rng: rand::rngs::SmallRng,
        group: Vec<NodeId>,
        disk: Vec<Bytes>,
        now: Time,
    }

    impl One {
        fn new(replica: u32, recovered: Vec<Bytes>) -> Self {
            let topology = Arc::new(Topology::new(1, 3, 1));
            let group = topology.shards[0].replicas.clone();
            let env = ServerEnv {
                me: group[replica as usize],
                shard: ShardId(0),
                replica,
                topology,
                store: Store::new(),
                recovered: recovered.clone(),
                durable: true,
                codec: Default::default(),
            };
            let mut one = One {
                r: TapirReplica::new(&TapirConfig::default(), env),
                rng: rand::rngs::SmallRng::seed_from_u64(1),
                group,
                disk: recovered,
                now: 0,
            };
            one.step(&mut |r, ctx| r.on_start(ctx));
            one
        }

        /// Run `f`, make what it persisted durable, return what it sent.
        fn step(
            &mut self,
            f: &mut dyn FnMut(&mut TapirReplica, &mut Ctx<Msg>),
        ) -> Vec<(NodeId, Msg)> {
            let mut effects = Vec::new();
            let me = self.group[self.r.index];
            let mut ctx = Ctx::new(self.now, me, &mut self.rng, &mut effects);
            f(&mut self.r, &mut ctx);
            let mut sent = Vec::new();
            let mut last = None;
            for e in effects {
                match e {
                    Effect::Send { to, msg } => sent.push((to, msg)),
                    Effect::Persist { token, record } => {
                        self.disk.push(record);
                        last = Some(token);
                    }
                    _ => {}
                }
            }
            if let Some(token) = last {
                sent.extend(self.step(&mut |r, ctx| r.on_persisted(ctx, token)));
            }
            sent
        }

        fn deliver(&mut self, from: NodeId, msg: Msg) -> Vec<(NodeId, Msg)> {
            let mut msg = Some(msg);
            self.step(&mut |r, ctx| r.on_message(ctx, from, msg.take().expect("once")))
        }
    }

    /// `sent` is a single PrepareReply with `vote` in `view`.
    fn one_prepare_reply(sent: &[(NodeId, Msg)], vote: Vote, view: u64) -> bool {
        matches!(sent, [(_, Msg::PrepareReply { vote: v, view: w, .. })] if *v == vote && *w == view)
    }

    fn client() -> NodeId {
        NodeId(100)
    }

    fn prepare(seq: u32, ts: u64, value: &'static [u8]) -> Msg {
        Msg::Prepare {
            txn: txn(seq),
            ts,
            footprint: writes_k(value),
        }
    }

    fn start_view(sent: &[(NodeId, Msg)]) -> Vec<RecordOp> {
        sent.iter()
            .find_map(|(_, m)| match m {
                Msg::StartView { record, .. } => Some(record.clone()),
                _ => None,
            })
            .expect("a StartView went out")
    }

    /// Two conflicting prepares, each tentative at one replica only (IR's
    /// `u`): the leader of the new view re-decides them with
    /// TAPIR-OCC-CHECK in timestamp order, so the earlier one is prepared
    /// and the later one abstains, whichever replica holds which.
    #[test]
    fn conflicting_undecided_prepares_resolve_by_timestamp() {
        for leader_has_early in [true, false] {
            // The leader of view 1 is replica 1.
            let mut leader = One::new(1, Vec::new());
            let mut other = One::new(2, Vec::new());
            let (mine, theirs) = if leader_has_early {
                (prepare(2, 40, b"early"), prepare(1, 50, b"late"))
            } else {
                (prepare(1, 50, b"late"), prepare(2, 40, b"early"))
            };
            for (one, p) in [(&mut leader, mine), (&mut other, theirs)] {
                let sent = one.deliver(client(), p);
                assert!(one_prepare_reply(&sent, Vote::Ok, 0), "{sent:?}");
            }
            let g = leader.group.clone();
            let sent = other.deliver(g[0], Msg::StartViewChange { view: 1 });
            assert!(!other.r.is_normal());
            let (to, dvc) = sent
                .into_iter()
                .find(|(_, m)| matches!(m, Msg::DoViewChange { .. }))
                .expect("its record goes to the leader of view 1");
            assert_eq!(to, g[1]);
            let sent = leader.deliver(g[0], Msg::StartViewChange { view: 1 });
            assert!(!leader.r.is_normal(), "one record (its own) is not f+1");
            assert!(sent
                .iter()
                .all(|(_, m)| !matches!(m, Msg::StartView { .. })));
            let sent = leader.deliver(g[2], dvc);
            let master = start_view(&sent);
            assert!(leader.r.is_normal());
            assert_eq!(
                leader.r.take_report().counters[1],
                ("tapir_merge_redecided", 2)
            );
            assert_eq!(state_of(&master, 2), Some(OpState::Finalized(Vote::Ok)));
            assert_eq!(
                state_of(&master, 1),
                Some(OpState::Finalized(Vote::Abstain))
            );
            other.deliver(
                g[1],
                Msg::StartView {
                    view: 1,
                    record: master.clone(),
                },
            );
            // Both hold the same prepared list now, and answer in view 1
            // with the merged result.
            for one in [&mut leader, &mut other] {
                assert!(one.r.is_normal());
                assert_eq!(one.r.view(), 1);
                assert!(one.r.prepared.contains_key(&txn(2)));
                assert!(!one.r.prepared.contains_key(&txn(1)));
                let sent = one.deliver(client(), prepare(1, 50, b"late"));
                assert!(one_prepare_reply(&sent, Vote::Abstain, 1), "{sent:?}");
                let finalize = Msg::Finalize {
                    txn: txn(1),
                    ts: 50,
                    vote: Vote::Ok,
                    footprint: writes_k(b"late"),
                };
                let sent = one.deliver(client(), finalize);
                assert!(
                    matches!(
                        sent.as_slice(),
                        [(
                            _,
                            Msg::Confirm {
                                vote: Vote::Abstain,
                                view: 1,
                                ..
                            }
                        )]
                    ),
                    "the merged result wins over a late Finalize"
                );
            }
        }
    }

    /// The leader of the next view is down: the view change times out and
    /// moves to the view after, whose leader is up.
    #[test]
    fn a_view_change_whose_leader_is_down_moves_on() {
        let mut c = One::new(2, Vec::new());
        let g = c.group.clone();
        let sent = c.deliver(g[0], Msg::StartViewChange { view: 1 });
        assert!(sent
            .iter()
            .any(|(to, m)| *to == g[1] && matches!(m, Msg::DoViewChange { view: 1, .. })));
        // Replica 1 never answers. Before the timeout: resends only.
        c.now = TapirConfig::default().view_timeout - 1;
        let sent = c.step(&mut |r, ctx| r.on_timer(ctx, VIEW));
        assert_eq!(c.r.view(), 1);
        assert!(sent
            .iter()
            .any(|(to, m)| *to == g[1] && matches!(m, Msg::DoViewChange { view: 1, .. })));
        c.now = TapirConfig::default().view_timeout;
        let sent = c.step(&mut |r, ctx| r.on_timer(ctx, VIEW));
        assert_eq!(c.r.view(), 2, "view 2's leader is replica 2 itself");
        assert!(!c.r.is_normal());
        assert!(sent
            .iter()
            .any(|(to, m)| *to == g[0] && matches!(m, Msg::StartViewChange { view: 2 })));
        // Replica 0's record completes f+1: view 2 starts, and replica 0
        // gets it.
        let sent = c.deliver(
            g[0],
            Msg::DoViewChange {
                view: 2,
                record: Vec::new(),
            },
        );
        assert!(c.r.is_normal());
        assert!(sent
            .iter()
            .any(|(to, m)| *to == g[0] && matches!(m, Msg::StartView { view: 2, .. })));
        // A replica that missed views is pointed at the current one.
        let sent = c.deliver(g[1], Msg::StartViewChange { view: 1 });
        assert!(matches!(
            sent.as_slice(),
            [(_, Msg::StartViewChange { view: 2 })]
        ));
    }

    /// Records issued while a flush runs go to the disk together when it
    /// ends, as one write with one completion (group commit); each reply
    /// still waits for its own record, and a restart replays them all.
    #[test]
    fn records_issued_during_a_flush_share_the_next_one() {
        type Flushes = Vec<(u64, Bytes)>;
        /// Run `f` without completing what it persisted.
        fn raw(
            a: &mut One,
            f: &mut dyn FnMut(&mut TapirReplica, &mut Ctx<Msg>),
        ) -> (Vec<(NodeId, Msg)>, Flushes) {
            let me = a.group[a.r.index];
            let mut effects = Vec::new();
            let mut ctx = Ctx::new(a.now, me, &mut a.rng, &mut effects);
            f(&mut a.r, &mut ctx);
            let mut sent = Vec::new();
            let mut flushes = Vec::new();
            for e in effects {
                match e {
                    Effect::Send { to, msg } => sent.push((to, msg)),
                    Effect::Persist { token, record } => flushes.push((token, record)),
                    _ => {}
                }
            }
            (sent, flushes)
        }
        let mut a = One::new(0, Vec::new());
        let prepare_at = |a: &mut One, seq: u32, key: u64| {
            let msg = Msg::Prepare {
                txn: txn(seq),
                ts: 10 * seq as u64,
                footprint: Footprint {
                    reads: Vec::new(),
                    writes: vec![(Key::new(0, key), Bytes::from_static(b"v"))],
                },
            };
            let mut msg = Some(msg);
            raw(a, &mut |r, ctx| {
                r.on_message(ctx, client(), msg.take().expect("once"))
            })
        };
        let (sent, first) = prepare_at(&mut a, 1, 1);
        assert!(sent.is_empty(), "the vote waits for its record");
        assert_eq!(first.len(), 1, "an idle disk takes the record at once");
        for (seq, key) in [(2, 2), (3, 3)] {
            let (sent, flushes) = prepare_at(&mut a, seq, key);
            assert!(
                sent.is_empty() && flushes.is_empty(),
                "batched behind the flush"
            );
        }
        let (token, record) = first.into_iter().next().expect("one");
        a.disk.push(record);
        let (sent, second) = raw(&mut a, &mut |r, ctx| r.on_persisted(ctx, token));
        assert!(one_prepare_reply(&sent, Vote::Ok, 0), "{sent:?}");
        assert_eq!(second.len(), 1, "both waiting records in one write");
        let (token, record) = second.into_iter().next().expect("one");
        a.disk.push(record);
        let (sent, none) = raw(&mut a, &mut |r, ctx| r.on_persisted(ctx, token));
        assert_eq!(sent.len(), 2);
        assert!(none.is_empty());
        let back = One::new(0, a.disk.clone());
        for seq in 1..=3 {
            assert!(back.r.prepared.contains_key(&txn(seq)), "replayed {seq}");
        }
    }

    /// A replica that restarts replays its record, stays silent, asks for
    /// a view change, and after StartView holds the commit it missed.
    #[test]
    fn a_restarted_replica_recovers_through_a_view_change() {
        let mut a = One::new(0, Vec::new());
        a.deliver(client(), prepare(1, 10, b"x"));
        let disk = a.disk.clone();
        let mut back = One::new(0, disk);
        assert!(!back.r.is_normal(), "recovering");
        assert_eq!(back.r.view(), 1, "asked for the next view");
        assert!(back.r.prepared.contains_key(&txn(1)), "replayed its vote");
        assert!(
            back.deliver(client(), prepare(2, 20, b"y")).is_empty(),
            "no answers while recovering"
        );
        // Meanwhile the others committed txn 1 (an inconsistent operation
        // the crashed replica never saw); their merge hands it over.
        let master = vec![RecordOp {
            txn: txn(1),
            ts: 10,
            footprint: writes_k(b"x"),
            state: OpState::Committed,
        }];
        let g = back.group.clone();
        back.deliver(
            g[1],
            Msg::StartView {
                view: 1,
                record: master,
            },
        );
        assert!(back.r.is_normal());
        assert!(back.r.prepared.is_empty());
        let rec = back.r.store.get(K).expect("installed");
        assert_eq!(rec.value, Bytes::from_static(b"x"));
        assert_eq!(rec.meta.wts, 10);
        let sent = back.deliver(client(), prepare(2, 20, b"y"));
        assert!(one_prepare_reply(&sent, Vote::Ok, 1), "{sent:?}");
        let rep = back.r.take_report();
        assert!(rep.counters.contains(&("tapir_recoveries", 1)));
        // Restarted again, it replays the view and the adopted commit.
        let again = One::new(0, back.disk.clone());
        assert_eq!(again.r.view(), 2);
        assert_eq!(again.r.store.get(K).map(|r| r.meta.wts), Some(10));
    }
}
