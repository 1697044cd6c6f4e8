//! Wire codec of the workloads' procedures: round trips and garbage.

use crate::{
    Micro, MicroConfig, TaoBench, TaoBenchConfig, Tatp, TatpConfig, Tpcc, TpccConfig, Ycsb,
    YcsbConfig,
};
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
    fn tatp_round_trips(seed: u64, parts in 1u32..4, ro_keys in 1u32..4) {
        let wl = Tatp::new(TatpConfig { subscribers: 500, partitions: parts, ro_keys }).unwrap();
        round_trip(Arc::new(wl), seed, 0);
    }

    #[test]
    fn taobench_round_trips(seed: u64, parts in 1u32..4, read_only in 0.0f64..=1.0) {
        round_trip(Arc::new(taobench(parts, read_only)), seed, 0);
    }

    #[test]
    fn tatp_and_taobench_garbage_is_rejected_without_panic(
        name in prop_oneof![Just("get_access_data"), Just("insert_call_forwarding"), Just("tao_read"), Just("tao_write")],
        params: Vec<u8>,
    ) {
        let t = Tatp::new(TatpConfig { subscribers: 500, partitions: 2, ro_keys: 2 }).unwrap();
        if let Ok(x) = t.decode_txn(name, &params) {
            assert_same(&x, &x);
        }
        if let Ok(x) = taobench(2, 0.5).decode_txn(name, &params) {
            assert_same(&x, &x);
        }
    }

    #[test]
    fn micro_round_trips(seed: u64, shards in 3u32..7) {
        let wl = Micro::new(MicroConfig { shards, keys_per_shard: 100, zipf_theta: 0.9 }).unwrap();
        round_trip(Arc::new(wl), seed, 0);
    }

    /// All five TPC-C procedures, remote ones included, rebuild with the
    /// same pieces and the same parameters.
    #[test]
    fn tpcc_round_trips(seed: u64, warehouses in 1u32..4, home in 0u32..3) {
        let wl = tpcc(warehouses);
        let mut g = wl.generator(ClientSlot { id: 0, home: ShardId(home % warehouses) });
        let mut rng = SmallRng::seed_from_u64(seed);
        let cx = DecodeCx::new(Arc::new(tpcc(warehouses)));
        for _ in 0..40 {
            let t = g.next(&mut rng);
            let mut out = BytesMut::new();
            encode_txn(t.as_ref(), &mut out).unwrap();
            let mut buf = &out[..];
            let d = decode_txn(&mut buf, &cx).unwrap();
            prop_assert!(buf.is_empty());
            prop_assert_eq!(t.name(), d.name());
            prop_assert_eq!(format!("{:?}", t.pieces()), format!("{:?}", d.pieces()));
            let mut again = BytesMut::new();
            encode_txn(d.as_ref(), &mut again).unwrap();
            prop_assert_eq!(&out[..], &again[..]);
            for cut in 0..out.len() {
                let mut b = &out[..cut];
                prop_assert!(decode_txn(&mut b, &cx).is_err() || !b.is_empty());
            }
        }
    }

    #[test]
    fn tpcc_garbage_is_rejected_without_panic(
        name in prop_oneof![Just("neworder"), Just("payment"), Just("orderstatus"), Just("delivery"), Just("stocklevel")],
        params: Vec<u8>,
    ) {
        let _ = tpcc(2).decode_txn(name, &params);
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

/// A small TPC-C with remote NewOrders and Payments.
fn tpcc(warehouses: u32) -> Tpcc {
    Tpcc::new(TpccConfig {
        customers: 60,
        items: 500,
        ..TpccConfig::spec(warehouses)
    })
    .unwrap()
}

/// A TPC-C transaction of a bigger deployment names rows the receiver does
/// not have: refused, whatever the procedure.
#[test]
fn tpcc_parameters_of_a_bigger_deployment_are_rejected() {
    let small = tpcc(1);
    let big = tpcc(3);
    let mut g = big.generator(ClientSlot {
        id: 0,
        home: ShardId(2),
    });
    let mut rng = SmallRng::seed_from_u64(5);
    for _ in 0..50 {
        let t = g.next(&mut rng);
        let mut out = BytesMut::new();
        t.encode_params(&mut out).unwrap();
        let err = small.decode_txn(t.name(), &out).unwrap_err();
        assert!(err.to_string().contains("tpcc warehouse"), "{err}");
    }
    assert!(small.decode_txn("neworder", &[]).is_err());
    assert!(small
        .decode_txn("audit", &[])
        .unwrap_err()
        .to_string()
        .contains("no procedure 'audit'"));
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

fn taobench(partitions: u32, read_only: f64) -> TaoBench {
    TaoBench::new(TaoBenchConfig {
        objects: 1000,
        edges: 500,
        partitions,
        read_only,
        ..TaoBenchConfig::default()
    })
    .unwrap()
}

/// TATP and TAOBench transactions of a bigger deployment name subscribers,
/// objects or edges the receiver does not have: refused.
#[test]
fn tatp_and_taobench_parameters_of_a_bigger_deployment_are_rejected() {
    let (small, big) = (
        TatpConfig {
            subscribers: 10,
            partitions: 1,
            ro_keys: 1,
        },
        TatpConfig {
            subscribers: 1_000_000,
            partitions: 1,
            ro_keys: 1,
        },
    );
    let (small, big) = (Tatp::new(small).unwrap(), Tatp::new(big).unwrap());
    let mut g = big.tatp_generator();
    let mut rng = SmallRng::seed_from_u64(5);
    let mut rejected = 0;
    for _ in 0..200 {
        let t = g.generate(&mut rng);
        let mut out = BytesMut::new();
        t.encode_params(&mut out).unwrap();
        rejected += usize::from(small.decode_txn(t.name(), &out).is_err());
        // The name must match the parameters' type.
        let other = if t.name() == "update_location" {
            "get_subscriber_data"
        } else {
            "update_location"
        };
        assert!(big.decode_txn(other, &out).is_err());
    }
    assert!(rejected > 190, "{rejected}");
    let (small, big) = (
        taobench(1, 0.5),
        TaoBench::new(TaoBenchConfig {
            read_only: 0.5,
            ..TaoBenchConfig::default()
        })
        .unwrap(),
    );
    let mut g = big.tao_generator();
    let mut rejected = 0;
    for _ in 0..100 {
        let t = g.generate(&mut rng);
        let mut out = BytesMut::new();
        t.encode_params(&mut out).unwrap();
        rejected += usize::from(small.decode_txn(t.name(), &out).is_err());
    }
    assert!(rejected > 90, "{rejected}");
}
