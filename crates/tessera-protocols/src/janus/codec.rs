//! The wire codec of Janus's messages ([`Msg`], §3.1 Algorithms 1–5 and
//! the messages this crate adds), so that Janus runs on `--runtime tcp`.
//!
//! Dependencies, components and piece results are written by the same
//! encoders as the replicas' log records ([`super::wal`]): a dependency
//! list in a PreAccept-OK and in a PreAccepted record are the same bytes.
//!
//! Layout: a tag byte ([`tag`]), then per message:
//! * PreAccept: txn id (8 bytes), ballot (varint), the procedure
//!   ([`tessera_core::codec::encode_txn`]), a presence byte and the floor's
//!   id, a presence byte and the done floor's id.
//! * PreAcceptOk: txn id, ballot, dependencies (count; per dependency its
//!   id and its shards as varints).
//! * PreAcceptNotOk, AcceptOk, AcceptNotOk, Prepare, PrepareNotOk: txn id,
//!   ballot.
//! * Accept: txn id, ballot, abandon flag, dependencies, then a presence
//!   byte and the procedure.
//! * Commit, InquireOk: txn id, abandon flag, dependencies, procedure.
//! * CommitOk: txn id, abandon flag, piece results (as in an Executed
//!   record).
//! * PrepareOk: txn id, ballot, a presence byte, then: a presence byte and
//!   the accepted ballot, the abandon flag, dependencies.
//! * Inquire: txn id, the its-shard flag. CatchUp: nothing.
//! * Committed: the reason byte ([`Announce`]), then the ids (count, 8
//!   bytes each). Executed: the echo flag, then the ids. Settled: the ask
//!   flag, then the ids.
//! * Done: the floor's id.
//! * Forgotten: txn id, abandon flag, the component (presence byte, ids).
//! * FetchOutput: txn id, piece (varint). Output: txn id, piece, a
//!   presence byte and the length-prefixed output.
//!
//! Decoding checks what a server later indexes with: a dependency's
//! shards are shards of the workload (a server looks their replicas up in
//! the topology to inquire), piece numbers fit a `u16`, and procedures are
//! checked by their workload.

use super::msg::{Announce, CommitInfo, Dep, Msg, Prepared};
use super::wal::{
    get_deps, get_ids, get_replies, get_txns, put_deps, put_ids, put_replies, put_txns,
};
use crate::depgraph::codec::check_shards;
use bytes::{BufMut, BytesMut};
use std::sync::Arc;
use tessera_core::codec::{
    decode_txn, encode_txn, get_bool, get_txn_id, get_u8, get_value, get_varint, put_bytes,
    put_txn_id, put_varint, Codec, DecodeCx, DecodeError, EncodeError,
};
use tessera_core::ids::TxnId;

/// Message type tags on the wire; append, never renumber.
mod tag {
    pub const PRE_ACCEPT: u8 = 0;
    pub const PRE_ACCEPT_OK: u8 = 1;
    pub const PRE_ACCEPT_NOT_OK: u8 = 2;
    pub const ACCEPT: u8 = 3;
    pub const ACCEPT_OK: u8 = 4;
    pub const ACCEPT_NOT_OK: u8 = 5;
    pub const COMMIT: u8 = 6;
    pub const COMMIT_OK: u8 = 7;
    pub const PREPARE: u8 = 8;
    pub const PREPARE_OK: u8 = 9;
    pub const PREPARE_NOT_OK: u8 = 10;
    pub const INQUIRE: u8 = 11;
    pub const INQUIRE_OK: u8 = 12;
    pub const COMMITTED: u8 = 13;
    pub const CATCH_UP: u8 = 14;
    pub const EXECUTED: u8 = 15;
    pub const FORGOTTEN: u8 = 16;
    pub const FETCH_OUTPUT: u8 = 17;
    pub const OUTPUT: u8 = 18;
    pub const SETTLED: u8 = 19;
    pub const DONE: u8 = 20;
}

fn announce_byte(a: Announce) -> u8 {
    match a {
        Announce::Lately => 0,
        Announce::Lagging => 1,
        Announce::CatchUp => 2,
    }
}

fn get_announce(buf: &mut &[u8]) -> Result<Announce, DecodeError> {
    Ok(match get_u8(buf, "announcement reason")? {
        0 => Announce::Lately,
        1 => Announce::Lagging,
        2 => Announce::CatchUp,
        t => {
            return Err(DecodeError::UnknownTag {
                what: "announcement reason",
                tag: t.into(),
            })
        }
    })
}

/// A ballot and the txn id before it: the header most messages share.
fn put_head(out: &mut BytesMut, txn: TxnId, ballot: u64) {
    put_txn_id(out, txn);
    put_varint(out, ballot);
}

fn get_ballot(buf: &mut &[u8]) -> Result<u64, DecodeError> {
    get_varint(buf, "ballot")
}

/// Dependencies whose shards are the workload's (when the decoder has
/// one): a server inquires the replicas of a dependency's shards, found by
/// index in its topology.
/// A presence byte and, if set, an id.
fn get_optional_id(buf: &mut &[u8], what: &'static str) -> Result<Option<TxnId>, DecodeError> {
    Ok(if get_bool(buf, what)? {
        Some(get_txn_id(buf)?)
    } else {
        None
    })
}

fn get_checked_deps(buf: &mut &[u8], cx: &DecodeCx) -> Result<Vec<Dep>, DecodeError> {
    let deps = get_deps(buf)?;
    check_shards(
        deps.iter().flat_map(|d| d.shards.iter()),
        cx,
        "dependency shard",
    )?;
    Ok(deps)
}

fn get_piece(buf: &mut &[u8]) -> Result<u16, DecodeError> {
    u16::try_from(get_varint(buf, "piece")?).map_err(|_| DecodeError::invalid("piece", "> u16"))
}

fn put_info(out: &mut BytesMut, i: &CommitInfo) -> Result<(), EncodeError> {
    put_txn_id(out, i.txn);
    out.put_u8(u8::from(i.abandon));
    put_deps(out, &i.deps);
    encode_txn(i.proc.as_ref(), out)
}

fn get_info(buf: &mut &[u8], cx: &DecodeCx) -> Result<Arc<CommitInfo>, DecodeError> {
    let txn = get_txn_id(buf)?;
    let abandon = get_bool(buf, "abandon flag")?;
    let deps = get_checked_deps(buf, cx)?;
    let proc = decode_txn(buf, cx)?;
    Ok(Arc::new(CommitInfo {
        txn,
        proc,
        deps,
        abandon,
    }))
}

impl Msg {
    fn tag(&self) -> u8 {
        match self {
            Msg::PreAccept { .. } => tag::PRE_ACCEPT,
            Msg::PreAcceptOk { .. } => tag::PRE_ACCEPT_OK,
            Msg::PreAcceptNotOk { .. } => tag::PRE_ACCEPT_NOT_OK,
            Msg::Accept { .. } => tag::ACCEPT,
            Msg::AcceptOk { .. } => tag::ACCEPT_OK,
            Msg::AcceptNotOk { .. } => tag::ACCEPT_NOT_OK,
            Msg::Commit(_) => tag::COMMIT,
            Msg::CommitOk { .. } => tag::COMMIT_OK,
            Msg::Prepare { .. } => tag::PREPARE,
            Msg::PrepareOk { .. } => tag::PREPARE_OK,
            Msg::PrepareNotOk { .. } => tag::PREPARE_NOT_OK,
            Msg::Inquire { .. } => tag::INQUIRE,
            Msg::InquireOk(_) => tag::INQUIRE_OK,
            Msg::Committed { .. } => tag::COMMITTED,
            Msg::CatchUp => tag::CATCH_UP,
            Msg::Executed { .. } => tag::EXECUTED,
            Msg::Settled { .. } => tag::SETTLED,
            Msg::Done { .. } => tag::DONE,
            Msg::Forgotten { .. } => tag::FORGOTTEN,
            Msg::FetchOutput { .. } => tag::FETCH_OUTPUT,
            Msg::Output { .. } => tag::OUTPUT,
        }
    }
}

/// See the module docs for the layout.
impl Codec for Msg {
    fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        out.put_u8(self.tag());
        match self {
            Msg::PreAccept {
                txn,
                ballot,
                proc,
                floor,
                done,
            } => {
                put_head(out, *txn, *ballot);
                encode_txn(proc.as_ref(), out)?;
                for f in [floor, done] {
                    out.put_u8(u8::from(f.is_some()));
                    if let Some(f) = f {
                        put_txn_id(out, *f);
                    }
                }
            }
            Msg::PreAcceptOk { txn, ballot, deps } => {
                put_head(out, *txn, *ballot);
                put_deps(out, deps);
            }
            Msg::PreAcceptNotOk { txn, ballot }
            | Msg::AcceptOk { txn, ballot }
            | Msg::AcceptNotOk { txn, ballot }
            | Msg::Prepare { txn, ballot }
            | Msg::PrepareNotOk { txn, ballot } => put_head(out, *txn, *ballot),
            Msg::Accept {
                txn,
                ballot,
                deps,
                abandon,
                proc,
            } => {
                put_head(out, *txn, *ballot);
                out.put_u8(u8::from(*abandon));
                put_deps(out, deps);
                out.put_u8(u8::from(proc.is_some()));
                if let Some(p) = proc {
                    encode_txn(p.as_ref(), out)?;
                }
            }
            Msg::Commit(i) | Msg::InquireOk(i) => put_info(out, i)?,
            Msg::CommitOk {
                txn,
                abandon,
                results,
            } => {
                put_txn_id(out, *txn);
                out.put_u8(u8::from(*abandon));
                put_replies(out, results);
            }
            Msg::PrepareOk {
                txn,
                ballot,
                prepared,
            } => {
                put_head(out, *txn, *ballot);
                out.put_u8(u8::from(prepared.is_some()));
                if let Some(p) = prepared {
                    out.put_u8(u8::from(p.accepted.is_some()));
                    if let Some(b) = p.accepted {
                        put_varint(out, b);
                    }
                    out.put_u8(u8::from(p.abandon));
                    put_deps(out, &p.deps);
                }
            }
            Msg::Done { floor } => put_txn_id(out, *floor),
            Msg::Inquire { txn, its_shard } => {
                put_txn_id(out, *txn);
                out.put_u8(u8::from(*its_shard));
            }
            Msg::Committed { txns, why } => {
                out.put_u8(announce_byte(*why));
                put_txns(out, txns);
            }
            Msg::CatchUp => {}
            Msg::Executed { txns, echo: flag } | Msg::Settled { txns, ask: flag } => {
                out.put_u8(u8::from(*flag));
                put_txns(out, txns);
            }
            Msg::Forgotten { txn, abandon, scc } => {
                put_txn_id(out, *txn);
                out.put_u8(u8::from(*abandon));
                put_ids(out, scc.as_ref());
            }
            Msg::FetchOutput { txn, piece } => {
                put_txn_id(out, *txn);
                put_varint(out, u64::from(*piece));
            }
            Msg::Output { txn, piece, output } => {
                put_txn_id(out, *txn);
                put_varint(out, u64::from(*piece));
                out.put_u8(u8::from(output.is_some()));
                if let Some(v) = output {
                    put_bytes(out, v);
                }
            }
        }
        Ok(())
    }

    fn decode(buf: &mut &[u8], cx: &DecodeCx) -> Result<Self, DecodeError> {
        let t = get_u8(buf, "message tag")?;
        Ok(match t {
            tag::PRE_ACCEPT => Msg::PreAccept {
                txn: get_txn_id(buf)?,
                ballot: get_ballot(buf)?,
                proc: decode_txn(buf, cx)?,
                floor: get_optional_id(buf, "floor presence")?,
                done: get_optional_id(buf, "done floor presence")?,
            },
            tag::PRE_ACCEPT_OK => Msg::PreAcceptOk {
                txn: get_txn_id(buf)?,
                ballot: get_ballot(buf)?,
                deps: get_checked_deps(buf, cx)?,
            },
            tag::PRE_ACCEPT_NOT_OK => Msg::PreAcceptNotOk {
                txn: get_txn_id(buf)?,
                ballot: get_ballot(buf)?,
            },
            tag::ACCEPT => Msg::Accept {
                txn: get_txn_id(buf)?,
                ballot: get_ballot(buf)?,
                abandon: get_bool(buf, "abandon flag")?,
                deps: Arc::new(get_checked_deps(buf, cx)?),
                proc: if get_bool(buf, "procedure present")? {
                    Some(decode_txn(buf, cx)?)
                } else {
                    None
                },
            },
            tag::ACCEPT_OK => Msg::AcceptOk {
                txn: get_txn_id(buf)?,
                ballot: get_ballot(buf)?,
            },
            tag::ACCEPT_NOT_OK => Msg::AcceptNotOk {
                txn: get_txn_id(buf)?,
                ballot: get_ballot(buf)?,
            },
            tag::COMMIT => Msg::Commit(get_info(buf, cx)?),
            tag::COMMIT_OK => Msg::CommitOk {
                txn: get_txn_id(buf)?,
                abandon: get_bool(buf, "abandon flag")?,
                results: get_replies(buf)?,
            },
            tag::PREPARE => Msg::Prepare {
                txn: get_txn_id(buf)?,
                ballot: get_ballot(buf)?,
            },
            tag::PREPARE_OK => Msg::PrepareOk {
                txn: get_txn_id(buf)?,
                ballot: get_ballot(buf)?,
                prepared: if get_bool(buf, "prepared present")? {
                    Some(Prepared {
                        accepted: if get_bool(buf, "accepted present")? {
                            Some(get_ballot(buf)?)
                        } else {
                            None
                        },
                        abandon: get_bool(buf, "abandon flag")?,
                        deps: get_checked_deps(buf, cx)?,
                    })
                } else {
                    None
                },
            },
            tag::PREPARE_NOT_OK => Msg::PrepareNotOk {
                txn: get_txn_id(buf)?,
                ballot: get_ballot(buf)?,
            },
            tag::INQUIRE => Msg::Inquire {
                txn: get_txn_id(buf)?,
                its_shard: get_bool(buf, "its-shard flag")?,
            },
            tag::INQUIRE_OK => Msg::InquireOk(get_info(buf, cx)?),
            tag::COMMITTED => Msg::Committed {
                why: get_announce(buf)?,
                txns: get_txns(buf, "committed transactions")?,
            },
            tag::CATCH_UP => Msg::CatchUp,
            tag::EXECUTED => Msg::Executed {
                echo: get_bool(buf, "echo flag")?,
                txns: get_txns(buf, "executed transactions")?,
            },
            tag::DONE => Msg::Done {
                floor: get_txn_id(buf)?,
            },
            tag::SETTLED => Msg::Settled {
                ask: get_bool(buf, "ask flag")?,
                txns: get_txns(buf, "settled transactions")?,
            },
            tag::FORGOTTEN => Msg::Forgotten {
                txn: get_txn_id(buf)?,
                abandon: get_bool(buf, "abandon flag")?,
                scc: get_ids(buf)?,
            },
            tag::FETCH_OUTPUT => Msg::FetchOutput {
                txn: get_txn_id(buf)?,
                piece: get_piece(buf)?,
            },
            tag::OUTPUT => Msg::Output {
                txn: get_txn_id(buf)?,
                piece: get_piece(buf)?,
                output: if get_bool(buf, "output present")? {
                    Some(get_value(buf, "piece output")?)
                } else {
                    None
                },
            },
            t => {
                return Err(DecodeError::UnknownTag {
                    what: "Janus message",
                    tag: t.into(),
                })
            }
        })
    }
}

#[cfg(test)]
mod tests;
