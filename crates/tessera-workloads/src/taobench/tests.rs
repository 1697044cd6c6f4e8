use super::*;
use crate::key_shard;
use std::collections::HashSet;

fn small(partitions: u32) -> TaoBenchConfig {
    TaoBenchConfig {
        objects: 2000,
        edges: 1000,
        partitions,
        ..TaoBenchConfig::default()
    }
}

fn draw(c: TaoBenchConfig, seed: u64, n: usize) -> Vec<TaoTxn> {
    let mut g = TaoBench::new(c).unwrap().tao_generator();
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..n).map(|_| g.generate(&mut rng)).collect()
}

fn loaded(w: &TaoBench) -> Vec<Store> {
    (0..w.config().partitions)
        .map(|s| {
            let mut st = Store::default();
            w.load(ShardId(s), &mut st);
            st
        })
        .collect()
}

#[test]
fn the_graph_has_every_object_and_edge_on_its_shard() {
    let w = TaoBench::new(small(3)).unwrap();
    let stores = loaded(&w);
    let objects: usize = stores
        .iter()
        .map(|s| s.rows(TableId(OBJECTS)).count())
        .sum();
    let edges: usize = stores.iter().map(|s| s.rows(TableId(EDGES)).count()).sum();
    assert_eq!((objects, edges), (2000, 1000));
    let mut degrees = 0u64;
    for o in 0..2000u64 {
        let k = w.config().object_key(o);
        let v = &stores[key_shard(k).0 as usize].get(k).unwrap().value;
        let d = u32::from_le_bytes(v[..4].try_into().unwrap());
        assert_eq!(
            d as usize,
            w.edge_keys(o).count(),
            "the object holds its edge count"
        );
        for e in w.edge_keys(o) {
            assert_eq!(key_shard(e), key_shard(k), "edges live with their id1");
        }
        degrees += u64::from(d);
    }
    assert_eq!(degrees, 1000);
    // Skewed: the hottest object has many more edges than average.
    assert!(w.edge_keys(0).count() > 20, "{}", w.edge_keys(0).count());
}

#[test]
fn the_mix_is_95_percent_read_only_and_sizes_follow_taobench() {
    let n = 40_000;
    let txns = draw(small(2), 1, n);
    let ro = txns.iter().filter(|t| t.read_only()).count();
    let share = ro as f64 / n as f64;
    assert!((share - 0.95).abs() < 0.005, "{share}");
    let mut writes_per_txn = Vec::new();
    for t in &txns {
        let keys: usize = t.pieces().iter().map(|p| p.reads.len()).sum();
        let writes: usize = t.pieces().iter().map(|p| p.writes.len()).sum();
        if t.read_only() {
            assert_eq!(t.name(), READ);
            assert!((1..=32 * 11).contains(&keys), "{keys}");
        } else {
            assert_eq!(t.name(), WRITE);
            assert_eq!(writes, keys, "a write transaction updates all it reads");
            assert!((2..=7).contains(&writes), "{writes}");
            writes_per_txn.push(writes);
        }
    }
    // TAOBench's write sizes: 4 is the most common, then 3.
    let count = |k| writes_per_txn.iter().filter(|&&w| w == k).count();
    assert!(count(4) > count(3) && count(3) > count(2) && count(2) > count(5));
}

#[test]
fn keys_are_distinct_in_range_and_loaded() {
    let c = small(2);
    let w = TaoBench::new(c).unwrap();
    let stores = loaded(&w);
    for t in draw(c, 2, 5000) {
        let mut seen = HashSet::new();
        for (i, p) in t.pieces().iter().enumerate() {
            if i > 0 {
                assert!(t.pieces()[i - 1].shard < p.shard);
            }
            for a in &p.reads {
                assert!(seen.insert(a.key), "distinct keys");
                assert_eq!(key_shard(a.key), p.shard);
                assert!(
                    stores[p.shard.0 as usize].get(a.key).is_some(),
                    "{:?}",
                    a.key
                );
            }
        }
    }
}

#[test]
fn edge_list_reads_take_the_first_edges_of_the_object() {
    let c = TaoBenchConfig {
        read_only: 1.0,
        max_read_ops: 2,
        range_limit: 3,
        ..small(1)
    };
    let w = TaoBench::new(c).unwrap();
    let mut lists = 0;
    for t in draw(c, 3, 3000) {
        let keys: Vec<Key> = t.pieces()[0].reads.iter().map(|a| a.key).collect();
        for (i, k) in keys.iter().enumerate() {
            if k.table.0 != OBJECTS {
                continue;
            }
            let o = key_rank(*k);
            let first: Vec<Key> = w.edge_keys(o).take(3).collect();
            if !first.is_empty() && keys[i + 1..].starts_with(&first) {
                lists += 1;
            }
        }
    }
    assert!(lists > 500, "{lists}");
}

#[test]
fn updates_rewrite_the_data_and_keep_the_links() {
    let c = TaoBenchConfig {
        read_only: 0.0,
        ..small(1)
    };
    let w = TaoBench::new(c).unwrap();
    let stores = loaded(&w);
    for t in draw(c, 4, 200) {
        let p = &t.pieces()[0];
        let vals: Vec<Option<&Value>> = p
            .reads
            .iter()
            .map(|a| stores[0].get(a.key).map(|r| &r.value))
            .collect();
        let r = t.execute(0, &vals, &[]);
        assert_eq!(r.writes.len(), p.writes.len());
        for ((k, new), old) in r.writes.iter().zip(&vals) {
            let old = old.unwrap();
            let keep = if k.table.0 == OBJECTS { 4 } else { 8 };
            assert_eq!(new[..keep], old[..keep]);
            assert_ne!(new[keep..], old[keep..]);
        }
    }
}

#[test]
fn the_seed_determines_the_transactions() {
    let keys = |v: Vec<TaoTxn>| -> Vec<Vec<Key>> {
        v.iter()
            .map(|t| {
                t.pieces()
                    .iter()
                    .flat_map(|p| p.reads.iter().map(|a| a.key))
                    .collect()
            })
            .collect()
    };
    assert_eq!(keys(draw(small(2), 7, 300)), keys(draw(small(2), 7, 300)));
    assert_ne!(keys(draw(small(2), 7, 300)), keys(draw(small(2), 8, 300)));
}

#[test]
fn bad_parameters_name_themselves() {
    let bad = |c: TaoBenchConfig| TaoBench::new(c).err().unwrap().param;
    let d = small(1);
    assert_eq!(bad(TaoBenchConfig { objects: 3, ..d }), "objects");
    assert_eq!(bad(TaoBenchConfig { edges: 0, ..d }), "edges");
    assert_eq!(bad(TaoBenchConfig { partitions: 0, ..d }), "partitions");
    assert_eq!(
        bad(TaoBenchConfig {
            zipf_theta: 2.0,
            ..d
        }),
        "zipf_theta"
    );
    assert_eq!(
        bad(TaoBenchConfig {
            read_only: 1.5,
            ..d
        }),
        "read_only"
    );
    assert_eq!(
        bad(TaoBenchConfig {
            max_read_ops: 0,
            ..d
        }),
        "max_read_ops"
    );
    assert_eq!(
        bad(TaoBenchConfig {
            max_read_ops: 33,
            ..d
        }),
        "max_read_ops"
    );
    assert_eq!(
        bad(TaoBenchConfig {
            range_limit: 0,
            ..d
        }),
        "range_limit"
    );
}

#[test]
fn profiles_cover_every_generated_shape() {
    let c = small(3);
    let profiles = TaoBench::new(c).unwrap().profiles();
    assert_eq!(profiles.len(), 2);
    for t in draw(c, 12, 3000) {
        let got = tessera_core::workload::TxnProfile::of(&t);
        let p = profiles
            .iter()
            .find(|p| p.name == got.name)
            .expect("profiled");
        assert!(got.pieces.len() <= p.pieces.len());
        for (g, q) in got.pieces.iter().zip(&p.pieces) {
            for (table, _) in g.reads.iter().chain(&g.writes) {
                assert!(q.reads.iter().any(|(t, _)| t == table));
            }
            assert_eq!(g.writes.is_empty(), q.writes.is_empty());
        }
    }
}
