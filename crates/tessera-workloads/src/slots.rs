//! Helpers shared by the fixed-slot workloads ([`crate::tatp`],
//! [`crate::taobench`]): every record they touch exists from the load on,
//! so they run on the memory-node protocols, which find records but never
//! allocate them (OOCC §VIII.A: fixed-size records in a hash table).
//!
//! A transaction is a list of accesses `(key, write)` on keys built by
//! [`Key::in_shard`]; [`pieces_by_shard`] groups them into one deferrable,
//! input-free piece per shard (as YCSB does), and the procedures compute
//! new values from the values read and a seed drawn at generation, so that
//! `execute` stays deterministic.

use crate::{key_shard, mix64};
use bytes::Bytes;
use rand::Rng;
use tessera_core::txn::{Access, PieceKind, PieceSpec, Value};
use tessera_core::Key;

/// One piece per shard the accesses touch, in ascending shard order; within
/// a piece the keys keep the order they were drawn in. A key drawn twice is
/// accessed once (written if either draw writes). Every key is read; the
/// written ones are also declared as writes.
pub(crate) fn pieces_by_shard(accesses: &[(Key, bool)]) -> Vec<PieceSpec> {
    let mut sorted: Vec<(Key, bool)> = Vec::with_capacity(accesses.len());
    for &(key, write) in accesses {
        match sorted.iter_mut().find(|(k, _)| *k == key) {
            Some(a) => a.1 |= write,
            None => sorted.push((key, write)),
        }
    }
    // Stable: the draw order survives within a shard.
    sorted.sort_by_key(|(k, _)| key_shard(*k));
    sorted
        .chunk_by(|a, b| key_shard(a.0) == key_shard(b.0))
        .map(|run| PieceSpec {
            shard: key_shard(run[0].0),
            reads: run.iter().map(|(k, _)| Access::all(*k)).collect(),
            writes: run
                .iter()
                .filter(|(_, w)| *w)
                .map(|(k, _)| Access::all(*k))
                .collect(),
            kind: PieceKind::Deferrable,
            inputs: Vec::new(),
            dynamic: false,
        })
        .collect()
}

/// Fill `buf` with bytes derived from `seed` (SplitMix64 stream).
pub(crate) fn fill(buf: &mut [u8], seed: u64) {
    let mut h = seed;
    for chunk in buf.chunks_mut(8) {
        h = mix64(h);
        chunk.copy_from_slice(&h.to_le_bytes()[..chunk.len()]);
    }
}

/// A seed for one key of one table, distinct across tables and rows.
pub(crate) fn key_seed(key: Key) -> u64 {
    mix64(mix64(u64::from(key.table.0)) ^ key.row)
}

/// `old` (or `size` zero bytes when missing) with bytes `range` replaced by
/// a hash of their old contents and `seed`: an update whose new value
/// depends on the value read.
pub(crate) fn rewrite(
    old: Option<&Value>,
    size: usize,
    range: std::ops::Range<usize>,
    seed: u64,
) -> Value {
    let mut buf = Vec::with_capacity(size);
    if let Some(v) = old {
        buf.extend_from_slice(&v[..v.len().min(size)]);
    }
    buf.resize(size, 0);
    let mut h = seed;
    for chunk in buf[range.clone()].chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        h = mix64(h ^ u64::from_le_bytes(w));
    }
    fill(&mut buf[range], h);
    Bytes::from(buf)
}

/// An index drawn with probability proportional to `weights[i]` (their sum
/// must be positive).
pub(crate) fn pick<R: Rng + ?Sized>(weights: &[u64], rng: &mut R) -> usize {
    let total: u64 = weights.iter().sum();
    let mut x = rng.random_range(0..total);
    for (i, &w) in weights.iter().enumerate() {
        if x < w {
            return i;
        }
        x -= w;
    }
    unreachable!("x < total")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;
    use tessera_core::ShardId;

    #[test]
    fn pieces_group_by_shard_and_merge_duplicates() {
        let k = |s, r| Key::in_shard(3, ShardId(s), r);
        let p = pieces_by_shard(&[
            (k(1, 5), false),
            (k(0, 2), true),
            (k(1, 4), true),
            (k(1, 5), true),
        ]);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].shard, ShardId(0));
        assert_eq!(p[1].shard, ShardId(1));
        let keys: Vec<Key> = p[1].reads.iter().map(|a| a.key).collect();
        assert_eq!(
            keys,
            vec![k(1, 5), k(1, 4)],
            "draw order kept, duplicate merged"
        );
        assert_eq!(p[1].writes.len(), 2, "the duplicate's write is kept");
        assert_eq!(p[0].writes.len(), 1);
    }

    #[test]
    fn rewrite_changes_only_its_range_and_depends_on_the_old_value() {
        let old = Bytes::from(vec![7u8; 16]);
        let new = rewrite(Some(&old), 16, 8..16, 42);
        assert_eq!(&new[..8], &old[..8]);
        assert_ne!(&new[8..], &old[8..]);
        let other = Bytes::from(vec![9u8; 16]);
        assert_ne!(&rewrite(Some(&other), 16, 8..16, 42)[8..], &new[8..]);
        assert_eq!(rewrite(Some(&old), 16, 8..16, 42), new, "deterministic");
    }

    #[test]
    fn pick_follows_the_weights() {
        let mut rng = SmallRng::seed_from_u64(3);
        let mut n = [0u32; 3];
        for _ in 0..30_000 {
            n[pick(&[1, 0, 3], &mut rng)] += 1;
        }
        assert_eq!(n[1], 0);
        let share = f64::from(n[2]) / 30_000.0;
        assert!((share - 0.75).abs() < 0.02, "{share}");
    }
}
