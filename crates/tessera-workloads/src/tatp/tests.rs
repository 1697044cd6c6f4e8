use super::*;
use crate::{key_rank, key_shard};
use rand::SeedableRng;
use std::collections::HashMap;

fn cfg(subscribers: u64, partitions: u32) -> TatpConfig {
    TatpConfig {
        subscribers,
        partitions,
        ro_keys: 2,
    }
}

fn draw(c: TatpConfig, seed: u64, n: usize) -> Vec<TatpTxn> {
    let mut g = Tatp::new(c).unwrap().tatp_generator();
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..n).map(|_| g.generate(&mut rng)).collect()
}

#[test]
fn mix_follows_the_specification() {
    let n = 100_000;
    let mut count: HashMap<TatpKind, usize> = HashMap::new();
    let mut ro = 0;
    for t in draw(cfg(1000, 2), 1, n) {
        *count.entry(t.kind()).or_default() += 1;
        ro += usize::from(t.read_only());
        assert_eq!(t.read_only(), t.kind().read_only());
    }
    for (k, w) in TatpKind::ALL.iter().zip(MIX) {
        let share = count[k] as f64 / n as f64;
        assert!((share - w as f64 / 100.0).abs() < 0.006, "{k:?}: {share}");
    }
    let ro = ro as f64 / n as f64;
    assert!((ro - 0.8).abs() < 0.006, "read-only share {ro}");
}

#[test]
fn keys_stay_in_range_and_on_their_shard() {
    let c = cfg(1001, 3);
    for t in draw(c, 2, 20_000) {
        let p = t.pieces();
        if !t.kind().read_only() {
            assert_eq!(p.len(), 1, "one subscriber: one piece");
        }
        for piece in p {
            let per_shard = c.subscribers.div_ceil(3);
            for a in &piece.reads {
                assert_eq!(key_shard(a.key), piece.shard);
                let limit = match a.key.table.0 {
                    SUBSCRIBER => per_shard,
                    ACCESS_INFO | SPECIAL_FACILITY => 4 * per_shard,
                    CALL_FORWARDING => 12 * per_shard,
                    t => panic!("table {t}"),
                };
                assert!(key_rank(a.key) < limit, "{:?}", a.key);
            }
            assert!(piece
                .writes
                .iter()
                .all(|w| piece.reads.iter().any(|r| r.key == w.key)));
        }
        let keys: usize = p.iter().map(|p| p.reads.len()).sum();
        match t.kind() {
            TatpKind::GetSubscriberData | TatpKind::GetAccessData | TatpKind::GetNewDestination => {
                assert_eq!(keys, 2, "two-key reads")
            }
            TatpKind::InsertCallForwarding => assert_eq!(keys, 6),
            _ => assert_eq!(keys, 2 - usize::from(t.kind() == TatpKind::UpdateLocation)),
        }
    }
}

#[test]
fn subscriber_ids_are_non_uniform_and_in_range() {
    let c = cfg(200_000, 1);
    let g = Tatp::new(c).unwrap().tatp_generator();
    let mut rng = SmallRng::seed_from_u64(3);
    let n = 200_000;
    let mut low = 0;
    for _ in 0..n {
        let s = g.subscriber(&mut rng);
        assert!(s < c.subscribers);
        // (x | y) with x < 2^16 sets low bits: ids whose low 16 bits are
        // all ones get far more than their uniform share.
        low += usize::from(s & 0xffff == 0xffff);
    }
    let uniform = n as f64 * 4.0 / 200_000.0;
    assert!(low as f64 > 10.0 * uniform, "{low} vs uniform {uniform}");
}

#[test]
fn the_seed_determines_the_transactions() {
    let a = draw(cfg(5000, 2), 9, 500);
    let b = draw(cfg(5000, 2), 9, 500);
    let c = draw(cfg(5000, 2), 10, 500);
    let keys = |v: &[TatpTxn]| -> Vec<(TatpKind, Vec<Key>, u64)> {
        v.iter()
            .map(|t| {
                let k = t
                    .pieces()
                    .iter()
                    .flat_map(|p| p.reads.iter().map(|a| a.key))
                    .collect();
                (t.kind(), k, t.params().seed)
            })
            .collect()
    };
    assert_eq!(keys(&a), keys(&b));
    assert_ne!(keys(&a), keys(&c));
}

#[test]
fn population_follows_the_specification() {
    let n = 20_000u64;
    let (mut ai, mut sf, mut active, mut cf) = (0u32, 0u32, 0u32, 0u32);
    for s in 0..n {
        let p = population(s);
        assert!((1..=4).contains(&p.access_info.count_ones()));
        assert!((1..=4).contains(&p.special_facility.count_ones()));
        assert_eq!(p.active & !p.special_facility, 0);
        for t in 0..4 {
            if p.special_facility & (1 << t) == 0 {
                assert_eq!(p.call_forwarding[t], 0);
            }
            assert!(p.call_forwarding[t] < 8);
            cf += p.call_forwarding[t].count_ones();
        }
        ai += p.access_info.count_ones();
        sf += p.special_facility.count_ones();
        active += p.active.count_ones();
    }
    let mean = |x: u32| f64::from(x) / n as f64;
    assert!((mean(ai) - 2.5).abs() < 0.05, "{}", mean(ai));
    assert!((mean(sf) - 2.5).abs() < 0.05);
    assert!((f64::from(active) / f64::from(sf) - 0.85).abs() < 0.02);
    // 1.5 forwarding rows per special facility.
    assert!((f64::from(cf) / f64::from(sf) - 1.5).abs() < 0.05);
}

fn loaded(c: TatpConfig) -> Vec<Store> {
    let w = Tatp::new(c).unwrap();
    (0..c.partitions)
        .map(|s| {
            let mut st = Store::default();
            w.load(ShardId(s), &mut st);
            st
        })
        .collect()
}

fn run(t: &TatpTxn, stores: &mut [Store]) -> PieceResult {
    assert_eq!(t.pieces().len(), 1);
    let p = &t.pieces()[0];
    let st = &stores[p.shard.0 as usize];
    let vals: Vec<Option<Value>> = p
        .reads
        .iter()
        .map(|a| st.get(a.key).map(|r| r.value.clone()))
        .collect();
    let refs: Vec<Option<&Value>> = vals.iter().map(Option::as_ref).collect();
    t.execute(0, &refs, &[])
}

#[test]
fn every_key_a_transaction_touches_is_loaded() {
    let c = cfg(300, 2);
    let stores = loaded(c);
    let rows: usize = stores.iter().map(Store::len).sum();
    assert_eq!(rows, 300 * 21);
    for t in draw(c, 4, 5000) {
        for p in t.pieces() {
            for a in &p.reads {
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
fn insert_and_delete_toggle_the_present_flag() {
    let c = cfg(50, 1);
    let mut stores = loaded(c);
    let mut g = Tatp::new(c).unwrap().tatp_generator();
    let mut rng = SmallRng::seed_from_u64(5);
    let (mut inserted, mut deleted, mut refused) = (0, 0, 0);
    for _ in 0..2000 {
        let kind = if rng.random() {
            TatpKind::InsertCallForwarding
        } else {
            TatpKind::DeleteCallForwarding
        };
        let t = g.generate_kind(kind, &mut rng);
        let cf = *t.pieces()[0].writes.first().map(|a| &a.key).unwrap();
        let before = present(stores[0].get(cf).map(|r| &r.value));
        let r = run(&t, &mut stores);
        assert!(r.writes.len() <= 1);
        for (k, v) in r.writes {
            assert_eq!(k, cf);
            let now = present(Some(&v));
            assert_ne!(before, now, "a write changes the flag");
            if now {
                inserted += 1;
            } else {
                deleted += 1;
            }
            stores[0].load(k, v);
        }
        if before == (kind == TatpKind::InsertCallForwarding) {
            refused += 1;
        }
    }
    assert!(
        inserted > 100 && deleted > 100 && refused > 100,
        "{inserted} {deleted} {refused}"
    );
}

#[test]
fn updates_change_the_fields_they_name() {
    let c = cfg(50, 1);
    let mut stores = loaded(c);
    let mut g = Tatp::new(c).unwrap().tatp_generator();
    let mut rng = SmallRng::seed_from_u64(6);
    let t = g.generate_kind(TatpKind::UpdateLocation, &mut rng);
    let k = t.pieces()[0].reads[0].key;
    let old = stores[0].get(k).unwrap().value.clone();
    let r = run(&t, &mut stores);
    let new = &r.writes[0].1;
    assert_eq!(&new[VLR_LOCATION], &(t.params().seed as u32).to_le_bytes());
    assert_eq!(&new[..VLR_LOCATION.start], &old[..VLR_LOCATION.start]);
    // UPDATE_SUBSCRIBER_DATA writes both rows or, without the facility,
    // neither.
    let mut both = 0;
    for _ in 0..200 {
        let t = g.generate_kind(TatpKind::UpdateSubscriberData, &mut rng);
        let sf = stores[0]
            .get(t.pieces()[0].reads[1].key)
            .map(|r| r.value.clone());
        let r = run(&t, &mut stores);
        assert_eq!(r.writes.len(), if present(sf.as_ref()) { 2 } else { 0 });
        both += usize::from(!r.writes.is_empty());
    }
    assert!(both > 50 && both < 150, "{both}");
}

#[test]
fn bad_parameters_name_themselves() {
    let bad = |c: TatpConfig| Tatp::new(c).err().unwrap().param;
    let d = TatpConfig::default();
    assert_eq!(
        bad(TatpConfig {
            subscribers: 0,
            ..d
        }),
        "subscribers"
    );
    assert_eq!(bad(TatpConfig { partitions: 0, ..d }), "partitions");
    assert_eq!(
        bad(TatpConfig {
            subscribers: 2,
            partitions: 3,
            ..d
        }),
        "subscribers"
    );
    assert_eq!(bad(TatpConfig { ro_keys: 0, ..d }), "ro_keys");
    assert_eq!(bad(TatpConfig { ro_keys: 17, ..d }), "ro_keys");
    assert_eq!(
        bad(TatpConfig {
            subscribers: 1,
            ro_keys: 2,
            ..d
        }),
        "ro_keys"
    );
}

#[test]
fn profiles_cover_every_generated_shape() {
    let c = cfg(1000, 3);
    let profiles = Tatp::new(c).unwrap().profiles();
    assert_eq!(profiles.len(), 7);
    for t in draw(c, 11, 3000) {
        let got = TxnProfile::of(&t);
        let p = profiles
            .iter()
            .find(|p| p.name == got.name)
            .expect("profiled");
        assert!(got.pieces.len() <= p.pieces.len(), "{}", got.name);
        assert_eq!(got.pieces[0], p.pieces[0], "{}", got.name);
    }
}
