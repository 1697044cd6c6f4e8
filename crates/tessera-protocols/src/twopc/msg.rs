//! The messages of 2PC over pieces.

use super::log::LogRecord;
use crate::paxos::PaxosMsg;
use bytes::{BufMut, BytesMut};
use tessera_core::codec::{
    bytes_len, decode_txn, encode_txn, get_bool, get_len, get_txn_id, get_u8, get_value,
    get_varint, put_bytes, put_txn_id, put_varint, varint_len, Codec, DecodeCx, DecodeError,
    EncodeError,
};
use tessera_core::ids::{NodeId, Time, TxnId};
use tessera_core::node::WireSize;
use tessera_core::txn::{AbortReason, Txn, Value};

pub use crate::piece::PieceReply;

/// Coordinator → participant: run these pieces of `txn`.
#[derive(Clone, Debug)]
pub struct Execute {
    pub txn: TxnId,
    /// The transaction's age (wound-wait priority).
    pub since: Time,
    pub proc: Txn,
    /// Every transaction of this coordinator (same node and incarnation)
    /// with a smaller id has finished there, so a participant may forget
    /// their tombstones and ignore their stale messages.
    pub floor: TxnId,
    pub pieces: Vec<u16>,
    /// Outputs of the pieces' input pieces, per piece in order; none for
    /// a piece whose inputs all come from pieces of this shard that the
    /// participant runs (or ran) itself: it takes their outputs.
    pub inputs: Vec<Vec<Value>>,
    /// The transaction's only participant gets its last pieces: commit in
    /// one phase as soon as they ran (the one-shot path: no CommitOnePhase
    /// round; the answer is an ExecuteOk with `committed`).
    pub commit: bool,
}

#[derive(Clone, Debug)]
pub enum Msg {
    Execute(Execute),
    ExecuteOk {
        txn: TxnId,
        results: Vec<PieceReply>,
        /// Answer to a one-shot Execute: the transaction committed here
        /// too (`results` then holds every piece's reply, or none when a
        /// restarted participant lost them).
        committed: bool,
    },
    ExecuteFailed {
        txn: TxnId,
        reason: AbortReason,
    },
    /// Lock the write set (protocols with a separate lock round: OCC).
    Lock {
        txn: TxnId,
    },
    Locked {
        txn: TxnId,
        ok: bool,
    },
    Prepare {
        txn: TxnId,
    },
    Vote {
        txn: TxnId,
        yes: bool,
    },
    /// Prepare and commit at the only participant.
    CommitOnePhase {
        txn: TxnId,
    },
    OnePhaseDone {
        txn: TxnId,
        committed: bool,
    },
    Commit {
        txn: TxnId,
    },
    Abort {
        txn: TxnId,
    },
    Ack {
        txn: TxnId,
    },
    /// Participant → coordinator: what became of `txn`?
    Inquire {
        txn: TxnId,
    },
    /// Replica → coordinator: this replica does not lead its shard; ask
    /// `leader` (if known) about `txn` instead.
    NotLeader {
        txn: TxnId,
        leader: Option<NodeId>,
    },
    /// Replica → coordinator, in answer to a resent request: this replica
    /// leads and holds the request (a piece waits for locks, or the replica
    /// is taking over); the answer will come. Keeps the coordinator from
    /// taking a wait for a failure.
    Busy {
        txn: TxnId,
    },
    /// Between the replicas of a shard whose participant log is a Paxos
    /// group (the layered baselines).
    Paxos(PaxosMsg<LogRecord>),
}

impl From<PaxosMsg<LogRecord>> for Msg {
    fn from(m: PaxosMsg<LogRecord>) -> Self {
        Msg::Paxos(m)
    }
}

impl Msg {
    /// The transaction a 2PC message is about (`None` for replication
    /// messages).
    pub fn txn(&self) -> Option<TxnId> {
        Some(match self {
            Msg::Execute(Execute { txn, .. })
            | Msg::ExecuteOk { txn, .. }
            | Msg::ExecuteFailed { txn, .. }
            | Msg::Lock { txn }
            | Msg::Locked { txn, .. }
            | Msg::Prepare { txn }
            | Msg::Vote { txn, .. }
            | Msg::CommitOnePhase { txn }
            | Msg::OnePhaseDone { txn, .. }
            | Msg::Commit { txn }
            | Msg::Abort { txn }
            | Msg::Ack { txn }
            | Msg::Inquire { txn }
            | Msg::NotLeader { txn, .. }
            | Msg::Busy { txn } => *txn,
            Msg::Paxos(_) => return None,
        })
    }
}

/// Message type tags on the wire. The numbering is part of the protocol
/// version ([`tessera_core::codec`]); append, never renumber.
mod tag {
    pub const EXECUTE: u8 = 0;
    pub const EXECUTE_OK: u8 = 1;
    pub const EXECUTE_FAILED: u8 = 2;
    pub const LOCK: u8 = 3;
    pub const LOCKED: u8 = 4;
    pub const PREPARE: u8 = 5;
    pub const VOTE: u8 = 6;
    pub const COMMIT_ONE_PHASE: u8 = 7;
    pub const ONE_PHASE_DONE: u8 = 8;
    pub const COMMIT: u8 = 9;
    pub const ABORT: u8 = 10;
    pub const ACK: u8 = 11;
    pub const INQUIRE: u8 = 12;
    pub const NOT_LEADER: u8 = 13;
    pub const BUSY: u8 = 14;
    /// Reserved for the replication messages of a Paxos participant log,
    /// which have no wire encoding yet (the layered baselines run on `sim`
    /// and `local`).
    pub const PAXOS: u8 = 15;
}

fn reason_byte(r: AbortReason) -> u8 {
    match r {
        AbortReason::LockConflict => 0,
        AbortReason::Validation => 1,
        AbortReason::Timeout => 2,
        AbortReason::User => 3,
        AbortReason::Stale => 4,
    }
}

fn get_reason(buf: &mut &[u8]) -> Result<AbortReason, DecodeError> {
    Ok(match get_u8(buf, "abort reason")? {
        0 => AbortReason::LockConflict,
        1 => AbortReason::Validation,
        2 => AbortReason::Timeout,
        3 => AbortReason::User,
        4 => AbortReason::Stale,
        t => {
            return Err(DecodeError::UnknownTag {
                what: "abort reason",
                tag: t.into(),
            })
        }
    })
}

impl Msg {
    /// The tag and, for the messages that carry one, the flag byte.
    fn head(&self) -> (u8, Option<u8>) {
        match self {
            Msg::Execute(e) => (tag::EXECUTE, Some(u8::from(e.commit))),
            Msg::ExecuteOk { committed, .. } => (tag::EXECUTE_OK, Some(u8::from(*committed))),
            Msg::ExecuteFailed { reason, .. } => (tag::EXECUTE_FAILED, Some(reason_byte(*reason))),
            Msg::Lock { .. } => (tag::LOCK, None),
            Msg::Locked { ok, .. } => (tag::LOCKED, Some(u8::from(*ok))),
            Msg::Prepare { .. } => (tag::PREPARE, None),
            Msg::Vote { yes, .. } => (tag::VOTE, Some(u8::from(*yes))),
            Msg::CommitOnePhase { .. } => (tag::COMMIT_ONE_PHASE, None),
            Msg::OnePhaseDone { committed, .. } => {
                (tag::ONE_PHASE_DONE, Some(u8::from(*committed)))
            }
            Msg::Commit { .. } => (tag::COMMIT, None),
            Msg::Abort { .. } => (tag::ABORT, None),
            Msg::Ack { .. } => (tag::ACK, None),
            Msg::Inquire { .. } => (tag::INQUIRE, None),
            Msg::NotLeader { leader, .. } => (tag::NOT_LEADER, Some(u8::from(leader.is_some()))),
            Msg::Busy { .. } => (tag::BUSY, None),
            Msg::Paxos(_) => (tag::PAXOS, None),
        }
    }
}

/// Layout: tag (1 byte), transaction id (8 bytes), then per type:
/// * Execute: commit flag byte, since (varint), floor (8), the procedure
///   ([`tessera_core::codec::encode_txn`]), piece count and indices
///   (varints), per piece its inputs (count, then length-prefixed values).
/// * ExecuteOk: committed flag byte, reply count; per reply the piece, reads (key, version),
///   writes (keys), output, user-abort flag.
/// * ExecuteFailed: reason byte. Locked / Vote / OnePhaseDone: flag byte.
/// * NotLeader: flag byte (leader known), then the leader's id (varint).
/// * the rest: nothing more.
///
/// Paxos replication messages have no encoding: encoding one fails.
impl Codec for Msg {
    fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        let Some(txn) = self.txn() else {
            return Err(EncodeError::NoWireFormat("a Paxos replication message"));
        };
        let (t, flag) = self.head();
        out.put_u8(t);
        put_txn_id(out, txn);
        if let Some(f) = flag {
            out.put_u8(f);
        }
        match self {
            Msg::Execute(e) => {
                put_varint(out, e.since);
                put_txn_id(out, e.floor);
                encode_txn(e.proc.as_ref(), out)?;
                put_varint(out, e.pieces.len() as u64);
                for p in &e.pieces {
                    put_varint(out, (*p).into());
                }
                for ins in &e.inputs {
                    put_varint(out, ins.len() as u64);
                    for v in ins {
                        put_bytes(out, v);
                    }
                }
            }
            Msg::ExecuteOk { results, .. } => crate::piece::put_replies(out, results),
            Msg::NotLeader {
                leader: Some(l), ..
            } => put_varint(out, l.0.into()),
            _ => {}
        }
        Ok(())
    }

    fn decode(buf: &mut &[u8], cx: &DecodeCx) -> Result<Self, DecodeError> {
        let t = get_u8(buf, "message tag")?;
        let txn = get_txn_id(buf)?;
        Ok(match t {
            tag::EXECUTE => {
                let commit = get_bool(buf, "commit flag")?;
                Msg::Execute(decode_execute(buf, cx, txn, commit)?)
            }
            tag::EXECUTE_OK => {
                let committed = get_bool(buf, "committed flag")?;
                let results = crate::piece::get_replies(buf)?;
                Msg::ExecuteOk {
                    txn,
                    results,
                    committed,
                }
            }
            tag::EXECUTE_FAILED => Msg::ExecuteFailed {
                txn,
                reason: get_reason(buf)?,
            },
            tag::LOCK => Msg::Lock { txn },
            tag::LOCKED => Msg::Locked {
                txn,
                ok: get_bool(buf, "locked flag")?,
            },
            tag::PREPARE => Msg::Prepare { txn },
            tag::VOTE => Msg::Vote {
                txn,
                yes: get_bool(buf, "vote")?,
            },
            tag::COMMIT_ONE_PHASE => Msg::CommitOnePhase { txn },
            tag::ONE_PHASE_DONE => Msg::OnePhaseDone {
                txn,
                committed: get_bool(buf, "committed flag")?,
            },
            tag::COMMIT => Msg::Commit { txn },
            tag::ABORT => Msg::Abort { txn },
            tag::ACK => Msg::Ack { txn },
            tag::INQUIRE => Msg::Inquire { txn },
            tag::NOT_LEADER => {
                let leader = if get_bool(buf, "leader known flag")? {
                    let id = get_varint(buf, "leader")?;
                    let id =
                        u32::try_from(id).map_err(|_| DecodeError::invalid("leader", "> u32"))?;
                    Some(NodeId(id))
                } else {
                    None
                };
                Msg::NotLeader { txn, leader }
            }
            tag::BUSY => Msg::Busy { txn },
            t => {
                return Err(DecodeError::UnknownTag {
                    what: "2pc message",
                    tag: t.into(),
                })
            }
        })
    }
}

/// Decode an Execute and check that its piece indices and input counts fit
/// the procedure, which the participant indexes with.
fn decode_execute(
    buf: &mut &[u8],
    cx: &DecodeCx,
    txn: TxnId,
    commit: bool,
) -> Result<Execute, DecodeError> {
    let since = get_varint(buf, "since")?;
    let floor = get_txn_id(buf)?;
    let proc = decode_txn(buf, cx)?;
    let specs = proc.pieces();
    let n = get_len(buf, 2, "pieces")?;
    let mut pieces = Vec::with_capacity(n);
    for _ in 0..n {
        let p = get_varint(buf, "piece index")?;
        if p >= specs.len() as u64 {
            return Err(DecodeError::invalid(
                "piece index",
                format!("{p} but the procedure has {} pieces", specs.len()),
            ));
        }
        pieces.push(p as u16);
    }
    let mut inputs = Vec::with_capacity(n);
    for &p in &pieces {
        let k = get_len(buf, 1, "piece inputs")?;
        if k != 0 && k != specs[p as usize].inputs.len() {
            return Err(DecodeError::invalid(
                "piece inputs",
                format!(
                    "{k} inputs for piece {p}, which takes {}",
                    specs[p as usize].inputs.len()
                ),
            ));
        }
        let mut ins = Vec::with_capacity(k);
        for _ in 0..k {
            ins.push(get_value(buf, "piece input")?);
        }
        inputs.push(ins);
    }
    Ok(Execute {
        txn,
        since,
        proc,
        floor,
        pieces,
        inputs,
        commit,
    })
}

/// The encoded size, computed without encoding: exact for every message
/// but Execute, whose procedure parameters are estimated (8 bytes per key
/// read or written) rather than encoded on the `local` runtime's hot path.
/// The `tcp` runtime counts the bytes it really writes.
impl WireSize for Msg {
    fn wire_size(&self) -> usize {
        if let Msg::Paxos(m) = self {
            return 1 + m.wire_size();
        }
        let (_, flag) = self.head();
        1 + 8
            + usize::from(flag.is_some())
            + match self {
                Msg::Execute(Execute {
                    since,
                    proc,
                    pieces,
                    inputs,
                    ..
                }) => {
                    let name = proc.name();
                    let params: usize = pieces
                        .iter()
                        .map(|&p| {
                            let s = &proc.pieces()[p as usize];
                            8 * (s.reads.len() + s.writes.len())
                        })
                        .sum();
                    varint_len(*since)
                        + 8
                        + bytes_len(name.as_bytes())
                        + varint_len(params as u64)
                        + params
                        + varint_len(pieces.len() as u64)
                        + pieces
                            .iter()
                            .map(|p| varint_len((*p).into()))
                            .sum::<usize>()
                        + inputs
                            .iter()
                            .map(|v| {
                                varint_len(v.len() as u64)
                                    + v.iter().map(|x| bytes_len(x)).sum::<usize>()
                            })
                            .sum::<usize>()
                }
                Msg::ExecuteOk { results, .. } => crate::piece::replies_len(results),
                Msg::NotLeader { leader, .. } => leader.map_or(0, |l| varint_len(l.0.into())),
                _ => 0,
            }
    }
}

#[cfg(test)]
mod tests;
