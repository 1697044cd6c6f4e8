//! The Janus micro-benchmark (Janus, OSDI '16, §6.2; see
//! `/work/shared/papers/janus-osdi16.txt`).
//!
//! "Each transaction performs 3 read-write accesses on different shards by
//! incrementing 3 randomly chosen key-value pairs. We pre-populate each shard
//! with 1 million key-value pairs [...] choosing keys according to a zipf
//! distribution with a varying zipf coefficient." Janus ran it on 3 shards of
//! 3 replicas and varied the coefficient from 0.5 to 1.0.
//!
//! Here a transaction picks 3 distinct shards uniformly among
//! [`MicroConfig::shards`] (all of them when there are 3; the client's home
//! shard plays no part) and in each a key by zipf rank over
//! [`MicroConfig::keys_per_shard`] (rank 0 is the hottest); the key is
//! [`Key::in_shard`]`(TABLE, shard, rank)`, unique across shards.
//! It has one deferrable, input-free piece per shard (no piece feeds
//! another, Rococo §3.1), each reading and
//! writing its one counter; pieces are ordered by shard.
//!
//! A counter is a `u64`, 8 bytes little-endian. Every row is loaded with 0
//! (so every record has a version from the start); a missing key still reads
//! as 0, so a store loaded with nothing also works.

use crate::error::{check_positive, ConfigError};
use crate::key_rank;
use crate::zipf::Zipf;
use bytes::Bytes;
use bytes::BytesMut;
use rand::rngs::SmallRng;
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tessera_core::codec::{get_len, get_varint, put_varint, DecodeError, EncodeError};
use tessera_core::storage::Store;
use tessera_core::txn::{Access, PieceKind, PieceResult, PieceSpec, Procedure, Txn, Value};
use tessera_core::workload::{ClientSlot, TxnGenerator, TxnProfile, Workload};
use tessera_core::{Key, ShardId, TableId};

/// Counters each transaction increments (Janus §6.2: 3).
pub const COUNTERS_PER_TXN: usize = 3;

/// The table the counters live in.
pub const TABLE: u32 = 0;

/// The procedure name of a micro-benchmark transaction.
pub const PROCEDURE: &str = "increment";

/// The micro-benchmark's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MicroConfig {
    /// Shards in the deployment; at least [`COUNTERS_PER_TXN`]. Default 3
    /// (Janus §6.2).
    pub shards: u32,
    /// Counters per shard. Default 1,000,000 (Janus §6.2).
    pub keys_per_shard: u64,
    /// Zipf exponent of the row choice in `[0, 1.5)`; 0 is uniform.
    /// Default 0.
    pub zipf_theta: f64,
}

impl Default for MicroConfig {
    fn default() -> Self {
        MicroConfig {
            shards: 3,
            keys_per_shard: 1_000_000,
            zipf_theta: 0.0,
        }
    }
}

impl MicroConfig {
    /// Check every parameter; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if (self.shards as usize) < COUNTERS_PER_TXN {
            return Err(ConfigError::new(
                "shards",
                format!(
                    "must be >= {COUNTERS_PER_TXN} (each transaction touches \
                     {COUNTERS_PER_TXN} shards), got {}",
                    self.shards
                ),
            ));
        }
        check_positive("keys_per_shard", self.keys_per_shard)?;
        zipf_for(self)?;
        Ok(())
    }
}

fn zipf_for(cfg: &MicroConfig) -> Result<Zipf, ConfigError> {
    Zipf::new(cfg.keys_per_shard, cfg.zipf_theta).map_err(|e| ConfigError {
        param: if e.param == "theta" {
            "zipf_theta"
        } else {
            "keys_per_shard"
        },
        reason: e.reason,
    })
}

/// Decode a counter: the first 8 bytes little-endian (shorter values are
/// zero-extended); a missing key is 0.
#[inline]
pub fn decode_counter(v: Option<&Value>) -> u64 {
    match v {
        None => 0,
        Some(b) => {
            let mut buf = [0u8; 8];
            let n = b.len().min(8);
            buf[..n].copy_from_slice(&b[..n]);
            u64::from_le_bytes(buf)
        }
    }
}

/// Encode a counter as 8 bytes little-endian.
#[inline]
pub fn encode_counter(x: u64) -> Value {
    Bytes::copy_from_slice(&x.to_le_bytes())
}

/// The sum of every counter in a store: after a run, the sum over all
/// shards must be [`COUNTERS_PER_TXN`] × the committed transactions.
pub fn sum_counters(store: &Store) -> u64 {
    store
        .records_sorted()
        .into_iter()
        .filter(|(k, _)| k.table == TableId(TABLE))
        .map(|(_, r)| decode_counter(Some(&r.value)))
        .fold(0u64, u64::wrapping_add)
}

/// The Janus micro-benchmark.
#[derive(Clone, Debug)]
pub struct Micro {
    cfg: MicroConfig,
    zipf: Zipf,
}

impl Micro {
    /// Validate `cfg` and build the workload.
    pub fn new(cfg: MicroConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let zipf = zipf_for(&cfg)?;
        Ok(Micro { cfg, zipf })
    }

    pub fn config(&self) -> &MicroConfig {
        &self.cfg
    }

    /// A concrete generator (no boxing), e.g. for benchmarks.
    pub fn micro_generator(&self) -> MicroGenerator {
        MicroGenerator {
            shards: self.cfg.shards,
            zipf: self.zipf,
        }
    }
}

impl Workload for Micro {
    fn name(&self) -> &'static str {
        "micro"
    }

    fn shards(&self) -> u32 {
        self.cfg.shards
    }

    /// Every row of the shard, as counter 0 (a shared static value: loading
    /// costs one hash insert per row and no allocation).
    fn load(&self, shard: ShardId, store: &mut Store) {
        assert!(
            shard.0 < self.cfg.shards,
            "micro: shard {} out of range (shards = {})",
            shard.0,
            self.cfg.shards
        );
        static ZERO: [u8; 8] = [0; 8];
        let zero = Bytes::from_static(&ZERO);
        store.reserve(TableId(TABLE), self.cfg.keys_per_shard as usize);
        for row in 0..self.cfg.keys_per_shard {
            store.load(Key::in_shard(TABLE, shard, row), zero.clone());
        }
    }

    fn generator(&self, _client: ClientSlot) -> Box<dyn TxnGenerator> {
        Box::new(self.micro_generator())
    }

    /// One transaction type; any sample shows its shape (the rows differ,
    /// the tables and columns do not).
    fn profiles(&self) -> Vec<TxnProfile> {
        use rand::SeedableRng;
        let sample = self
            .micro_generator()
            .generate(&mut SmallRng::seed_from_u64(0));
        vec![TxnProfile::of(&sample)]
    }

    /// Rebuilds an [`IncrementTxn`]: [`COUNTERS_PER_TXN`] pieces on
    /// distinct, ascending shards of this deployment, ranks in range.
    fn decode_txn(&self, name: &str, params: &[u8]) -> Result<Txn, DecodeError> {
        if name != PROCEDURE {
            return Err(DecodeError::invalid(
                "procedure",
                format!("micro has no procedure '{name}'"),
            ));
        }
        let mut buf = params;
        let n = get_len(&mut buf, 2, "micro pieces")?;
        if n != COUNTERS_PER_TXN {
            return Err(DecodeError::invalid(
                "micro pieces",
                format!("{n}, expected {COUNTERS_PER_TXN}"),
            ));
        }
        let mut pieces: Vec<PieceSpec> = Vec::with_capacity(n);
        for _ in 0..n {
            let shard = get_varint(&mut buf, "micro shard")?;
            let rank = get_varint(&mut buf, "micro rank")?;
            if shard >= u64::from(self.cfg.shards) || rank >= self.cfg.keys_per_shard {
                return Err(DecodeError::invalid(
                    "micro counter",
                    format!("shard {shard} rank {rank} outside the deployment"),
                ));
            }
            let shard = ShardId(shard as u32);
            if pieces.last().is_some_and(|p| p.shard >= shard) {
                return Err(DecodeError::invalid("micro shards", "not ascending"));
            }
            pieces.push(counter_piece(shard, rank));
        }
        if !buf.is_empty() {
            return Err(DecodeError::Trailing(buf.len()));
        }
        Ok(Arc::new(IncrementTxn { pieces }))
    }
}

/// Generates [`IncrementTxn`]s.
#[derive(Clone, Debug)]
pub struct MicroGenerator {
    shards: u32,
    zipf: Zipf,
}

impl MicroGenerator {
    /// One transaction, as a concrete type.
    pub fn generate<R: Rng + ?Sized>(&mut self, rng: &mut R) -> IncrementTxn {
        let mut shards = [0u32; COUNTERS_PER_TXN];
        for i in 0..COUNTERS_PER_TXN {
            shards[i] = loop {
                let s = rng.random_range(0..self.shards);
                if !shards[..i].contains(&s) {
                    break s;
                }
            };
        }
        shards.sort_unstable();
        let pieces = shards
            .iter()
            .map(|&s| counter_piece(ShardId(s), self.zipf.sample(rng)))
            .collect();
        IncrementTxn { pieces }
    }
}

/// The piece that increments counter `rank` of `shard`.
fn counter_piece(shard: ShardId, rank: u64) -> PieceSpec {
    let key = Key::in_shard(TABLE, shard, rank);
    PieceSpec {
        shard,
        reads: vec![Access::all(key)],
        writes: vec![Access::all(key)],
        kind: PieceKind::Deferrable,
        inputs: Vec::new(),
        dynamic: false,
    }
}

impl TxnGenerator for MicroGenerator {
    fn next(&mut self, rng: &mut SmallRng) -> Txn {
        Arc::new(self.generate(rng))
    }
}

/// One micro-benchmark transaction: one piece per shard, each incrementing
/// one counter. Piece outputs are the counters' new values.
#[derive(Clone, Debug)]
pub struct IncrementTxn {
    pieces: Vec<PieceSpec>,
}

impl IncrementTxn {
    /// The counters incremented, as (shard, key), in piece order.
    pub fn counters(&self) -> impl Iterator<Item = (ShardId, Key)> + '_ {
        self.pieces.iter().map(|p| (p.shard, p.writes[0].key))
    }
}

impl Procedure for IncrementTxn {
    fn name(&self) -> &'static str {
        PROCEDURE
    }

    /// Wire parameters: the piece count, then per piece its shard and the
    /// counter's rank (varints).
    fn encode_params(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        put_varint(out, self.pieces.len() as u64);
        for (shard, key) in self.counters() {
            put_varint(out, u64::from(shard.0));
            put_varint(out, key_rank(key));
        }
        Ok(())
    }

    fn pieces(&self) -> &[PieceSpec] {
        &self.pieces
    }

    fn execute(&self, piece: usize, reads: &[Option<&Value>], _inputs: &[Value]) -> PieceResult {
        let key = self.pieces[piece].writes[0].key;
        let old = decode_counter(reads.first().copied().flatten());
        let new = encode_counter(old.wrapping_add(1));
        PieceResult {
            writes: vec![(key, new.clone())],
            output: new,
            user_abort: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Borrow owned read values the way a participant hands them to `execute`.
    fn borrowed(values: &[Option<Value>]) -> Vec<Option<&Value>> {
        values.iter().map(Option::as_ref).collect()
    }
    use crate::{key_rank, key_shard};
    use rand::SeedableRng;
    use tessera_core::Version;

    fn small(shards: u32, keys: u64, theta: f64) -> Micro {
        Micro::new(MicroConfig {
            shards,
            keys_per_shard: keys,
            zipf_theta: theta,
        })
        .unwrap()
    }

    #[test]
    fn config_errors_name_the_parameter() {
        let bad = |cfg: MicroConfig| Micro::new(cfg).unwrap_err().param;
        let d = MicroConfig::default();
        assert_eq!(bad(MicroConfig { shards: 2, ..d }), "shards");
        assert_eq!(bad(MicroConfig { shards: 0, ..d }), "shards");
        assert_eq!(
            bad(MicroConfig {
                keys_per_shard: 0,
                ..d
            }),
            "keys_per_shard"
        );
        for theta in [-1.0, 1.5, f64::NAN] {
            assert_eq!(
                bad(MicroConfig {
                    zipf_theta: theta,
                    ..d
                }),
                "zipf_theta"
            );
        }
        assert!(Micro::new(d).is_ok());
        let msg = Micro::new(MicroConfig { shards: 2, ..d })
            .unwrap_err()
            .to_string();
        assert!(msg.contains("shards") && msg.contains('2'), "{msg}");
    }

    #[test]
    fn txns_touch_three_distinct_shards_once_each() {
        let w = small(5, 1000, 0.99);
        let mut g = w.generator(ClientSlot {
            id: 0,
            home: ShardId(0),
        });
        let mut rng = SmallRng::seed_from_u64(9);
        let mut seen = [0u32; 5];
        for _ in 0..2000 {
            let t = g.next(&mut rng);
            assert_eq!(t.name(), "increment");
            assert!(!t.read_only());
            let p = t.pieces();
            assert_eq!(p.len(), 3);
            assert!(p[0].shard < p[1].shard && p[1].shard < p[2].shard);
            for piece in p {
                seen[piece.shard.0 as usize] += 1;
                assert!(piece.shard.0 < 5);
                assert_eq!(piece.kind, PieceKind::Deferrable);
                assert!(piece.inputs.is_empty());
                assert_eq!(piece.reads.len(), 1);
                assert_eq!(piece.reads, piece.writes);
                let key = piece.reads[0].key;
                assert_eq!(key.table, TableId(0));
                assert_eq!(key_shard(key), piece.shard, "{key:?}");
                assert!(key_rank(key) < 1000, "{key:?}");
                assert_eq!(key, Key::in_shard(TABLE, piece.shard, key_rank(key)));
            }
        }
        // Shards chosen uniformly: each is in 3/5 of the transactions.
        for s in seen {
            assert!((1000..1400).contains(&s), "{seen:?}");
        }
    }

    #[test]
    fn execute_increments_deterministically() {
        let w = small(3, 10, 0.0);
        let mut g = w.micro_generator();
        let mut rng = SmallRng::seed_from_u64(1);
        let t = g.generate(&mut rng);
        for i in 0..3 {
            let r0 = t.execute(i, &[None], &[]);
            assert_eq!(r0.writes.len(), 1);
            assert_eq!(r0.writes[0].0, t.pieces()[i].writes[0].key);
            assert_eq!(decode_counter(Some(&r0.writes[0].1)), 1);
            assert_eq!(r0.output, r0.writes[0].1);
            assert!(!r0.user_abort);
            let r = t.execute(i, &[Some(&encode_counter(41))], &[]);
            assert_eq!(&r.writes[0].1[..], &42u64.to_le_bytes());
            let again = t.execute(i, &[Some(&encode_counter(41))], &[]);
            assert_eq!(again.writes, r.writes);
        }
    }

    /// Apply transactions serially to loaded stores: every counter ends at
    /// the number of transactions that incremented it.
    #[test]
    fn serial_run_counts() {
        let w = small(4, 50, 1.2);
        let mut stores: Vec<Store> = (0..4)
            .map(|s| {
                let mut st = Store::new();
                w.load(ShardId(s), &mut st);
                st
            })
            .collect();
        assert!(stores.iter().all(|s| s.len() == 50));
        for (s, st) in stores.iter().enumerate() {
            let shard = ShardId(s as u32);
            assert_eq!(
                st.get(Key::in_shard(TABLE, shard, 7)).unwrap().meta.version,
                Version::INITIAL
            );
            // Every loaded key is one of this shard's ranks.
            for (k, _) in st.records_sorted() {
                assert_eq!(key_shard(k), shard, "{k:?}");
                assert!(key_rank(k) < 50, "{k:?}");
            }
        }
        // Keys are unique across shards.
        let all: std::collections::HashSet<Key> = stores
            .iter()
            .flat_map(|st| st.records_sorted().into_iter().map(|(k, _)| k))
            .collect();
        assert_eq!(all.len(), 4 * 50);
        let mut g = w.micro_generator();
        let mut rng = SmallRng::seed_from_u64(5);
        let mut expect = std::collections::HashMap::new();
        let n = 3000u64;
        for i in 0..n {
            let t = g.generate(&mut rng);
            for (p, spec) in t.pieces().iter().enumerate() {
                let st = &mut stores[spec.shard.0 as usize];
                let reads: Vec<Option<Value>> = spec
                    .reads
                    .iter()
                    .map(|a| st.get(a.key).map(|r| r.value.clone()))
                    .collect();
                for (k, v) in t.execute(p, &borrowed(&reads), &[]).writes {
                    st.install(k, v, Version(i + 1));
                }
                assert_eq!(key_shard(spec.writes[0].key), spec.shard);
                *expect
                    .entry((spec.shard, spec.writes[0].key))
                    .or_insert(0u64) += 1;
            }
        }
        let total: u64 = stores.iter().map(sum_counters).sum();
        assert_eq!(total, 3 * n);
        for ((s, k), c) in expect {
            let v = stores[s.0 as usize].get(k).unwrap();
            assert_eq!(decode_counter(Some(&v.value)), c);
        }
        // θ = 1.2: rank 0 is the hottest on every shard.
        for (s, st) in stores.iter().enumerate() {
            let shard = ShardId(s as u32);
            let count = |rank| {
                decode_counter(Some(
                    &st.get(Key::in_shard(TABLE, shard, rank)).unwrap().value,
                ))
            };
            let (c0, c9) = (count(0), count(9));
            assert!(c0 > 3 * c9, "{c0} vs {c9}");
        }
    }

    #[test]
    fn loads_a_million_rows() {
        let w = Micro::new(MicroConfig::default()).unwrap();
        let mut st = Store::new();
        w.load(ShardId(2), &mut st);
        assert_eq!(st.len(), 1_000_000);
        for rank in [0, 999_999] {
            let r = st.get(Key::in_shard(TABLE, ShardId(2), rank)).unwrap();
            assert_eq!(decode_counter(Some(&r.value)), 0);
        }
        assert!(st
            .get(Key::in_shard(TABLE, ShardId(2), 1_000_000))
            .is_none());
        assert!(st.get(Key::in_shard(TABLE, ShardId(1), 0)).is_none());
    }

    #[test]
    fn counter_codec() {
        assert_eq!(decode_counter(None), 0);
        assert_eq!(decode_counter(Some(&encode_counter(u64::MAX))), u64::MAX);
        assert_eq!(decode_counter(Some(&Bytes::from_static(&[1]))), 1);
    }
}
