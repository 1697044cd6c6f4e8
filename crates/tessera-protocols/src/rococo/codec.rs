//! The wire codec of Rococo's messages ([`Msg`]: §3.2 Figs. 5–7, §4.1's
//! read-only rounds, §4.2's merged pieces and the messages this crate adds
//! for faults, §3.5), so that Rococo runs on `--runtime tcp`.
//!
//! A start request is the same bytes on the wire and in a server's log
//! (`server::log`'s Start, Merged and Decided records use [`put_start`]),
//! procedures go through the workloads' codec
//! ([`tessera_core::codec::encode_txn`], as Janus's and 2PC's do), piece
//! replies through [`crate::piece`], and dependency graphs, id lists and
//! shard checks through [`crate::depgraph::codec`], shared with Janus.
//!
//! Layout: a tag byte ([`tag`], append-only), then per message:
//! * Start, OccExecute: a start request — txn id (8 bytes), the procedure,
//!   piece count, then per piece its index (varint) and its inputs (count,
//!   then length-prefixed values).
//! * StartOk: txn id, the immediate pieces' replies, the received pieces
//!   (count, varint each), the dependency vertices.
//! * Commit, InquireOk: txn id, vertices.
//! * CommitOk, OccExecuteOk: txn id, piece replies.
//! * Committed, Gone, Inquire, NotHere, OccRetry: txn id.
//! * RoRead: the request tag (varint), then a start request.
//!   RoReadOk: txn id, request tag, piece replies, then the column
//!   versions (count of lists, then per list a count and varints).
//! * OccCommit: a start request, then one output per piece (count, then
//!   length-prefixed values). OccPrepare: attempt (varint), then as
//!   OccCommit.
//! * OccVote: txn id, attempt, the vote byte.
//! * OccDecide: attempt, the commit byte, the node to reply to (varint),
//!   a start request.
//! * OccDecideOk, OccAsk, OccAbort: txn id, attempt.
//! * AskHeld, Held: txn id, the asker's nonce (8 bytes).
//!
//! Decoding checks what a server later indexes with: piece indices are
//! pieces of the procedure and each piece gets exactly the inputs it
//! declares (a workload's piece function reads them by position), merged
//! pieces carry one output per piece, a vertex names one or more shards of
//! the workload, numbers fit their types. Procedures are checked by their
//! workload.

use super::msg::{Msg, Start};
use crate::depgraph::codec::{get_vertices, put_vertices};
use crate::piece::{get_replies, put_replies};
use bytes::{BufMut, BytesMut};
use tessera_core::codec::{
    decode_txn, encode_txn, get_bool, get_len, get_txn_id, get_u64, get_u8, get_value, get_varint,
    put_bytes, put_txn_id, put_varint, Codec, DecodeCx, DecodeError, EncodeError,
};
use tessera_core::ids::{NodeId, TxnId, Version};
use tessera_core::txn::{Txn, Value};

/// Message type tags on the wire; append, never renumber.
pub(super) mod tag {
    pub const START: u8 = 0;
    pub const START_OK: u8 = 1;
    pub const COMMIT: u8 = 2;
    pub const COMMIT_OK: u8 = 3;
    pub const COMMITTED: u8 = 4;
    pub const GONE: u8 = 5;
    pub const INQUIRE: u8 = 6;
    pub const INQUIRE_OK: u8 = 7;
    pub const NOT_HERE: u8 = 8;
    pub const RO_READ: u8 = 9;
    pub const RO_READ_OK: u8 = 10;
    pub const OCC_EXECUTE: u8 = 11;
    pub const OCC_EXECUTE_OK: u8 = 12;
    pub const OCC_COMMIT: u8 = 13;
    pub const OCC_PREPARE: u8 = 14;
    pub const OCC_VOTE: u8 = 15;
    pub const OCC_DECIDE: u8 = 16;
    pub const OCC_DECIDE_OK: u8 = 17;
    pub const OCC_RETRY: u8 = 18;
    pub const OCC_ASK: u8 = 19;
    pub const OCC_ABORT: u8 = 20;
    pub const ASK_HELD: u8 = 21;
    pub const HELD: u8 = 22;
}

/// A start request (see the module docs); also a log record's body.
pub(super) fn put_start(out: &mut BytesMut, s: &Start) -> Result<(), EncodeError> {
    put_request(out, s.txn, &s.proc, &s.pieces, &s.inputs)
}

/// The fields of a start request, which a read-only request shares.
fn put_request(
    out: &mut BytesMut,
    txn: TxnId,
    proc: &Txn,
    pieces: &[u16],
    inputs: &[Vec<Value>],
) -> Result<(), EncodeError> {
    debug_assert_eq!(pieces.len(), inputs.len(), "one input list per piece");
    put_txn_id(out, txn);
    encode_txn(proc.as_ref(), out)?;
    put_varint(out, pieces.len() as u64);
    for (&p, ins) in pieces.iter().zip(inputs) {
        put_varint(out, u64::from(p));
        put_values(out, ins);
    }
    Ok(())
}

/// Read what [`put_start`] wrote: piece indices must be the procedure's
/// and each piece gets exactly the inputs it declares, or none when a
/// read-only transaction's chain feeds it at the server (`driver`).
pub(super) fn get_start(buf: &mut &[u8], cx: &DecodeCx) -> Result<Start, DecodeError> {
    let txn = get_txn_id(buf)?;
    let proc = decode_txn(buf, cx)?;
    let specs = proc.pieces();
    let n = get_len(buf, 2, "pieces")?;
    let mut pieces = Vec::with_capacity(n);
    let mut inputs = Vec::with_capacity(n);
    for _ in 0..n {
        let p = get_varint(buf, "piece index")?;
        let Some(spec) = usize::try_from(p).ok().and_then(|i| specs.get(i)) else {
            return Err(DecodeError::invalid(
                "piece index",
                format!("{p} but the procedure has {} pieces", specs.len()),
            ));
        };
        let k = get_len(buf, 1, "piece inputs")?;
        let chained = k == 0 && proc.read_only();
        if k != spec.inputs.len() && !chained {
            return Err(DecodeError::invalid(
                "piece inputs",
                format!(
                    "{k} inputs for piece {p}, which takes {}",
                    spec.inputs.len()
                ),
            ));
        }
        let mut v = Vec::with_capacity(k);
        for _ in 0..k {
            v.push(get_value(buf, "piece input")?);
        }
        pieces.push(p as u16);
        inputs.push(v);
    }
    Ok(Start {
        txn,
        proc,
        pieces,
        inputs,
    })
}

fn put_values(out: &mut BytesMut, vs: &[Value]) {
    put_varint(out, vs.len() as u64);
    for v in vs {
        put_bytes(out, v);
    }
}

/// Merged pieces' outputs: one per piece of `req`.
fn get_outputs(buf: &mut &[u8], req: &Start) -> Result<Vec<Value>, DecodeError> {
    let n = get_len(buf, 1, "merged outputs")?;
    if n != req.pieces.len() {
        return Err(DecodeError::invalid(
            "merged outputs",
            format!("{n} outputs for {} pieces", req.pieces.len()),
        ));
    }
    (0..n).map(|_| get_value(buf, "merged output")).collect()
}

/// The column versions of a read-only reply (see the layout above).
fn get_seen(buf: &mut &[u8]) -> Result<Vec<Vec<Version>>, DecodeError> {
    let n = get_len(buf, 1, "column version lists")?;
    let mut seen = Vec::with_capacity(n);
    for _ in 0..n {
        let k = get_len(buf, 1, "column versions")?;
        let mut s = Vec::with_capacity(k);
        for _ in 0..k {
            s.push(Version(get_varint(buf, "column version")?));
        }
        seen.push(s);
    }
    Ok(seen)
}

fn get_u32v(buf: &mut &[u8], what: &'static str) -> Result<u32, DecodeError> {
    u32::try_from(get_varint(buf, what)?).map_err(|_| DecodeError::invalid(what, "> u32"))
}

/// A transaction id and an attempt of its merged pieces' 2PC.
fn get_attempt(buf: &mut &[u8]) -> Result<(TxnId, u32), DecodeError> {
    Ok((get_txn_id(buf)?, get_u32v(buf, "attempt")?))
}

fn get_pieces(buf: &mut &[u8]) -> Result<Vec<u16>, DecodeError> {
    let n = get_len(buf, 1, "received pieces")?;
    (0..n)
        .map(|_| {
            u16::try_from(get_varint(buf, "piece index")?)
                .map_err(|_| DecodeError::invalid("piece index", "> u16"))
        })
        .collect()
}

impl Msg {
    fn tag(&self) -> u8 {
        match self {
            Msg::Start(_) => tag::START,
            Msg::StartOk { .. } => tag::START_OK,
            Msg::Commit { .. } => tag::COMMIT,
            Msg::CommitOk { .. } => tag::COMMIT_OK,
            Msg::Committed { .. } => tag::COMMITTED,
            Msg::Gone { .. } => tag::GONE,
            Msg::Inquire { .. } => tag::INQUIRE,
            Msg::InquireOk { .. } => tag::INQUIRE_OK,
            Msg::NotHere { .. } => tag::NOT_HERE,
            Msg::RoRead { .. } => tag::RO_READ,
            Msg::RoReadOk { .. } => tag::RO_READ_OK,
            Msg::OccExecute(_) => tag::OCC_EXECUTE,
            Msg::OccExecuteOk { .. } => tag::OCC_EXECUTE_OK,
            Msg::OccCommit { .. } => tag::OCC_COMMIT,
            Msg::OccPrepare { .. } => tag::OCC_PREPARE,
            Msg::OccVote { .. } => tag::OCC_VOTE,
            Msg::OccDecide { .. } => tag::OCC_DECIDE,
            Msg::OccDecideOk { .. } => tag::OCC_DECIDE_OK,
            Msg::OccRetry { .. } => tag::OCC_RETRY,
            Msg::OccAsk { .. } => tag::OCC_ASK,
            Msg::OccAbort { .. } => tag::OCC_ABORT,
            Msg::AskHeld { .. } => tag::ASK_HELD,
            Msg::Held { .. } => tag::HELD,
        }
    }
}

/// See the module docs for the layout.
impl Codec for Msg {
    fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        out.put_u8(self.tag());
        match self {
            Msg::Start(s) | Msg::OccExecute(s) => put_start(out, s)?,
            Msg::StartOk {
                txn,
                immediate,
                received,
                deps,
            } => {
                put_txn_id(out, *txn);
                put_replies(out, immediate);
                put_varint(out, received.len() as u64);
                for &p in received {
                    put_varint(out, u64::from(p));
                }
                put_vertices(out, deps);
            }
            Msg::Commit { txn, deps } => {
                put_txn_id(out, *txn);
                put_vertices(out, deps);
            }
            Msg::InquireOk { txn, deps } => {
                put_txn_id(out, *txn);
                put_vertices(out, deps);
            }
            Msg::CommitOk { txn, deferred: r } | Msg::OccExecuteOk { txn, results: r } => {
                put_txn_id(out, *txn);
                put_replies(out, r);
            }
            Msg::Committed { txn }
            | Msg::Gone { txn }
            | Msg::Inquire { txn }
            | Msg::NotHere { txn }
            | Msg::OccRetry { txn } => put_txn_id(out, *txn),
            Msg::RoRead {
                txn,
                tag,
                proc,
                pieces,
                inputs,
            } => {
                put_varint(out, u64::from(*tag));
                put_request(out, *txn, proc, pieces, inputs)?;
            }
            Msg::RoReadOk {
                txn,
                tag,
                results,
                seen,
            } => {
                put_txn_id(out, *txn);
                put_varint(out, u64::from(*tag));
                put_replies(out, results);
                put_varint(out, seen.len() as u64);
                for s in seen {
                    put_varint(out, s.len() as u64);
                    for v in s {
                        put_varint(out, v.0);
                    }
                }
            }
            Msg::OccCommit { req, outputs } => {
                put_start(out, req)?;
                put_values(out, outputs);
            }
            Msg::OccPrepare {
                attempt,
                req,
                outputs,
            } => {
                put_varint(out, u64::from(*attempt));
                put_start(out, req)?;
                put_values(out, outputs);
            }
            Msg::OccVote { txn, attempt, ok } => {
                put_txn_id(out, *txn);
                put_varint(out, u64::from(*attempt));
                out.put_u8(u8::from(*ok));
            }
            Msg::OccDecide {
                attempt,
                commit,
                reply_to,
                req,
            } => {
                put_varint(out, u64::from(*attempt));
                out.put_u8(u8::from(*commit));
                put_varint(out, u64::from(reply_to.0));
                put_start(out, req)?;
            }
            Msg::OccDecideOk { txn, attempt }
            | Msg::OccAsk { txn, attempt }
            | Msg::OccAbort { txn, attempt } => {
                put_txn_id(out, *txn);
                put_varint(out, u64::from(*attempt));
            }
            Msg::AskHeld { txn, nonce } | Msg::Held { txn, nonce } => {
                put_txn_id(out, *txn);
                out.put_u64_le(*nonce);
            }
        }
        Ok(())
    }

    fn decode(buf: &mut &[u8], cx: &DecodeCx) -> Result<Self, DecodeError> {
        let t = get_u8(buf, "message tag")?;
        Ok(match t {
            tag::START => Msg::Start(get_start(buf, cx)?),
            tag::START_OK => Msg::StartOk {
                txn: get_txn_id(buf)?,
                immediate: get_replies(buf)?,
                received: get_pieces(buf)?,
                deps: get_vertices(buf, cx)?,
            },
            tag::COMMIT => Msg::Commit {
                txn: get_txn_id(buf)?,
                deps: get_vertices(buf, cx)?.into(),
            },
            tag::COMMIT_OK => Msg::CommitOk {
                txn: get_txn_id(buf)?,
                deferred: get_replies(buf)?,
            },
            tag::COMMITTED => Msg::Committed {
                txn: get_txn_id(buf)?,
            },
            tag::GONE => Msg::Gone {
                txn: get_txn_id(buf)?,
            },
            tag::INQUIRE => Msg::Inquire {
                txn: get_txn_id(buf)?,
            },
            tag::INQUIRE_OK => Msg::InquireOk {
                txn: get_txn_id(buf)?,
                deps: get_vertices(buf, cx)?,
            },
            tag::NOT_HERE => Msg::NotHere {
                txn: get_txn_id(buf)?,
            },
            tag::RO_READ => {
                let tag = get_u32v(buf, "read-only request tag")?;
                let Start {
                    txn,
                    proc,
                    pieces,
                    inputs,
                } = get_start(buf, cx)?;
                Msg::RoRead {
                    txn,
                    tag,
                    proc,
                    pieces,
                    inputs,
                }
            }
            tag::RO_READ_OK => Msg::RoReadOk {
                txn: get_txn_id(buf)?,
                tag: get_u32v(buf, "read-only request tag")?,
                results: get_replies(buf)?,
                seen: get_seen(buf)?,
            },
            tag::OCC_EXECUTE => Msg::OccExecute(get_start(buf, cx)?),
            tag::OCC_EXECUTE_OK => Msg::OccExecuteOk {
                txn: get_txn_id(buf)?,
                results: get_replies(buf)?,
            },
            tag::OCC_COMMIT => {
                let req = get_start(buf, cx)?;
                let outputs = get_outputs(buf, &req)?;
                Msg::OccCommit { req, outputs }
            }
            tag::OCC_PREPARE => {
                let attempt = get_u32v(buf, "attempt")?;
                let req = get_start(buf, cx)?;
                let outputs = get_outputs(buf, &req)?;
                Msg::OccPrepare {
                    attempt,
                    req,
                    outputs,
                }
            }
            tag::OCC_VOTE => Msg::OccVote {
                txn: get_txn_id(buf)?,
                attempt: get_u32v(buf, "attempt")?,
                ok: get_bool(buf, "vote")?,
            },
            tag::OCC_DECIDE => Msg::OccDecide {
                attempt: get_u32v(buf, "attempt")?,
                commit: get_bool(buf, "commit flag")?,
                reply_to: NodeId(get_u32v(buf, "reply-to node")?),
                req: get_start(buf, cx)?,
            },
            tag::OCC_DECIDE_OK => {
                let (txn, attempt) = get_attempt(buf)?;
                Msg::OccDecideOk { txn, attempt }
            }
            tag::OCC_RETRY => Msg::OccRetry {
                txn: get_txn_id(buf)?,
            },
            tag::OCC_ASK => {
                let (txn, attempt) = get_attempt(buf)?;
                Msg::OccAsk { txn, attempt }
            }
            tag::OCC_ABORT => {
                let (txn, attempt) = get_attempt(buf)?;
                Msg::OccAbort { txn, attempt }
            }
            tag::ASK_HELD => Msg::AskHeld {
                txn: get_txn_id(buf)?,
                nonce: get_u64(buf, "nonce")?,
            },
            tag::HELD => Msg::Held {
                txn: get_txn_id(buf)?,
                nonce: get_u64(buf, "nonce")?,
            },
            t => {
                return Err(DecodeError::UnknownTag {
                    what: "Rococo message",
                    tag: t.into(),
                })
            }
        })
    }
}

#[cfg(test)]
mod tests;
