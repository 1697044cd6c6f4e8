//! TPC-C (TPC Benchmark C, revision 5.11): the nine tables, clause-4.3
//! population, all five transactions with the standard mix, the papers'
//! partitioning schemes, and the consistency conditions of clause 3.3.2.
//!
//! * [`schema`] — tables as compact fixed-layout records.
//! * [`keys`] — key layout, and the `warehouse` / `district` / `tiny`
//!   partitioning schemes (Janus §6.3 and COCO §7.1.1; Rococo §5.4;
//!   NOCC §4).
//! * [`populate`] — clause 4.3 population, NURand and its C constants.
//! * [`neworder`], [`payment`], [`orderstatus`], [`delivery`],
//!   [`stocklevel`] — the transactions as pieces; each module documents its
//!   pieces (shard, keys, columns, immediate/deferrable, inputs).
//! * [`consistency`] — the conditions of clause 3.3.2, over the final
//!   stores of every shard.
//!
//! # Pieces
//!
//! A piece is **immediate** when its output feeds another piece (Rococo §3.1:
//! it must run during the start phase) and **deferrable** otherwise. Keys
//! that depend on an earlier piece's output — the order id a district piece
//! hands out, the customer a last-name lookup picks, the order a delivery
//! cursor points at — make a piece *dynamic* ([`PieceSpec::dynamic`]): its
//! static spec lists placeholder keys of the right tables and columns (all
//! Rococo's offline checker reads) and [`Procedure::resolve`] gives the real
//! keys once its inputs are known.
//!
//! # Ordered access without phantoms
//!
//! The transactions that need order (Delivery: the oldest new order of a
//! district; Order-Status: a customer's latest order; Stock-Level: the last
//! 20 orders) read **point keys computed from counters**, never a range
//! scan: every protocol here locks or validates point keys only, and a scan
//! would admit phantoms. The counters are the ordered index:
//!
//! * the orders of a district are `1..D_NEXT_O_ID` (dense: NewOrder takes
//!   the next id under the district's lock or validation), so "the last 20
//!   orders" is 20 point keys;
//! * the district's **delivery cursor** (table [`schema::DELIVERY_CURSOR`])
//!   holds the oldest undelivered o_id: the new-order rows are exactly
//!   `[cursor, D_NEXT_O_ID)`, so "the oldest new order" is the point key at
//!   the cursor (missing when there is none: a read of a missing key is
//!   locked or validated like any other, so a NewOrder inserting it
//!   concurrently conflicts);
//! * each customer's **last order** record (table [`schema::LAST_ORDER`]),
//!   written by the NewOrder that creates the order, names the order
//!   Order-Status reads.
//!
//! Every read a transaction makes is thus a key that any conflicting writer
//! also writes: phantom-free by construction, under 2PL and OCC alike. The
//! customer last-name index ([`schema::NAME_INDEX`]) is read-only
//! (customers are never inserted and names never change).
//!
//! The ITEM table is read-only and replicated on every shard. Deleted
//! new-order rows are written as empty values (the store has no delete); an
//! empty value reads as a missing record everywhere.
//!
//! # Deviations from the specification
//!
//! * Scale knobs (districts, customers, items) and the derived initial
//!   values are described in [`populate`].
//! * Item ids of one order may repeat (the stock row then takes each line in
//!   turn).
//! * Dates are opaque nonzero counters, not wall-clock times: pieces are
//!   deterministic.
//! * The 1% of NewOrders with an unused item id roll back from the item
//!   piece ([`PieceResult::user_abort`]); a user abort is final and counted
//!   apart (it is an attempt, not a commit).
//! * In the `district` scheme `W_YTD` is not maintained (Rococo §5.4), so
//!   condition 1 is replaced by condition 8 on the sum of `D_YTD`.
//!
//! [`PieceSpec::dynamic`]: tessera_core::txn::PieceSpec::dynamic
//! [`Procedure::resolve`]: tessera_core::txn::Procedure::resolve
//! [`PieceResult::user_abort`]: tessera_core::txn::PieceResult::user_abort

mod codec;
pub mod consistency;
pub mod delivery;
pub mod keys;
pub mod neworder;
pub mod orderstatus;
pub mod payment;
pub mod populate;
pub mod schema;
pub mod stocklevel;

pub use keys::{Layout, Partition};

use crate::error::ConfigError;
use rand::rngs::SmallRng;
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tessera_core::storage::Store;
use tessera_core::txn::{Access, Columns, PieceKind, PieceSpec, Txn};
use tessera_core::workload::{ClientSlot, TxnGenerator, TxnProfile, Workload};
use tessera_core::{Key, ShardId};

/// Transaction type names (the procedures' names, the keys of `--mix`).
pub const NEWORDER: &str = "neworder";
pub const PAYMENT: &str = "payment";
pub const ORDERSTATUS: &str = "orderstatus";
pub const DELIVERY: &str = "delivery";
pub const STOCKLEVEL: &str = "stocklevel";
/// StockLevel's ordered form (`stocklevel::StockLevel`'s module doc): not
/// in the mix; Rococo runs it for a StockLevel whose rounds keep differing.
pub const STOCKLEVEL_ORDERED: &str = "stocklevel-ordered";

/// The transaction mix, as relative weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mix {
    pub neworder: u32,
    pub payment: u32,
    pub orderstatus: u32,
    pub delivery: u32,
    pub stocklevel: u32,
}

impl Default for Mix {
    /// Clause 5.2.3's minimums, with NewOrder taking the rest: 45/43/4/4/4.
    fn default() -> Self {
        Mix {
            neworder: 45,
            payment: 43,
            orderstatus: 4,
            delivery: 4,
            stocklevel: 4,
        }
    }
}

impl Mix {
    /// Payment only (NOCC §4).
    pub const PAYMENT_ONLY: Mix = Mix {
        neworder: 0,
        payment: 100,
        orderstatus: 0,
        delivery: 0,
        stocklevel: 0,
    };

    /// NewOrder and Payment only, in the full mix's proportions (45/43):
    /// the read-write transactions whose keys are known before execution,
    /// what Janus runs (§4; Order-Status, Delivery and Stock-Level find
    /// customers and stock rows by values read).
    pub const NEWORDER_PAYMENT: Mix = Mix {
        neworder: 45,
        payment: 43,
        orderstatus: 0,
        delivery: 0,
        stocklevel: 0,
    };

    fn weights(&self) -> [(&'static str, u32); 5] {
        [
            (NEWORDER, self.neworder),
            (PAYMENT, self.payment),
            (ORDERSTATUS, self.orderstatus),
            (DELIVERY, self.delivery),
            (STOCKLEVEL, self.stocklevel),
        ]
    }

    pub fn total(&self) -> u64 {
        self.weights().iter().map(|(_, w)| u64::from(*w)).sum()
    }

    /// Parse `neworder=45,payment=43,...`; types not named get weight 0.
    pub fn parse(s: &str) -> Result<Self, ConfigError> {
        let bad = |why: String| {
            ConfigError::new(
                "mix",
                format!(
                    "--mix '{s}': {why}; expected NAME=WEIGHT,... with NAME one of \
                     neworder, payment, orderstatus, delivery, stocklevel"
                ),
            )
        };
        let mut m = Mix {
            neworder: 0,
            payment: 0,
            orderstatus: 0,
            delivery: 0,
            stocklevel: 0,
        };
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, w) = part
                .split_once('=')
                .ok_or_else(|| bad(format!("'{part}' lacks '='")))?;
            let w: u32 = w
                .trim()
                .parse()
                .map_err(|_| bad(format!("weight '{w}' is not a whole number")))?;
            let slot = match name.trim() {
                NEWORDER => &mut m.neworder,
                PAYMENT => &mut m.payment,
                ORDERSTATUS => &mut m.orderstatus,
                DELIVERY => &mut m.delivery,
                STOCKLEVEL => &mut m.stocklevel,
                other => return Err(bad(format!("unknown transaction '{other}'"))),
            };
            *slot = w;
        }
        if m.total() == 0 {
            return Err(bad("the weights sum to 0".into()));
        }
        Ok(m)
    }
}

/// How remote NewOrders are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RemoteNewOrder {
    /// Each order line's supplying warehouse is another one with this
    /// probability in percent (clause 2.4.1.5: 1%).
    PerLine(f64),
    /// This percentage of NewOrders touch another warehouse: one line, drawn
    /// uniformly, is supplied by another warehouse (COCO §7.1.1: 10%).
    PerTxn(f64),
}

impl RemoteNewOrder {
    pub fn pct(self) -> f64 {
        match self {
            RemoteNewOrder::PerLine(p) | RemoteNewOrder::PerTxn(p) => p,
        }
    }

    /// Parse `PCT` (per transaction) or `PCT/line`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.strip_suffix("/line") {
            Some(p) => p.trim().parse().ok().map(RemoteNewOrder::PerLine),
            None => s.trim().parse().ok().map(RemoteNewOrder::PerTxn),
        }
    }
}

/// Which warehouse a client's transactions are homed at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HomeWarehouse {
    /// One warehouse per client for the whole run, clause 5.2.4's
    /// terminal (`--home-warehouse fixed`, the default).
    #[default]
    Fixed,
    /// Drawn anew for every transaction, uniformly among the warehouses of
    /// the client's home shard (`--home-warehouse per-node`): COCO's
    /// workers (§7.1: 12 per node, 96 warehouses over 8 nodes) each pick
    /// the transaction's home partition among their node's ones
    /// (`Executor::get_partition_id` in the authors' code), so workers of
    /// one node collide on warehouse and district rows — the contention
    /// behind Fig. 9's abort rates. A retry keeps its warehouse (the
    /// client re-runs the same transaction), as theirs does.
    PerNode,
}

impl HomeWarehouse {
    pub const NAMES: &'static [&'static str] = &["fixed", "per-node"];

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "fixed" => Some(HomeWarehouse::Fixed),
            "per-node" => Some(HomeWarehouse::PerNode),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            HomeWarehouse::Fixed => "fixed",
            HomeWarehouse::PerNode => "per-node",
        }
    }
}

/// TPC-C's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TpccConfig {
    pub partition: Partition,
    /// Shards; 0 = one per warehouse (warehouse, tiny) or 2 (district).
    pub shards: u32,
    pub warehouses: u32,
    /// Districts per warehouse (10).
    pub districts: u32,
    /// Customers per district (3,000).
    pub customers: u32,
    /// Items (100,000).
    pub items: u32,
    pub mix: Mix,
    pub remote_neworder: RemoteNewOrder,
    /// Percent of Payments for a customer of another warehouse (15).
    pub remote_payment: f64,
    /// Percent of Payments and Order-Status that select the customer by
    /// last name (clause 2.5.1.2: 60). Such a Payment's customer keys
    /// depend on a lookup's output, which Janus refuses (§4: keys must be
    /// known before execution), so its TPC-C experiment sets 0.
    pub by_name: u32,
    /// NewOrder's stock pieces immediate instead of deferrable: the
    /// variant of Rococo §4.2's example, which needs merged pieces
    /// (`--immediate-stock`; see [`neworder::NewOrder::with_immediate_stock`]).
    pub immediate_stock: bool,
    /// How a client's home warehouse is chosen ([`HomeWarehouse`]).
    pub home_warehouse: HomeWarehouse,
}

impl Default for TpccConfig {
    /// The specification's scale with one warehouse (so no remote shares).
    fn default() -> Self {
        TpccConfig {
            partition: Partition::Warehouse,
            shards: 0,
            warehouses: 1,
            districts: 10,
            customers: 3000,
            items: 100_000,
            mix: Mix::default(),
            remote_neworder: RemoteNewOrder::PerLine(0.0),
            remote_payment: 0.0,
            by_name: 60,
            immediate_stock: false,
            home_warehouse: HomeWarehouse::Fixed,
        }
    }
}

impl TpccConfig {
    /// The specification's configuration for `warehouses`: 1% remote order
    /// lines and 15% remote payments when there are several warehouses.
    pub fn spec(warehouses: u32) -> Self {
        let remote = warehouses > 1;
        TpccConfig {
            warehouses,
            remote_neworder: RemoteNewOrder::PerLine(if remote { 1.0 } else { 0.0 }),
            remote_payment: if remote { 15.0 } else { 0.0 },
            ..TpccConfig::default()
        }
    }

    /// Rococo §5.4's scaled TPC-C: one warehouse split by district and item
    /// over `shards`, `districts` per warehouse, 3,000 customers each.
    pub fn rococo(shards: u32, districts: u32) -> Self {
        TpccConfig {
            partition: Partition::District,
            shards,
            districts,
            ..TpccConfig::default()
        }
    }

    /// NOCC §4's high-contention configuration: 1 warehouse, 2 districts,
    /// 10 customers, 10 items, Payment only.
    pub fn tiny() -> Self {
        TpccConfig {
            partition: Partition::Tiny,
            shards: 1,
            warehouses: 1,
            districts: 2,
            customers: 10,
            items: 10,
            mix: Mix::PAYMENT_ONLY,
            ..TpccConfig::default()
        }
    }

    /// The shard count, defaults applied.
    pub fn shard_count(&self) -> u32 {
        match (self.shards, self.partition) {
            (0, Partition::District) => 2.min(self.warehouses * self.districts).max(1),
            (0, _) => self.warehouses,
            (s, _) => s,
        }
    }

    pub fn layout(&self) -> Layout {
        Layout::new(
            self.partition,
            self.shard_count(),
            self.warehouses,
            self.districts,
            self.customers,
            self.items,
        )
    }

    /// Check every parameter; the error names the flag at fault.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (param, flag, v) in [
            ("warehouses", "--warehouses", self.warehouses),
            ("districts", "--districts", self.districts),
            ("customers", "--customers", self.customers),
            ("items", "--items", self.items),
        ] {
            if v == 0 {
                return Err(ConfigError::new(
                    param,
                    format!("{flag} must be > 0, got 0"),
                ));
            }
        }
        let dists = u64::from(self.warehouses) * u64::from(self.districts);
        if dists > keys::MAX_DISTRICTS_TOTAL {
            return Err(ConfigError::new(
                "districts",
                format!(
                    "--warehouses × --districts must be at most {}, got {dists}",
                    keys::MAX_DISTRICTS_TOTAL
                ),
            ));
        }
        if dists * u64::from(self.customers) > keys::MAX_CUSTOMERS_TOTAL {
            return Err(ConfigError::new(
                "customers",
                format!(
                    "--warehouses × --districts × --customers must be at most {}",
                    keys::MAX_CUSTOMERS_TOTAL
                ),
            ));
        }
        if self.mix.total() == 0 {
            return Err(ConfigError::new("mix", "--mix weights sum to 0"));
        }
        let shards = self.shard_count();
        let max_shards = match self.partition {
            Partition::District => dists,
            Partition::Warehouse | Partition::Tiny => u64::from(self.warehouses),
        };
        if u64::from(shards) > max_shards {
            return Err(ConfigError::new(
                "shards",
                format!(
                    "--shards {shards} with --partition {} needs at most {max_shards} \
                     (one {} per shard at least)",
                    self.partition.name(),
                    if self.partition.by_district() {
                        "district"
                    } else {
                        "warehouse"
                    }
                ),
            ));
        }
        for (param, flag, pct) in [
            (
                "remote_neworder",
                "--remote-neworder",
                self.remote_neworder.pct(),
            ),
            ("remote_payment", "--remote-payment", self.remote_payment),
        ] {
            if !(pct.is_finite() && (0.0..=100.0).contains(&pct)) {
                return Err(ConfigError::new(
                    param,
                    format!("{flag} must be a percentage in [0, 100], got {pct}"),
                ));
            }
            if pct > 0.0 && self.warehouses < 2 {
                return Err(ConfigError::new(
                    param,
                    format!("{flag} {pct} needs --warehouses >= 2 (a remote warehouse), got 1"),
                ));
            }
        }
        if self.home_warehouse == HomeWarehouse::PerNode && self.partition.by_district() {
            return Err(ConfigError::new(
                "home_warehouse",
                "--home-warehouse per-node needs --partition warehouse or tiny: under \
                 district a shard holds districts, not whole warehouses, to draw from",
            ));
        }
        if self.by_name > 100 {
            return Err(ConfigError::new(
                "by_name",
                format!(
                    "--by-name (by_name) must be a percentage in [0, 100], got {}",
                    self.by_name
                ),
            ));
        }
        Ok(())
    }
}

/// The TPC-C workload.
#[derive(Clone, Debug)]
pub struct Tpcc {
    cfg: TpccConfig,
    layout: Layout,
}

impl Tpcc {
    /// Validate `cfg` and build the workload.
    pub fn new(cfg: TpccConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        Ok(Tpcc {
            cfg,
            layout: cfg.layout(),
        })
    }

    pub fn config(&self) -> &TpccConfig {
        &self.cfg
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// A concrete generator (no boxing).
    pub fn tpcc_generator(&self, client: ClientSlot) -> TpccGenerator {
        let l = &self.layout;
        let s = l.shards;
        let home = client.home.0 % s;
        let nth = client.id / s;
        // Warehouses home + 1, home + 1 + s, ... live on the home shard
        // (a district-scheme shard holds no whole warehouse).
        let on_home = match l.partition {
            Partition::District => 1,
            Partition::Warehouse | Partition::Tiny => (l.warehouses - (home + 1)) / s + 1,
        };
        let w = match l.partition {
            Partition::District => nth % l.warehouses + 1,
            Partition::Warehouse | Partition::Tiny => home + 1 + s * (nth % on_home),
        };
        let local: Vec<u32> = (1..=l.districts)
            .filter(|&d| l.district_shard(w, d).0 == home)
            .collect();
        let stock_level_d = if local.is_empty() {
            nth % l.districts + 1
        } else {
            local[nth as usize % local.len()]
        };
        let mut acc = 0u64;
        let cumulative = self.cfg.mix.weights().map(|(n, wt)| {
            acc += u64::from(wt);
            (n, acc)
        });
        TpccGenerator {
            cfg: self.cfg,
            layout: self.layout,
            w,
            node: (home, on_home),
            stock_level_d,
            cumulative,
            clock: populate::LOAD_DATE,
        }
    }
}

impl Workload for Tpcc {
    fn name(&self) -> &'static str {
        "tpcc"
    }

    fn shards(&self) -> u32 {
        self.layout.shards
    }

    fn load(&self, shard: ShardId, store: &mut Store) {
        populate::load(&self.layout, shard, store);
    }

    fn generator(&self, client: ClientSlot) -> Box<dyn TxnGenerator> {
        Box::new(self.tpcc_generator(client))
    }

    fn check_consistency(&self, stores: &[Store]) -> Option<Vec<String>> {
        Some(consistency::check(&self.layout, stores).violations)
    }

    /// Every distinct piece structure of the five transactions (by-name and
    /// by-id Payment and Order-Status, NewOrder's line counts, ...), drawn
    /// from a fixed-seed sample of each type, for Rococo's offline checker.
    fn profiles(&self) -> Vec<TxnProfile> {
        use rand::SeedableRng;
        let mut g = self.tpcc_generator(ClientSlot {
            id: 0,
            home: ShardId(0),
        });
        let mut rng = SmallRng::seed_from_u64(0);
        let mut out: Vec<TxnProfile> = Vec::new();
        for _ in 0..200 {
            let samples = [
                TxnProfile::of(&g.new_order(&mut rng)),
                TxnProfile::of(&g.payment(&mut rng)),
                TxnProfile::of(&g.order_status(&mut rng)),
                TxnProfile::of(&g.delivery(&mut rng)),
                TxnProfile::of(&g.stock_level(&mut rng)),
            ];
            for p in samples {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        out
    }

    fn decode_txn(
        &self,
        name: &str,
        params: &[u8],
    ) -> Result<Txn, tessera_core::codec::DecodeError> {
        codec::decode(&self.layout, name, params)
    }
}

/// Generates one client's transactions (clause 5.2.4: the terminal's home
/// warehouse is fixed; districts are drawn per transaction, except
/// Stock-Level's, which is the terminal's own).
#[derive(Clone, Debug)]
pub struct TpccGenerator {
    cfg: TpccConfig,
    layout: Layout,
    w: u32,
    /// The home shard and how many warehouses it holds: what
    /// [`HomeWarehouse::PerNode`] draws `w` from.
    node: (u32, u32),
    stock_level_d: u32,
    cumulative: [(&'static str, u64); 5],
    /// The dates this client stamps (`O_ENTRY_D`, `H_DATE`,
    /// `OL_DELIVERY_D`): a counter, so pieces stay deterministic.
    clock: u64,
}

impl TpccGenerator {
    /// The client's home warehouse (under [`HomeWarehouse::PerNode`], the
    /// last transaction's).
    pub fn home_warehouse(&self) -> u32 {
        self.w
    }

    /// A warehouse other than `w`, uniformly.
    fn other_warehouse<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        let o = rng.random_range(1..self.layout.warehouses);
        if o >= self.w {
            o + 1
        } else {
            o
        }
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// The next transaction type, by the mix's weights.
    pub fn next_type<R: Rng + ?Sized>(&self, rng: &mut R) -> &'static str {
        let total = self.cumulative[4].1;
        let x = rng.random_range(0..total);
        self.cumulative
            .iter()
            .find(|(_, c)| x < *c)
            .map_or(PAYMENT, |(n, _)| n)
    }

    /// Under [`HomeWarehouse::PerNode`], draw this transaction's home
    /// warehouse uniformly among the home shard's (COCO §7.1's workers).
    pub fn draw_home<R: Rng + ?Sized>(&mut self, rng: &mut R) {
        if self.cfg.home_warehouse == HomeWarehouse::PerNode {
            let (home, on_home) = self.node;
            self.w = home + 1 + self.layout.shards * rng.random_range(0..on_home);
        }
    }

    /// One transaction.
    pub fn generate<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Txn {
        self.draw_home(rng);
        match self.next_type(rng) {
            NEWORDER => Arc::new(self.new_order(rng)),
            PAYMENT => Arc::new(self.payment(rng)),
            ORDERSTATUS => Arc::new(self.order_status(rng)),
            DELIVERY => Arc::new(self.delivery(rng)),
            _ => Arc::new(self.stock_level(rng)),
        }
    }

    /// A NewOrder (clause 2.4.1).
    pub fn new_order<R: Rng + ?Sized>(&mut self, rng: &mut R) -> neworder::NewOrder {
        let l = self.layout;
        let w = self.w;
        let d = rng.random_range(1..=l.districts);
        let c = populate::run_customer(rng, l.customers);
        let ol_cnt = rng.random_range(5..=15u32);
        let rollback = rng.random_ratio(1, 100);
        let remote_line = match self.cfg.remote_neworder {
            RemoteNewOrder::PerTxn(p) if p > 0.0 && rng.random::<f64>() * 100.0 < p => {
                Some(rng.random_range(0..ol_cnt))
            }
            _ => None,
        };
        let mut lines = Vec::with_capacity(ol_cnt as usize);
        for n in 0..ol_cnt {
            let i_id = if rollback && n == ol_cnt - 1 {
                l.items + 1 // unused: clause 2.4.1.4
            } else {
                populate::run_item(rng, l.items)
            };
            let remote = match self.cfg.remote_neworder {
                RemoteNewOrder::PerLine(p) => p > 0.0 && rng.random::<f64>() * 100.0 < p,
                RemoteNewOrder::PerTxn(_) => remote_line == Some(n),
            };
            let supply_w = if remote { self.other_warehouse(rng) } else { w };
            lines.push(neworder::Line {
                i_id,
                supply_w,
                quantity: rng.random_range(1..=10),
            });
        }
        let date = self.tick();
        let n = neworder::NewOrder::new(l, w, d, c, lines, date);
        if self.cfg.immediate_stock {
            n.with_immediate_stock()
        } else {
            n
        }
    }

    /// How a customer is selected (clause 2.5.1.2 / 2.6.1.2): by last name
    /// 60% of the time.
    fn customer_by<R: Rng + ?Sized>(&self, rng: &mut R) -> payment::CustomerBy {
        let cs = self.layout.customers;
        if rng.random_ratio(self.cfg.by_name, 100) {
            payment::CustomerBy::Name(populate::run_name(rng, cs))
        } else {
            payment::CustomerBy::Id(populate::run_customer(rng, cs))
        }
    }

    /// A Payment (clause 2.5.1).
    pub fn payment<R: Rng + ?Sized>(&mut self, rng: &mut R) -> payment::Payment {
        let l = self.layout;
        let d = rng.random_range(1..=l.districts);
        let remote =
            self.cfg.remote_payment > 0.0 && rng.random::<f64>() * 100.0 < self.cfg.remote_payment;
        let (c_w, c_d) = if remote {
            (self.other_warehouse(rng), rng.random_range(1..=l.districts))
        } else {
            (self.w, d)
        };
        let by = self.customer_by(rng);
        let amount = rng.random_range(100..=500_000);
        let date = self.tick();
        // The history row's id: random, never 0 (the loaded row's).
        let hid = rng.random_range(1..1u64 << l.history_id_bits().min(63));
        payment::Payment::new(l, self.w, d, c_w, c_d, by, amount, date, hid)
    }

    /// An Order-Status (clause 2.6.1).
    pub fn order_status<R: Rng + ?Sized>(&mut self, rng: &mut R) -> orderstatus::OrderStatus {
        let d = rng.random_range(1..=self.layout.districts);
        let by = self.customer_by(rng);
        orderstatus::OrderStatus::new(self.layout, self.w, d, by)
    }

    /// A Delivery (clause 2.7.1).
    pub fn delivery<R: Rng + ?Sized>(&mut self, rng: &mut R) -> delivery::Delivery {
        let d = rng.random_range(1..=self.layout.districts);
        let carrier = rng.random_range(1..=10);
        let date = self.tick();
        delivery::Delivery::new(self.layout, self.w, d, carrier, date)
    }

    /// A Stock-Level (clause 2.8.1).
    pub fn stock_level<R: Rng + ?Sized>(&mut self, rng: &mut R) -> stocklevel::StockLevel {
        let threshold = rng.random_range(10..=20);
        stocklevel::StockLevel::new(self.layout, self.w, self.stock_level_d, threshold)
            .orderable(!self.cfg.immediate_stock)
    }
}

impl TxnGenerator for TpccGenerator {
    fn next(&mut self, rng: &mut SmallRng) -> Txn {
        self.generate(rng)
    }
}

/// A piece's spec (shorthand for the transaction modules).
pub(crate) fn piece(
    shard: ShardId,
    kind: PieceKind,
    reads: Vec<Access>,
    writes: Vec<Access>,
    inputs: Vec<u16>,
    dynamic: bool,
) -> PieceSpec {
    PieceSpec {
        shard,
        reads,
        writes,
        kind,
        inputs,
        dynamic,
    }
}

/// An access to `key` touching `columns`.
pub(crate) fn acc(key: Key, columns: Columns) -> Access {
    Access { key, columns }
}

#[cfg(test)]
mod tests;
