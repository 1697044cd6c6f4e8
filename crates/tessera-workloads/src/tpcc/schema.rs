//! The TPC-C schema (clause 1.3) as compact fixed-layout records.
//!
//! A record is a numeric **header** (little-endian integers at fixed
//! offsets, see [`header!`]) followed by a **tail** of character fields at
//! fixed offsets, the last of which may be shorter than its maximum (the
//! variable-length `*_DATA` columns are always last, so a record is only as
//! long as its data). A transaction that updates numbers copies the record
//! and rewrites the header in place: no parsing of strings, no serde on the
//! hot path.
//!
//! Money is in cents (`i64`), rates (taxes, discounts) in units of 1/10,000
//! (`u32`), dates are opaque nonzero `u64`s (0 = null), ids are 1-based as
//! in the specification. An empty value is a missing record: OCC locks
//! placeholders for records about to be inserted, and deleted new-order rows
//! are written as empty values (see the module docs of [`super`]).
//!
//! Two tables are ours, not the specification's (see [`super`] on ordered
//! access): [`DELIVERY_CURSOR`] and [`LAST_ORDER`]; [`NAME_INDEX`] is the
//! customer-by-last-name index.

use bytes::Bytes;
use tessera_core::txn::{Columns, Value};

/// Table ids.
pub const WAREHOUSE: u32 = 0;
pub const DISTRICT: u32 = 1;
pub const CUSTOMER: u32 = 2;
pub const HISTORY: u32 = 3;
pub const NEW_ORDER: u32 = 4;
pub const ORDER: u32 = 5;
pub const ORDER_LINE: u32 = 6;
pub const ITEM: u32 = 7;
pub const STOCK: u32 = 8;
/// (w, d, last name) → the c_ids with that name, sorted by `C_FIRST`
/// (clause 2.5.2.2 picks the one at position ⌈n/2⌉).
pub const NAME_INDEX: u32 = 9;
/// (w, d) → the oldest undelivered o_id and the customers of the
/// undelivered orders, oldest first: the district's new-order rows are
/// exactly `[cursor, D_NEXT_O_ID)`.
pub const DELIVERY_CURSOR: u32 = 10;
/// (w, d, c) → the customer's most recent order: (o_id, ol_cnt).
pub const LAST_ORDER: u32 = 11;

/// Table names, by id (for messages).
pub const TABLE_NAMES: [&str; 12] = [
    "warehouse",
    "district",
    "customer",
    "history",
    "new_order",
    "order",
    "order_line",
    "item",
    "stock",
    "name_index",
    "delivery_cursor",
    "last_order",
];

/// Column numbers per table, in the specification's column order (clause
/// 1.3), for the access profiles Rococo's offline checker reads.
pub mod col {
    pub const W_NAME: u32 = 1;
    pub const W_TAX: u32 = 7;
    pub const W_YTD: u32 = 8;
    pub const D_NAME: u32 = 2;
    pub const D_TAX: u32 = 8;
    pub const D_YTD: u32 = 9;
    pub const D_NEXT_O_ID: u32 = 10;
    pub const C_FIRST: u32 = 3;
    pub const C_MIDDLE: u32 = 4;
    pub const C_LAST: u32 = 5;
    pub const C_CREDIT: u32 = 13;
    pub const C_DISCOUNT: u32 = 15;
    pub const C_BALANCE: u32 = 16;
    pub const C_YTD_PAYMENT: u32 = 17;
    pub const C_PAYMENT_CNT: u32 = 18;
    pub const C_DELIVERY_CNT: u32 = 19;
    pub const C_DATA: u32 = 20;
    pub const O_C_ID: u32 = 3;
    pub const O_ENTRY_D: u32 = 4;
    pub const O_CARRIER_ID: u32 = 5;
    pub const O_OL_CNT: u32 = 6;
    pub const OL_I_ID: u32 = 4;
    pub const OL_DELIVERY_D: u32 = 6;
    pub const OL_QUANTITY: u32 = 7;
    pub const OL_AMOUNT: u32 = 8;
    pub const I_NAME: u32 = 2;
    pub const I_PRICE: u32 = 3;
    pub const I_DATA: u32 = 4;
    pub const S_QUANTITY: u32 = 2;
    /// `S_DIST_01` is column 3, `S_DIST_10` column 12.
    pub const S_DIST_01: u32 = 3;
    pub const S_YTD: u32 = 13;
    pub const S_ORDER_CNT: u32 = 14;
    pub const S_REMOTE_CNT: u32 = 15;
    pub const S_DATA: u32 = 16;
}

/// A column set from column numbers.
pub const fn cols(list: &[u32]) -> Columns {
    let mut m = 0u64;
    let mut i = 0;
    while i < list.len() {
        m |= 1 << list[i];
        i += 1;
    }
    Columns(m)
}

/// Declares a fixed-layout header: a struct of integers with `LEN`, `read`
/// and `write` at fixed little-endian offsets, in field order.
macro_rules! header {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $f:ident : $t:ident),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name { $($(#[$fm])* pub $f: $t),* }

        impl $name {
            /// Bytes the header takes at the start of a record.
            pub const LEN: usize = 0 $(+ std::mem::size_of::<$t>())*;

            /// Decode from the first [`Self::LEN`] bytes of `b`.
            ///
            /// # Panics
            /// If `b` is shorter than [`Self::LEN`]; use [`Self::decode`]
            /// on values from a store.
            pub fn read(b: &[u8]) -> Self {
                let mut o = 0;
                $(
                    let n = std::mem::size_of::<$t>();
                    let $f = <$t>::from_le_bytes(b[o..o + n].try_into().expect("sized slice"));
                    o += n;
                )*
                let _ = o;
                $name { $($f),* }
            }

            /// Encode into the first [`Self::LEN`] bytes of `b`.
            pub fn write(&self, b: &mut [u8]) {
                let mut o = 0;
                $(
                    let n = std::mem::size_of::<$t>();
                    b[o..o + n].copy_from_slice(&self.$f.to_le_bytes());
                    o += n;
                )*
                let _ = o;
            }

            /// The header of a stored value; `None` for a missing record (no
            /// value, or an empty one).
            pub fn decode(v: Option<&Value>) -> Option<Self> {
                match v {
                    Some(v) if v.len() >= Self::LEN => Some(Self::read(v)),
                    _ => None,
                }
            }

            /// `old` with this header written over its own.
            pub fn patch(&self, old: &[u8]) -> Value {
                let mut v = old.to_vec();
                self.write(&mut v);
                Bytes::from(v)
            }

            /// A record of this header followed by `tail`.
            pub fn with_tail(&self, tail: &[u8]) -> Value {
                let mut v = vec![0u8; Self::LEN + tail.len()];
                self.write(&mut v);
                v[Self::LEN..].copy_from_slice(tail);
                Bytes::from(v)
            }
        }
    };
}

header!(
    /// WAREHOUSE: tail = W_NAME(10) W_STREET_1(20) W_STREET_2(20)
    /// W_CITY(20) W_STATE(2) W_ZIP(9).
    Warehouse {
        tax: u32,
        /// In cents. Not maintained in the district partitioning (Rococo
        /// §5.4 replaces it by a sum over `D_YTD`).
        ytd: i64,
    }
);

header!(
    /// DISTRICT: tail = D_NAME(10) D_STREET_1(20) D_STREET_2(20)
    /// D_CITY(20) D_STATE(2) D_ZIP(9).
    District {
        tax: u32,
        ytd: i64,
        next_o_id: u32,
    }
);

header!(
    /// CUSTOMER: tail = C_FIRST(16) C_MIDDLE(2) C_LAST(16) C_STREET_1(20)
    /// C_STREET_2(20) C_CITY(20) C_STATE(2) C_ZIP(9) C_PHONE(16) C_DATA(..500).
    Customer {
        balance: i64,
        ytd_payment: i64,
        payment_cnt: u32,
        delivery_cnt: u32,
        discount: u32,
        credit_lim: i64,
        since: u64,
        /// 1 for "BC" (bad credit), 0 for "GC".
        bad_credit: u8,
    }
);

header!(
    /// HISTORY: tail = H_DATA(..24).
    History {
        c_id: u32,
        c_d_id: u32,
        c_w_id: u32,
        d_id: u32,
        w_id: u32,
        date: u64,
        amount: i64,
    }
);

header!(
    /// ORDER (no tail).
    Order {
        c_id: u32,
        entry_d: u64,
        /// 0 = null (not delivered).
        carrier_id: u8,
        ol_cnt: u8,
        all_local: u8,
    }
);

header!(
    /// ORDER-LINE: tail = OL_DIST_INFO(24).
    OrderLine {
        i_id: u32,
        supply_w_id: u32,
        /// 0 = null (not delivered).
        delivery_d: u64,
        quantity: u8,
        amount: i64,
    }
);

header!(
    /// ITEM: tail = I_NAME(24) I_DATA(..50).
    Item {
        im_id: u32,
        price: i64,
        /// `I_DATA` contains "ORIGINAL".
        original: u8,
    }
);

header!(
    /// STOCK: tail = S_DIST_01..S_DIST_10 (24 each) S_DATA(..50).
    Stock {
        quantity: i32,
        ytd: i64,
        order_cnt: u32,
        remote_cnt: u32,
        /// `S_DATA` contains "ORIGINAL".
        original: u8,
    }
);

header!(
    /// DELIVERY_CURSOR: the oldest undelivered order id of a district; tail
    /// = the `O_C_ID` of each undelivered order, oldest first (u32 each,
    /// [`encode_ids`]). NewOrder appends, Delivery pops: Delivery learns
    /// the order's customer from an immediate piece, so its deferrable
    /// piece knows every key it touches when issued (Rococo §3.2).
    Cursor { next: u32 }
);

header!(
    /// LAST_ORDER: a customer's most recent order.
    LastOrder { o_id: u32, ol_cnt: u8 }
);

/// Tail offsets.
pub mod tail {
    pub const W_NAME: usize = 0;
    pub const W_LEN: usize = 10 + 20 + 20 + 20 + 2 + 9;
    pub const D_NAME: usize = 0;
    pub const D_LEN: usize = W_LEN;
    pub const NAME_LEN: usize = 10;
    pub const C_FIRST: usize = 0;
    pub const C_MIDDLE: usize = 16;
    pub const C_LAST: usize = 18;
    pub const C_DATA: usize = 16 + 2 + 16 + 20 + 20 + 20 + 2 + 9 + 16;
    pub const C_DATA_MAX: usize = 500;
    pub const H_DATA_MAX: usize = 24;
    pub const OL_DIST_INFO: usize = 24;
    pub const I_NAME: usize = 0;
    pub const I_DATA: usize = 24;
    pub const S_DIST_LEN: usize = 24;
    pub const S_DATA: usize = 10 * S_DIST_LEN;
}

/// The `S_DIST_xx` field of district `d` (1..=10; larger district numbers,
/// as in Rococo's 1,000-district warehouses, wrap around) in a stock value.
pub fn stock_dist(v: &[u8], d: u32) -> &[u8] {
    let i = ((d - 1) % 10) as usize;
    let at = Stock::LEN + i * tail::S_DIST_LEN;
    &v[at..at + tail::S_DIST_LEN]
}

/// A new-order row: one marker byte (an empty value means deleted).
pub fn new_order_value() -> Value {
    Value::from_static(&[1])
}

/// True when `v` holds a record (not missing, not deleted).
pub fn present(v: Option<&Value>) -> bool {
    v.is_some_and(|v| !v.is_empty())
}

/// A name-index value: the c_ids, in `C_FIRST` order.
pub fn encode_ids(ids: &[u32]) -> Value {
    let mut v = Vec::with_capacity(ids.len() * 4);
    for id in ids {
        v.extend_from_slice(&id.to_le_bytes());
    }
    Bytes::from(v)
}

/// The c_ids of a name-index value.
pub fn decode_ids(v: &[u8]) -> impl Iterator<Item = u32> + '_ {
    v.chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
}

/// Little-endian piece outputs: a small writer and reader.
#[derive(Default)]
pub struct Out(Vec<u8>);

impl Out {
    pub fn with_capacity(n: usize) -> Self {
        Out(Vec::with_capacity(n))
    }
    pub fn u32(mut self, x: u32) -> Self {
        self.0.extend_from_slice(&x.to_le_bytes());
        self
    }
    pub fn i64(mut self, x: i64) -> Self {
        self.0.extend_from_slice(&x.to_le_bytes());
        self
    }
    pub fn bytes(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(b);
        self
    }
    pub fn push_u32(&mut self, x: u32) {
        self.0.extend_from_slice(&x.to_le_bytes());
    }
    pub fn push_i64(&mut self, x: i64) {
        self.0.extend_from_slice(&x.to_le_bytes());
    }
    pub fn push_bytes(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }
    pub fn done(self) -> Value {
        Bytes::from(self.0)
    }
}

/// Reads what [`Out`] wrote. Short input reads as zeros, so a malformed
/// output never panics a server.
pub struct In<'a>(&'a [u8]);

impl<'a> In<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        In(b)
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    fn take(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
    pub fn u32(&mut self) -> u32 {
        let mut w = [0u8; 4];
        let b = self.take(4);
        w[..b.len()].copy_from_slice(b);
        u32::from_le_bytes(w)
    }
    pub fn i64(&mut self) -> i64 {
        let mut w = [0u8; 8];
        let b = self.take(8);
        w[..b.len()].copy_from_slice(b);
        i64::from_le_bytes(w)
    }
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        self.take(n)
    }
}
