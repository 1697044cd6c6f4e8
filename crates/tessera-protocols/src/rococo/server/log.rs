//! A server's durable log (§3.5): start requests in arrival order, and the
//! points at which deferred pieces ran, so that a restarted server rebuilds
//! its dependency graph and its store by running the same pieces in the
//! same order.
//!
//! Records:
//! * **Start** — a start request's transaction, procedure and the pieces it
//!   added here with their inputs, appended before the `StartOk` leaves
//!   (§3.5: "servers log start requests in arrival order"). Replaying them
//!   in order re-runs the immediate pieces on the same data, so they give
//!   the same outputs, and re-records the same one-hop edges.
//! * **Finish** — a transaction's deferred pieces ran here, with its
//!   component (the members in execution order), appended right after its
//!   `CommitOk` is handed over: the reply waits for the records before the
//!   finish, not for the finish (§3.5 logs commits "off the critical
//!   path"). Replayed at its place among the start requests, it re-runs
//!   the deferred pieces in the committed order. The paper's servers log
//!   the commit decision instead and re-derive the order; the component in
//!   the record is that decision, and its place in the log is the order.
//!
//! Records are durable in the order they were appended (the simulator's
//! disk and the WAL are logs), so a crash loses a suffix: a lost start
//! request was never answered, so no one saw what a crash took back.
//! Replies therefore wait for the last record appended before them
//! ([`Pending`]) — all but the `CommitOk` of the finish appended after
//! it, whose loss the restarted server repairs by running the deferred
//! pieces again before anything else touches their keys
//! ([`super::guard`] has the argument).
//!
//! * **Merged** — the commit of merged pieces (§4.2) here: a start request
//!   that first releases the transaction's validation locks. Appended
//!   before the `OccDecideOk` (and the `StartOk`) leave.
//! * **Prepared** — merged pieces validated here: the attempt and the keys
//!   locked, appended before the yes vote leaves, so that a participant
//!   that voted yes still holds its locks after a crash, as a 2PC
//!   participant's prepare record keeps them (`twopc::wal`), and asks
//!   the leader it names for the decision if none comes.
//! * **Aborted** — an attempt's abort decision reached this participant:
//!   its locks go, and prepares of that attempt are refused; appended
//!   before the acknowledgement leaves (the leader then stops resending
//!   the decision, so a lost release would hold the locks for good).
//! * **Decided** — this server, the leader of a transaction's merged
//!   pieces, decided an attempt: appended before any decision (and the
//!   driver's `OccRetry`) leaves, with every participant's request, so a
//!   restarted leader resends the decision until acknowledged and numbers
//!   its next attempt after it. An undecided attempt is not logged: its
//!   participants' locks are presumed aborted, as in 2PC. The driver
//!   resends that very commit request (it never heard `OccRetry`), so the
//!   restarted leader's attempt of the same number carries the same
//!   outputs as the lost one.
//! * **LeadDone** — every participant acknowledged a commit decision:
//!   replay need not resend it. Nothing waits for this record.
//!
//! Commit requests are not logged: after a restart a transaction whose
//! finish is not in the log is STARTED again, and its coordinator's resent
//! commit request, or the recovery of a silent coordinator's transaction
//! (§3.5, [`super::super::driver`]), which asks every server of the
//! transaction again, brings it to its decision.
//!
//! Ids: records start with [`RECORD_TAG`], and persist tokens carry it in
//! their top byte.
//!
//! **Open: truncation (§3.5).** The log grows without bound: a restart
//! replays every record since the server first started. A checkpoint after
//! which earlier records can be dropped was designed, not built
//! (`rococo19`); what it must hold, found on the way:
//! * *Not "the store plus the unfinished transactions' start records".*
//!   Replaying a start record re-runs its immediate pieces, and a store
//!   taken at the checkpoint already holds their writes: they would run
//!   twice and give other outputs than the ones reported in `StartOk`.
//!   The checkpoint must carry each uncollected local transaction as
//!   `Local` keeps it — pieces with inputs, immediate replies, keys,
//!   written keys, deferred replies once finished (a resent commit request
//!   must get the reported `CommitOk`; answering `Gone` instead leaves its
//!   coordinator in doubt) — and the store is then taken as is.
//! * *The graph and the tracker.* A start request after the checkpoint gets
//!   its one-hop edges from the tracker's accessors of each key; a replay
//!   with fewer accessors than the run had records fewer edges, and the
//!   replayed graph is no longer the one the server exported (the
//!   invariant that a COMMITTING vertex has all its in-edges,
//!   `depgraph/graph.rs`). So the tracker and the undecided local vertices
//!   with their edges and components go in too; learnt vertices of other
//!   servers' transactions can be left out (status requests fetch them
//!   again).
//! * *Collected transactions.* Today a crash loses the `gone` marks, and
//!   the full replay brings the collected transactions' start records
//!   back, so a driver's late request is still recognised as not new. With
//!   truncation it would be taken as new: its immediate pieces would run
//!   again, and the restart guard would take its hold as proof that it was
//!   never COMMITTING ([`super::guard`]'s holds at other servers), which
//!   would then be false. The marks younger than `forget_after` go in.
//! * *Merged pieces* (§4.2): prepared attempts' locks, decided attempts
//!   not yet acknowledged (the Prepared, Aborted, Decided, LeadDone state),
//!   and the finished view read-only requests read.
//! * *The runtimes*: the simulator's disk and the WAL keep every record;
//!   dropping those before a durable checkpoint needs a new effect (or a
//!   record flag) that both understand — outside this crate.
//!
//! So a sound checkpoint is a serialization of nearly the whole server
//! state, with a round-trip test of each part (a restart from a
//! checkpoint gives the same store, graph, tracker and replies as a full
//! replay); a quiescent cut (nothing unfinished, uncollected or locked),
//! which would need only the store and the marks, never comes under load.

use super::super::codec::{get_start, put_start};
use super::super::msg::{Msg, Start};
use crate::depgraph::codec::{get_txns, put_txns};
use bytes::{BufMut, Bytes, BytesMut};
use std::collections::VecDeque;
use std::sync::Arc;
use tessera_core::codec::{
    get_bool, get_key, get_len, get_txn_id, get_u32, get_u8, put_key, put_txn_id, put_varint,
    DecodeCx, DecodeError, EncodeError,
};
use tessera_core::ids::{Key, NodeId, TxnId};
use tessera_core::node::Ctx;

/// First byte of every record of a Rococo server, and top byte of its
/// persist tokens: `'R'`.
pub const RECORD_TAG: u8 = 0x52;
const START: u8 = 1;
const FINISH: u8 = 2;
const MERGED: u8 = 3;
const PREPARED: u8 = 4;
const ABORTED: u8 = 5;
const DECIDED: u8 = 6;
const LEAD_DONE: u8 = 7;

/// One logged event.
#[derive(Debug)]
pub(super) enum Record {
    Start(Start),
    /// The deferred pieces of `txn` ran here; `members` is its component
    /// in execution order (just `txn` when alone).
    Finish {
        txn: TxnId,
        members: Arc<[TxnId]>,
    },
    /// The commit of merged pieces here (§4.2).
    Merged(Start),
    /// Merged pieces of `txn`'s `attempt` validated here; `keys` locked,
    /// each with whether it is written; `leader` asked for the vote (and
    /// is asked for the decision if none comes).
    Prepared {
        txn: TxnId,
        attempt: u32,
        leader: NodeId,
        keys: Vec<(Key, bool)>,
    },
    /// The abort of `txn`'s `attempt` reached this participant.
    Aborted {
        txn: TxnId,
        attempt: u32,
    },
    /// This leader decided `txn`'s `attempt`; `parts` are the
    /// participants with their requests.
    Decided {
        txn: TxnId,
        attempt: u32,
        commit: bool,
        reply_to: NodeId,
        parts: Vec<(NodeId, Start)>,
    },
    /// Every participant acknowledged the commit of `txn`'s merged pieces.
    LeadDone {
        txn: TxnId,
    },
}

impl Record {
    pub fn encode(&self) -> Result<Bytes, EncodeError> {
        let mut out = BytesMut::new();
        out.put_u8(RECORD_TAG);
        match self {
            Record::Start(s) => {
                out.put_u8(START);
                put_start(&mut out, s)?;
            }
            Record::Merged(s) => {
                out.put_u8(MERGED);
                put_start(&mut out, s)?;
            }
            Record::Finish { txn, members } => {
                out.put_u8(FINISH);
                put_txn_id(&mut out, *txn);
                put_txns(&mut out, members);
            }
            Record::Prepared {
                txn,
                attempt,
                leader,
                keys,
            } => {
                out.put_u8(PREPARED);
                put_txn_id(&mut out, *txn);
                out.put_u32_le(*attempt);
                out.put_u32_le(leader.0);
                put_varint(&mut out, keys.len() as u64);
                for &(k, write) in keys {
                    put_key(&mut out, k);
                    out.put_u8(write as u8);
                }
            }
            Record::Aborted { txn, attempt } => {
                out.put_u8(ABORTED);
                put_txn_id(&mut out, *txn);
                out.put_u32_le(*attempt);
            }
            Record::Decided {
                txn,
                attempt,
                commit,
                reply_to,
                parts,
            } => {
                out.put_u8(DECIDED);
                put_txn_id(&mut out, *txn);
                out.put_u32_le(*attempt);
                out.put_u8(*commit as u8);
                out.put_u32_le(reply_to.0);
                put_varint(&mut out, parts.len() as u64);
                for (node, req) in parts {
                    out.put_u32_le(node.0);
                    put_start(&mut out, req)?;
                }
            }
            Record::LeadDone { txn } => {
                out.put_u8(LEAD_DONE);
                put_txn_id(&mut out, *txn);
            }
        }
        Ok(out.freeze())
    }

    pub fn decode(mut buf: &[u8], cx: &DecodeCx) -> Result<Record, DecodeError> {
        let buf = &mut buf;
        let tag = get_u8(buf, "record tag")?;
        if tag != RECORD_TAG {
            return Err(DecodeError::UnknownTag {
                what: "rococo record",
                tag: tag as u64,
            });
        }
        let rec = match get_u8(buf, "record kind")? {
            START => Record::Start(get_start(buf, cx)?),
            MERGED => Record::Merged(get_start(buf, cx)?),
            PREPARED => {
                let txn = get_txn_id(buf)?;
                let attempt = get_u32(buf, "attempt")?;
                let leader = NodeId(get_u32(buf, "leader")?);
                let n = get_len(buf, 2, "keys")?;
                let mut keys = Vec::with_capacity(n);
                for _ in 0..n {
                    let k = get_key(buf)?;
                    keys.push((k, get_bool(buf, "write")?));
                }
                Record::Prepared {
                    txn,
                    attempt,
                    leader,
                    keys,
                }
            }
            ABORTED => Record::Aborted {
                txn: get_txn_id(buf)?,
                attempt: get_u32(buf, "attempt")?,
            },
            DECIDED => {
                let txn = get_txn_id(buf)?;
                let attempt = get_u32(buf, "attempt")?;
                let commit = get_bool(buf, "commit")?;
                let reply_to = NodeId(get_u32(buf, "reply_to")?);
                let n = get_len(buf, 5, "parts")?;
                let mut parts = Vec::with_capacity(n);
                for _ in 0..n {
                    let node = NodeId(get_u32(buf, "part")?);
                    parts.push((node, get_start(buf, cx)?));
                }
                Record::Decided {
                    txn,
                    attempt,
                    commit,
                    reply_to,
                    parts,
                }
            }
            LEAD_DONE => Record::LeadDone {
                txn: get_txn_id(buf)?,
            },
            FINISH => Record::Finish {
                txn: get_txn_id(buf)?,
                members: get_txns(buf, "members")?,
            },
            k => {
                return Err(DecodeError::UnknownTag {
                    what: "rococo record kind",
                    tag: k as u64,
                })
            }
        };
        if !buf.is_empty() {
            return Err(DecodeError::Trailing(buf.len()));
        }
        Ok(rec)
    }
}

/// Records appended and not yet durable, with the replies that wait for
/// them. A reply waits for the last record appended before it, whether it
/// is about that record's transaction or not: what it reports may rest on
/// any earlier record (an immediate piece that read another's write).
#[derive(Default)]
pub(super) struct Pending {
    durable: bool,
    next: u64,
    waiting: VecDeque<(u64, Vec<(NodeId, Msg)>)>,
}

impl Pending {
    /// `durable`: whether records survive a crash here
    /// ([`tessera_core::protocol::ServerEnv::durable`]); when not, nothing
    /// is written and replies leave at once.
    pub fn new(durable: bool) -> Self {
        Pending {
            durable,
            ..Pending::default()
        }
    }

    /// Append `rec` to the log.
    pub fn append(&mut self, ctx: &mut Ctx<Msg>, rec: &Record) {
        if !self.durable {
            return;
        }
        match rec.encode() {
            Ok(bytes) => {
                self.next += 1;
                let token = ((RECORD_TAG as u64) << 56) | self.next;
                ctx.persist(token, bytes);
                self.waiting.push_back((token, Vec::new()));
            }
            Err(e) => {
                // The procedure has no codec: the record cannot be logged,
                // so this server cannot survive a crash with it.
                tracing::error!(%e, "rococo server cannot log a start request");
            }
        }
    }

    /// Send `msg` once every record appended so far is durable.
    pub fn reply(&mut self, ctx: &mut Ctx<Msg>, to: NodeId, msg: Msg) {
        match self.waiting.back_mut() {
            Some((_, replies)) => replies.push((to, msg)),
            None => ctx.send(to, msg),
        }
    }

    /// The record of `token` (and so every earlier one) is durable.
    pub fn persisted(&mut self, ctx: &mut Ctx<Msg>, token: u64) {
        while self.waiting.front().is_some_and(|(t, _)| *t <= token) {
            let (_, replies) = self.waiting.pop_front().expect("checked");
            for (to, msg) in replies {
                ctx.send(to, msg);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every record of merged pieces' 2PC decodes to what was encoded, and
    /// no prefix of it decodes.
    #[test]
    fn merged_piece_records_round_trip() {
        let t = TxnId::new(NodeId(2), 0, 7);
        let (k, l) = (Key::new(1, 3), Key::new(2, u64::MAX - 1));
        let recs = [
            Record::Prepared {
                txn: t,
                attempt: 3,
                leader: NodeId(1),
                keys: vec![(k, true), (l, false)],
            },
            Record::Aborted { txn: t, attempt: 2 },
            Record::LeadDone { txn: t },
        ];
        let cx = DecodeCx::default();
        for rec in recs {
            let bytes = rec.encode().expect("encodable");
            let back = Record::decode(&bytes, &cx).expect("decodes");
            assert_eq!(format!("{back:?}"), format!("{rec:?}"));
            for cut in 0..bytes.len() {
                assert!(Record::decode(&bytes[..cut], &cx).is_err(), "cut at {cut}");
            }
        }
    }

    #[test]
    fn finish_records_round_trip_and_bad_bytes_are_refused() {
        let t = TxnId::new(NodeId(2), 0, 7);
        let u = TxnId::new(NodeId(3), 1, 9);
        let rec = Record::Finish {
            txn: t,
            members: Arc::from([u, t]),
        };
        let bytes = rec.encode().expect("encodable");
        let cx = DecodeCx::default();
        match Record::decode(&bytes, &cx).expect("decodes") {
            Record::Finish { txn, members } => {
                assert_eq!(txn, t);
                assert_eq!(&members[..], &[u, t]);
            }
            other => panic!("{other:?}"),
        }
        for cut in 0..bytes.len() {
            assert!(Record::decode(&bytes[..cut], &cx).is_err(), "cut at {cut}");
        }
        let mut other_tag = bytes.to_vec();
        other_tag[0] = 0x57;
        assert!(Record::decode(&other_tag, &cx).is_err());
    }
}
