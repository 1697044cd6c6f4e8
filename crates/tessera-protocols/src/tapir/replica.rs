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

use super::msg::{Footprint, Msg, Vote};
use crate::paxos::codec::{get_bytes, get_u32, get_u64, get_u8, put_bytes, put_u32, put_u64};
use crate::paxos::codec::{put_u8, DecodeError};
use crate::tombstones::Tombstones;
use crate::twopc::log::{get_key, put_key};
use bytes::Bytes;
use std::collections::VecDeque;
use tessera_core::ids::{Key, NodeId, Time, TimerId, TxnId, Version};
use tessera_core::node::{Ctx, Node};
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
    fn encode(&self) -> Bytes {
        let mut out = vec![TAG];
        match self {
            Record::Vote {
                txn,
                ts,
                vote,
                finalized,
                footprint,
            } => {
                put_u8(&mut out, 1);
                put_u64(&mut out, txn.0);
                put_u64(&mut out, *ts);
                put_vote(&mut out, *vote);
                put_u8(&mut out, *finalized as u8);
                put_footprint(&mut out, footprint);
            }
            Record::Commit { txn, ts, footprint } => {
                put_u8(&mut out, 2);
                put_u64(&mut out, txn.0);
                put_u64(&mut out, *ts);
                put_footprint(&mut out, footprint);
            }
            Record::Abort { txn } => {
                put_u8(&mut out, 3);
                put_u64(&mut out, txn.0);
            }
        }
        Bytes::from(out)
    }

    fn decode(mut input: &[u8]) -> Result<Option<Self>, DecodeError> {
        let r = &mut input;
        if get_u8(r)? != TAG {
            return Ok(None);
        }
        let kind = get_u8(r)?;
        let txn = TxnId(get_u64(r)?);
        Ok(Some(match kind {
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
            tag => {
                return Err(DecodeError::Tag {
                    what: "tapir record",
                    tag,
                })
            }
        }))
    }
}

/// The server role of [`super::Tapir`].
pub struct TapirReplica {
    store: Store,
    /// Transactions prepared here (TAPIR's prepared list).
    prepared: FastMap<TxnId, Footprint>,
    /// Prepared reads and writes per key: (timestamp, transaction).
    prepared_reads: FastMap<Key, Vec<(u64, TxnId)>>,
    prepared_writes: FastMap<Key, Vec<(u64, TxnId)>>,
    /// Votes given (IR's record of consensus operations), to answer
    /// duplicates the same way; dropped when the transaction ends.
    votes: FastMap<TxnId, Vote>,
    /// Committed (true) or aborted transactions.
    ended: Tombstones<bool>,
    /// Persist tokens issued and durable; replies waiting for durability.
    issued: u64,
    durable: u64,
    waiting: VecDeque<(u64, NodeId, Msg)>,
}

const SWEEP: TimerId = TimerId(1);
const SWEEP_EVERY: Time = 100 * tessera_core::ids::MS;

impl TapirReplica {
    pub fn new(keep: Time, env: ServerEnv) -> Self {
        let mut r = TapirReplica {
            store: env.store,
            prepared: tessera_core::fast_map(),
            prepared_reads: tessera_core::fast_map(),
            prepared_writes: tessera_core::fast_map(),
            votes: tessera_core::fast_map(),
            ended: Tombstones::new(keep),
            issued: 0,
            durable: 0,
            waiting: VecDeque::new(),
        };
        for rec in &env.recovered {
            match Record::decode(rec) {
                Ok(Some(rec)) => r.apply(rec, 0),
                Ok(None) => {}
                Err(e) => tracing::error!(error = %e, "tapir: unreadable record"),
            }
        }
        r
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

    fn add_prepared(&mut self, txn: TxnId, ts: u64, footprint: Footprint) {
        if self.prepared.contains_key(&txn) {
            return;
        }
        for (k, _) in &footprint.reads {
            self.prepared_reads.entry(*k).or_default().push((ts, txn));
        }
        for (k, _) in &footprint.writes {
            self.prepared_writes.entry(*k).or_default().push((ts, txn));
        }
        self.prepared.insert(txn, footprint);
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
                footprint,
                ..
            } => {
                self.votes.insert(txn, vote);
                if vote == Vote::Ok {
                    self.add_prepared(txn, ts, footprint);
                } else {
                    self.remove_prepared(txn);
                }
            }
            Record::Commit { txn, ts, footprint } => {
                self.remove_prepared(txn);
                self.votes.remove(&txn);
                for (k, v) in footprint.writes {
                    let newer = self.store.get(k).is_none_or(|r| ts > r.meta.wts);
                    if newer {
                        self.store.install(k, v, txn.version());
                        self.store.get_mut(k).expect("installed").meta.wts = ts;
                    }
                }
                for (k, _) in footprint.reads {
                    if let Some(r) = self.store.get_mut(k) {
                        r.meta.rts = r.meta.rts.max(ts);
                    }
                }
                self.ended.insert(txn, true, now);
            }
            Record::Abort { txn } => {
                self.remove_prepared(txn);
                self.votes.remove(&txn);
                self.ended.insert(txn, false, now);
            }
        }
    }

    /// Make `rec` durable, apply it, and send `reply` to `to` once it is.
    fn log(&mut self, ctx: &mut Ctx<Msg>, rec: Record, to: NodeId, reply: Msg) {
        self.issued += 1;
        ctx.persist(self.issued, rec.encode());
        self.apply(rec, ctx.now());
        self.waiting.push_back((self.issued, to, reply));
    }

    fn on_prepare(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId, ts: u64, f: Footprint) {
        if let Some(&committed) = self.ended.get(txn) {
            let vote = if committed { Vote::Ok } else { Vote::Abort };
            self.after_durable(ctx, from, Msg::PrepareReply { txn, vote });
            return;
        }
        if let Some(&vote) = self.votes.get(&txn) {
            // A duplicate: the same answer, once it is durable.
            self.after_durable(ctx, from, Msg::PrepareReply { txn, vote });
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
        self.log(ctx, rec, from, Msg::PrepareReply { txn, vote });
    }

    fn on_finalize(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        txn: TxnId,
        ts: u64,
        vote: Vote,
        f: Footprint,
    ) {
        if self.ended.contains(txn) {
            self.after_durable(ctx, from, Msg::Confirm { txn });
            return;
        }
        let rec = Record::Vote {
            txn,
            ts,
            vote,
            finalized: true,
            footprint: f,
        };
        self.log(ctx, rec, from, Msg::Confirm { txn });
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
}

impl Node<Msg> for TapirReplica {
    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        ctx.set_timer(SWEEP_EVERY, SWEEP);
    }

    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
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
                if self.ended.get(txn) == Some(&true) {
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
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<Msg>, id: TimerId) {
        if id == SWEEP {
            self.ended.sweep(ctx.now());
            ctx.set_timer(SWEEP_EVERY, SWEEP);
        }
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<Msg>, token: u64) {
        self.durable = self.durable.max(token);
        while let Some((t, _, _)) = self.waiting.front() {
            if *t > self.durable {
                break;
            }
            let (_, to, msg) = self.waiting.pop_front().expect("peeked");
            ctx.send(to, msg);
        }
    }

    fn store(&self) -> Option<&Store> {
        Some(&self.store)
    }
}
