//! Key layout and partitioning schemes.
//!
//! Ids are 1-based as in the specification. A district's global number is
//! `dist = (w − 1)·D + (d − 1)`. Rows of the tables that are not replicated
//! pack their composite primary key into the 64-bit row (table id apart):
//!
//! | table | row |
//! |---|---|
//! | DISTRICT, DELIVERY_CURSOR | `dist` |
//! | CUSTOMER, LAST_ORDER | `cust = dist·C + (c − 1)` |
//! | NAME_INDEX | `dist·1000 + name` |
//! | HISTORY | `cust << hist_bits \| id` (0 for the loaded row; a payment's random id: see payment) |
//! | ORDER, NEW_ORDER | `dist << 40 \| o_id` |
//! | ORDER_LINE | `dist << 44 \| o_id << 4 \| (ol − 1)` |
//! | STOCK | `(w − 1)·I + (i − 1)` |
//!
//! The replicated read-only tables — ITEM everywhere, and WAREHOUSE in the
//! district scheme — use [`Key::in_shard`], so each copy has its own key.
//! (The other tables do not use `in_shard`: its 40-bit rank is too small for
//! `dist`, `o_id` and the line number together; the shard of any key is
//! [`Layout::shard_of`] instead.) Row `u64::MAX` of a table is never a real
//! row: dynamic pieces list it as their placeholder key.
//!
//! **Partitioning** ([`Partition`]):
//! * `warehouse` (Janus §6.3, COCO §7.1.1): everything of warehouse `w` on
//!   shard `(w − 1) mod S`.
//! * `district` (Rococo §5.4, Fig. 12): district-related tables by `dist mod
//!   S`, STOCK by `((w − 1)·I + (i − 1)) mod S`; WAREHOUSE is read-only
//!   (`W_YTD` is replaced by the sum of `D_YTD`) and replicated.
//! * `tiny` (NOCC §4): the warehouse layout with 1 warehouse, 2 districts,
//!   10 customers, 10 items, Payment only (defaults; knobs may override).

use serde::{Deserialize, Serialize};
use tessera_core::{Key, ShardId};

use super::schema::*;

/// How the database is split over shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Partition {
    Warehouse,
    District,
    Tiny,
}

impl Partition {
    pub const NAMES: &'static [&'static str] = &["warehouse", "district", "tiny"];

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "warehouse" => Some(Partition::Warehouse),
            "district" => Some(Partition::District),
            "tiny" => Some(Partition::Tiny),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Partition::Warehouse => "warehouse",
            Partition::District => "district",
            Partition::Tiny => "tiny",
        }
    }

    /// Splits inside a warehouse (Rococo §5.4): `W_YTD` is not maintained.
    pub fn by_district(self) -> bool {
        self == Partition::District
    }
}

/// Distinct last names (clause 4.3.2.3: 1,000 syllable combinations).
pub const LAST_NAMES: u32 = 1000;

/// The placeholder row of dynamic pieces' static specs.
pub const PLACEHOLDER: u64 = u64::MAX;

/// Where every record lives and what its key is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub partition: Partition,
    pub shards: u32,
    pub warehouses: u32,
    pub districts: u32,
    pub customers: u32,
    pub items: u32,
    /// Bits of a HISTORY row below the customer number.
    hist_bits: u32,
}

/// Largest `W·D`: `dist` has 20 bits in ORDER_LINE rows.
pub const MAX_DISTRICTS_TOTAL: u64 = (1 << 20) - 1;
/// Largest `W·D·C`, leaving HISTORY rows ≥ 24 bits of payment count.
pub const MAX_CUSTOMERS_TOTAL: u64 = (1 << 40) - 1;

impl Layout {
    /// The caller has validated the sizes (see [`super::TpccConfig::validate`]).
    pub fn new(
        partition: Partition,
        shards: u32,
        warehouses: u32,
        districts: u32,
        customers: u32,
        items: u32,
    ) -> Self {
        let total = u64::from(warehouses) * u64::from(districts) * u64::from(customers);
        let cust_bits = 64 - total.leading_zeros();
        Layout {
            partition,
            shards,
            warehouses,
            districts,
            customers,
            items,
            hist_bits: 64 - cust_bits,
        }
    }

    #[inline]
    pub fn dist(&self, w: u32, d: u32) -> u64 {
        u64::from(w - 1) * u64::from(self.districts) + u64::from(d - 1)
    }

    /// (w, d) of a district number.
    pub fn wd(&self, dist: u64) -> (u32, u32) {
        let dd = u64::from(self.districts);
        ((dist / dd) as u32 + 1, (dist % dd) as u32 + 1)
    }

    #[inline]
    fn cust(&self, w: u32, d: u32, c: u32) -> u64 {
        self.dist(w, d) * u64::from(self.customers) + u64::from(c - 1)
    }

    /// (w, d, c) of a customer number.
    pub fn wdc(&self, cust: u64) -> (u32, u32, u32) {
        let cc = u64::from(self.customers);
        let (w, d) = self.wd(cust / cc);
        (w, d, (cust % cc) as u32 + 1)
    }

    /// The shard of warehouse `w`'s district-related data.
    #[inline]
    pub fn district_shard(&self, w: u32, d: u32) -> ShardId {
        match self.partition {
            Partition::District => ShardId((self.dist(w, d) % u64::from(self.shards)) as u32),
            Partition::Warehouse | Partition::Tiny => ShardId((w - 1) % self.shards),
        }
    }

    /// The shard of stock `(w, i)`.
    #[inline]
    pub fn stock_shard(&self, w: u32, i: u32) -> ShardId {
        match self.partition {
            Partition::District => ShardId(
                ((u64::from(w - 1) * u64::from(self.items) + u64::from(i - 1))
                    % u64::from(self.shards)) as u32,
            ),
            Partition::Warehouse | Partition::Tiny => ShardId((w - 1) % self.shards),
        }
    }

    /// Shards holding stock of warehouse `w`, ascending.
    pub fn stock_shards(&self, w: u32) -> Vec<ShardId> {
        match self.partition {
            Partition::District => {
                let n = self.shards.min(self.items);
                let mut v: Vec<ShardId> = (1..=n).map(|i| self.stock_shard(w, i)).collect();
                v.sort_unstable();
                v
            }
            Partition::Warehouse | Partition::Tiny => vec![self.stock_shard(w, 1)],
        }
    }

    /// Is warehouse `w`'s row stored (a copy of it) on `shard`?
    pub fn has_warehouse(&self, w: u32, shard: ShardId) -> bool {
        match self.partition {
            Partition::District => true,
            Partition::Warehouse | Partition::Tiny => self.district_shard(w, 1) == shard,
        }
    }

    /// Warehouse `w`'s row as read on `shard` (its home in the warehouse
    /// layout, the local replica in the district layout).
    pub fn warehouse(&self, w: u32, shard: ShardId) -> Key {
        Key::in_shard(WAREHOUSE, shard, u64::from(w))
    }

    /// Item `i`'s replica on `shard`.
    pub fn item(&self, i: u32, shard: ShardId) -> Key {
        Key::in_shard(ITEM, shard, u64::from(i))
    }

    pub fn district(&self, w: u32, d: u32) -> Key {
        Key::new(DISTRICT, self.dist(w, d))
    }

    pub fn cursor(&self, w: u32, d: u32) -> Key {
        Key::new(DELIVERY_CURSOR, self.dist(w, d))
    }

    pub fn customer(&self, w: u32, d: u32, c: u32) -> Key {
        Key::new(CUSTOMER, self.cust(w, d, c))
    }

    pub fn last_order(&self, w: u32, d: u32, c: u32) -> Key {
        Key::new(LAST_ORDER, self.cust(w, d, c))
    }

    pub fn name_index(&self, w: u32, d: u32, name: u32) -> Key {
        Key::new(
            NAME_INDEX,
            self.dist(w, d) * u64::from(LAST_NAMES) + u64::from(name),
        )
    }

    /// The history row `id` of customer (w, d, c) (its low
    /// [`Self::history_id_bits`] bits).
    pub fn history(&self, w: u32, d: u32, c: u32, id: u64) -> Key {
        let mask = (1u64 << self.hist_bits) - 1;
        Key::new(
            HISTORY,
            (self.cust(w, d, c) << self.hist_bits) | (id & mask),
        )
    }

    /// Bits of a history row id.
    pub fn history_id_bits(&self) -> u32 {
        self.hist_bits
    }

    /// The customer number of a history row.
    pub fn history_customer(&self, row: u64) -> u64 {
        row >> self.hist_bits
    }

    pub fn order(&self, w: u32, d: u32, o: u32) -> Key {
        Key::new(ORDER, (self.dist(w, d) << 40) | u64::from(o))
    }

    pub fn new_order(&self, w: u32, d: u32, o: u32) -> Key {
        Key::new(NEW_ORDER, (self.dist(w, d) << 40) | u64::from(o))
    }

    /// (dist, o_id) of an ORDER or NEW_ORDER row.
    pub fn order_of(row: u64) -> (u64, u32) {
        (row >> 40, (row & ((1 << 40) - 1)) as u32)
    }

    pub fn order_line(&self, w: u32, d: u32, o: u32, ol: u32) -> Key {
        Key::new(
            ORDER_LINE,
            (self.dist(w, d) << 44) | (u64::from(o) << 4) | u64::from(ol - 1),
        )
    }

    /// (dist, o_id, ol_number) of an ORDER_LINE row.
    pub fn order_line_of(row: u64) -> (u64, u32, u32) {
        (
            row >> 44,
            ((row >> 4) & ((1 << 40) - 1)) as u32,
            (row & 15) as u32 + 1,
        )
    }

    pub fn stock(&self, w: u32, i: u32) -> Key {
        Key::new(
            STOCK,
            u64::from(w - 1) * u64::from(self.items) + u64::from(i - 1),
        )
    }

    /// A dynamic piece's placeholder key of `table`.
    pub fn placeholder(table: u32) -> Key {
        Key::new(table, PLACEHOLDER)
    }

    /// The shard a real key lives on (`None` for placeholders and for rows
    /// outside the configured sizes).
    pub fn shard_of(&self, key: Key) -> Option<ShardId> {
        let row = key.row;
        if row == PLACEHOLDER {
            return None;
        }
        let dists = u64::from(self.warehouses) * u64::from(self.districts);
        let by_dist = |dist: u64| (dist < dists).then(|| self.wd(dist));
        let (w, d) = match key.table.0 {
            WAREHOUSE | ITEM => return Some(crate::key_shard(key)),
            STOCK => {
                let ii = u64::from(self.items);
                let (w, i) = ((row / ii) as u32 + 1, (row % ii) as u32 + 1);
                return (w <= self.warehouses).then(|| self.stock_shard(w, i));
            }
            DISTRICT | DELIVERY_CURSOR => by_dist(row)?,
            CUSTOMER | LAST_ORDER => by_dist(row / u64::from(self.customers))?,
            NAME_INDEX => by_dist(row / u64::from(LAST_NAMES))?,
            HISTORY => by_dist(self.history_customer(row) / u64::from(self.customers))?,
            ORDER | NEW_ORDER => by_dist(Self::order_of(row).0)?,
            ORDER_LINE => by_dist(Self::order_line_of(row).0)?,
            _ => return None,
        };
        Some(self.district_shard(w, d))
    }
}
