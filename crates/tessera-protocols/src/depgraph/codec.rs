//! Wire and log encodings of what the dependency-graph protocols say about
//! transactions, shared by Rococo (its messages, `rococo::codec`, and its
//! log) and Janus (its messages and its log records, `janus::wal`): lists
//! of transaction ids, components, and Rococo's [`Vertex`] (§3.2: a
//! transaction, its status, its shards and its incoming edges).
//!
//! Layouts:
//! * Ids: count (varint), then 8 bytes each.
//! * A component (or none): a presence byte, then ids.
//! * A vertex: id (8 bytes), status byte (STARTED 0, COMMITTING 1,
//!   DECIDED 2), shards (count, varint each), parents (count; per parent
//!   its id and an edge byte, D 0, I 1), then the component.
//! * Vertices: count, then each vertex.
//!
//! A decoded vertex has at least one shard and only shards of the
//! workload (when the decoder has one): a server sends its status request
//! (Inquire) to the leader of one of them, found by index in its topology.

use super::{Edge, Status, Vertex};
use bytes::{BufMut, BytesMut};
use std::sync::Arc;
use tessera_core::codec::{get_bool, get_len, get_txn_id, get_u8, get_varint, put_txn_id};
use tessera_core::codec::{put_varint, DecodeCx, DecodeError};
use tessera_core::ids::{ShardId, TxnId};

/// A list of transaction ids: count, then 8 bytes each.
pub(crate) fn put_txns(out: &mut BytesMut, ids: &[TxnId]) {
    put_varint(out, ids.len() as u64);
    for &t in ids {
        put_txn_id(out, t);
    }
}

pub(crate) fn get_txns(buf: &mut &[u8], what: &'static str) -> Result<Arc<[TxnId]>, DecodeError> {
    let n = get_len(buf, 8, what)?;
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        ids.push(get_txn_id(buf)?);
    }
    Ok(ids.into())
}

/// A component (or none): a presence byte, then [`put_txns`].
pub(crate) fn put_ids(out: &mut BytesMut, ids: Option<&Arc<[TxnId]>>) {
    match ids {
        None => out.put_u8(0),
        Some(ids) => {
            out.put_u8(1);
            put_txns(out, ids);
        }
    }
}

pub(crate) fn get_ids(buf: &mut &[u8]) -> Result<Option<Arc<[TxnId]>>, DecodeError> {
    if !get_bool(buf, "component present")? {
        return Ok(None);
    }
    get_txns(buf, "component").map(Some)
}

/// A shard id written as a varint.
pub(crate) fn get_shard(buf: &mut &[u8]) -> Result<ShardId, DecodeError> {
    let s = get_varint(buf, "shard")?;
    u32::try_from(s)
        .map(ShardId)
        .map_err(|_| DecodeError::invalid("shard", "> u32"))
}

/// Refuse a shard the decoder's workload does not have: servers index
/// their topology with the shards a message names.
pub(crate) fn check_shards<'a>(
    shards: impl IntoIterator<Item = &'a ShardId>,
    cx: &DecodeCx,
    what: &'static str,
) -> Result<(), DecodeError> {
    if let Some(wl) = &cx.workload {
        let n = wl.shards();
        if let Some(s) = shards.into_iter().find(|s| s.0 >= n) {
            return Err(DecodeError::invalid(
                what,
                format!("{} but the workload has {n} shards", s.0),
            ));
        }
    }
    Ok(())
}

fn status_byte(s: Status) -> u8 {
    match s {
        Status::Started => 0,
        Status::Committing => 1,
        Status::Decided => 2,
    }
}

fn get_status(buf: &mut &[u8]) -> Result<Status, DecodeError> {
    Ok(match get_u8(buf, "vertex status")? {
        0 => Status::Started,
        1 => Status::Committing,
        2 => Status::Decided,
        t => {
            return Err(DecodeError::UnknownTag {
                what: "vertex status",
                tag: t.into(),
            })
        }
    })
}

fn get_edge(buf: &mut &[u8]) -> Result<Edge, DecodeError> {
    Ok(match get_u8(buf, "edge type")? {
        0 => Edge::D,
        1 => Edge::I,
        t => {
            return Err(DecodeError::UnknownTag {
                what: "edge type",
                tag: t.into(),
            })
        }
    })
}

/// Vertices (see the module docs for the layout).
pub(crate) fn put_vertices(out: &mut BytesMut, vs: &[Vertex]) {
    put_varint(out, vs.len() as u64);
    for v in vs {
        put_txn_id(out, v.txn);
        out.put_u8(status_byte(v.status));
        put_varint(out, v.shards.len() as u64);
        for s in v.shards.iter() {
            put_varint(out, u64::from(s.0));
        }
        put_varint(out, v.parents.len() as u64);
        for &(p, e) in &v.parents {
            put_txn_id(out, p);
            out.put_u8(match e {
                Edge::D => 0,
                Edge::I => 1,
            });
        }
        put_ids(out, v.scc.as_ref());
    }
}

/// Read what [`put_vertices`] wrote; counts are checked against the bytes
/// left before anything is allocated, and shards as the module docs say.
pub(crate) fn get_vertices(buf: &mut &[u8], cx: &DecodeCx) -> Result<Vec<Vertex>, DecodeError> {
    // Smallest vertex: id, status, one shard, no parent, no component.
    let n = get_len(buf, 8 + 1 + 2 + 1 + 1, "vertices")?;
    let mut vs = Vec::with_capacity(n);
    for _ in 0..n {
        let txn = get_txn_id(buf)?;
        let status = get_status(buf)?;
        let k = get_len(buf, 1, "vertex shards")?;
        if k == 0 {
            return Err(DecodeError::invalid(
                "vertex shards",
                "none (a transaction involves at least one shard)",
            ));
        }
        let mut shards = Vec::with_capacity(k);
        for _ in 0..k {
            shards.push(get_shard(buf)?);
        }
        check_shards(&shards, cx, "vertex shard")?;
        let k = get_len(buf, 9, "vertex parents")?;
        let mut parents = Vec::with_capacity(k);
        for _ in 0..k {
            let p = get_txn_id(buf)?;
            parents.push((p, get_edge(buf)?));
        }
        let scc = get_ids(buf)?;
        vs.push(Vertex {
            txn,
            status,
            shards: shards.into(),
            parents,
            scc,
        });
    }
    Ok(vs)
}
