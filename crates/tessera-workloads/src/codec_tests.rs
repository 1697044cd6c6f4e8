//! Wire codec of the workloads' procedures: round trips and garbage.

use crate::{Micro, MicroConfig, Ycsb, YcsbConfig};
use bytes::BytesMut;
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::sync::Arc;
use tessera_core::codec::{decode_txn, encode_txn, DecodeCx};
use tessera_core::txn::{Procedure, Txn, Value};
use tessera_core::workload::{ClientSlot, Workload};
use tessera_core::ShardId;

/// Same pieces, and every piece computes the same result on the same reads.
fn assert_same(a: &Txn, b: &Txn) {
    assert_eq!(a.name(), b.name());
    assert_eq!(format!("{:?}", a.pieces()), format!("{:?}", b.pieces()));
    for (i, p) in a.pieces().iter().enumerate() {
        let vals: Vec<Option<Value>> = (0..p.reads.len())
            .map(|j| (j % 3 != 0).then(|| Value::from(vec![j as u8; 100])))
            .collect();
        let reads: Vec<Option<&Value>> = vals.iter().map(Option::as_ref).collect();
        let (x, y) = (a.execute(i, &reads, &[]), b.execute(i, &reads, &[]));
        assert_eq!(x.writes, y.writes);
        assert_eq!(x.output, y.output);
    }
}

fn round_trip(wl: Arc<dyn Workload>, seed: u64, home: u32) {
    let mut g = wl.generator(ClientSlot {
        id: 0,
        home: ShardId(home),
    });
    let mut rng = SmallRng::seed_from_u64(seed);
    let cx = DecodeCx::new(wl.clone());
    for _ in 0..20 {
        let t = g.next(&mut rng);
        let mut out = BytesMut::new();
        encode_txn(t.as_ref(), &mut out).unwrap();
        let mut buf = &out[..];
        let d = decode_txn(&mut buf, &cx).unwrap();
        assert!(buf.is_empty());
        assert_same(&t, &d);
        // Every strict prefix is rejected, never a panic.
        for cut in 0..out.len() {
            let mut b = &out[..cut];
            assert!(decode_txn(&mut b, &cx).is_err() || !b.is_empty());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn ycsb_round_trips(seed: u64, parts in 2u32..5, mp in 0.0f64..=1.0, rr in 0.0f64..=1.0, home in 0u32..8) {
        let wl = Ycsb::new(YcsbConfig { partitions: parts, keys_per_partition: 1000, multi_partition: mp, read_ratio: rr, ..YcsbConfig::default() }).unwrap();
        round_trip(Arc::new(wl), seed, home);
    }

    #[test]
    fn micro_round_trips(seed: u64, shards in 3u32..7) {
        let wl = Micro::new(MicroConfig { shards, keys_per_shard: 100, zipf_theta: 0.9 }).unwrap();
        round_trip(Arc::new(wl), seed, 0);
    }

    #[test]
    fn garbage_is_rejected_without_panic(name in prop_oneof![Just("ycsb"), Just("increment"), Just("other")], params: Vec<u8>) {
        let y = Ycsb::new(YcsbConfig { partitions: 2, keys_per_partition: 100, ..YcsbConfig::default() }).unwrap();
        let m = Micro::new(MicroConfig { shards: 3, keys_per_shard: 100, zipf_theta: 0.0 }).unwrap();
        if let Ok(t) = y.decode_txn(name, &params) {
            // Whatever decodes must be safe to run.
            assert_same(&t, &t);
        }
        if let Ok(t) = m.decode_txn(name, &params) {
            assert_same(&t, &t);
        }
    }
}

#[test]
fn out_of_range_parameters_are_rejected() {
    let small = Ycsb::new(YcsbConfig {
        partitions: 2,
        keys_per_partition: 10,
        ..YcsbConfig::default()
    })
    .unwrap();
    let big = Ycsb::new(YcsbConfig {
        partitions: 4,
        keys_per_partition: 1000,
        multi_partition: 1.0,
        ..YcsbConfig::default()
    })
    .unwrap();
    let mut g = big.ycsb_generator(ShardId(3));
    let mut rng = SmallRng::seed_from_u64(3);
    let mut rejected = 0;
    for _ in 0..50 {
        let t = g.generate(&mut rng);
        let mut out = BytesMut::new();
        t.encode_params(&mut out).unwrap();
        if small.decode_txn("ycsb", &out).is_err() {
            rejected += 1;
        }
    }
    assert_eq!(rejected, 50, "a txn of a bigger deployment decoded");
}
