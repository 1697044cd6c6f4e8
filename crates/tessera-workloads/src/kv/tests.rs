use super::*;
use tessera_core::codec::{decode_txn, encode_txn, DecodeCx};

const SHARDS: u32 = 3;

/// Run every piece of `t` against `store`, as a server would, applying its
/// writes; the pieces' outputs, or `None` on a user abort.
fn run(t: &dyn Procedure, store: &mut Store) -> Option<Vec<Value>> {
    let mut outputs = Vec::new();
    for (i, p) in t.pieces().iter().enumerate() {
        let reads: Vec<Option<&Value>> = p
            .reads
            .iter()
            .map(|a| store.get(a.key).map(|r| &r.value))
            .collect();
        let r = t.execute(i, &reads, &[]);
        if r.user_abort {
            return None;
        }
        for (k, v) in r.writes {
            assert!(p.writes.iter().any(|a| a.key == k), "undeclared write");
            store.load(k, v);
        }
        outputs.push(r.output);
    }
    Some(outputs)
}

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("key-{i}")).collect()
}

#[test]
fn keys_are_checked() {
    for bad in ["", "a b", "k=v", "ü", &"x".repeat(MAX_KEY_LEN + 1)] {
        assert!(
            matches!(check_key(bad), Err(KvError::BadKey { .. })),
            "{bad:?}"
        );
    }
    for good in ["k1", "user:42/name_x.y-z", &"x".repeat(MAX_KEY_LEN)] {
        check_key(good).unwrap();
    }
    let e = KvTxn::get(&["a", "b c"], SHARDS).unwrap_err().to_string();
    assert!(e.contains("'b c'") && e.contains("A-Z a-z 0-9"), "{e}");
}

#[test]
fn names_map_to_stable_records_spread_over_the_shards() {
    assert_eq!(locate("k1", SHARDS), locate("k1", SHARDS));
    let ns = names(300);
    let mut per_shard = [0; SHARDS as usize];
    for n in &ns {
        let k = locate(n, SHARDS);
        assert_eq!(k.table.0, TABLE);
        per_shard[crate::key_shard(k).0 as usize] += 1;
    }
    assert!(per_shard.iter().all(|&c| c > 50), "{per_shard:?}");
}

#[test]
fn one_piece_per_shard_in_ascending_order() {
    let ns = names(20);
    let refs: Vec<&str> = ns.iter().map(String::as_str).collect();
    let t = KvTxn::get(&refs, SHARDS).unwrap();
    let shards: Vec<u32> = t.pieces().iter().map(|p| p.shard.0).collect();
    assert_eq!(shards, vec![0, 1, 2]);
    assert!(t.read_only());
    for p in t.pieces() {
        assert!(p.reads.iter().all(|a| crate::key_shard(a.key) == p.shard));
    }
}

#[test]
fn put_then_get_returns_values_in_the_order_named() {
    let mut store = Store::new();
    let ns = names(8);
    let pairs: Vec<(&str, Value)> = ns
        .iter()
        .map(|n| (n.as_str(), Value::from(format!("v-{n}"))))
        .collect();
    let put = KvTxn::put(&pairs, SHARDS).unwrap();
    assert!(put.pieces().iter().all(|p| p.reads.is_empty()));
    run(&put, &mut store).unwrap();
    let asked = ["key-5", "missing", "key-0", "key-7"];
    let get = KvTxn::get(&asked, SHARDS).unwrap();
    let got = get.read_values(&run(&get, &mut store).unwrap()).unwrap();
    assert_eq!(
        got,
        vec![
            Some(Value::from("v-key-5")),
            None,
            Some(Value::from("v-key-0")),
            Some(Value::from("v-key-7")),
        ]
    );
}

#[test]
fn incr_counts_from_zero_and_refuses_non_integers_and_overflow() {
    let mut store = Store::new();
    let incr = |by, store: &mut Store| {
        let t = KvTxn::incr("c", by, SHARDS).unwrap();
        run(&t, store).map(|o| t.incremented(&o).unwrap())
    };
    assert_eq!(incr(1, &mut store), Some(1));
    assert_eq!(incr(41, &mut store), Some(42));
    assert_eq!(incr(-50, &mut store), Some(-8));
    let put = KvTxn::put(&[("c", Value::from("forty"))], SHARDS).unwrap();
    run(&put, &mut store).unwrap();
    assert_eq!(incr(1, &mut store), None, "not a number: user abort");
    let put = KvTxn::put(&[("c", Value::from(i64::MAX.to_string()))], SHARDS).unwrap();
    run(&put, &mut store).unwrap();
    assert_eq!(incr(1, &mut store), None, "overflow: user abort");
    assert_eq!(incr(-1, &mut store), Some(i64::MAX - 1));
}

#[test]
fn a_key_named_twice_or_no_key_is_refused() {
    assert_eq!(
        KvTxn::get(&["a", "b", "a"], SHARDS).unwrap_err(),
        KvError::Duplicate("a".into())
    );
    assert_eq!(
        KvTxn::get(&[], SHARDS).unwrap_err(),
        KvError::NoKeys("kv.get")
    );
    let big = Value::from(vec![0u8; MAX_VALUE_LEN + 1]);
    assert!(matches!(
        KvTxn::put(&[("a", big)], SHARDS),
        Err(KvError::ValueTooLong { .. })
    ));
}

fn workload() -> Arc<dyn Workload> {
    let ycsb = crate::Ycsb::new(crate::YcsbConfig {
        partitions: SHARDS,
        keys_per_partition: 10,
        ..Default::default()
    })
    .unwrap();
    with_builtins(Arc::new(ycsb))
}

fn round_trip(t: &KvTxn) -> Txn {
    let mut buf = BytesMut::new();
    encode_txn(t, &mut buf).unwrap();
    decode_txn(&mut &buf[..], &DecodeCx::new(workload())).unwrap()
}

#[test]
fn the_wire_form_rebuilds_the_same_pieces_and_effects() {
    let pairs = [("a", Value::from("1")), ("b", Value::from("two"))];
    let put = KvTxn::put(&pairs, SHARDS).unwrap();
    let incr = KvTxn::incr("a", -7, SHARDS).unwrap();
    let (mut here, mut there) = (Store::new(), Store::new());
    for t in [&put, &incr] {
        let d = round_trip(t);
        assert_eq!(d.name(), t.name());
        assert_eq!(format!("{:?}", d.pieces()), format!("{:?}", t.pieces()));
        run(t, &mut here).unwrap();
        run(d.as_ref(), &mut there).unwrap();
    }
    assert_eq!(here.records_sorted().len(), 2);
    for (k, r) in here.records_sorted() {
        assert_eq!(there.get(k).unwrap().value, r.value);
    }
}

#[test]
fn the_wrapped_workload_still_decodes_its_own_procedures() {
    let wl = workload();
    let mut g = wl.generator(ClientSlot {
        id: 0,
        home: ShardId(1),
    });
    let mut rng = <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(3);
    let t = g.next(&mut rng);
    let mut buf = BytesMut::new();
    encode_txn(t.as_ref(), &mut buf).unwrap();
    let d = decode_txn(&mut &buf[..], &DecodeCx::new(wl)).unwrap();
    assert_eq!(d.name(), "ycsb");
}

#[test]
fn bad_wire_parameters_are_refused() {
    let wl = workload();
    let bad = |name: &str, params: &[u8]| wl.decode_txn(name, params).unwrap_err();
    // A shard beyond the cluster's.
    let mut b = BytesMut::new();
    put_varint(&mut b, 1);
    put_varint(&mut b, u64::from(SHARDS));
    put_varint(&mut b, 0);
    assert!(bad("kv.get", &b).to_string().contains("shard"));
    // incr with two keys.
    let mut b = BytesMut::new();
    put_varint(&mut b, 2);
    for r in 0..2 {
        put_varint(&mut b, 0);
        put_varint(&mut b, r);
    }
    b.put_u64_le(1);
    assert!(bad("kv.incr", &b).to_string().contains("not 1"));
    // The same key twice, trailing bytes, a truncated list, no keys.
    let mut b = BytesMut::new();
    put_varint(&mut b, 2);
    for _ in 0..2 {
        put_varint(&mut b, 0);
        put_varint(&mut b, 5);
    }
    assert!(bad("kv.get", &b).to_string().contains("twice"));
    b.put_u8(0);
    assert!(matches!(bad("kv.get", &b), DecodeError::Trailing(1)));
    assert!(matches!(bad("kv.get", &[9, 0]), DecodeError::Truncated(_)));
    assert!(bad("kv.get", &[0]).to_string().contains("at least one key"));
    assert!(bad("kv.nope", &[0]).to_string().contains("no procedure"));
}
