//! The participant's state as one byte string: what a snapshot of its log
//! holds (a Paxos group's compaction, a write-ahead log's checkpoint).
//!
//! An image is the store's data, the prepared transactions with their
//! coordinators and buffered writes, and the transactions remembered as
//! committed. The commits matter after a restore: a retransmitted
//! CommitOnePhase for a transaction that committed before the snapshot must
//! be answered "committed", not treated as a stranger and refused.
//!
//! Lock words are not data (only a leader holds locks), and neither are the
//! empty placeholders OCC locks for inserts (they read as missing): both
//! are left out, so the replicas of a shard write equal images of equal
//! data.

use crate::paxos::codec::{get_bytes, get_u32, get_u64, put_bytes, put_u32, put_u64};
use crate::paxos::DecodeError;
use crate::twopc::log::{get_key, put_key};
use bytes::Bytes;
use tessera_core::ids::{Key, NodeId, TxnId, Version};
use tessera_core::storage::{Record, Store};
use tessera_core::txn::Value;

/// A prepared transaction of an image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedEntry {
    pub txn: TxnId,
    pub coord: NodeId,
    pub writes: Vec<(Key, Value)>,
}

/// A decoded image.
#[derive(Debug, Default)]
pub struct Image {
    pub store: Store,
    pub prepared: Vec<PreparedEntry>,
    pub committed: Vec<TxnId>,
}

/// A record OCC created to lock a key that does not exist yet: it reads as
/// missing, and no replica but the leader has it.
pub fn is_placeholder(r: &Record) -> bool {
    r.meta.version == Version::INITIAL && r.value.is_empty()
}

/// Encode an image of `store` with the writes of `installed` applied on top
/// (transactions whose commit is appended but not yet back), then
/// `prepared` and `committed`, each sorted for a deterministic encoding.
pub fn encode(
    store: &Store,
    installed: &[(TxnId, &[Key], &[Value])],
    mut prepared: Vec<(TxnId, NodeId, &[Key], &[Value])>,
    mut committed: Vec<TxnId>,
) -> Bytes {
    let mut out = Vec::new();
    let mut recs: Vec<(Key, Version, Value)> = store
        .records_sorted()
        .into_iter()
        .filter(|(_, r)| !is_placeholder(r))
        .map(|(k, r)| (k, r.meta.version, r.value.clone()))
        .collect();
    if !installed.is_empty() {
        let mut s = Store::new();
        for (k, v, val) in recs {
            s.install(k, val, v);
        }
        for (txn, keys, values) in installed {
            for (k, v) in keys.iter().zip(values.iter()) {
                s.install(*k, v.clone(), txn.version());
            }
        }
        recs = s
            .records_sorted()
            .into_iter()
            .map(|(k, r)| (k, r.meta.version, r.value.clone()))
            .collect();
    }
    put_u64(&mut out, recs.len() as u64);
    for (k, v, val) in recs {
        put_key(&mut out, k);
        put_u64(&mut out, v.0);
        put_bytes(&mut out, &val);
    }
    prepared.sort_unstable_by_key(|p| p.0);
    put_u64(&mut out, prepared.len() as u64);
    for (txn, coord, keys, values) in prepared {
        put_u64(&mut out, txn.0);
        put_u32(&mut out, coord.0);
        put_u32(&mut out, keys.len() as u32);
        for (k, v) in keys.iter().zip(values) {
            put_key(&mut out, *k);
            put_bytes(&mut out, v);
        }
    }
    committed.sort_unstable();
    committed.dedup();
    put_u64(&mut out, committed.len() as u64);
    for t in committed {
        put_u64(&mut out, t.0);
    }
    Bytes::from(out)
}

/// Decode an image; counts are checked against the bytes left, so garbage
/// is an error, never a huge allocation.
pub fn decode(mut input: &[u8]) -> Result<Image, DecodeError> {
    let r = &mut input;
    let mut img = Image::default();
    let n = count(r, 12 + 8 + 4)?;
    for _ in 0..n {
        let k = get_key(r)?;
        let v = Version(get_u64(r)?);
        img.store.install(k, get_bytes(r)?, v);
    }
    let n = count(r, 8 + 4 + 4)?;
    for _ in 0..n {
        let txn = TxnId(get_u64(r)?);
        let coord = NodeId(get_u32(r)?);
        let w = get_u32(r)? as usize;
        if w > r.len() / (12 + 4) {
            return Err(truncated(w * 16, r.len()));
        }
        let mut writes = Vec::with_capacity(w);
        for _ in 0..w {
            let k = get_key(r)?;
            writes.push((k, get_bytes(r)?));
        }
        img.prepared.push(PreparedEntry { txn, coord, writes });
    }
    let n = count(r, 8)?;
    for _ in 0..n {
        img.committed.push(TxnId(get_u64(r)?));
    }
    Ok(img)
}

fn truncated(needed: usize, left: usize) -> DecodeError {
    DecodeError::Truncated { needed, left }
}

/// A count of items of at least `min` bytes each.
fn count(r: &mut &[u8], min: usize) -> Result<usize, DecodeError> {
    let n = get_u64(r)?;
    if n > (r.len() / min) as u64 {
        return Err(truncated(n.saturating_mul(min as u64) as usize, r.len()));
    }
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_round_trip_with_pending_installs_and_no_placeholders() {
        let mut s = Store::new();
        s.install(Key::new(0, 1), Value::from_static(b"a"), TxnId(5).version());
        s.install(Key::new(0, 2), Value::new(), Version::INITIAL);
        let (k3, v3) = ([Key::new(0, 3)], [Value::from_static(b"c")]);
        let (k4, v4) = ([Key::new(0, 4)], [Value::from_static(b"d")]);
        let bytes = encode(
            &s,
            &[(TxnId(9), &k3, &v3)],
            vec![(TxnId(8), NodeId(2), &k4, &v4)],
            vec![TxnId(9), TxnId(5), TxnId(9)],
        );
        let img = decode(&bytes).unwrap();
        assert_eq!(img.store.len(), 2, "placeholder left out, t9 installed");
        assert_eq!(
            img.store.get(Key::new(0, 3)).unwrap().meta.version,
            TxnId(9).version()
        );
        assert_eq!(
            img.prepared,
            vec![PreparedEntry {
                txn: TxnId(8),
                coord: NodeId(2),
                writes: vec![(k4[0], v4[0].clone())],
            }]
        );
        assert_eq!(img.committed, vec![TxnId(5), TxnId(9)]);
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        assert!(decode(&[0xff; 24]).is_err());
    }
}
