//! A replica's checkpoint: its whole durable state as one log record
//! ([`super::wal::Record::Image`]), what [`tessera_core::node::Node::snapshot`]
//! hands the runtime, which then drops the log before it. Without it a
//! restarted replica replayed its log from the start: every transaction it
//! ever pre-accepted, executed and forgot (one-site TPC-C at 60 clients
//! under `--replica-faults`, seed 1, 2 s: 270,982 records replayed at
//! restarts, 16,296 with `--checkpoint-kb 256`; `docs/results/janus.md`,
//! *session 27*).
//!
//! An image holds what the records before it rebuild, as the replica
//! holds it now rather than as history:
//!
//! * the **store**, with each row's per-column last writers
//!   ([`tessera_core::storage::Store::column_groups`]);
//! * the **record of what was forgotten** ([`super::gc::Gc::encode_record`]:
//!   the bits above each coordinator's done floor, the floors, abandoned
//!   ids, components kept) and the epoch;
//! * the **tracker** whole ([`super::tracker::Tracker::encode`]): its last
//!   executed writer of a key may be a transaction forgotten since, so the
//!   live transactions could not rebuild it;
//! * the **ballots promised** for transactions never pre-accepted here;
//! * every **live transaction** with pieces here: procedure, ballot,
//!   accepted ballot, dependencies, abandon flag, whether committed, and
//!   once executed its piece results and component. Replay grafts the
//!   committed ones into a fresh graph and marks the executed ones'
//!   components DECIDED, as the Committed and Executed records did;
//! * the **last component listed** in the log ([`super::wal::Components`]):
//!   a record after the image may refer to it.
//!
//! What the log never held is not in the image either (tombstones, who
//! announced what, ancestors known only by Inquire); a restart from an
//! image asks for them again as from the log. The one difference: the
//! record's bits below the done floors, which a full replay set again
//! until new floors came, stay dropped.
//!
//! **Records issued before the image and written after it.** The replica
//! groups its records into one write at a time ([`super::server`]'s group
//! commit), so when the runtime asks for an image, the records issued
//! since the write in flight are in the replica's state but not yet in the
//! log; they reach the log after the image. The image counts them
//! ([`Image::skip`]) and replay passes over that many records after it.

use super::gc::{Gc, Kept};
use super::msg::{Ballot, Dep};
use super::tracker::Tracker;
use super::wal::{
    get_deps, get_ids, get_replies, put_deps, put_ids, put_replies, IMAGE, RESTARTED, TAG,
};
use crate::depgraph::PieceReply;
use bytes::{BufMut, Bytes, BytesMut};
use std::sync::Arc;
use tessera_core::codec::{
    decode_store, decode_txn, encode_store, encode_txn, get_bool, get_key, get_len, get_txn_id,
    get_u64, get_u8, get_varint, get_version, put_key, put_txn_id, put_varint, DecodeCx,
    DecodeError, EncodeError,
};
use tessera_core::ids::{TxnId, Version};
use tessera_core::storage::Store;
use tessera_core::txn::Txn;

/// A transaction with pieces here, as an image keeps it.
#[derive(Debug)]
pub(super) struct LiveTxn {
    pub txn: TxnId,
    pub proc: Txn,
    /// The highest ballot seen.
    pub ballot: Ballot,
    pub accepted: Option<Ballot>,
    /// Pre-accepted, accepted, or (when committed) the consensus ones.
    pub deps: Vec<Dep>,
    pub abandon: bool,
    pub committed: bool,
    pub executed: Option<Executed>,
}

/// A live transaction executed here: its piece results and its component
/// (`None`: alone).
pub(super) type Executed = (Vec<PieceReply>, Option<Arc<[TxnId]>>);

/// A decoded image (see the module docs).
#[derive(Debug)]
pub(super) struct Image {
    /// Records issued before the image and written after it: replay
    /// passes over them.
    pub skip: u64,
    pub store: Store,
    pub gc: Kept,
    pub tracker: Tracker,
    pub promised: Vec<(TxnId, Ballot)>,
    pub live: Vec<LiveTxn>,
    pub listed: Option<Arc<[TxnId]>>,
}

/// What an image is made of, borrowed from the replica that writes it.
pub(super) struct Parts<'a> {
    pub skip: u64,
    pub store: &'a Store,
    pub gc: &'a Gc,
    pub tracker: &'a Tracker,
    pub promised: Vec<(TxnId, Ballot)>,
    pub live: Vec<LiveTxn>,
    pub listed: Option<&'a Arc<[TxnId]>>,
}

/// Whether the record `rec` of a write is [`super::wal::Record::Restarted`],
/// which ends the records an image passes over: they were the write in
/// flight at the crash if they did not come before it.
pub(super) fn is_restart(rec: &[u8]) -> bool {
    rec.len() == 2 && rec[0] == TAG && rec[1] == RESTARTED
}

/// Whether the record `rec` of a write is an image.
pub(super) fn is_image(rec: &[u8]) -> bool {
    rec.len() >= 2 && rec[0] == TAG && rec[1] == IMAGE
}

/// The image record of `p`; fails only for a procedure whose workload has
/// no codec.
pub(super) fn encode(p: &Parts<'_>) -> Result<Bytes, EncodeError> {
    let mut out = BytesMut::new();
    out.put_u8(TAG);
    out.put_u8(IMAGE);
    let out = &mut out;
    put_varint(out, p.skip);
    encode_store(p.store, out);
    let groups = p.store.column_groups();
    put_varint(out, groups.len() as u64);
    for (k, base, gs) in groups {
        put_key(out, k);
        out.put_u64_le(base.0);
        put_varint(out, gs.len() as u64);
        for &(cols, v) in gs {
            put_varint(out, cols);
            out.put_u64_le(v.0);
        }
    }
    p.gc.encode_record(out);
    p.tracker.encode(out);
    put_varint(out, p.promised.len() as u64);
    for &(t, b) in &p.promised {
        put_txn_id(out, t);
        put_varint(out, b);
    }
    put_varint(out, p.live.len() as u64);
    for l in &p.live {
        put_txn_id(out, l.txn);
        encode_txn(l.proc.as_ref(), out)?;
        put_varint(out, l.ballot);
        match l.accepted {
            None => out.put_u8(0),
            Some(b) => {
                out.put_u8(1);
                put_varint(out, b);
            }
        }
        put_deps(out, &l.deps);
        out.put_u8(u8::from(l.abandon));
        out.put_u8(u8::from(l.committed));
        match &l.executed {
            None => out.put_u8(0),
            Some((results, scc)) => {
                out.put_u8(1);
                put_replies(out, results);
                put_ids(out, scc.as_ref());
            }
        }
    }
    put_ids(out, p.listed);
    Ok(std::mem::take(out).freeze())
}

/// One whole image record; procedures are rebuilt by `cx`'s workload.
pub(super) fn decode(mut rec: &[u8], cx: &DecodeCx) -> Result<Image, DecodeError> {
    let buf = &mut rec;
    let (tag, kind) = (get_u8(buf, "record tag")?, get_u8(buf, "record kind")?);
    if (tag, kind) != (TAG, IMAGE) {
        return Err(DecodeError::invalid("Janus image", "not an image record"));
    }
    let skip = get_varint(buf, "records to skip")?;
    let mut store = decode_store(buf)?;
    for _ in 0..get_len(buf, 14, "rows written per column")? {
        let k = get_key(buf)?;
        let base = get_version(buf)?;
        let n = get_len(buf, 9, "column groups")?;
        let mut groups = Vec::with_capacity(n);
        for _ in 0..n {
            let cols = get_varint(buf, "columns")?;
            groups.push((cols, Version(get_u64(buf, "version")?)));
        }
        store.set_column_groups(k, base, groups);
    }
    let gc = Kept::decode(buf)?;
    let tracker = Tracker::decode(buf)?;
    let n = get_len(buf, 9, "promised")?;
    let mut promised = Vec::with_capacity(n);
    for _ in 0..n {
        promised.push((get_txn_id(buf)?, get_varint(buf, "ballot")?));
    }
    let n = get_len(buf, 14, "live transactions")?;
    let mut live = Vec::with_capacity(n);
    for _ in 0..n {
        let txn = get_txn_id(buf)?;
        let proc = decode_txn(buf, cx)?;
        let ballot = get_varint(buf, "ballot")?;
        let accepted = if get_bool(buf, "accepted")? {
            Some(get_varint(buf, "accepted ballot")?)
        } else {
            None
        };
        let deps = get_deps(buf)?;
        let abandon = get_bool(buf, "abandon")?;
        let committed = get_bool(buf, "committed")?;
        let executed = if get_bool(buf, "executed")? {
            Some((get_replies(buf)?, get_ids(buf)?))
        } else {
            None
        };
        live.push(LiveTxn {
            txn,
            proc,
            ballot,
            accepted,
            deps,
            abandon,
            committed,
            executed,
        });
    }
    let listed = get_ids(buf)?;
    if !buf.is_empty() {
        return Err(DecodeError::Trailing(buf.len()));
    }
    Ok(Image {
        skip,
        store,
        gc,
        tracker,
        promised,
        live,
        listed,
    })
}
