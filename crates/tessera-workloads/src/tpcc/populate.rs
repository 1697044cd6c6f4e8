//! Population (clause 4.3) and the random functions of clause 2.1.6 / 4.3.2.
//!
//! Every row's contents come from an RNG seeded by the row's identity
//! ([`row_rng`]), so a shard loads the same data whatever the number of
//! shards, and every replica of a replicated table is identical.
//!
//! Scaled knobs (`C` customers per district instead of 3,000): each
//! district has `C` orders, one per customer (a random permutation, clause
//! 4.3.3.1); the newest `⌊3C/10⌋` (900 of 3,000) are undelivered and have
//! NEW-ORDER rows; `D_NEXT_O_ID = C + 1`; `D_YTD = C × 10.00` and
//! `W_YTD = D × C × 10.00` (30,000.00 and 300,000.00 at the specification's
//! scale), so that the consistency conditions hold from the start.

use super::keys::{Layout, LAST_NAMES};
use super::schema::{self, tail, Cursor, Customer, District, History, Item, LastOrder, Order};
use super::schema::{OrderLine, Stock, Warehouse};
use crate::mix64;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use tessera_core::storage::Store;
use tessera_core::{ShardId, TableId};

/// The run-time and load-time constants C of NURand (clause 2.1.6.1).
/// Fixed, not drawn, so that one seed replays one run; `C_LAST_RUN −
/// C_LAST_LOAD = 73` lies in [65, 119] and is neither 96 nor 112 (clause
/// 2.1.6.1's rule for the two C_LAST values).
pub const C_LAST_LOAD: u64 = 157;
pub const C_LAST_RUN: u64 = 230;
pub const C_ID: u64 = 259;
pub const C_OL_I_ID: u64 = 7911;

/// NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y − x + 1)) + x.
pub fn nurand<R: Rng + ?Sized>(rng: &mut R, a: u64, x: u64, y: u64, c: u64) -> u64 {
    (((rng.random_range(0..=a) | rng.random_range(x..=y)) + c) % (y - x + 1)) + x
}

const SYLLABLES: [&str; 10] = [
    "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
];

/// The last name of number `n` in [0, 999] (clause 4.3.2.3): three
/// syllables, one per decimal digit.
pub fn last_name(n: u32) -> String {
    let n = n as usize;
    [n / 100, (n / 10) % 10, n % 10]
        .iter()
        .map(|&i| SYLLABLES[i])
        .collect()
}

/// The number of last names a district's customers use: names `0..C` when
/// `C` < 1,000, all 1,000 otherwise.
pub fn name_range(customers: u32) -> u32 {
    customers.min(LAST_NAMES)
}

/// A last-name number for a run-time lookup (clause 2.5.1.2, scaled to the
/// names that exist).
pub fn run_name<R: Rng + ?Sized>(rng: &mut R, customers: u32) -> u32 {
    nurand(
        rng,
        255,
        0,
        u64::from(name_range(customers)) - 1,
        C_LAST_RUN,
    ) as u32
}

/// A customer id for a run-time lookup (clause 2.1.6: NURand(1023, 1, C)).
pub fn run_customer<R: Rng + ?Sized>(rng: &mut R, customers: u32) -> u32 {
    nurand(rng, 1023, 1, u64::from(customers), C_ID) as u32
}

/// An item id (clause 2.4.1.5: NURand(8191, 1, I)).
pub fn run_item<R: Rng + ?Sized>(rng: &mut R, items: u32) -> u32 {
    nurand(rng, 8191, 1, u64::from(items), C_OL_I_ID) as u32
}

const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// Append a random a-string of length in [lo, hi] (clause 4.3.2.2).
fn astring(rng: &mut SmallRng, lo: usize, hi: usize, out: &mut Vec<u8>) -> usize {
    let n = rng.random_range(lo..=hi);
    out.extend((0..n).map(|_| ALNUM[rng.random_range(0..ALNUM.len())]));
    n
}

/// Append a random a-string of length in [lo, hi], padded with zeros to
/// `hi` bytes (a fixed-width field).
fn afield(rng: &mut SmallRng, lo: usize, hi: usize, out: &mut Vec<u8>) {
    let n = astring(rng, lo, hi, out);
    out.resize(out.len() + hi - n, 0);
}

fn nfield(rng: &mut SmallRng, n: usize, out: &mut Vec<u8>) {
    out.extend((0..n).map(|_| b'0' + rng.random_range(0..10u8)));
}

/// Street 1, street 2, city, state, zip (clause 4.3.2.7 and 4.3.2.10).
fn address(rng: &mut SmallRng, out: &mut Vec<u8>) {
    afield(rng, 10, 20, out);
    afield(rng, 10, 20, out);
    afield(rng, 10, 20, out);
    out.extend((0..2).map(|_| b'A' + rng.random_range(0..26u8)));
    nfield(rng, 4, out);
    out.extend_from_slice(b"11111");
}

/// A `*_DATA` string of length [lo, hi]; 10% contain "ORIGINAL" at a random
/// position (clause 4.3.3.1). Returns whether it does.
fn data_field(rng: &mut SmallRng, lo: usize, hi: usize, out: &mut Vec<u8>) -> bool {
    let start = out.len();
    let n = astring(rng, lo, hi, out);
    if rng.random_ratio(1, 10) {
        let at = start + rng.random_range(0..=n - 8);
        out[at..at + 8].copy_from_slice(b"ORIGINAL");
        true
    } else {
        false
    }
}

/// Random rate in [0, max] in units of 1/10,000.
fn rate(rng: &mut SmallRng, max: u32) -> u32 {
    rng.random_range(0..=max)
}

/// An RNG for one row (or one group of rows), from its table and identity.
pub fn row_rng(table: u32, a: u64, b: u64) -> SmallRng {
    SmallRng::seed_from_u64(mix64(mix64(u64::from(table) ^ (a << 8)) ^ b))
}

/// The load-time date of every row (`O_ENTRY_D`, `C_SINCE`, ...): nonzero.
pub const LOAD_DATE: u64 = 1;

/// Initial `D_YTD` in cents for `customers` per district.
pub fn initial_d_ytd(customers: u32) -> i64 {
    i64::from(customers) * 1000
}

/// Orders per district that are undelivered at load: the newest 30%.
pub fn undelivered(customers: u32) -> u32 {
    customers * 3 / 10
}

/// Populate `shard` of `layout`.
pub fn load(layout: &Layout, shard: ShardId, store: &mut Store) {
    let l = layout;
    store.reserve(TableId(schema::ITEM), l.items as usize);
    for i in 1..=l.items {
        store.load(l.item(i, shard), item(i));
    }
    for w in 1..=l.warehouses {
        if l.has_warehouse(w, shard) {
            store.load(l.warehouse(w, shard), warehouse(l, w));
        }
        for i in 1..=l.items {
            if l.stock_shard(w, i) == shard {
                store.load(l.stock(w, i), stock(w, i));
            }
        }
        for d in 1..=l.districts {
            if l.district_shard(w, d) == shard {
                load_district(l, w, d, store);
            }
        }
    }
}

fn item(i: u32) -> tessera_core::Value {
    let mut rng = row_rng(schema::ITEM, u64::from(i), 0);
    let mut t = Vec::with_capacity(tail::I_DATA + 50);
    afield(&mut rng, 14, 24, &mut t);
    let original = data_field(&mut rng, 26, 50, &mut t);
    Item {
        im_id: rng.random_range(1..=10_000),
        price: rng.random_range(100..=10_000),
        original: original.into(),
    }
    .with_tail(&t)
}

fn warehouse(l: &Layout, w: u32) -> tessera_core::Value {
    let mut rng = row_rng(schema::WAREHOUSE, u64::from(w), 0);
    let mut t = Vec::with_capacity(tail::W_LEN);
    afield(&mut rng, 6, 10, &mut t);
    address(&mut rng, &mut t);
    Warehouse {
        tax: rate(&mut rng, 2000),
        ytd: i64::from(l.districts) * initial_d_ytd(l.customers),
    }
    .with_tail(&t)
}

fn stock(w: u32, i: u32) -> tessera_core::Value {
    let mut rng = row_rng(schema::STOCK, u64::from(w), u64::from(i));
    let mut t = Vec::with_capacity(tail::S_DATA + 50);
    for _ in 0..10 {
        afield(&mut rng, 24, 24, &mut t);
    }
    let original = data_field(&mut rng, 26, 50, &mut t);
    Stock {
        quantity: rng.random_range(10..=100),
        ytd: 0,
        order_cnt: 0,
        remote_cnt: 0,
        original: original.into(),
    }
    .with_tail(&t)
}

/// `S_DIST_xx` of district `d` in stock row (w, i) as loaded. The column
/// never changes (no transaction writes it), so, like ITEM, it can be read
/// anywhere: NewOrder's insert piece takes `OL_DIST_INFO` from here instead
/// of from an immediate piece on the stock row, whose `S_QUANTITY` is
/// updated by a deferrable one (see [`super::neworder`]).
pub fn stock_dist(w: u32, i: u32, d: u32) -> [u8; tail::S_DIST_LEN] {
    let mut rng = row_rng(schema::STOCK, u64::from(w), u64::from(i));
    let mut t = Vec::with_capacity(10 * tail::S_DIST_LEN);
    for _ in 0..10 {
        afield(&mut rng, 24, 24, &mut t);
    }
    let at = ((d - 1) % 10) as usize * tail::S_DIST_LEN;
    t[at..at + tail::S_DIST_LEN]
        .try_into()
        .expect("24-byte field")
}

/// One district: DISTRICT, its cursor, CUSTOMER, the name index, HISTORY,
/// ORDER, ORDER-LINE, NEW-ORDER and LAST_ORDER rows.
fn load_district(l: &Layout, w: u32, d: u32, store: &mut Store) {
    let dist = l.dist(w, d);
    let cs = l.customers;
    let mut rng = row_rng(schema::DISTRICT, dist, 0);
    let mut t = Vec::with_capacity(tail::D_LEN);
    afield(&mut rng, 6, 10, &mut t);
    address(&mut rng, &mut t);
    store.load(
        l.district(w, d),
        District {
            tax: rate(&mut rng, 2000),
            ytd: initial_d_ytd(cs),
            next_o_id: cs + 1,
        }
        .with_tail(&t),
    );
    let delivered = cs - undelivered(cs);

    // Customers, their first history row, and the name index.
    let mut names: Vec<Vec<(Vec<u8>, u32)>> = vec![Vec::new(); name_range(cs) as usize];
    for c in 1..=cs {
        let mut rng = row_rng(schema::CUSTOMER, dist, u64::from(c));
        let name = if c <= LAST_NAMES {
            c - 1
        } else {
            nurand(&mut rng, 255, 0, u64::from(LAST_NAMES) - 1, C_LAST_LOAD) as u32
        };
        let mut t = Vec::with_capacity(tail::C_DATA + tail::C_DATA_MAX);
        afield(&mut rng, 8, 16, &mut t);
        let first = t[..16].to_vec();
        t.extend_from_slice(b"OE");
        let ln = last_name(name);
        t.extend_from_slice(ln.as_bytes());
        t.resize(tail::C_LAST + 16, 0);
        address(&mut rng, &mut t);
        nfield(&mut rng, 16, &mut t);
        debug_assert_eq!(t.len(), tail::C_DATA);
        astring(&mut rng, 300, 500, &mut t);
        let bad_credit = rng.random_ratio(1, 10);
        store.load(
            l.customer(w, d, c),
            Customer {
                balance: -1000,
                ytd_payment: 1000,
                payment_cnt: 1,
                delivery_cnt: 0,
                discount: rate(&mut rng, 5000),
                credit_lim: 5_000_000,
                since: LOAD_DATE,
                bad_credit: bad_credit.into(),
            }
            .with_tail(&t),
        );
        if let Some(v) = names.get_mut(name as usize) {
            v.push((first, c));
        }
        let mut h = Vec::with_capacity(tail::H_DATA_MAX);
        astring(&mut rng, 12, 24, &mut h);
        store.load(
            l.history(w, d, c, 0),
            History {
                c_id: c,
                c_d_id: d,
                c_w_id: w,
                d_id: d,
                w_id: w,
                date: LOAD_DATE,
                amount: 1000,
            }
            .with_tail(&h),
        );
    }
    for (n, mut v) in names.into_iter().enumerate() {
        if v.is_empty() {
            continue;
        }
        v.sort();
        let ids: Vec<u32> = v.iter().map(|(_, c)| *c).collect();
        store.load(l.name_index(w, d, n as u32), schema::encode_ids(&ids));
    }

    // Orders: one per customer, in a random permutation of customers.
    let mut rng = row_rng(schema::ORDER, dist, 0);
    let mut perm: Vec<u32> = (1..=cs).collect();
    perm.shuffle(&mut rng);
    store.load(
        l.cursor(w, d),
        Cursor {
            next: delivered + 1,
        }
        .with_tail(&schema::encode_ids(&perm[delivered as usize..])),
    );
    store.reserve(TableId(schema::ORDER_LINE), cs as usize * 10);
    for (o, &c) in (1..=cs).zip(&perm) {
        let done = o <= delivered;
        let ol_cnt: u8 = rng.random_range(5..=15);
        store.load(
            l.order(w, d, o),
            Order {
                c_id: c,
                entry_d: LOAD_DATE,
                carrier_id: if done { rng.random_range(1..=10) } else { 0 },
                ol_cnt,
                all_local: 1,
            }
            .with_tail(&[]),
        );
        for ol in 1..=u32::from(ol_cnt) {
            let mut t = Vec::with_capacity(tail::OL_DIST_INFO);
            afield(&mut rng, 24, 24, &mut t);
            store.load(
                l.order_line(w, d, o, ol),
                OrderLine {
                    i_id: rng.random_range(1..=l.items),
                    supply_w_id: w,
                    delivery_d: if done { LOAD_DATE } else { 0 },
                    quantity: 5,
                    amount: if done {
                        0
                    } else {
                        rng.random_range(1..=999_999)
                    },
                }
                .with_tail(&t),
            );
        }
        if !done {
            store.load(l.new_order(w, d, o), schema::new_order_value());
        }
        store.load(
            l.last_order(w, d, c),
            LastOrder { o_id: o, ol_cnt }.with_tail(&[]),
        );
    }
}
