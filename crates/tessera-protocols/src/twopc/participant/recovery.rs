//! What a participant logs, and how it comes back after a crash.
//!
//! The log is the engine's (`Effect::Persist`, the `tcp` runtime's
//! write-ahead log); what goes in it is decided here. Presumed abort (the
//! coordinator logs only commit decisions) needs, at a participant:
//!
//! * **Prepared** `{txn, writes}` — durable *before* the yes vote leaves
//!   (2PC's rule: a participant that voted yes must be able to commit after
//!   a crash). Only a participant with buffered writes logs it; a read-only
//!   participant has nothing to redo and its locks past the vote are not
//!   needed (every lock of the transaction was taken before the vote, so
//!   releasing reads then is still two-phase).
//! * **Committed** `{txn}` after a 2PC commit, durable before the Ack: the
//!   coordinator forgets its decision once every participant acknowledged,
//!   so a participant that acknowledged and then lost the commit would find
//!   the transaction prepared and hear "abort" (presumed abort) from a
//!   coordinator that no longer remembers it. The writes are installed at
//!   once (the decision is durable at the coordinator); only the Ack waits.
//! * **Committed** `{txn, writes}` for a one-phase commit: durable before the
//!   writes are installed and the locks released and before the coordinator
//!   hears of it — no one may read a write a crash could take back.
//! * **Aborted** `{txn}` when a prepared transaction is aborted, lazily (if
//!   lost, the coordinator answers the inquiry with abort anyway).
//! * **Snapshot** `{store, prepared, committed}`: the checkpoint (the
//!   runtime asks for it via `Node::snapshot` and truncates the log).
//!
//! Restart: the store is rebuilt from the workload's load (or the snapshot)
//! plus every logged commit in order; transactions prepared but undecided
//! are rebuilt in the Prepared phase with their write sets locked and their
//! coordinator (named in the transaction id) is asked (`Inquire`) by the
//! regular sweep; transactions committed since the snapshot get tombstones,
//! so that a retransmitted commit request is answered "committed" instead of
//! "unknown, aborted".
//!
//! A participant that lost a transaction's state cannot run its later
//! pieces: [`first_contact_ok`] refuses an Execute that reaches an unknown
//! transaction without the pieces every first Execute carries.

use super::{Participant, Phase, TxnState};
use crate::twopc::cc::{ConcurrencyControl, Priority};
use crate::twopc::msg::Msg;
use bytes::{BufMut, Bytes, BytesMut};
use std::collections::BTreeMap;
use tessera_core::codec::{
    decode_store, encode_store, get_key, get_len, get_txn_id, get_u8, get_value, put_bytes,
    put_key, put_txn_id, put_varint, DecodeError,
};
use tessera_core::ids::{Key, NodeId, ShardId, TxnId};
use tessera_core::node::Ctx;
use tessera_core::storage::Store;
use tessera_core::txn::{Access, Procedure, Value};

const PREPARED: u8 = 1;
const COMMITTED: u8 = 2;
const COMMITTED_WITH_WRITES: u8 = 3;
const ABORTED: u8 = 4;
const SNAPSHOT: u8 = 5;

type Writes = Vec<(Key, Value)>;

fn put_writes(out: &mut BytesMut, keys: &[Key], values: &[Value]) {
    put_varint(out, keys.len() as u64);
    for (k, v) in keys.iter().zip(values) {
        put_key(out, *k);
        put_bytes(out, v);
    }
}

fn get_writes(buf: &mut &[u8]) -> Result<Writes, DecodeError> {
    let n = get_len(buf, 10, "logged writes")?;
    let mut w = Vec::with_capacity(n);
    for _ in 0..n {
        let k = get_key(buf)?;
        w.push((k, get_value(buf, "logged value")?));
    }
    Ok(w)
}

fn record(tag: u8, txn: TxnId, f: impl FnOnce(&mut BytesMut)) -> Bytes {
    let mut out = BytesMut::new();
    out.put_u8(tag);
    put_txn_id(&mut out, txn);
    f(&mut out);
    out.freeze()
}

/// A replayed log.
#[derive(Default)]
pub(super) struct Replayed {
    pub prepared: BTreeMap<TxnId, Writes>,
    pub committed: Vec<TxnId>,
}

/// Apply `records` to `store` (the workload's load); what is left
/// prepared, and what committed since the last snapshot.
pub(super) fn replay(store: &mut Store, records: &[Bytes]) -> Result<Replayed, DecodeError> {
    let mut r = Replayed::default();
    for rec in records {
        let buf = &mut &rec[..];
        let tag = get_u8(buf, "log record tag")?;
        let txn = get_txn_id(buf)?;
        match tag {
            PREPARED => {
                r.prepared.insert(txn, get_writes(buf)?);
            }
            COMMITTED => {
                if let Some(ws) = r.prepared.remove(&txn) {
                    for (k, v) in ws {
                        store.install(k, v, txn.version());
                    }
                }
                r.committed.push(txn);
            }
            COMMITTED_WITH_WRITES => {
                for (k, v) in get_writes(buf)? {
                    store.install(k, v, txn.version());
                }
                r.committed.push(txn);
            }
            ABORTED => {
                r.prepared.remove(&txn);
            }
            SNAPSHOT => {
                *store = decode_store(buf)?;
                r = Replayed::default();
                let n = get_len(buf, 9, "snapshot prepared")?;
                for _ in 0..n {
                    let t = get_txn_id(buf)?;
                    r.prepared.insert(t, get_writes(buf)?);
                }
                let n = get_len(buf, 8, "snapshot committed")?;
                for _ in 0..n {
                    r.committed.push(get_txn_id(buf)?);
                }
            }
            t => {
                return Err(DecodeError::UnknownTag {
                    what: "participant log record",
                    tag: t.into(),
                })
            }
        }
    }
    Ok(r)
}

/// May an Execute that reaches `txn` for the first time here start it? It
/// must carry every input-free piece of this shard: the coordinator sends
/// all of them in its first Execute (they are ready at once), so one that
/// lacks some is a later round for a transaction whose state this
/// participant lost in a crash; running it would commit half the
/// transaction's writes here.
pub(super) fn first_contact_ok(proc: &dyn Procedure, shard: ShardId, pieces: &[u16]) -> bool {
    proc.pieces()
        .iter()
        .enumerate()
        .filter(|(_, p)| p.shard == shard && p.inputs.is_empty())
        .all(|(i, _)| pieces.contains(&(i as u16)))
}

/// A reply that waits for its log record.
pub(super) enum Pending {
    Vote { txn: TxnId, to: NodeId },
    OnePhase { txn: TxnId, to: NodeId },
    Ack { txn: TxnId, to: NodeId },
}

impl<C: ConcurrencyControl> Participant<C> {
    /// Rebuild from the log: replay into the loaded store, re-lock and
    /// re-prepare undecided transactions, tombstone recent commits.
    pub(super) fn recover(&mut self, records: &[Bytes]) {
        if records.is_empty() {
            return;
        }
        let r = match replay(&mut self.store, records) {
            Ok(r) => r,
            Err(e) => {
                // The log's records are checksummed; one that does not
                // decode was written by another build. Refuse to guess.
                panic!("participant log does not decode: {e}");
            }
        };
        tracing::info!(
            prepared = r.prepared.len(),
            committed = r.committed.len(),
            "participant recovered"
        );
        for t in r.committed {
            self.ended.insert(t, Phase::Committed, 0);
        }
        for (txn, writes) in r.prepared {
            let prio = Priority { since: 0, txn };
            let mut st = TxnState::new(txn.node(), prio, Phase::Prepared, 0);
            let access: Vec<Access> = writes.iter().map(|(k, _)| Access::all(*k)).collect();
            for (k, v) in writes {
                st.write_keys.push(k);
                st.write_values.push(v);
            }
            // Prepared transactions held these locks before the crash, so
            // no two of them conflict: admission and prepare succeed.
            let _ = self
                .cc
                .admit(&mut self.store, prio, &[], &access, &mut self.wounded);
            self.wounded.clear();
            let ok = self.cc.prepare(&mut self.store, txn, &[], &st.write_keys);
            debug_assert!(ok, "a recovered prepared transaction could not re-lock");
            self.txns.insert(txn, st);
        }
    }

    fn next_token(&mut self) -> u64 {
        self.log_seq += 1;
        self.log_seq
    }

    /// Phase one with the prepare record made durable before a yes vote.
    pub(super) fn on_prepare(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId) {
        if self.pending_for(txn) {
            return; // the vote goes out when the record is durable
        }
        let was_prepared = self
            .txns
            .get(&txn)
            .is_some_and(|s| s.phase == Phase::Prepared);
        let yes = self.prepare(ctx, txn);
        let st = self.txns.get(&txn);
        let log = yes && !was_prepared && st.is_some_and(|s| !s.write_keys.is_empty());
        if !log {
            ctx.send(from, Msg::Vote { txn, yes });
            return;
        }
        let st = st.expect("checked");
        let rec = record(PREPARED, txn, |o| {
            put_writes(o, &st.write_keys, &st.write_values)
        });
        let token = self.next_token();
        self.pending.insert(token, Pending::Vote { txn, to: from });
        ctx.persist(token, rec);
    }

    /// One-phase commit: prepare, make the writes durable, then install,
    /// release and answer.
    pub(super) fn on_commit_one_phase(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId) {
        if self.pending_for(txn) {
            return;
        }
        let committed = self.prepare(ctx, txn);
        let writes = self
            .txns
            .get(&txn)
            .filter(|s| s.phase == Phase::Prepared && !s.write_keys.is_empty());
        match (committed, writes) {
            (true, Some(st)) => {
                let rec = record(COMMITTED_WITH_WRITES, txn, |o| {
                    put_writes(o, &st.write_keys, &st.write_values)
                });
                let token = self.next_token();
                self.pending
                    .insert(token, Pending::OnePhase { txn, to: from });
                ctx.persist(token, rec);
            }
            _ => {
                if committed {
                    self.commit(ctx, txn);
                }
                ctx.send(from, Msg::OnePhaseDone { txn, committed });
            }
        }
    }

    /// Commit (2PC phase two) and acknowledge once the commit record is
    /// durable — at once when nothing was logged for the transaction.
    pub(super) fn on_commit(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId) {
        if self.pending_for(txn) {
            return; // the Ack goes out when the record is durable
        }
        let log = self.logged_prepare(txn);
        self.commit(ctx, txn);
        if log {
            let token = self.next_token();
            self.pending.insert(token, Pending::Ack { txn, to: from });
            ctx.persist(token, record(COMMITTED, txn, |_| {}));
        } else {
            ctx.send(from, Msg::Ack { txn });
        }
    }

    /// Log the abort of a prepared transaction (lazily: presumed abort).
    pub(super) fn log_abort(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        if self.logged_prepare(txn) {
            let token = self.next_token();
            ctx.persist(token, record(ABORTED, txn, |_| {}));
        }
    }

    fn logged_prepare(&self, txn: TxnId) -> bool {
        self.txns
            .get(&txn)
            .is_some_and(|s| s.phase == Phase::Prepared && !s.write_keys.is_empty())
    }

    fn pending_for(&self, txn: TxnId) -> bool {
        self.pending.values().any(|p| match p {
            Pending::Vote { txn: t, .. }
            | Pending::OnePhase { txn: t, .. }
            | Pending::Ack { txn: t, .. } => *t == txn,
        })
    }

    /// A record is durable: send what waited for it.
    pub(super) fn persisted(&mut self, ctx: &mut Ctx<Msg>, token: u64) {
        match self.pending.remove(&token) {
            Some(Pending::Vote { txn, to }) => {
                let yes = self
                    .txns
                    .get(&txn)
                    .is_some_and(|s| s.phase == Phase::Prepared);
                ctx.send(to, Msg::Vote { txn, yes });
            }
            Some(Pending::OnePhase { txn, to }) => {
                self.commit(ctx, txn);
                ctx.send(
                    to,
                    Msg::OnePhaseDone {
                        txn,
                        committed: true,
                    },
                );
                self.resume_granted(ctx);
            }
            Some(Pending::Ack { txn, to }) => ctx.send(to, Msg::Ack { txn }),
            None => {}
        }
    }

    /// The checkpoint: the store, the prepared transactions with their
    /// writes, and the commits still remembered as tombstones.
    ///
    /// The runtime writes the snapshot after every record appended before
    /// it is durable, so a one-phase commit whose record is still pending
    /// here is committed by then: the snapshot shows it installed (the old
    /// log holding its record is deleted with the checkpoint).
    pub(super) fn snapshot_record(&self) -> Bytes {
        let one_phase: Vec<TxnId> = self
            .pending
            .values()
            .filter_map(|p| match p {
                Pending::OnePhase { txn, .. } => Some(*txn),
                _ => None,
            })
            .collect();
        let mut out = BytesMut::new();
        out.put_u8(SNAPSHOT);
        put_txn_id(&mut out, TxnId(0));
        if one_phase.is_empty() {
            encode_store(&self.store, &mut out);
        } else {
            let mut store = self.store.clone();
            for t in &one_phase {
                if let Some(st) = self.txns.get(t) {
                    for (k, v) in st.write_keys.iter().zip(&st.write_values) {
                        store.install(*k, v.clone(), t.version());
                    }
                }
            }
            encode_store(&store, &mut out);
        }
        let prepared: Vec<(&TxnId, &TxnState)> = self
            .txns
            .iter()
            .filter(|(t, s)| {
                s.phase == Phase::Prepared && !s.write_keys.is_empty() && !one_phase.contains(t)
            })
            .collect();
        put_varint(&mut out, prepared.len() as u64);
        for (t, s) in prepared {
            put_txn_id(&mut out, *t);
            put_writes(&mut out, &s.write_keys, &s.write_values);
        }
        let committed: Vec<TxnId> = self
            .ended
            .iter()
            .filter(|(_, p)| **p == Phase::Committed)
            .map(|(t, _)| t)
            .chain(one_phase.iter().copied())
            .collect();
        put_varint(&mut out, committed.len() as u64);
        for t in committed {
            put_txn_id(&mut out, t);
        }
        out.freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(k: u64, v: &'static [u8]) -> (Key, Value) {
        (Key::new(0, k), Value::from_static(v))
    }

    fn writes(ws: &[(Key, Value)]) -> impl FnOnce(&mut BytesMut) + '_ {
        move |o| {
            let (k, v): (Vec<Key>, Vec<Value>) = ws.iter().cloned().unzip();
            put_writes(o, &k, &v)
        }
    }

    #[test]
    fn replay_installs_commits_and_keeps_the_undecided_prepared() {
        let (t1, t2, t3, t4) = (TxnId(1), TxnId(2), TxnId(3), TxnId(4));
        let a = [w(1, b"a")];
        let b = [w(2, b"b")];
        let c = [w(3, b"c")];
        let d = [w(4, b"d")];
        let log = vec![
            record(PREPARED, t1, writes(&a)),
            record(PREPARED, t2, writes(&b)),
            record(COMMITTED_WITH_WRITES, t3, writes(&c)),
            record(COMMITTED, t1, |_| {}),
            record(PREPARED, t4, writes(&d)),
            record(ABORTED, t4, |_| {}),
        ];
        let mut store = Store::new();
        let r = replay(&mut store, &log).unwrap();
        assert_eq!(
            store.get(Key::new(0, 1)).unwrap().meta.version,
            t1.version()
        );
        assert_eq!(
            store.get(Key::new(0, 3)).unwrap().meta.version,
            t3.version()
        );
        assert!(store.get(Key::new(0, 2)).is_none(), "t2 is undecided");
        assert!(store.get(Key::new(0, 4)).is_none(), "t4 aborted");
        assert_eq!(r.prepared.keys().copied().collect::<Vec<_>>(), vec![t2]);
        assert_eq!(r.committed, vec![t3, t1]);
    }

    #[test]
    fn a_snapshot_replaces_what_came_before() {
        let mut s = Store::new();
        s.install(Key::new(0, 9), Value::from_static(b"z"), TxnId(7).version());
        let mut snap = BytesMut::new();
        snap.put_u8(SNAPSHOT);
        put_txn_id(&mut snap, TxnId(0));
        encode_store(&s, &mut snap);
        put_varint(&mut snap, 1);
        put_txn_id(&mut snap, TxnId(8));
        writes(&[w(5, b"p")])(&mut snap);
        put_varint(&mut snap, 0);
        let log = vec![
            record(COMMITTED_WITH_WRITES, TxnId(1), writes(&[w(1, b"x")])),
            snap.freeze(),
        ];
        let mut store = Store::new();
        let r = replay(&mut store, &log).unwrap();
        assert!(store.get(Key::new(0, 1)).is_none());
        assert_eq!(store.len(), 1);
        assert!(r.prepared.contains_key(&TxnId(8)));
        assert!(r.committed.is_empty());
        assert!(replay(&mut Store::new(), &[Bytes::from_static(&[9, 0])]).is_err());
    }
}
