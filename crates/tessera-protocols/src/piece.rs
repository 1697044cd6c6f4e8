//! A piece's reply, as a server reports an executed piece, and its one wire
//! encoding. 2PC participants (`ExecuteOk`), Rococo's and Janus's servers
//! and Janus's log records all carry it, so the type and its layout live
//! here once.
//!
//! Layout of a reply list: count (varint); per reply the piece index
//! (varint), reads (count, then key and version each), writes (count, then
//! keys), the output (length-prefixed) and the user-abort flag (one byte).

use bytes::{BufMut, BytesMut};
use tessera_core::codec::{
    bytes_len, get_bool, get_key, get_len, get_value, get_varint, get_version, key_len, put_bytes,
    put_key, put_varint, varint_len, DecodeError,
};
use tessera_core::ids::Key;
use tessera_core::txn::{Columns, ReadObs, Value};

/// One executed piece, as a server reports it.
#[derive(Clone, Debug)]
pub struct PieceReply {
    pub piece: u16,
    pub reads: Vec<ReadObs>,
    pub writes: Vec<Key>,
    pub output: Value,
    /// The piece asked to abort its transaction (a TPC-C NewOrder with an
    /// unused item). 2PC aborts; Rococo honours it when it came from an
    /// immediate piece before anything was written ([`crate::rococo`],
    /// §3.1); Janus does not.
    pub user_abort: bool,
}

/// Append `results` (see the module docs for the layout).
pub fn put_replies(out: &mut BytesMut, results: &[PieceReply]) {
    put_varint(out, results.len() as u64);
    for r in results {
        put_varint(out, u64::from(r.piece));
        put_varint(out, r.reads.len() as u64);
        for o in &r.reads {
            put_key(out, o.key);
            out.put_u64_le(o.version.0);
            // Complemented: a read of the whole row (all bits) is 1 byte.
            put_varint(out, !o.columns.0);
        }
        put_varint(out, r.writes.len() as u64);
        for &k in &r.writes {
            put_key(out, k);
        }
        put_bytes(out, &r.output);
        out.put_u8(u8::from(r.user_abort));
    }
}

/// Bytes [`put_replies`] writes for `results`.
pub fn replies_len(results: &[PieceReply]) -> usize {
    varint_len(results.len() as u64)
        + results
            .iter()
            .map(|r| {
                varint_len(r.piece.into())
                    + varint_len(r.reads.len() as u64)
                    + r.reads
                        .iter()
                        .map(|o| key_len(o.key) + 8 + varint_len(!o.columns.0))
                        .sum::<usize>()
                    + varint_len(r.writes.len() as u64)
                    + r.writes.iter().map(|k| key_len(*k)).sum::<usize>()
                    + bytes_len(&r.output)
                    + 1
            })
            .sum::<usize>()
}

/// Read what [`put_replies`] wrote; counts are checked against the bytes
/// left before anything is allocated.
pub fn get_replies(buf: &mut &[u8]) -> Result<Vec<PieceReply>, DecodeError> {
    let n = get_len(buf, 4, "piece replies")?;
    let mut results = Vec::with_capacity(n);
    for _ in 0..n {
        let piece = u16::try_from(get_varint(buf, "piece index")?)
            .map_err(|_| DecodeError::invalid("piece index", "> u16"))?;
        let k = get_len(buf, 18, "reads")?;
        let mut reads = Vec::with_capacity(k);
        for _ in 0..k {
            let key = get_key(buf)?;
            let version = get_version(buf)?;
            let columns = Columns(!get_varint(buf, "read columns")?);
            reads.push(ReadObs {
                columns,
                ..ReadObs::row(key, version)
            });
        }
        let k = get_len(buf, 9, "writes")?;
        let mut writes = Vec::with_capacity(k);
        for _ in 0..k {
            writes.push(get_key(buf)?);
        }
        let output = get_value(buf, "piece output")?;
        let user_abort = get_bool(buf, "user abort flag")?;
        results.push(PieceReply {
            piece,
            reads,
            writes,
            output,
            user_abort,
        });
    }
    Ok(results)
}
