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
//! * A checkpoint's image ([`super::image`]): the replica's whole state,
//!   after which the runtime drops the records before it.
//! * [`Record::Restarted`] — a restart: ends what an image said to pass
//!   over.
//!
//! **Components are listed once.** An Executed record names the component
//! its transaction was decided in, and a Forgotten record the component of
//! each transaction it drops; every member of a component of `C` members
//! has such a record, so listing the members in each costs `C²` ids: over
//! three sites at zipf 0.9, components of 1,201 members (1,800 clients) made
//! Executed and Forgotten records 88% of the log's bytes, and the 10,800
//! client point outgrew the machine's memory in the simulator's logs. A
//! record therefore lists a component only when it differs from the last
//! one this log listed ([`Component::AsListed`] otherwise), and replay
//! takes it from there ([`Components`]). The log is read only from its
//! start in order, and a write is durable only after every earlier one, so
//! the listing a reference points to is always replayed before it.
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
use tessera_core::txn::{Columns, Txn, Value};

/// First byte of every Janus server record: `'J'`.
pub const TAG: u8 = 0x4A;

/// A forgotten transaction as its record keeps it: id, abandon flag,
/// component.
pub type Buried = (TxnId, bool, Component);

/// A transaction's component in a record (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Component {
    /// Decided alone.
    Alone,
    /// Its members, in execution order.
    Listed(Arc<[TxnId]>),
    /// The members of the last component listed in this log.
    AsListed,
}

/// The last component a log listed: what a [`Component::AsListed`] stands
/// for, when writing and when replaying.
#[derive(Default)]
pub struct Components {
    last: Option<Arc<[TxnId]>>,
}

impl Components {
    /// Replay from a checkpoint's image: `last` is the listing it names
    /// ([`super::image`]).
    pub fn listed(last: Option<Arc<[TxnId]>>) -> Self {
        Components { last }
    }

    /// The last listing, for a checkpoint's image.
    pub fn last(&self) -> Option<&Arc<[TxnId]>> {
        self.last.as_ref()
    }

    /// `scc` (`None`: alone) as the next record written to the log holds it.
    pub fn write(&mut self, scc: Option<Arc<[TxnId]>>) -> Component {
        match scc {
            None => Component::Alone,
            Some(s) if self.last.as_ref().is_some_and(|l| Arc::ptr_eq(l, &s)) => {
                Component::AsListed
            }
            Some(s) => {
                self.last = Some(s.clone());
                Component::Listed(s)
            }
        }
    }

    /// The members `c`, read from the log in order, stands for (`None`:
    /// alone); fails on a reference with no listing before it.
    pub fn read(&mut self, c: Component) -> Result<Option<Arc<[TxnId]>>, DecodeError> {
        match c {
            Component::Alone => Ok(None),
            Component::Listed(s) => {
                self.last = Some(s.clone());
                Ok(Some(s))
            }
            Component::AsListed => self.last.clone().map(Some).ok_or_else(|| {
                DecodeError::invalid("component", "refers to a listing the log does not hold")
            }),
        }
    }
}

const ALONE: u8 = 0;
const LISTED: u8 = 1;
const AS_LISTED: u8 = 2;

fn put_component(out: &mut BytesMut, c: &Component) {
    match c {
        Component::Alone => out.put_u8(ALONE),
        Component::Listed(s) => {
            out.put_u8(LISTED);
            put_txns(out, s);
        }
        Component::AsListed => out.put_u8(AS_LISTED),
    }
}

fn get_component(buf: &mut &[u8]) -> Result<Component, DecodeError> {
    match get_u8(buf, "component")? {
        ALONE => Ok(Component::Alone),
        LISTED => Ok(Component::Listed(get_txns(buf, "component")?)),
        AS_LISTED => Ok(Component::AsListed),
        tag => Err(DecodeError::UnknownTag {
            what: "component",
            tag: u64::from(tag),
        }),
    }
}

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
        scc: Component,
        /// Each key written, the columns the transaction wrote of it (to
        /// restore the store's per-column last writers,
        /// [`tessera_core::storage::Store::install_columns`]) and its value.
        written: Vec<(Key, Columns, Value)>,
        results: Vec<PieceReply>,
    },
    Forgotten {
        epoch: u64,
        txns: Vec<Buried>,
    },
    /// The first record of an incarnation restarted from an image whose
    /// records to pass over ([`super::image::Image::skip`]) were not all
    /// in the log (their write was lost in the crash): every record after
    /// it is this incarnation's, none to pass over.
    Restarted,
}

const PRE_ACCEPTED: u8 = 1;
const PROMISED: u8 = 2;
const ACCEPTED: u8 = 3;
const COMMITTED: u8 = 4;
const EXECUTED: u8 = 5;
const FORGOTTEN: u8 = 6;
pub(super) const RESTARTED: u8 = 8;
/// A checkpoint's image ([`super::image`]): always the first record
/// replayed when present.
pub(super) const IMAGE: u8 = 7;

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
                put_component(&mut out, scc);
                put_varint(&mut out, written.len() as u64);
                for (k, c, v) in written {
                    put_key(&mut out, *k);
                    // Complemented: a whole-row write (all bits) is 1 byte.
                    put_varint(&mut out, !c.0);
                    put_bytes(&mut out, v);
                }
                put_replies(&mut out, results);
            }
            Record::Restarted => out.put_u8(RESTARTED),
            Record::Forgotten { epoch, txns } => {
                out.put_u8(FORGOTTEN);
                put_varint(&mut out, *epoch);
                put_varint(&mut out, txns.len() as u64);
                for (t, abandon, scc) in txns {
                    put_txn_id(&mut out, *t);
                    out.put_u8(u8::from(*abandon));
                    put_component(&mut out, scc);
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
                let scc = get_component(buf)?;
                let n = get_len(buf, 11, "written")?;
                let mut written = Vec::with_capacity(n);
                for _ in 0..n {
                    let k = get_key(buf)?;
                    let c = Columns(!get_varint(buf, "written columns")?);
                    written.push((k, c, get_value(buf, "written value")?));
                }
                Record::Executed {
                    txn,
                    scc,
                    written,
                    results: get_replies(buf)?,
                }
            }
            RESTARTED => Record::Restarted,
            FORGOTTEN => {
                let epoch = get_varint(buf, "epoch")?;
                let n = get_len(buf, 10, "forgotten")?;
                let mut txns = Vec::with_capacity(n);
                for _ in 0..n {
                    let t = get_txn_id(buf)?;
                    let abandon = get_bool(buf, "abandon")?;
                    txns.push((t, abandon, get_component(buf)?));
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
                scc: Component::Listed(Arc::from([t(1), t(2)])),
                written: vec![
                    (Key::new(0, 5), Columns::ALL, Value::from_static(b"v")),
                    (Key::new(0, 6), Columns(0b101), Value::from_static(b"w")),
                ],
                results: vec![PieceReply {
                    piece: 1,
                    reads: vec![ReadObs::row(Key::new(0, 5), Version(11))],
                    writes: vec![Key::new(0, 5)],
                    output: Value::from_static(b"out"),
                    user_abort: false,
                }],
            },
            Record::Forgotten {
                epoch: 12,
                txns: vec![
                    (t(1), true, Component::Alone),
                    (t(2), false, Component::Listed(Arc::from([t(2), t(3)]))),
                    (t(3), false, Component::AsListed),
                ],
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

    /// A component is listed once while its members follow one another,
    /// listed again after another one, and read back whole; a reference
    /// with no listing before it is refused.
    #[test]
    fn components_are_listed_once_and_read_back_whole() {
        let a: Arc<[TxnId]> = Arc::from([t(1), t(2), t(3)]);
        let b: Arc<[TxnId]> = Arc::from([t(4), t(5)]);
        let mut w = Components::default();
        let written: Vec<Component> = [Some(&a), Some(&a), None, Some(&a), Some(&b), Some(&a)]
            .into_iter()
            .map(|s| w.write(s.cloned()))
            .collect();
        assert_eq!(
            written,
            [
                Component::Listed(a.clone()),
                Component::AsListed,
                Component::Alone,
                Component::AsListed,
                Component::Listed(b.clone()),
                Component::Listed(a.clone()),
            ]
        );
        let mut r = Components::default();
        let read: Vec<Option<Arc<[TxnId]>>> = written
            .into_iter()
            .map(|c| r.read(c).expect("listed before"))
            .collect();
        assert_eq!(
            read,
            [Some(&a), Some(&a), None, Some(&a), Some(&b), Some(&a)].map(|s| s.cloned())
        );
        assert!(Components::default().read(Component::AsListed).is_err());
    }
}
