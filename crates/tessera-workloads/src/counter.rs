//! NOCC's micro-benchmark (NOCC §1 Fig. 1, §4 Figs. 3–4): clients read or
//! increment a single counter.
//!
//! Each transaction picks one key among [`CounterConfig::keys`] (zipf θ;
//! with one key, every client hits the same counter) and, with probability
//! [`CounterConfig::write_ratio`], increments it (read-modify-write);
//! otherwise it only reads it. Counters live on one shard, since NOCC has a
//! single store. They reuse the micro-benchmark's encoding (8 bytes, little
//! endian) so [`crate::micro::sum_counters`] checks a run: the sum equals
//! the committed increments.

use crate::error::{check_positive, ConfigError};
use crate::micro::{decode_counter, encode_counter};
use crate::zipf::Zipf;
use rand::rngs::SmallRng;
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tessera_core::storage::Store;
use tessera_core::txn::{Access, PieceKind, PieceResult, PieceSpec, Procedure, Txn, Value};
use tessera_core::workload::{ClientSlot, TxnGenerator, Workload};
use tessera_core::{Key, ShardId};

/// The table the counters live in.
pub const TABLE: u32 = 0;

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CounterConfig {
    /// Counters. Default 1 (NOCC Figs. 1, 3, 4a: one contended counter).
    pub keys: u64,
    /// Share of transactions that increment; the rest read. Default 0.2
    /// (NOCC Fig. 1).
    pub write_ratio: f64,
    /// Zipf exponent of the key choice in `[0, 1.5)`. Default 0.
    pub zipf_theta: f64,
}

impl Default for CounterConfig {
    fn default() -> Self {
        CounterConfig {
            keys: 1,
            write_ratio: 0.2,
            zipf_theta: 0.0,
        }
    }
}

impl CounterConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_positive("keys", self.keys)?;
        if !(0.0..=1.0).contains(&self.write_ratio) {
            return Err(ConfigError::new(
                "write_ratio",
                format!("must be in [0, 1], got {}", self.write_ratio),
            ));
        }
        Zipf::new(self.keys, self.zipf_theta).map_err(|e| ConfigError {
            param: "zipf_theta",
            reason: e.reason,
        })?;
        Ok(())
    }
}

/// The workload.
pub struct Counter {
    cfg: CounterConfig,
    zipf: Zipf,
}

impl Counter {
    pub fn new(cfg: CounterConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let zipf = Zipf::new(cfg.keys, cfg.zipf_theta).expect("validated");
        Ok(Counter { cfg, zipf })
    }

    pub fn key(rank: u64) -> Key {
        Key::in_shard(TABLE, ShardId(0), rank)
    }
}

impl Workload for Counter {
    fn name(&self) -> &'static str {
        "counter"
    }

    fn shards(&self) -> u32 {
        1
    }

    fn load(&self, shard: ShardId, store: &mut Store) {
        if shard != ShardId(0) {
            return;
        }
        for r in 0..self.cfg.keys {
            store.load(Self::key(r), encode_counter(0));
        }
    }

    fn generator(&self, _client: ClientSlot) -> Box<dyn TxnGenerator> {
        Box::new(CounterGenerator {
            cfg: self.cfg,
            zipf: self.zipf,
        })
    }
}

struct CounterGenerator {
    cfg: CounterConfig,
    zipf: Zipf,
}

impl TxnGenerator for CounterGenerator {
    fn next(&mut self, rng: &mut SmallRng) -> Txn {
        let key = Counter::key(self.zipf.sample(rng));
        let write = rng.random::<f64>() < self.cfg.write_ratio;
        Arc::new(CounterTxn::new(key, write))
    }
}

/// Read one counter, or increment it.
#[derive(Debug)]
pub struct CounterTxn {
    pieces: [PieceSpec; 1],
    write: bool,
}

impl CounterTxn {
    pub fn new(key: Key, write: bool) -> Self {
        CounterTxn {
            pieces: [PieceSpec {
                shard: ShardId(0),
                reads: vec![Access::all(key)],
                writes: if write {
                    vec![Access::all(key)]
                } else {
                    Vec::new()
                },
                kind: PieceKind::Immediate,
                inputs: Vec::new(),
                dynamic: false,
            }],
            write,
        }
    }
}

impl Procedure for CounterTxn {
    fn name(&self) -> &'static str {
        if self.write {
            "increment"
        } else {
            "read"
        }
    }

    fn pieces(&self) -> &[PieceSpec] {
        &self.pieces
    }

    fn execute(&self, _piece: usize, reads: &[Option<&Value>], _inputs: &[Value]) -> PieceResult {
        let old = decode_counter(reads[0]);
        let writes = if self.write {
            vec![(self.pieces[0].reads[0].key, encode_counter(old + 1))]
        } else {
            Vec::new()
        };
        PieceResult {
            writes,
            output: encode_counter(old),
            user_abort: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn write_ratio_and_key_range_hold() {
        let w = Counter::new(CounterConfig {
            keys: 10,
            write_ratio: 0.3,
            zipf_theta: 0.9,
        })
        .unwrap();
        let mut g = w.generator(ClientSlot {
            id: 0,
            home: ShardId(0),
        });
        let mut rng = SmallRng::seed_from_u64(7);
        let n = 20_000;
        let mut writes = 0;
        for _ in 0..n {
            let t = g.next(&mut rng);
            let k = t.pieces()[0].reads[0].key;
            assert!(crate::key_rank(k) < 10);
            writes += usize::from(!t.read_only());
        }
        let share = writes as f64 / n as f64;
        assert!((share - 0.3).abs() < 0.02, "write share {share}");
    }

    #[test]
    fn increments_add_one_and_reads_write_nothing() {
        let k = Counter::key(0);
        let inc = CounterTxn::new(k, true);
        let v = encode_counter(41);
        let r = inc.execute(0, &[Some(&v)], &[]);
        assert_eq!(decode_counter(Some(&r.writes[0].1)), 42);
        let rd = CounterTxn::new(k, false);
        assert!(rd.execute(0, &[Some(&v)], &[]).writes.is_empty());
        assert!(rd.read_only());
    }

    #[test]
    fn bad_parameters_name_themselves() {
        let bad = |c: CounterConfig| Counter::new(c).err().unwrap().param;
        let d = CounterConfig::default();
        assert_eq!(bad(CounterConfig { keys: 0, ..d }), "keys");
        assert_eq!(
            bad(CounterConfig {
                write_ratio: 1.5,
                ..d
            }),
            "write_ratio"
        );
        assert_eq!(
            bad(CounterConfig {
                zipf_theta: 2.0,
                ..d
            }),
            "zipf_theta"
        );
    }
}
