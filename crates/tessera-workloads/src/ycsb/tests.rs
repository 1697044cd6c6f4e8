use super::*;
use crate::key_shard;
use proptest::prelude::*;
use rand::SeedableRng;
use std::collections::HashSet;
use tessera_core::Version;

fn cfg(partitions: u32, multi: f64) -> YcsbConfig {
    YcsbConfig {
        partitions,
        keys_per_partition: 1000,
        multi_partition: multi,
        ..YcsbConfig::default()
    }
}

/// Structural invariants every generated transaction must satisfy.
fn check_shape(t: &YcsbTxn, c: &YcsbConfig, home: u32) {
    assert_eq!(t.name(), "ycsb");
    let p = t.pieces();
    assert!(!p.is_empty());
    let mut total = 0;
    for (i, piece) in p.iter().enumerate() {
        if i > 0 {
            assert!(p[i - 1].shard < piece.shard, "one piece per shard, sorted");
        }
        assert!(piece.shard.0 < c.partitions);
        assert_eq!(piece.kind, PieceKind::Deferrable);
        assert!(piece.inputs.is_empty());
        let keys: HashSet<Key> = piece.reads.iter().map(|a| a.key).collect();
        assert_eq!(keys.len(), piece.reads.len(), "distinct keys");
        for a in &piece.reads {
            assert_eq!(a.key.table, TableId(TABLE));
            assert_eq!(key_shard(a.key), piece.shard, "{:?}", a.key);
            assert!(key_rank(a.key) < c.keys_per_partition, "{:?}", a.key);
            assert_eq!(a.key, Key::in_shard(TABLE, piece.shard, key_rank(a.key)));
            assert_eq!(a.columns, Columns::ALL);
        }
        let ops = t.ops(i);
        assert_eq!(ops.len(), piece.reads.len());
        let rmw: Vec<Key> = ops
            .iter()
            .zip(&piece.reads)
            .filter(|(o, _)| o.rmw)
            .map(|(_, a)| a.key)
            .collect();
        let written: Vec<Key> = piece.writes.iter().map(|a| a.key).collect();
        assert_eq!(rmw, written, "writes are the RMW keys, in read order");
        for (w, o) in piece.writes.iter().zip(ops.iter().filter(|o| o.rmw)) {
            assert!(o.field < c.fields);
            assert_eq!(w.columns, Columns::one(o.field));
        }
        total += piece.reads.len();
    }
    assert_eq!(total, c.ops_per_txn as usize);
    if t.is_multi_partition() {
        assert!(p.len() >= 2);
    } else {
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].shard, ShardId(home));
    }
}

#[test]
fn single_partition_shape_and_read_ratio() {
    let c = cfg(4, 0.0);
    let w = Ycsb::new(c).unwrap();
    let mut g = w.generator(ClientSlot {
        id: 3,
        home: ShardId(2),
    });
    let mut rng = SmallRng::seed_from_u64(11);
    let (mut reads, mut rmws) = (0u32, 0u32);
    for _ in 0..5000 {
        let t = g.next(&mut rng);
        let p = t.pieces();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].shard, ShardId(2));
        assert_eq!(p[0].reads.len(), 10);
        let keys: HashSet<Key> = p[0].reads.iter().map(|a| a.key).collect();
        assert_eq!(keys.len(), 10);
        rmws += p[0].writes.len() as u32;
        reads += (p[0].reads.len() - p[0].writes.len()) as u32;
    }
    let share = f64::from(rmws) / f64::from(reads + rmws);
    assert!((share - 0.2).abs() < 0.01, "RMW share {share}");
}

#[test]
fn concrete_generator_shapes() {
    for (parts, multi, theta) in [(1, 0.0, 0.0), (2, 1.0, 0.0), (8, 0.5, 0.99), (3, 0.2, 1.4)] {
        let c = YcsbConfig {
            zipf_theta: theta,
            ..cfg(parts, multi)
        };
        let w = Ycsb::new(c).unwrap();
        let home = parts - 1;
        let mut g = w.ycsb_generator(ShardId(home + parts)); // modulo
        assert_eq!(g.home(), ShardId(home));
        let mut rng = SmallRng::seed_from_u64(u64::from(parts));
        for _ in 0..2000 {
            check_shape(&g.generate(&mut rng), &c, home);
        }
    }
}

#[test]
fn multi_partition_share_and_spread() {
    let c = cfg(4, 0.2);
    let w = Ycsb::new(c).unwrap();
    let mut g = w.ycsb_generator(ShardId(0));
    let mut rng = SmallRng::seed_from_u64(12);
    let n = 20_000;
    let mut multi = 0;
    let mut per_shard = [0u32; 4];
    for _ in 0..n {
        let t = g.generate(&mut rng);
        if t.pieces().len() > 1 {
            multi += 1;
            for p in t.pieces() {
                per_shard[p.shard.0 as usize] += p.reads.len() as u32;
            }
        }
        assert_eq!(t.pieces().len() > 1, t.is_multi_partition());
    }
    let share = f64::from(multi) / f64::from(n);
    assert!((share - 0.2).abs() < 0.015, "multi share {share}");
    // Operations of multi-partition transactions spread uniformly.
    let total: u32 = per_shard.iter().sum();
    for s in per_shard {
        let f = f64::from(s) / f64::from(total);
        assert!((f - 0.25).abs() < 0.01, "{per_shard:?}");
    }
}

#[test]
fn two_partitions_always_both_when_multi() {
    let w = Ycsb::new(YcsbConfig {
        ops_per_txn: 2,
        ..cfg(2, 1.0)
    })
    .unwrap();
    let mut g = w.ycsb_generator(ShardId(1));
    let mut rng = SmallRng::seed_from_u64(13);
    for _ in 0..1000 {
        let t = g.generate(&mut rng);
        assert_eq!(t.pieces().len(), 2);
        assert_eq!(t.pieces()[0].reads.len(), 1);
    }
}

#[test]
fn distinct_keys_even_when_ops_equal_keys() {
    let c = YcsbConfig {
        keys_per_partition: 10,
        ops_per_txn: 10,
        zipf_theta: 1.4,
        ..YcsbConfig::default()
    };
    let w = Ycsb::new(c).unwrap();
    let mut g = w.ycsb_generator(ShardId(0));
    let mut rng = SmallRng::seed_from_u64(14);
    for _ in 0..200 {
        let t = g.generate(&mut rng);
        let p = &t.pieces()[0];
        assert!(p.reads.iter().all(|a| key_shard(a.key) == p.shard));
        let ranks: HashSet<u64> = p.reads.iter().map(|a| key_rank(a.key)).collect();
        assert_eq!(ranks, (0..10).collect());
    }
}

#[test]
fn load_is_deterministic_and_complete() {
    let w = Ycsb::new(cfg(3, 0.5)).unwrap();
    let load = |s: u32| {
        let mut st = Store::new();
        w.load(ShardId(s), &mut st);
        st
    };
    let (a, b, other) = (load(1), load(1), load(2));
    assert_eq!(a.len(), 1000);
    assert_eq!(other.len(), 1000);
    // Every key of a partition is one of its ranks, so the partitions'
    // key sets are disjoint.
    for (st, shard) in [(&a, ShardId(1)), (&other, ShardId(2))] {
        for (k, _) in st.records_sorted() {
            assert_eq!(k.table, TableId(TABLE));
            assert_eq!(key_shard(k), shard, "{k:?}");
            assert!(key_rank(k) < 1000, "{k:?}");
        }
    }
    for rank in [0u64, 1, 500, 999] {
        let k = Key::in_shard(TABLE, ShardId(1), rank);
        let ra = a.get(k).unwrap();
        assert_eq!(ra.value.len(), 100);
        assert_eq!(ra.meta.version, Version::INITIAL);
        assert_eq!(ra.value, b.get(k).unwrap().value);
        assert_eq!(ra.value, initial_value(1, rank, 100));
        assert!(other.get(k).is_none(), "partition 2 holds no key of 1");
        let ko = Key::in_shard(TABLE, ShardId(2), rank);
        assert_ne!(ra.value, other.get(ko).unwrap().value);
        assert_eq!(other.get(ko).unwrap().value, initial_value(2, rank, 100));
    }
    assert_ne!(
        a.get(Key::in_shard(TABLE, ShardId(1), 0)).unwrap().value,
        a.get(Key::in_shard(TABLE, ShardId(1), 1)).unwrap().value
    );
}

#[test]
fn execute_is_deterministic_and_modifies_one_field() {
    let c = YcsbConfig {
        read_ratio: 0.5,
        ..cfg(3, 1.0)
    };
    let w = Ycsb::new(c).unwrap();
    let mut stores: Vec<Store> = (0..3)
        .map(|s| {
            let mut st = Store::new();
            w.load(ShardId(s), &mut st);
            st
        })
        .collect();
    // The stores as loaded, untouched by the run.
    let loaded = stores.clone();
    let mut g = w.ycsb_generator(ShardId(0));
    let mut rng = SmallRng::seed_from_u64(15);
    let mut seen_write = false;
    for v in 1..=200u64 {
        let t = g.generate(&mut rng);
        for (i, spec) in t.pieces().iter().enumerate() {
            let st = &mut stores[spec.shard.0 as usize];
            let reads: Vec<Option<Value>> = spec
                .reads
                .iter()
                .map(|a| st.get(a.key).map(|r| r.value.clone()))
                .collect();
            let r = t.execute(i, &borrowed(&reads), &[]);
            let again = t.execute(i, &borrowed(&reads), &[]);
            assert_eq!(r.writes, again.writes, "deterministic");
            assert!(r.output.is_empty() && !r.user_abort);
            assert_eq!(r.writes.len(), spec.writes.len());
            let ops = t.ops(i);
            for (k, new) in &r.writes {
                let j = spec.reads.iter().position(|a| a.key == *k).unwrap();
                let old = reads[j].as_ref().unwrap();
                let f = ops[j].field as usize;
                assert_eq!(new.len(), 100);
                assert_eq!(old[..f * 10], new[..f * 10]);
                assert_eq!(old[(f + 1) * 10..], new[(f + 1) * 10..]);
                assert_ne!(old[f * 10..(f + 1) * 10], new[f * 10..(f + 1) * 10]);
                seen_write = true;
            }
            // The write depends on the value read.
            if let Some((k, new)) = r.writes.first() {
                let j = spec.reads.iter().position(|a| a.key == *k).unwrap();
                let mut other = reads.clone();
                let mut changed = other[j].as_ref().unwrap().to_vec();
                let f = ops[j].field as usize;
                changed[f * 10] ^= 1;
                other[j] = Some(Bytes::from(changed));
                assert_ne!(&t.execute(i, &borrowed(&other), &[]).writes[0].1, new);
                // A missing record reads as its initial value: the value
                // it was loaded with.
                let mut missing = reads.clone();
                missing[j] = None;
                let from_initial = t.execute(i, &borrowed(&missing), &[]).writes[0].1.clone();
                let mut init = reads.clone();
                init[j] = Some(loaded[spec.shard.0 as usize].get(*k).unwrap().value.clone());
                assert_eq!(
                    init[j],
                    Some(initial_value(spec.shard.0, key_rank(*k), 100))
                );
                assert_eq!(
                    t.execute(i, &borrowed(&init), &[]).writes[0].1,
                    from_initial
                );
            }
            for (k, new) in r.writes {
                st.install(k, new, Version(v));
            }
        }
    }
    assert!(seen_write);
}

#[test]
fn read_only_and_write_only_extremes() {
    let mut rng = SmallRng::seed_from_u64(16);
    let w = Ycsb::new(YcsbConfig {
        read_ratio: 1.0,
        ..cfg(1, 0.0)
    })
    .unwrap();
    let t = w.ycsb_generator(ShardId(0)).generate(&mut rng);
    assert!(t.read_only());
    let w = Ycsb::new(YcsbConfig {
        read_ratio: 0.0,
        ..cfg(1, 0.0)
    })
    .unwrap();
    let t = w.ycsb_generator(ShardId(0)).generate(&mut rng);
    assert_eq!(t.pieces()[0].writes.len(), 10);
}

#[test]
fn config_errors_name_the_parameter() {
    let d = cfg(4, 0.2);
    let bad = |c: YcsbConfig| Ycsb::new(c).unwrap_err().param;
    assert!(Ycsb::new(d).is_ok());
    assert!(Ycsb::new(YcsbConfig::default()).is_ok());
    assert_eq!(bad(YcsbConfig { partitions: 0, ..d }), "partitions");
    assert_eq!(
        bad(YcsbConfig {
            keys_per_partition: 0,
            ..d
        }),
        "keys_per_partition"
    );
    assert_eq!(
        bad(YcsbConfig {
            ops_per_txn: 0,
            ..d
        }),
        "ops_per_txn"
    );
    assert_eq!(
        bad(YcsbConfig {
            keys_per_partition: 5,
            ops_per_txn: 6,
            ..d
        }),
        "ops_per_txn"
    );
    for r in [-0.1, 1.1, f64::NAN] {
        assert_eq!(bad(YcsbConfig { read_ratio: r, ..d }), "read_ratio");
        assert_eq!(
            bad(YcsbConfig {
                multi_partition: r,
                ..d
            }),
            "multi_partition"
        );
    }
    assert_eq!(bad(YcsbConfig { fields: 0, ..d }), "fields");
    assert_eq!(bad(YcsbConfig { fields: 65, ..d }), "fields");
    assert_eq!(bad(YcsbConfig { field_size: 0, ..d }), "field_size");
    assert_eq!(
        bad(YcsbConfig {
            zipf_theta: 1.5,
            ..d
        }),
        "zipf_theta"
    );
    assert_eq!(
        bad(YcsbConfig {
            zipf_theta: -0.5,
            ..d
        }),
        "zipf_theta"
    );
    assert_eq!(bad(cfg(1, 0.1)), "multi_partition");
    assert_eq!(
        bad(YcsbConfig {
            ops_per_txn: 1,
            ..d
        }),
        "multi_partition"
    );
    let msg = Ycsb::new(cfg(1, 0.1)).unwrap_err().to_string();
    assert!(
        msg.contains("multi_partition") && msg.contains("partitions"),
        "{msg}"
    );
}

#[test]
fn config_deserializes_with_defaults() {
    let c: YcsbConfig = from_empty_map();
    assert_eq!(c.partitions, 1);
    assert_eq!(c.ops_per_txn, 10);
    assert_eq!(c.record_size(), 100);
}

/// `YcsbConfig::default()` is what an empty serde document gives; checked
/// without a JSON dependency through serde's map deserializer.
fn from_empty_map() -> YcsbConfig {
    use serde::de::value::{Error, MapDeserializer};
    let empty: Vec<(&str, u32)> = Vec::new();
    YcsbConfig::deserialize(MapDeserializer::<_, Error>::new(empty.into_iter())).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn generated_txns_are_well_formed(
        partitions in 1u32..6,
        keys in 1u64..50,
        ops in 1u32..12,
        read_ratio in 0.0f64..=1.0,
        theta in 0.0f64..1.49,
        multi in 0.0f64..=1.0,
        fields in 1u32..=64,
        field_size in 1u32..20,
        home in 0u32..10,
        seed in any::<u64>(),
    ) {
        let ops_per_txn = ops.max(if partitions > 1 { 2 } else { 1 });
        let c = YcsbConfig {
            partitions,
            keys_per_partition: keys.max(u64::from(ops_per_txn)),
            ops_per_txn,
            read_ratio,
            fields,
            field_size,
            zipf_theta: theta,
            multi_partition: if partitions > 1 { multi } else { 0.0 },
        };
        let w = Ycsb::new(c).unwrap();
        let mut g = w.ycsb_generator(ShardId(home));
        let mut rng = SmallRng::seed_from_u64(seed);
        for _ in 0..20 {
            let t = g.generate(&mut rng);
            check_shape(&t, &c, home % partitions);
            for i in 0..t.pieces().len() {
                let spec = &t.pieces()[i];
                let reads: Vec<Option<Value>> = spec
                    .reads
                    .iter()
                    .map(|a| Some(initial_value(spec.shard.0, key_rank(a.key), c.record_size())))
                    .collect();
                let r = t.execute(i, &borrowed(&reads), &[]);
                prop_assert_eq!(r.writes.len(), t.pieces()[i].writes.len());
                prop_assert!(r.writes.iter().all(|(_, v)| v.len() == c.record_size()));
            }
        }
    }
}

/// Borrow owned read values the way a participant hands them to `execute`.
fn borrowed(values: &[Option<Value>]) -> Vec<Option<&Value>> {
    values.iter().map(Option::as_ref).collect()
}
