//! The consistency conditions of clause 3.3.2, over the final stores.
//!
//! Checked (numbers are the specification's):
//!
//! 1. `W_YTD = Σ D_YTD` per warehouse — `warehouse` and `tiny` schemes
//!    only: the `district` scheme does not maintain `W_YTD` (Rococo §5.4).
//! 2. `D_NEXT_O_ID − 1 = max(O_ID) = max(NO_O_ID)` per district.
//! 3. `max(NO_O_ID) − min(NO_O_ID) + 1 = count(NEW-ORDER)` per district.
//! 4. `Σ O_OL_CNT = count(ORDER-LINE)` per district.
//! 5. `O_CARRIER_ID` is null iff a NEW-ORDER row exists, per order.
//! 6. `O_OL_CNT = count(ORDER-LINE)` per order.
//! 7. `OL_DELIVERY_D` is null iff `O_CARRIER_ID` is null, per line.
//! 8. `W_YTD = Σ H_AMOUNT` per warehouse (`Σ D_YTD` in the `district`
//!    scheme).
//! 9. `D_YTD = Σ H_AMOUNT` per district.
//! 10. `C_BALANCE = Σ OL_AMOUNT (delivered orders) − Σ H_AMOUNT` per customer.
//! 12. `C_BALANCE + C_YTD_PAYMENT = Σ OL_AMOUNT (delivered orders)` per
//!     customer.
//!
//! Condition 11 (`count(ORDER) − count(NEW-ORDER)` equals its load value)
//! holds only until the first Delivery, so it is checked right after
//! population only ([`check_population`]). Our own invariants are checked
//! too: the delivery cursor is the smallest new-order id (or
//! `D_NEXT_O_ID` when none) and its queue lists the customers of orders
//! `[cursor, D_NEXT_O_ID)`, order ids are dense `1..D_NEXT_O_ID`, a
//! customer's LAST_ORDER names their newest order, and a customer has
//! `C_PAYMENT_CNT` history rows.
//!
//! The stores must be quiescent: a transaction committed on one shard and
//! not yet on another would show as a violation.

use super::keys::Layout;
use super::populate;
use super::schema::{self, Customer, District, History, LastOrder, Order, OrderLine, Warehouse};
use std::collections::BTreeMap;
use std::fmt::Write;
use tessera_core::storage::Store;
use tessera_core::{FastMap, TableId};

/// Most violations reported (the first ones, in a deterministic order).
pub const MAX_REPORTED: usize = 20;

/// The outcome of [`check`].
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Human-readable violations, first [`MAX_REPORTED`] only.
    pub violations: Vec<String>,
    /// All violations found.
    pub count: usize,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.count == 0
    }

    fn fail(&mut self, condition: u32, what: impl FnOnce(&mut String)) {
        self.count += 1;
        if self.violations.len() < MAX_REPORTED {
            let mut s = format!("TPC-C consistency condition {condition}: ");
            what(&mut s);
            self.violations.push(s);
        }
    }
}

#[derive(Default)]
struct OrderInfo {
    c_id: u32,
    carrier: u8,
    ol_cnt: u8,
    lines: u32,
    /// Lines with a null `OL_DELIVERY_D`.
    undelivered_lines: u32,
    amount: i64,
    new_order: bool,
}

#[derive(Default)]
struct DistrictInfo {
    ytd: i64,
    next_o_id: u32,
    cursor: u32,
    /// The customers the delivery queue lists, oldest order first.
    queue: Vec<u32>,
    orders: BTreeMap<u32, OrderInfo>,
    new_orders: Vec<u32>,
    history: i64,
    lines: u64,
}

#[derive(Default)]
struct CustomerInfo {
    balance: i64,
    ytd_payment: i64,
    payment_cnt: u32,
    history: i64,
    history_rows: u32,
    last_order: Option<LastOrder>,
}

fn rows<'a>(
    stores: &'a [Store],
    table: u32,
) -> impl Iterator<Item = (u64, &'a tessera_core::Value)> + 'a {
    stores
        .iter()
        .flat_map(move |s| s.rows(TableId(table)))
        .filter(|(_, r)| !r.value.is_empty())
        .map(|(k, r)| (k.row, &r.value))
}

/// Check every condition on `stores` (indexed by shard).
pub fn check(l: &Layout, stores: &[Store]) -> Report {
    let mut rep = Report::default();
    let mut dists: BTreeMap<u64, DistrictInfo> = BTreeMap::new();
    let mut custs: FastMap<u64, CustomerInfo> = tessera_core::fast_map();

    for (row, v) in rows(stores, schema::DISTRICT) {
        let h = District::read(v);
        let e = dists.entry(row).or_default();
        e.ytd = h.ytd;
        e.next_o_id = h.next_o_id;
    }
    for (row, v) in rows(stores, schema::DELIVERY_CURSOR) {
        let e = dists.entry(row).or_default();
        e.cursor = schema::Cursor::read(v).next;
        e.queue = schema::decode_ids(&v[schema::Cursor::LEN..]).collect();
    }
    for (row, v) in rows(stores, schema::ORDER) {
        let (dist, o) = Layout::order_of(row);
        let h = Order::read(v);
        dists.entry(dist).or_default().orders.insert(
            o,
            OrderInfo {
                c_id: h.c_id,
                carrier: h.carrier_id,
                ol_cnt: h.ol_cnt,
                ..OrderInfo::default()
            },
        );
    }
    for (row, _) in rows(stores, schema::NEW_ORDER) {
        let (dist, o) = Layout::order_of(row);
        let e = dists.entry(dist).or_default();
        e.new_orders.push(o);
        if let Some(oi) = e.orders.get_mut(&o) {
            oi.new_order = true;
        }
    }
    for (row, v) in rows(stores, schema::ORDER_LINE) {
        let (dist, o, ol) = Layout::order_line_of(row);
        let h = OrderLine::read(v);
        let e = dists.entry(dist).or_default();
        e.lines += 1;
        match e.orders.get_mut(&o) {
            Some(oi) => {
                oi.lines += 1;
                oi.amount += h.amount;
                oi.undelivered_lines += u32::from(h.delivery_d == 0);
            }
            None => rep.fail(6, |s| {
                let _ = write!(s, "order line {dist}/{o}/{ol} has no order");
            }),
        }
    }
    for (row, v) in rows(stores, schema::CUSTOMER) {
        let h = Customer::read(v);
        let e = custs.entry(row).or_default();
        e.balance = h.balance;
        e.ytd_payment = h.ytd_payment;
        e.payment_cnt = h.payment_cnt;
    }
    for (row, v) in rows(stores, schema::LAST_ORDER) {
        custs.entry(row).or_default().last_order = Some(LastOrder::read(v));
    }
    for (row, v) in rows(stores, schema::HISTORY) {
        let h = History::read(v);
        if h.w_id >= 1 && h.d_id >= 1 {
            dists.entry(l.dist(h.w_id, h.d_id)).or_default().history += h.amount;
        }
        let e = custs.entry(l.history_customer(row)).or_default();
        e.history += h.amount;
        e.history_rows += 1;
    }

    check_districts(l, stores, &dists, &mut rep);
    check_customers(l, &dists, &custs, &mut rep);
    rep
}

fn check_districts(
    l: &Layout,
    stores: &[Store],
    dists: &BTreeMap<u64, DistrictInfo>,
    rep: &mut Report,
) {
    let mut w_ytd_sum: BTreeMap<u32, (i64, i64)> = BTreeMap::new();
    for (&dist, di) in dists {
        let (w, d) = l.wd(dist);
        let name = format!("district ({w}, {d})");
        let e = w_ytd_sum.entry(w).or_default();
        e.0 += di.ytd;
        e.1 += di.history;
        let max_o = di.orders.keys().next_back().copied().unwrap_or(0);
        if di.next_o_id != max_o + 1 {
            rep.fail(2, |s| {
                let _ = write!(
                    s,
                    "{name}: D_NEXT_O_ID {} but max(O_ID) {max_o}",
                    di.next_o_id
                );
            });
        }
        if di.orders.len() as u64 != u64::from(max_o) {
            rep.fail(2, |s| {
                let _ = write!(
                    s,
                    "{name}: {} orders but max(O_ID) {max_o}: ids not dense",
                    di.orders.len()
                );
            });
        }
        let (min_no, max_no) = (
            di.new_orders.iter().min().copied(),
            di.new_orders.iter().max().copied(),
        );
        if let Some(max_no) = max_no {
            if di.next_o_id != max_no + 1 {
                rep.fail(2, |s| {
                    let _ = write!(
                        s,
                        "{name}: D_NEXT_O_ID {} but max(NO_O_ID) {max_no}",
                        di.next_o_id
                    );
                });
            }
            let min_no = min_no.expect("non-empty");
            if u64::from(max_no - min_no + 1) != di.new_orders.len() as u64 {
                rep.fail(3, |s| {
                    let _ = write!(
                        s,
                        "{name}: new orders {min_no}..={max_no} but {} rows",
                        di.new_orders.len()
                    );
                });
            }
        }
        let expect_cursor = min_no.unwrap_or(di.next_o_id);
        if di.cursor != expect_cursor {
            rep.fail(3, |s| {
                let _ = write!(
                    s,
                    "{name}: delivery cursor {} but oldest new order {expect_cursor}",
                    di.cursor
                );
            });
        }
        let queued: Vec<Option<u32>> = (di.cursor..di.next_o_id)
            .map(|o| di.orders.get(&o).map(|oi| oi.c_id))
            .collect();
        if queued != di.queue.iter().map(|&c| Some(c)).collect::<Vec<_>>() {
            rep.fail(3, |s| {
                let _ = write!(
                    s,
                    "{name}: delivery queue lists customers {:?} but orders {}..{} have {queued:?}",
                    di.queue, di.cursor, di.next_o_id
                );
            });
        }
        let ol_sum: u64 = di.orders.values().map(|o| u64::from(o.ol_cnt)).sum();
        if ol_sum != di.lines {
            rep.fail(4, |s| {
                let _ = write!(
                    s,
                    "{name}: Σ O_OL_CNT {ol_sum} but {} order lines",
                    di.lines
                );
            });
        }
        for (&o, oi) in &di.orders {
            if (oi.carrier == 0) != oi.new_order {
                rep.fail(5, |s| {
                    let _ = write!(
                        s,
                        "{name} order {o}: carrier {} but new-order row {}",
                        oi.carrier,
                        if oi.new_order { "present" } else { "absent" }
                    );
                });
            }
            if u32::from(oi.ol_cnt) != oi.lines {
                rep.fail(6, |s| {
                    let _ = write!(
                        s,
                        "{name} order {o}: O_OL_CNT {} but {} lines",
                        oi.ol_cnt, oi.lines
                    );
                });
            }
            let expect_undelivered = if oi.carrier == 0 { oi.lines } else { 0 };
            if oi.undelivered_lines != expect_undelivered {
                rep.fail(7, |s| {
                    let _ = write!(
                        s,
                        "{name} order {o}: carrier {} but {} of {} lines undelivered",
                        oi.carrier, oi.undelivered_lines, oi.lines
                    );
                });
            }
        }
        if di.ytd != di.history {
            rep.fail(9, |s| {
                let _ = write!(s, "{name}: D_YTD {} but Σ H_AMOUNT {}", di.ytd, di.history);
            });
        }
    }
    for (&w, &(d_sum, h_sum)) in &w_ytd_sum {
        if l.partition.by_district() {
            if d_sum != h_sum {
                rep.fail(8, |s| {
                    let _ = write!(s, "warehouse {w}: Σ D_YTD {d_sum} but Σ H_AMOUNT {h_sum}");
                });
            }
            continue;
        }
        let shard = l.district_shard(w, 1);
        let Some(w_ytd) = stores
            .get(shard.0 as usize)
            .and_then(|s| s.get(l.warehouse(w, shard)))
            .and_then(|r| Warehouse::decode(Some(&r.value)))
            .map(|h| h.ytd)
        else {
            rep.fail(1, |s| {
                let _ = write!(s, "warehouse {w} is missing");
            });
            continue;
        };
        if w_ytd != d_sum {
            rep.fail(1, |s| {
                let _ = write!(s, "warehouse {w}: W_YTD {w_ytd} but Σ D_YTD {d_sum}");
            });
        }
        if w_ytd != h_sum {
            rep.fail(8, |s| {
                let _ = write!(s, "warehouse {w}: W_YTD {w_ytd} but Σ H_AMOUNT {h_sum}");
            });
        }
    }
}

fn check_customers(
    l: &Layout,
    dists: &BTreeMap<u64, DistrictInfo>,
    custs: &FastMap<u64, CustomerInfo>,
    rep: &mut Report,
) {
    // Σ OL_AMOUNT of delivered orders, and the newest order, per customer.
    let cc = u64::from(l.customers);
    let mut delivered: FastMap<u64, i64> = tessera_core::fast_map();
    let mut newest: FastMap<u64, (u32, u8)> = tessera_core::fast_map();
    for (&dist, di) in dists {
        for (&o, oi) in &di.orders {
            if oi.c_id == 0 || oi.c_id > l.customers {
                continue;
            }
            let cust = dist * cc + u64::from(oi.c_id - 1);
            if oi.carrier != 0 {
                *delivered.entry(cust).or_default() += oi.amount;
            }
            newest.insert(cust, (o, oi.ol_cnt));
        }
    }
    let mut sorted: Vec<_> = custs.iter().collect();
    sorted.sort_unstable_by_key(|(k, _)| **k);
    for (&cust, ci) in sorted {
        let (w, d, c) = l.wdc(cust);
        let name = format!("customer ({w}, {d}, {c})");
        let ol = delivered.get(&cust).copied().unwrap_or(0);
        if ci.balance != ol - ci.history {
            rep.fail(10, |s| {
                let _ = write!(
                    s,
                    "{name}: C_BALANCE {} but Σ OL_AMOUNT delivered {ol} − Σ H_AMOUNT {}",
                    ci.balance, ci.history
                );
            });
        }
        if ci.balance + ci.ytd_payment != ol {
            rep.fail(12, |s| {
                let _ = write!(
                    s,
                    "{name}: C_BALANCE {} + C_YTD_PAYMENT {} but Σ OL_AMOUNT delivered {ol}",
                    ci.balance, ci.ytd_payment
                );
            });
        }
        if ci.history_rows != ci.payment_cnt {
            rep.fail(9, |s| {
                let _ = write!(
                    s,
                    "{name}: C_PAYMENT_CNT {} but {} history rows",
                    ci.payment_cnt, ci.history_rows
                );
            });
        }
        let last = ci.last_order.map(|lo| (lo.o_id, lo.ol_cnt));
        if last != newest.get(&cust).copied() {
            rep.fail(2, |s| {
                let _ = write!(
                    s,
                    "{name}: last-order record {last:?} but newest order {:?}",
                    newest.get(&cust)
                );
            });
        }
    }
}

/// Condition 11, which holds only right after population:
/// `count(ORDER) − count(NEW-ORDER)` is the number of orders loaded as
/// delivered, per district.
pub fn check_population(l: &Layout, stores: &[Store]) -> Report {
    let mut rep = check(l, stores);
    let mut orders: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for (row, _) in rows(stores, schema::ORDER) {
        orders.entry(Layout::order_of(row).0).or_default().0 += 1;
    }
    for (row, _) in rows(stores, schema::NEW_ORDER) {
        orders.entry(Layout::order_of(row).0).or_default().1 += 1;
    }
    let expect = u64::from(l.customers - populate::undelivered(l.customers));
    for (dist, (o, no)) in orders {
        if o - no != expect {
            rep.fail(11, |s| {
                let _ = write!(
                    s,
                    "district {dist}: {o} orders − {no} new orders ≠ {expect}"
                );
            });
        }
    }
    rep
}
