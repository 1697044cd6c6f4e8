use super::consistency;
use super::keys::{Layout, Partition};
use super::payment::CustomerBy;
use super::populate::{self, last_name, nurand};
use super::schema::{self, Customer, District, Stock};
use super::*;
use rand::SeedableRng;
use tessera_core::txn::{Procedure, Value};
use tessera_core::{Key, Version};

fn small(partition: Partition, warehouses: u32, shards: u32) -> TpccConfig {
    TpccConfig {
        partition,
        shards,
        warehouses,
        districts: 4,
        customers: 30,
        items: 200,
        ..TpccConfig::default()
    }
}

fn loaded(cfg: &TpccConfig) -> (Tpcc, Vec<Store>) {
    let t = Tpcc::new(*cfg).unwrap();
    let stores = (0..t.shards())
        .map(|s| {
            let mut st = Store::new();
            t.load(ShardId(s), &mut st);
            st
        })
        .collect();
    (t, stores)
}

/// Runs a transaction's pieces one after the other on the stores, as a
/// serial scheduler would, checking that every key a piece resolves to
/// lives on the piece's shard and that it writes only declared keys.
/// `None` when the transaction rolled back.
fn run_serial(l: &Layout, stores: &mut [Store], txn: &dyn Procedure) -> Option<Vec<Value>> {
    let n = txn.pieces().len();
    let mut outputs: Vec<Option<Value>> = vec![None; n];
    let mut writes: Vec<(ShardId, Key, Value)> = Vec::new();
    for i in 0..n {
        let inputs: Vec<Value> = txn.pieces()[i]
            .inputs
            .iter()
            .map(|&j| outputs[j as usize].clone().expect("inputs run first"))
            .collect();
        let spec = txn.resolve(i, &inputs);
        for a in spec.reads.iter().chain(&spec.writes) {
            assert_eq!(
                l.shard_of(a.key),
                Some(spec.shard),
                "{} piece {i}: key {:?} not on shard {:?}",
                txn.name(),
                a.key,
                spec.shard
            );
        }
        let store = &stores[spec.shard.0 as usize];
        let vals: Vec<Option<&Value>> = spec
            .reads
            .iter()
            .map(|a| {
                writes
                    .iter()
                    .rev()
                    .find(|(_, k, _)| *k == a.key)
                    .map(|(_, _, v)| v)
                    .or_else(|| store.get(a.key).map(|r| &r.value))
            })
            .collect();
        let res = txn.execute(i, &vals, &inputs);
        if res.user_abort {
            return None;
        }
        for (k, v) in res.writes {
            assert!(
                spec.writes.iter().any(|a| a.key == k),
                "{} piece {i} wrote undeclared {k:?}",
                txn.name()
            );
            writes.push((spec.shard, k, v));
        }
        outputs[i] = Some(res.output);
    }
    for (s, k, v) in writes {
        stores[s.0 as usize].install(k, v, Version(1));
    }
    Some(outputs.into_iter().map(Option::unwrap).collect())
}

fn client(id: u32, shards: u32) -> ClientSlot {
    ClientSlot {
        id,
        home: ShardId(id % shards),
    }
}

#[test]
fn headers_round_trip_and_patch_keeps_the_tail() {
    let c = Customer {
        balance: -1234,
        ytd_payment: 99,
        payment_cnt: 7,
        delivery_cnt: 3,
        discount: 4999,
        credit_lim: 5_000_000,
        since: 1,
        bad_credit: 1,
    };
    let v = c.with_tail(b"tail-bytes");
    assert_eq!(v.len(), Customer::LEN + 10);
    assert_eq!(Customer::decode(Some(&v)), Some(c));
    let mut c2 = c;
    c2.balance = 5;
    let v2 = c2.patch(&v);
    assert_eq!(Customer::read(&v2).balance, 5);
    assert_eq!(&v2[Customer::LEN..], b"tail-bytes");
    assert_eq!(
        Customer::decode(Some(&Value::new())),
        None,
        "empty = missing"
    );
    assert_eq!(Customer::decode(None), None);
}

#[test]
fn nurand_stays_in_range_and_is_skewed() {
    let mut rng = SmallRng::seed_from_u64(1);
    let mut hits = vec![0u32; 3001];
    for _ in 0..300_000 {
        let x = nurand(&mut rng, 1023, 1, 3000, populate::C_ID);
        assert!((1..=3000).contains(&x));
        hits[x as usize] += 1;
    }
    let max = *hits.iter().max().unwrap();
    let min = *hits[1..].iter().min().unwrap();
    // Uniform would give ~100 each; NURand's OR makes some ids far hotter.
    assert!(max > 4 * min.max(1), "max {max} min {min}");
    for _ in 0..1000 {
        let x = nurand(&mut rng, 255, 0, 9, 7);
        assert!(x <= 9);
    }
}

#[test]
fn last_names_follow_the_syllable_table() {
    assert_eq!(last_name(0), "BARBARBAR");
    assert_eq!(last_name(371), "PRICALLYOUGHT");
    assert_eq!(last_name(999), "EINGEINGEING");
}

#[test]
fn run_time_and_load_time_c_last_differ_as_the_spec_requires() {
    let delta = populate::C_LAST_RUN.abs_diff(populate::C_LAST_LOAD);
    assert!((65..=119).contains(&delta) && delta != 96 && delta != 112);
}

#[test]
fn population_has_the_clause_4_3_cardinalities_and_is_consistent() {
    for cfg in [
        small(Partition::Warehouse, 2, 2),
        small(Partition::District, 1, 3),
        small(Partition::District, 2, 3),
        TpccConfig::tiny(),
    ] {
        let (t, stores) = loaded(&cfg);
        let l = t.layout();
        let count = |table: u32| -> usize {
            stores
                .iter()
                .map(|s| s.rows(tessera_core::TableId(table)).count())
                .sum()
        };
        let (w, d, c, i) = (
            cfg.warehouses as usize,
            cfg.districts as usize,
            cfg.customers as usize,
            cfg.items as usize,
        );
        assert_eq!(count(schema::ITEM), i * l.shards as usize, "replicated");
        assert_eq!(count(schema::STOCK), w * i);
        assert_eq!(count(schema::DISTRICT), w * d);
        assert_eq!(count(schema::CUSTOMER), w * d * c);
        assert_eq!(count(schema::HISTORY), w * d * c);
        assert_eq!(count(schema::ORDER), w * d * c);
        assert_eq!(
            count(schema::NEW_ORDER),
            w * d * populate::undelivered(cfg.customers) as usize
        );
        let rep = consistency::check_population(l, &stores);
        assert!(rep.ok(), "{:?}: {:?}", cfg.partition, rep.violations);
        // Every loaded key lives where the layout says.
        for (s, st) in stores.iter().enumerate() {
            for (k, _) in st.records_sorted() {
                assert_eq!(l.shard_of(k), Some(ShardId(s as u32)), "{k:?}");
            }
        }
    }
}

#[test]
fn a_broken_store_fails_the_consistency_check() {
    let cfg = small(Partition::Warehouse, 1, 1);
    let (t, mut stores) = loaded(&cfg);
    let l = *t.layout();
    let k = l.customer(1, 2, 3);
    let v = stores[0].get(k).unwrap().value.clone();
    let mut h = Customer::read(&v);
    h.balance += 1;
    stores[0].install(k, h.patch(&v), Version(9));
    let rep = consistency::check(&l, &stores);
    assert!(!rep.ok());
    assert!(
        rep.violations.iter().any(|v| v.contains("condition 10")),
        "{:?}",
        rep.violations
    );
    // A lost new-order row breaks conditions 3 and 5.
    let (t, mut stores) = loaded(&cfg);
    let o = cfg.customers - 1;
    stores[0].install(t.layout().new_order(1, 1, o), Value::new(), Version(9));
    let rep = consistency::check(t.layout(), &stores);
    let text = rep.violations.join("\n");
    assert!(
        text.contains("condition 3") && text.contains("condition 5"),
        "{text}"
    );
}

/// Serial execution of the full mix keeps every condition, on every scheme.
#[test]
fn the_full_mix_run_serially_stays_consistent() {
    for cfg in [
        TpccConfig {
            remote_neworder: RemoteNewOrder::PerTxn(30.0),
            remote_payment: 30.0,
            ..small(Partition::Warehouse, 3, 3)
        },
        TpccConfig {
            remote_neworder: RemoteNewOrder::PerLine(5.0),
            remote_payment: 15.0,
            ..small(Partition::District, 2, 3)
        },
        small(Partition::District, 1, 4),
        TpccConfig {
            mix: Mix::default(),
            ..TpccConfig::tiny()
        },
    ] {
        let (t, mut stores) = loaded(&cfg);
        let l = *t.layout();
        let mut rng = SmallRng::seed_from_u64(3);
        let mut gens: Vec<_> = (0..4)
            .map(|i| t.tpcc_generator(client(i, l.shards)))
            .collect();
        let mut by_type: std::collections::BTreeMap<&str, (u32, u32)> = Default::default();
        for n in 0..3000 {
            let k = n % gens.len();
            let txn = gens[k].generate(&mut rng);
            let ok = run_serial(&l, &mut stores, txn.as_ref()).is_some();
            let e = by_type.entry(txn.name()).or_default();
            e.0 += 1;
            e.1 += u32::from(ok);
            if !ok {
                assert_eq!(txn.name(), NEWORDER, "only NewOrder rolls back");
            }
        }
        let rep = consistency::check(&l, &stores);
        assert!(rep.ok(), "{:?}: {:?}", cfg.partition, rep.violations);
        for name in [NEWORDER, PAYMENT, ORDERSTATUS, DELIVERY, STOCKLEVEL] {
            let (all, ok) = by_type[name];
            assert!(ok > 0, "{name}: none committed of {all}");
        }
        let (all, ok) = by_type[NEWORDER];
        let rolled_back = f64::from(all - ok) / f64::from(all);
        assert!(
            (0.002..0.03).contains(&rolled_back),
            "NewOrder rollbacks {rolled_back}"
        );
    }
}

#[test]
fn the_static_s_dist_copy_matches_the_loaded_stock_rows() {
    let cfg = small(Partition::Warehouse, 1, 1);
    let (t, stores) = loaded(&cfg);
    let l = *t.layout();
    for i in [1, 2, cfg.items] {
        let v = &stores[0].get(l.stock(1, i)).unwrap().value;
        for d in 1..=12 {
            assert_eq!(
                schema::stock_dist(v, d),
                populate::stock_dist(1, i, d),
                "item {i} district {d}"
            );
        }
    }
    assert_ne!(populate::stock_dist(1, 1, 1), populate::stock_dist(1, 1, 2));
}

#[test]
fn neworder_takes_the_next_order_id_and_updates_stock() {
    let cfg = small(Partition::Warehouse, 1, 1);
    let (t, mut stores) = loaded(&cfg);
    let l = *t.layout();
    let lines = vec![
        neworder::Line {
            i_id: 5,
            supply_w: 1,
            quantity: 3,
        },
        neworder::Line {
            i_id: 5,
            supply_w: 1,
            quantity: 4,
        },
        neworder::Line {
            i_id: 9,
            supply_w: 1,
            quantity: 1,
        },
    ];
    let s5 = Stock::read(&stores[0].get(l.stock(1, 5)).unwrap().value);
    let txn = neworder::NewOrder::new(l, 1, 2, 7, lines, 42);
    let out = run_serial(&l, &mut stores, &txn).expect("commits");
    let o_id = schema::In::new(out.last().unwrap()).u32();
    assert_eq!(o_id, cfg.customers + 1);
    let dh = District::read(&stores[0].get(l.district(1, 2)).unwrap().value);
    assert_eq!(dh.next_o_id, o_id + 1);
    let s5b = Stock::read(&stores[0].get(l.stock(1, 5)).unwrap().value);
    assert_eq!(s5b.ytd, s5.ytd + 7, "a repeated item takes both lines");
    assert_eq!(s5b.order_cnt, s5.order_cnt + 2);
    assert!(schema::present(
        stores[0].get(l.new_order(1, 2, o_id)).map(|r| &r.value)
    ));
    let lo = schema::LastOrder::read(&stores[0].get(l.last_order(1, 2, 7)).unwrap().value);
    assert_eq!((lo.o_id, lo.ol_cnt), (o_id, 3));
    // An unused item id rolls the order back: nothing changes.
    let before = stores[0].records_sorted().len();
    let bad = neworder::NewOrder::new(
        l,
        1,
        2,
        7,
        vec![neworder::Line {
            i_id: cfg.items + 1,
            supply_w: 1,
            quantity: 1,
        }],
        43,
    );
    assert!(run_serial(&l, &mut stores, &bad).is_none());
    assert_eq!(stores[0].records_sorted().len(), before);
    assert!(consistency::check(&l, &stores).ok());
}

#[test]
fn delivery_takes_the_oldest_new_order_of_its_district() {
    let cfg = small(Partition::District, 1, 2);
    let (t, mut stores) = loaded(&cfg);
    let l = *t.layout();
    let first = cfg.customers - populate::undelivered(cfg.customers) + 1;
    for d in 1..=cfg.districts {
        let s = l.district_shard(1, d).0 as usize;
        let c = schema::Order::read(&stores[s].get(l.order(1, d, first)).unwrap().value).c_id;
        let before = Customer::read(&stores[s].get(l.customer(1, d, c)).unwrap().value);
        run_serial(&l, &mut stores, &delivery::Delivery::new(l, 1, d, 4, 99)).expect("commits");
        let after = Customer::read(&stores[s].get(l.customer(1, d, c)).unwrap().value);
        assert_eq!(
            after.delivery_cnt,
            before.delivery_cnt + 1,
            "the queue names the customer"
        );
        assert!(after.balance > before.balance);
    }
    for d in 1..=cfg.districts {
        let s = l.district_shard(1, d).0 as usize;
        let no = stores[s].get(l.new_order(1, d, first)).map(|r| &r.value);
        assert!(!schema::present(no), "district {d}: oldest delivered");
        let next = stores[s]
            .get(l.new_order(1, d, first + 1))
            .map(|r| &r.value);
        assert!(schema::present(next), "district {d}: only the oldest");
        let o = schema::Order::read(&stores[s].get(l.order(1, d, first)).unwrap().value);
        assert_eq!(o.carrier_id, 4);
    }
    assert!(consistency::check(&l, &stores).ok());
    // Deliver everything; further deliveries find nothing and change nothing.
    for d in 1..=cfg.districts {
        for _ in 0..populate::undelivered(cfg.customers) + 2 {
            run_serial(&l, &mut stores, &delivery::Delivery::new(l, 1, d, 4, 99)).unwrap();
        }
    }
    let rep = consistency::check(&l, &stores);
    assert!(rep.ok(), "{:?}", rep.violations);
    let no_rows: usize = stores
        .iter()
        .map(|s| {
            s.rows(tessera_core::TableId(schema::NEW_ORDER))
                .filter(|(_, r)| !r.value.is_empty())
                .count()
        })
        .sum();
    assert_eq!(no_rows, 0);
}

#[test]
fn payment_by_name_picks_the_middle_customer_and_writes_history() {
    let cfg = TpccConfig {
        customers: 1200, // names 0..999 for the first 1,000, then repeats
        districts: 1,
        items: 10,
        ..TpccConfig::default()
    };
    let (t, mut stores) = loaded(&cfg);
    let l = *t.layout();
    // Find a name shared by several customers.
    let (name, ids) = (0..1000)
        .find_map(|n| {
            let v = &stores[0].get(l.name_index(1, 1, n))?.value;
            let ids: Vec<u32> = schema::decode_ids(v).collect();
            (ids.len() >= 2).then_some((n, ids))
        })
        .expect("some name repeats");
    let want = ids[ids.len().div_ceil(2) - 1];
    let txn = payment::Payment::new(l, 1, 1, 1, 1, CustomerBy::Name(name), 1234, 5, 77);
    run_serial(&l, &mut stores, &txn).unwrap();
    let ch = Customer::read(&stores[0].get(l.customer(1, 1, want)).unwrap().value);
    assert_eq!(ch.payment_cnt, 2);
    assert_eq!(ch.balance, -1000 - 1234);
    assert!(stores[0].get(l.history(1, 1, want, 77)).is_some());
    assert!(consistency::check(&l, &stores).ok());
}

#[test]
fn stock_level_counts_low_stock_of_the_last_20_orders() {
    let cfg = small(Partition::District, 1, 3);
    let (t, mut stores) = loaded(&cfg);
    let l = *t.layout();
    // Threshold above every quantity: every distinct item counts.
    let txn = stocklevel::StockLevel::new(l, 1, 2, 1000);
    let out = run_serial(&l, &mut stores, &txn).unwrap();
    let low: u32 = out[3..].iter().map(|o| schema::In::new(o).u32()).sum();
    let items = schema::In::new(&out[2]);
    let distinct = out[2].len() / 4;
    assert!(!items.is_empty());
    assert_eq!(low as usize, distinct);
    assert_eq!(out.len(), 3 + l.stock_shards(1).len());
}

/// StockLevel's ordered form (Rococo's bound on read-only rounds): the
/// same pieces, its immediate ones all at the district's server and
/// feeding the stock pieces (what Rococo's hold needs), giving the plain
/// form's outputs; it crosses the wire whole; and an `--immediate-stock`
/// StockLevel has none.
#[test]
fn stock_level_has_an_ordered_form_with_its_immediate_pieces_at_one_server() {
    let cfg = small(Partition::District, 1, 3);
    let (t, mut stores) = loaded(&cfg);
    let l = *t.layout();
    let mut rng = SmallRng::seed_from_u64(3);
    let plain = t.tpcc_generator(client(0, 2)).stock_level(&mut rng);
    let out = run_serial(&l, &mut stores, &plain).unwrap();
    let f = plain.ordered().expect("an ordered form");
    assert_eq!(f.name(), STOCKLEVEL_ORDERED);
    assert!(f.read_only() && f.ordered().is_none());
    let home = f.pieces()[0].shard;
    for (i, p) in f.pieces().iter().enumerate() {
        let immediate = p.kind == tessera_core::PieceKind::Immediate;
        assert_eq!(immediate, i < 3, "piece {i}");
        assert!(!immediate || p.shard == home, "piece {i}");
        assert!(i == 0 || !p.inputs.is_empty(), "piece {i} is fed");
    }
    assert_eq!(run_serial(&l, &mut stores, f.as_ref()).unwrap(), out);
    let mut params = bytes::BytesMut::new();
    f.encode_params(&mut params).unwrap();
    let back = t.decode_txn(f.name(), &params).unwrap();
    assert_eq!(format!("{:?}", back.pieces()), format!("{:?}", f.pieces()));
    assert_eq!(run_serial(&l, &mut stores, back.as_ref()).unwrap(), out);
    let mut params = bytes::BytesMut::new();
    plain.encode_params(&mut params).unwrap();
    let decoded = t.decode_txn(plain.name(), &params).unwrap();
    assert!(decoded.ordered().is_some(), "decoded with its form");
    let immediate = TpccConfig {
        immediate_stock: true,
        ..cfg
    };
    let t = Tpcc::new(immediate).unwrap();
    let sl = t.tpcc_generator(client(0, 2)).stock_level(&mut rng);
    assert!(sl.ordered().is_none(), "--immediate-stock: none");
}

#[test]
fn generator_draws_the_mix_and_home_warehouses_on_the_home_shard() {
    let cfg = small(Partition::Warehouse, 4, 2);
    let t = Tpcc::new(cfg).unwrap();
    let mut rng = SmallRng::seed_from_u64(5);
    for id in 0..8 {
        let g = t.tpcc_generator(client(id, 2));
        assert_eq!(t.layout().district_shard(g.home_warehouse(), 1).0, id % 2);
    }
    let g = t.tpcc_generator(client(0, 2));
    let mut n = std::collections::BTreeMap::new();
    for _ in 0..20_000 {
        *n.entry(g.next_type(&mut rng)).or_insert(0u32) += 1;
    }
    let share = |k| f64::from(n[k]) / 20_000.0;
    assert!((share(NEWORDER) - 0.45).abs() < 0.02);
    assert!((share(PAYMENT) - 0.43).abs() < 0.02);
    assert!((share(DELIVERY) - 0.04).abs() < 0.01);
}

#[test]
fn per_node_home_warehouses_are_drawn_per_transaction_on_the_home_shard() {
    // 12 warehouses on 3 shards: shard 1 holds warehouses 2, 5, 8, 11.
    let cfg = TpccConfig {
        home_warehouse: HomeWarehouse::PerNode,
        mix: Mix::NEWORDER_PAYMENT,
        ..small(Partition::Warehouse, 12, 3)
    };
    let t = Tpcc::new(cfg).unwrap();
    let mut g = t.tpcc_generator(client(4, 3));
    let mut rng = SmallRng::seed_from_u64(3);
    let mut seen = std::collections::BTreeMap::new();
    let n = 8_000;
    for _ in 0..n {
        let txn = g.generate(&mut rng);
        assert_eq!(txn.pieces()[0].shard, ShardId(1), "home piece off the node");
        *seen.entry(g.home_warehouse()).or_insert(0u32) += 1;
    }
    assert_eq!(seen.keys().copied().collect::<Vec<_>>(), vec![2, 5, 8, 11]);
    for (w, k) in &seen {
        let share = f64::from(*k) / f64::from(n);
        assert!((share - 0.25).abs() < 0.03, "warehouse {w}: {share}");
    }
    // Fixed (the default): one warehouse for the whole run.
    let mut g = Tpcc::new(TpccConfig {
        home_warehouse: HomeWarehouse::Fixed,
        ..cfg
    })
    .unwrap()
    .tpcc_generator(client(4, 3));
    let w = g.home_warehouse();
    for _ in 0..200 {
        g.generate(&mut rng);
        assert_eq!(g.home_warehouse(), w);
    }
    // Under the district scheme a shard holds no whole warehouse.
    let e = TpccConfig {
        home_warehouse: HomeWarehouse::PerNode,
        ..small(Partition::District, 1, 2)
    }
    .validate()
    .unwrap_err()
    .to_string();
    assert!(e.contains("--home-warehouse"), "{e}");
    assert_eq!(
        HomeWarehouse::parse("per-node"),
        Some(HomeWarehouse::PerNode)
    );
    assert_eq!(HomeWarehouse::parse("fixed"), Some(HomeWarehouse::Fixed));
    assert_eq!(HomeWarehouse::parse("node"), None);
}

#[test]
fn remote_shares_follow_the_flags() {
    let cfg = TpccConfig {
        remote_neworder: RemoteNewOrder::PerTxn(10.0),
        remote_payment: 15.0,
        ..small(Partition::Warehouse, 3, 3)
    };
    let t = Tpcc::new(cfg).unwrap();
    let mut g = t.tpcc_generator(client(0, 3));
    let mut rng = SmallRng::seed_from_u64(9);
    let n = 20_000;
    let remote_no = (0..n).filter(|_| g.new_order(&mut rng).is_remote()).count();
    let remote_p = (0..n)
        .filter(|_| g.payment(&mut rng).customer_district().0 != g.home_warehouse())
        .count();
    let (a, b) = (remote_no as f64 / n as f64, remote_p as f64 / n as f64);
    assert!((a - 0.10).abs() < 0.01, "remote neworder {a}");
    assert!((b - 0.15).abs() < 0.01, "remote payment {b}");
    // Per line at 1%: about 1 − 0.99^10 ≈ 9.6% of orders have a remote line.
    let cfg = TpccConfig {
        remote_neworder: RemoteNewOrder::PerLine(1.0),
        ..cfg
    };
    let mut g = Tpcc::new(cfg).unwrap().tpcc_generator(client(0, 3));
    let remote_no = (0..n).filter(|_| g.new_order(&mut rng).is_remote()).count();
    let a = remote_no as f64 / n as f64;
    assert!((0.07..0.12).contains(&a), "per-line remote share {a}");
}

#[test]
fn bad_configs_are_rejected_naming_the_flag() {
    let err = |c: TpccConfig| c.validate().unwrap_err().to_string();
    let base = small(Partition::Warehouse, 1, 1);
    assert!(err(TpccConfig { items: 0, ..base }).contains("--items"));
    assert!(err(TpccConfig {
        warehouses: 0,
        ..base
    })
    .contains("--warehouses"));
    let e = err(TpccConfig {
        remote_payment: 15.0,
        ..base
    });
    assert!(
        e.contains("--remote-payment") && e.contains("--warehouses"),
        "{e}"
    );
    let e = err(TpccConfig {
        remote_neworder: RemoteNewOrder::PerTxn(10.0),
        ..base
    });
    assert!(e.contains("--remote-neworder"), "{e}");
    assert!(err(TpccConfig { shards: 2, ..base }).contains("--shards"));
    assert!(err(TpccConfig {
        by_name: 101,
        ..base
    })
    .contains("by_name"));
    assert!(err(TpccConfig {
        remote_payment: 120.0,
        warehouses: 2,
        ..base
    })
    .contains("[0, 100]"));
    assert!(Mix::parse("neworder=1,bogus=2")
        .unwrap_err()
        .to_string()
        .contains("--mix"));
    assert!(Mix::parse("neworder=0").is_err());
    assert!(Mix::parse("payment=x").is_err());
    assert_eq!(
        Mix::parse("neworder=50,payment=50").unwrap(),
        Mix {
            neworder: 50,
            payment: 50,
            orderstatus: 0,
            delivery: 0,
            stocklevel: 0
        }
    );
    assert_eq!(
        RemoteNewOrder::parse("1/line"),
        Some(RemoteNewOrder::PerLine(1.0))
    );
    assert_eq!(
        RemoteNewOrder::parse("10"),
        Some(RemoteNewOrder::PerTxn(10.0))
    );
    assert_eq!(RemoteNewOrder::parse("ten"), None);
}

#[test]
fn static_specs_list_placeholders_of_the_right_tables() {
    let cfg = small(Partition::District, 1, 3);
    let t = Tpcc::new(cfg).unwrap();
    let mut g = t.tpcc_generator(client(0, 3));
    let mut rng = SmallRng::seed_from_u64(1);
    let no = g.new_order(&mut rng);
    let insert = no.pieces().last().unwrap();
    assert!(insert.dynamic && insert.kind == tessera_core::PieceKind::Deferrable);
    let tables: Vec<u32> = insert.writes.iter().map(|a| a.key.table.0).collect();
    assert!(tables.contains(&schema::ORDER) && tables.contains(&schema::ORDER_LINE));
    assert!(!no.read_only());
    assert!(g.order_status(&mut rng).read_only());
    assert!(g.stock_level(&mut rng).read_only());
    // Immediate pieces are exactly those whose output feeds another piece.
    for txn in [
        Arc::new(g.new_order(&mut rng)) as Txn,
        Arc::new(g.payment(&mut rng)),
        Arc::new(g.delivery(&mut rng)),
        Arc::new(g.order_status(&mut rng)),
        Arc::new(g.stock_level(&mut rng)),
    ] {
        let p = txn.pieces();
        for (i, s) in p.iter().enumerate() {
            let feeds = p.iter().any(|q| q.inputs.contains(&(i as u16)));
            assert_eq!(
                s.kind == tessera_core::PieceKind::Immediate,
                feeds,
                "{} piece {i}",
                txn.name()
            );
            assert!(s.inputs.iter().all(|&j| (j as usize) < i));
        }
    }
}

/// `--immediate-stock` (Rococo §4.2's example): every stock piece of every
/// NewOrder is immediate, the home piece too, the insert piece stays
/// deferrable; the variant survives the wire codec; other transactions and
/// the plain configuration are untouched.
#[test]
fn immediate_stock_makes_the_stock_pieces_immediate_and_round_trips() {
    use tessera_core::txn::PieceKind::{Deferrable, Immediate};
    let cfg = TpccConfig {
        immediate_stock: true,
        ..small(Partition::District, 1, 3)
    };
    let wl = Tpcc::new(cfg).unwrap();
    let plain = Tpcc::new(small(Partition::District, 1, 3)).unwrap();
    let mut g = wl.tpcc_generator(client(0, 3));
    let mut rng = SmallRng::seed_from_u64(7);
    for _ in 0..50 {
        let n = g.new_order(&mut rng);
        let kinds: Vec<_> = n.pieces().iter().map(|p| p.kind).collect();
        let last = kinds.len() - 1;
        assert!(kinds[..last].iter().all(|k| *k == Immediate), "{kinds:?}");
        assert_eq!(kinds[last], Deferrable);
        assert!(n.immediate_stock());
        let mut params = bytes::BytesMut::new();
        n.encode_params(&mut params).unwrap();
        let d = wl.decode_txn(NEWORDER, &params).unwrap();
        assert_eq!(format!("{:?}", d.pieces()), format!("{:?}", n.pieces()));
        let p = plain.decode_txn(NEWORDER, &params).unwrap();
        assert_eq!(
            p.pieces()[1].kind,
            Immediate,
            "the flag travels with the txn"
        );
    }
    let mut g = plain.tpcc_generator(client(0, 3));
    let n = g.new_order(&mut rng);
    assert!(!n.immediate_stock());
    assert!(n.pieces()[1..].iter().all(|p| p.kind == Deferrable));
}
