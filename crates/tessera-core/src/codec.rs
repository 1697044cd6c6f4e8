//! The wire codec: explicit, hand-written, little-endian binary encoding.
//!
//! Messages cross process boundaries in the `tcp` runtime and records go to
//! the write-ahead log, so every type that travels has an encoder and a
//! decoder written out field by field (no serde: the layout is the
//! contract, and a decoder must never trust a length it reads).
//!
//! Rules every decoder follows:
//! * **Never panic on bad bytes.** Every read checks what is left; lengths
//!   are checked against the bytes that remain before anything is
//!   allocated, so a forged length cannot make a decoder allocate
//!   gigabytes.
//! * **Validate what later code indexes with.** A decoded procedure is
//!   checked by its workload (shards, key ranges, field numbers), a decoded
//!   message by its protocol (piece indices), so that a malformed frame is
//!   rejected here instead of panicking inside a state machine.
//!
//! A procedure is workload code plus parameters; only the parameters cross
//! the wire. [`encode_txn`] writes the procedure's name and its
//! [`Procedure::encode_params`]; [`decode_txn`] asks the workload in the
//! [`DecodeCx`] to rebuild it ([`crate::workload::Workload::decode_txn`]).

use crate::ids::{Key, TableId, TxnId, Version};
use crate::storage::Store;
use crate::txn::{Procedure, Txn, Value};
use crate::workload::Workload;
use bytes::{BufMut, Bytes, BytesMut};
use std::sync::Arc;
use thiserror::Error;

/// Why bytes could not be decoded.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("truncated input while reading {0}")]
    Truncated(&'static str),
    #[error("unknown {what} tag {tag}")]
    UnknownTag { what: &'static str, tag: u64 },
    #[error("invalid {what}: {detail}")]
    Invalid { what: &'static str, detail: String },
    #[error("{0} trailing bytes after the message")]
    Trailing(usize),
}

impl DecodeError {
    pub fn invalid(what: &'static str, detail: impl Into<String>) -> Self {
        DecodeError::Invalid {
            what,
            detail: detail.into(),
        }
    }
}

/// Why a value could not be encoded.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum EncodeError {
    /// The procedure's workload has no wire encoding (it can run on `sim`
    /// and `local`, not across processes).
    #[error("procedure '{0}' cannot be encoded for the wire (its workload has no codec)")]
    NotEncodable(&'static str),
}

/// What a decoder may need beyond the bytes: the workload that rebuilds
/// procedures from their parameters.
#[derive(Clone, Default)]
pub struct DecodeCx {
    pub workload: Option<Arc<dyn Workload>>,
}

impl DecodeCx {
    pub fn new(workload: Arc<dyn Workload>) -> Self {
        DecodeCx {
            workload: Some(workload),
        }
    }
}

/// A type with a wire encoding.
pub trait Codec: Sized {
    fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError>;
    /// Decode one value from the front of `buf`, advancing it.
    fn decode(buf: &mut &[u8], cx: &DecodeCx) -> Result<Self, DecodeError>;

    /// Encode into a fresh buffer.
    fn to_bytes(&self) -> Result<Bytes, EncodeError> {
        let mut out = BytesMut::new();
        self.encode(&mut out)?;
        Ok(out.freeze())
    }

    /// Decode a whole buffer: trailing bytes are an error.
    fn from_bytes(mut buf: &[u8], cx: &DecodeCx) -> Result<Self, DecodeError> {
        let v = Self::decode(&mut buf, cx)?;
        if buf.is_empty() {
            Ok(v)
        } else {
            Err(DecodeError::Trailing(buf.len()))
        }
    }
}

// ---- primitives -------------------------------------------------------

/// LEB128 unsigned varint.
#[inline]
pub fn put_varint(out: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

/// Bytes [`put_varint`] writes for `v`.
#[inline]
pub fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

pub fn get_varint(buf: &mut &[u8], what: &'static str) -> Result<u64, DecodeError> {
    let mut v: u64 = 0;
    for i in 0..10 {
        let (&b, rest) = buf.split_first().ok_or(DecodeError::Truncated(what))?;
        *buf = rest;
        if i == 9 && b > 1 {
            return Err(DecodeError::invalid(what, "varint overflows 64 bits"));
        }
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(DecodeError::invalid(what, "varint longer than 10 bytes"))
}

pub fn get_u8(buf: &mut &[u8], what: &'static str) -> Result<u8, DecodeError> {
    let (&b, rest) = buf.split_first().ok_or(DecodeError::Truncated(what))?;
    *buf = rest;
    Ok(b)
}

pub fn get_bool(buf: &mut &[u8], what: &'static str) -> Result<bool, DecodeError> {
    match get_u8(buf, what)? {
        0 => Ok(false),
        1 => Ok(true),
        b => Err(DecodeError::invalid(what, format!("boolean byte {b}"))),
    }
}

pub fn get_u32(buf: &mut &[u8], what: &'static str) -> Result<u32, DecodeError> {
    let b = take(buf, 4, what)?;
    Ok(u32::from_le_bytes(b.try_into().expect("4 bytes")))
}

pub fn get_u64(buf: &mut &[u8], what: &'static str) -> Result<u64, DecodeError> {
    let b = take(buf, 8, what)?;
    Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

/// The next `n` bytes.
pub fn take<'a>(buf: &mut &'a [u8], n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
    if buf.len() < n {
        return Err(DecodeError::Truncated(what));
    }
    let (head, rest) = buf.split_at(n);
    *buf = rest;
    Ok(head)
}

/// A count of items that each take at least `min_item` bytes: rejected when
/// the rest of the buffer cannot hold them (so it is safe to allocate).
pub fn get_len(buf: &mut &[u8], min_item: usize, what: &'static str) -> Result<usize, DecodeError> {
    let n = get_varint(buf, what)?;
    let fits = (n as u128) * (min_item.max(1) as u128) <= buf.len() as u128;
    if !fits {
        return Err(DecodeError::Truncated(what));
    }
    Ok(n as usize)
}

/// Length-prefixed bytes.
#[inline]
pub fn put_bytes(out: &mut BytesMut, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.put_slice(b);
}

pub fn bytes_len(b: &[u8]) -> usize {
    varint_len(b.len() as u64) + b.len()
}

pub fn get_bytes<'a>(buf: &mut &'a [u8], what: &'static str) -> Result<&'a [u8], DecodeError> {
    let n = get_len(buf, 1, what)?;
    take(buf, n, what)
}

/// Length-prefixed bytes as an owned [`Value`].
pub fn get_value(buf: &mut &[u8], what: &'static str) -> Result<Value, DecodeError> {
    Ok(Bytes::copy_from_slice(get_bytes(buf, what)?))
}

pub fn put_str(out: &mut BytesMut, s: &str) {
    put_bytes(out, s.as_bytes());
}

pub fn get_str<'a>(buf: &mut &'a [u8], what: &'static str) -> Result<&'a str, DecodeError> {
    std::str::from_utf8(get_bytes(buf, what)?).map_err(|_| DecodeError::invalid(what, "not UTF-8"))
}

/// A key: table as a varint, row as 8 fixed bytes (rows built by
/// [`Key::in_shard`] have high bits set; a varint would take 9-10 bytes).
#[inline]
pub fn put_key(out: &mut BytesMut, k: Key) {
    put_varint(out, u64::from(k.table.0));
    out.put_u64_le(k.row);
}

pub fn key_len(k: Key) -> usize {
    varint_len(u64::from(k.table.0)) + 8
}

pub fn get_key(buf: &mut &[u8]) -> Result<Key, DecodeError> {
    let table = get_varint(buf, "key table")?;
    let table = u32::try_from(table).map_err(|_| DecodeError::invalid("key table", "> u32"))?;
    let row = get_u64(buf, "key row")?;
    Ok(Key {
        table: TableId(table),
        row,
    })
}

#[inline]
pub fn put_txn_id(out: &mut BytesMut, t: TxnId) {
    out.put_u64_le(t.0);
}

pub fn get_txn_id(buf: &mut &[u8]) -> Result<TxnId, DecodeError> {
    Ok(TxnId(get_u64(buf, "txn id")?))
}

pub fn get_version(buf: &mut &[u8]) -> Result<Version, DecodeError> {
    Ok(Version(get_u64(buf, "version")?))
}

// ---- procedures -------------------------------------------------------

/// A procedure on the wire: its name, then its parameters as one
/// length-prefixed blob (so the workload decodes from exactly its bytes).
pub fn encode_txn(txn: &dyn Procedure, out: &mut BytesMut) -> Result<(), EncodeError> {
    put_str(out, txn.name());
    let mut params = BytesMut::new();
    txn.encode_params(&mut params)?;
    put_bytes(out, &params);
    Ok(())
}

pub fn decode_txn(buf: &mut &[u8], cx: &DecodeCx) -> Result<Txn, DecodeError> {
    let name = get_str(buf, "procedure name")?;
    let params = get_bytes(buf, "procedure parameters")?;
    let wl = cx
        .workload
        .as_ref()
        .ok_or_else(|| DecodeError::invalid("procedure", "no workload to decode it with"))?;
    wl.decode_txn(name, params)
}

// ---- stores -----------------------------------------------------------

/// A store image (checkpoints, end-of-run dumps): every record's key,
/// version and value, sorted by key. Protocol metadata other than the
/// version (locks, timestamps) is volatile and not written.
pub fn encode_store(store: &Store, out: &mut BytesMut) {
    let recs = store.records_sorted();
    put_varint(out, recs.len() as u64);
    for (k, r) in recs {
        put_key(out, k);
        out.put_u64_le(r.meta.version.0);
        put_bytes(out, &r.value);
    }
}

pub fn decode_store(buf: &mut &[u8]) -> Result<Store, DecodeError> {
    let n = get_len(buf, 10, "store records")?;
    let mut store = Store::new();
    for _ in 0..n {
        let k = get_key(buf)?;
        let v = get_version(buf)?;
        let value = get_value(buf, "record value")?;
        store.install(k, value, v);
    }
    Ok(store)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn varints_round_trip(v: u64) {
            let mut out = BytesMut::new();
            put_varint(&mut out, v);
            prop_assert_eq!(out.len(), varint_len(v));
            let mut b = &out[..];
            prop_assert_eq!(get_varint(&mut b, "v").unwrap(), v);
            prop_assert!(b.is_empty());
        }

        #[test]
        fn primitives_never_panic_on_garbage(bytes: Vec<u8>) {
            let mut b = &bytes[..];
            let _ = get_varint(&mut b, "v");
            let mut b = &bytes[..];
            let _ = get_bytes(&mut b, "b");
            let mut b = &bytes[..];
            let _ = decode_store(&mut b);
            let mut b = &bytes[..];
            let _ = decode_txn(&mut b, &DecodeCx::default());
        }

        #[test]
        fn stores_round_trip(recs in proptest::collection::vec((0u32..4, any::<u64>(), any::<u64>(), proptest::collection::vec(any::<u8>(), 0..20)), 0..30)) {
            let mut s = Store::new();
            for (t, row, ver, val) in &recs {
                s.install(Key::new(*t, *row), Bytes::copy_from_slice(val), Version(*ver));
            }
            let mut out = BytesMut::new();
            encode_store(&s, &mut out);
            let mut b = &out[..];
            let d = decode_store(&mut b).unwrap();
            prop_assert!(b.is_empty());
            let a: Vec<_> = s.records_sorted().into_iter().map(|(k, r)| (k, r.meta.version, r.value.clone())).collect();
            let c: Vec<_> = d.records_sorted().into_iter().map(|(k, r)| (k, r.meta.version, r.value.clone())).collect();
            prop_assert_eq!(a, c);
        }
    }

    #[test]
    fn forged_lengths_are_rejected_before_allocating() {
        let mut out = BytesMut::new();
        put_varint(&mut out, u64::MAX / 2);
        let mut b = &out[..];
        assert_eq!(get_len(&mut b, 1, "n"), Err(DecodeError::Truncated("n")));
        let over = [0xffu8; 11];
        assert!(get_varint(&mut &over[..], "v").is_err());
    }
}
