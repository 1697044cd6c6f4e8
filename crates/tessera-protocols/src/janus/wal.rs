//! What a Janus replica makes durable before it answers, so that it can
//! crash and restart without contradicting a promise (§3.2–3.3: a replica
//! that answered PreAccept, Accept or Prepare is part of a quorum the
//! coordinator counted on), and the records' encoding in the node's log
//! (the engine's write-ahead log: [`tessera_core::node::Ctx::persist`], the
//! simulator's disk with fsync latency and group commit).
//!
//! * [`Record::PreAccepted`] — Algorithm 2, l. 31: the transaction (its
//!   procedure, so that a restarted replica can still recover or execute
//!   it), the ballot and the dependencies it answered; durable before the
//!   PreAccept-OK leaves.
//! * [`Record::Promised`] — a higher ballot promised: Prepare (§3.3,
//!   Algorithm 7, l. 87), a recovery coordinator's PreAccept, or this
//!   replica's own recovery ballot before its Prepare leaves (a ballot must
//!   never be reused with another value after a restart).
//! * [`Record::Accepted`] — Algorithm 3, l. 33: ballot, dependencies,
//!   abandon flag; durable before the Accept-OK.
//! * [`Record::Committed`] — Algorithm 4, l. 39: the consensus
//!   dependencies of a transaction with pieces here (its procedure when no
//!   PreAccepted record carries it).
//! * [`Record::Executed`] — l. 56, `processed_S[T]`: the piece results
//!   (answers to late Commits and §4 output fetches), the values written
//!   (replayed into the freshly loaded store, in execution order) and the
//!   component it was decided in. Durable before this replica announces
//!   executing it ([`super::msg::Msg::Executed`]): the others forget it
//!   only then, and a replica that lost the record could no longer learn it.
//! * [`Record::Forgotten`] — garbage collection ([`super::gc`]): dropped
//!   from the graph, kept as tombstones, so that a replay does not rebuild
//!   the whole history.
//!
//! A write to the log holds the records issued since the previous write
//! (group commit), each length-prefixed ([`records`]).
//! Records start with [`TAG`]; a log that does not decode was written by
//! another build and is refused (the server panics naming the error)
//! rather than guessed at.

use super::msg::{Ballot, Dep};
use crate::depgraph::codec::get_shard;
use crate::depgraph::PieceReply;
use bytes::{BufMut, Bytes, BytesMut};
use std::sync::Arc;
use tessera_core::codec::{
    decode_txn, encode_txn, get_bool, get_bytes, get_key, get_len, get_txn_id, get_u8, get_value,
    get_varint, put_bytes, put_key, put_txn_id, put_varint, DecodeCx, DecodeError, EncodeError,
};
use tessera_core::ids::{Key, TxnId};
use tessera_core::txn::{Txn, Value};

/// First byte of every Janus server record: `'J'`.
pub const TAG: u8 = 0x4A;

/// A forgotten transaction as its tombstone keeps it: id, abandon flag,
/// component.
pub type Buried = (TxnId, bool, Option<Arc<[TxnId]>>);

/// One durable record of a Janus replica (see the module docs).
#[derive(Debug)]
pub enum Record {
    PreAccepted {
        txn: TxnId,
        ballot: Ballot,
        deps: Vec<Dep>,
        proc: Txn,
    },
    Promised {
        txn: TxnId,
        ballot: Ballot,
    },
    Accepted {
        txn: TxnId,
        ballot: Ballot,
        deps: Vec<Dep>,
        abandon: bool,
    },
    Committed {
        txn: TxnId,
        deps: Vec<Dep>,
        abandon: bool,
        proc: Option<Txn>,
    },
    Executed {
        txn: TxnId,
        scc: Option<Arc<[TxnId]>>,
        written: Vec<(Key, Value)>,
        results: Vec<PieceReply>,
    },
    Forgotten {
        epoch: u64,
        txns: Vec<Buried>,
    },
}

const PRE_ACCEPTED: u8 = 1;
const PROMISED: u8 = 2;
const ACCEPTED: u8 = 3;
const COMMITTED: u8 = 4;
const EXECUTED: u8 = 5;
const FORGOTTEN: u8 = 6;

// The encoders below are shared with the wire codec ([`super::codec`]), so
// that a message and a log record carry dependencies, components and piece
// results alike.

/// Dependencies: count, then per dependency its id and shards (varints).
pub(super) fn put_deps(out: &mut BytesMut, deps: &[Dep]) {
    put_varint(out, deps.len() as u64);
    for d in deps {
        put_txn_id(out, d.txn);
        put_varint(out, d.shards.len() as u64);
        for s in d.shards.iter() {
            put_varint(out, u64::from(s.0));
        }
    }
}

pub(super) fn get_deps(buf: &mut &[u8]) -> Result<Vec<Dep>, DecodeError> {
    let n = get_len(buf, 9, "dependencies")?;
    let mut deps = Vec::with_capacity(n);
    for _ in 0..n {
        let txn = get_txn_id(buf)?;
        let k = get_len(buf, 1, "dependency shards")?;
        let mut shards = Vec::with_capacity(k);
        for _ in 0..k {
            shards.push(get_shard(buf)?);
        }
        deps.push(Dep {
            txn,
            shards: shards.into(),
        });
    }
    Ok(deps)
}

pub(super) use crate::depgraph::codec::{get_ids, get_txns, put_ids, put_txns};
pub(super) use crate::piece::{get_replies, put_replies};
impl Record {
    /// The record's bytes; fails only for a procedure whose workload has
    /// no codec.
    pub fn encode(&self) -> Result<Bytes, EncodeError> {
        let mut out = BytesMut::new();
        out.put_u8(TAG);
        match self {
            Record::PreAccepted {
                txn,
                ballot,
                deps,
                proc,
            } => {
                out.put_u8(PRE_ACCEPTED);
                put_txn_id(&mut out, *txn);
                put_varint(&mut out, *ballot);
                put_deps(&mut out, deps);
                encode_txn(proc.as_ref(), &mut out)?;
            }
            Record::Promised { txn, ballot } => {
                out.put_u8(PROMISED);
                put_txn_id(&mut out, *txn);
                put_varint(&mut out, *ballot);
            }
            Record::Accepted {
                txn,
                ballot,
                deps,
                abandon,
            } => {
                out.put_u8(ACCEPTED);
                put_txn_id(&mut out, *txn);
                put_varint(&mut out, *ballot);
                put_deps(&mut out, deps);
                out.put_u8(u8::from(*abandon));
            }
            Record::Committed {
                txn,
                deps,
                abandon,
                proc,
            } => {
                out.put_u8(COMMITTED);
                put_txn_id(&mut out, *txn);
                put_deps(&mut out, deps);
                out.put_u8(u8::from(*abandon));
                match proc {
                    None => out.put_u8(0),
                    Some(p) => {
                        out.put_u8(1);
                        encode_txn(p.as_ref(), &mut out)?;
                    }
                }
            }
            Record::Executed {
                txn,
                scc,
                written,
                results,
            } => {
                out.put_u8(EXECUTED);
                put_txn_id(&mut out, *txn);
                put_ids(&mut out, scc.as_ref());
                put_varint(&mut out, written.len() as u64);
                for (k, v) in written {
                    put_key(&mut out, *k);
                    put_bytes(&mut out, v);
                }
                put_replies(&mut out, results);
            }
            Record::Forgotten { epoch, txns } => {
                out.put_u8(FORGOTTEN);
                put_varint(&mut out, *epoch);
                put_varint(&mut out, txns.len() as u64);
                for (t, abandon, scc) in txns {
                    put_txn_id(&mut out, *t);
                    out.put_u8(u8::from(*abandon));
                    put_ids(&mut out, scc.as_ref());
                }
            }
        }
        Ok(out.freeze())
    }

    /// One whole record; procedures are rebuilt by `cx`'s workload.
    pub fn decode(mut buf: &[u8], cx: &DecodeCx) -> Result<Record, DecodeError> {
        let buf = &mut buf;
        let tag = get_u8(buf, "record tag")?;
        if tag != TAG {
            return Err(DecodeError::UnknownTag {
                what: "Janus record (not a Janus server's log)",
                tag: u64::from(tag),
            });
        }
        let rec = match get_u8(buf, "record kind")? {
            PRE_ACCEPTED => Record::PreAccepted {
                txn: get_txn_id(buf)?,
                ballot: get_varint(buf, "ballot")?,
                deps: get_deps(buf)?,
                proc: decode_txn(buf, cx)?,
            },
            PROMISED => Record::Promised {
                txn: get_txn_id(buf)?,
                ballot: get_varint(buf, "ballot")?,
            },
            ACCEPTED => Record::Accepted {
                txn: get_txn_id(buf)?,
                ballot: get_varint(buf, "ballot")?,
                deps: get_deps(buf)?,
                abandon: get_bool(buf, "abandon")?,
            },
            COMMITTED => Record::Committed {
                txn: get_txn_id(buf)?,
                deps: get_deps(buf)?,
                abandon: get_bool(buf, "abandon")?,
                proc: if get_bool(buf, "procedure present")? {
                    Some(decode_txn(buf, cx)?)
                } else {
                    None
                },
            },
            EXECUTED => {
                let txn = get_txn_id(buf)?;
                let scc = get_ids(buf)?;
                let n = get_len(buf, 10, "written")?;
                let mut written = Vec::with_capacity(n);
                for _ in 0..n {
                    let k = get_key(buf)?;
                    written.push((k, get_value(buf, "written value")?));
                }
                Record::Executed {
                    txn,
                    scc,
                    written,
                    results: get_replies(buf)?,
                }
            }
            FORGOTTEN => {
                let epoch = get_varint(buf, "epoch")?;
                let n = get_len(buf, 10, "forgotten")?;
                let mut txns = Vec::with_capacity(n);
                for _ in 0..n {
                    let t = get_txn_id(buf)?;
                    let abandon = get_bool(buf, "abandon")?;
                    txns.push((t, abandon, get_ids(buf)?));
                }
                Record::Forgotten { epoch, txns }
            }
            kind => {
                return Err(DecodeError::UnknownTag {
                    what: "Janus record kind",
                    tag: u64::from(kind),
                })
            }
        };
        if !buf.is_empty() {
            return Err(DecodeError::Trailing(buf.len()));
        }
        Ok(rec)
    }
}

/// The records of one write to the log.
pub fn records(mut write: &[u8]) -> Result<Vec<&[u8]>, DecodeError> {
    let mut out = Vec::new();
    while !write.is_empty() {
        out.push(get_bytes(&mut write, "Janus record")?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::ids::{NodeId, ShardId, Version};
    use tessera_core::txn::ReadObs;

    fn t(i: u32) -> TxnId {
        TxnId::new(NodeId(9), 0, i)
    }

    /// Every record kind without a procedure comes back as written, a
    /// write of several records splits back into them, and cut or foreign
    /// bytes are refused.
    #[test]
    fn records_round_trip_and_bad_bytes_are_refused() {
        let deps = vec![Dep {
            txn: t(1),
            shards: Arc::from([ShardId(0), ShardId(2)]),
        }];
        let recs = [
            Record::Promised {
                txn: t(2),
                ballot: (3 << 16) | 4,
            },
            Record::Accepted {
                txn: t(2),
                ballot: 7,
                deps: deps.clone(),
                abandon: true,
            },
            Record::Committed {
                txn: t(2),
                deps,
                abandon: false,
                proc: None,
            },
            Record::Executed {
                txn: t(2),
                scc: Some(Arc::from([t(1), t(2)])),
                written: vec![(Key::new(0, 5), Value::from_static(b"v"))],
                results: vec![PieceReply {
                    piece: 1,
                    reads: vec![ReadObs {
                        key: Key::new(0, 5),
                        version: Version(11),
                    }],
                    writes: vec![Key::new(0, 5)],
                    output: Value::from_static(b"out"),
                    user_abort: false,
                }],
            },
            Record::Forgotten {
                epoch: 12,
                txns: vec![(t(1), true, None), (t(2), false, Some(Arc::from([t(2)])))],
            },
        ];
        let cx = DecodeCx::default();
        let mut write = BytesMut::new();
        for r in &recs {
            let b = r.encode().expect("no procedure to encode");
            let back = Record::decode(&b, &cx).expect("decodes");
            assert_eq!(format!("{back:?}"), format!("{r:?}"));
            put_bytes(&mut write, &b);
            assert!(Record::decode(&b[..b.len() - 1], &cx).is_err(), "{r:?} cut");
        }
        assert_eq!(records(&write).expect("splits").len(), recs.len());
        assert!(records(&write[..write.len() - 1]).is_err());
        assert!(
            Record::decode(&[0x57, 2], &cx).is_err(),
            "not a Janus record"
        );
    }
}
