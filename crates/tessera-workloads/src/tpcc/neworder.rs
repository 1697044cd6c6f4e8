//! NewOrder (clause 2.4) as pieces.
//!
//! | # | piece | shard | reads | writes | kind | inputs |
//! |---|---|---|---|---|---|---|
//! | 0 | district | home district's | DISTRICT(D_TAX, D_NEXT_O_ID) | DISTRICT(D_NEXT_O_ID) | immediate | — |
//! | 1 | warehouse + customer | home district's | WAREHOUSE(W_TAX), CUSTOMER(C_DISCOUNT, C_LAST, C_CREDIT) | — | immediate | — |
//! | 2 | items | home district's (ITEM is replicated) | ITEM(I_PRICE, I_NAME, I_DATA) per distinct item | — | immediate | — |
//! | 3.. | stock, one per supplying shard | that shard | STOCK(S_QUANTITY, S_DIST_xx, S_YTD, S_ORDER_CNT, S_REMOTE_CNT, S_DATA) | STOCK(S_QUANTITY, S_YTD, S_ORDER_CNT, S_REMOTE_CNT) | immediate | — |
//! | last | insert (dynamic: keyed by the o_id of piece 0) | home district's | — | ORDER, NEW-ORDER, ORDER-LINE × ol_cnt, LAST_ORDER | deferrable | all others |
//!
//! Outputs: the district piece hands out `o_id` and `D_TAX`; piece 1 gives
//! `W_TAX` and `C_DISCOUNT`; the items piece the prices (it rolls back, with
//! a user abort, when an item id is unused: clause 2.4.2.3); each stock
//! piece the `S_DIST_xx` of its lines (the order lines' `OL_DIST_INFO`). The
//! insert piece writes the order and returns `o_id` and the total amount.

use super::keys::Layout;
use super::schema::{self, col, cols, In, Out};
use super::schema::{District, Item, LastOrder, Order, OrderLine, Stock, Warehouse};
use super::{acc, piece, NEWORDER};
use std::borrow::Cow;
use tessera_core::txn::{PieceKind, PieceResult, PieceSpec, Procedure, Value};
use tessera_core::{Key, ShardId};

/// One order line as drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Line {
    pub i_id: u32,
    pub supply_w: u32,
    pub quantity: u8,
}

const P_DISTRICT: usize = 0;
const P_WC: usize = 1;
const P_ITEMS: usize = 2;
const P_STOCK: usize = 3;

/// Where a line's stock is handled: stock piece `piece − P_STOCK`, stock
/// key `key` within it, and the line's position `slot` among that piece's
/// lines.
#[derive(Clone, Copy, Debug)]
struct LineAt {
    item: u16,
    piece: u16,
    key: u16,
    slot: u16,
}

/// One NewOrder transaction.
#[derive(Clone, Debug)]
pub struct NewOrder {
    layout: Layout,
    w: u32,
    d: u32,
    c: u32,
    lines: Vec<Line>,
    at: Vec<LineAt>,
    /// Per stock piece: its lines, in order.
    stock_lines: Vec<Vec<u16>>,
    date: u64,
    pieces: Vec<PieceSpec>,
}

fn stock_cols(d: u32) -> tessera_core::txn::Columns {
    let mut c = cols(&[
        col::S_QUANTITY,
        col::S_YTD,
        col::S_ORDER_CNT,
        col::S_REMOTE_CNT,
        col::S_DATA,
    ]);
    c.0 |= 1 << (col::S_DIST_01 + (d - 1) % 10);
    c
}

impl NewOrder {
    pub fn new(layout: Layout, w: u32, d: u32, c: u32, lines: Vec<Line>, date: u64) -> Self {
        let l = &layout;
        let home = l.district_shard(w, d);
        let mut pieces = Vec::with_capacity(5);
        pieces.push(piece(
            home,
            PieceKind::Immediate,
            vec![acc(l.district(w, d), cols(&[col::D_TAX, col::D_NEXT_O_ID]))],
            vec![acc(l.district(w, d), cols(&[col::D_NEXT_O_ID]))],
            vec![],
            false,
        ));
        pieces.push(piece(
            home,
            PieceKind::Immediate,
            vec![
                acc(l.warehouse(w, home), cols(&[col::W_TAX])),
                acc(
                    l.customer(w, d, c),
                    cols(&[col::C_DISCOUNT, col::C_LAST, col::C_CREDIT]),
                ),
            ],
            vec![],
            vec![],
            false,
        ));

        // Distinct items; stock keys grouped by shard, distinct per piece.
        let mut items: Vec<u32> = Vec::with_capacity(lines.len());
        let mut shards: Vec<ShardId> = Vec::with_capacity(2);
        let mut stock_keys: Vec<Vec<Key>> = Vec::with_capacity(2);
        let mut stock_lines: Vec<Vec<u16>> = Vec::with_capacity(2);
        let mut at = Vec::with_capacity(lines.len());
        for (n, line) in lines.iter().enumerate() {
            let item = match items.iter().position(|&i| i == line.i_id) {
                Some(p) => p,
                None => {
                    items.push(line.i_id);
                    items.len() - 1
                }
            };
            if line.i_id > l.items {
                // The unused item of a rollback: the items piece aborts, no
                // stock row is touched.
                at.push(LineAt {
                    item: item as u16,
                    piece: u16::MAX,
                    key: 0,
                    slot: 0,
                });
                continue;
            }
            let s = l.stock_shard(line.supply_w, line.i_id);
            let p = match shards.iter().position(|&x| x == s) {
                Some(p) => p,
                None => {
                    shards.push(s);
                    stock_keys.push(Vec::new());
                    stock_lines.push(Vec::new());
                    shards.len() - 1
                }
            };
            let key = l.stock(line.supply_w, line.i_id);
            let k = match stock_keys[p].iter().position(|&x| x == key) {
                Some(k) => k,
                None => {
                    stock_keys[p].push(key);
                    stock_keys[p].len() - 1
                }
            };
            at.push(LineAt {
                item: item as u16,
                piece: p as u16,
                key: k as u16,
                slot: stock_lines[p].len() as u16,
            });
            stock_lines[p].push(n as u16);
        }
        pieces.push(piece(
            home,
            PieceKind::Immediate,
            items
                .iter()
                .map(|&i| {
                    acc(
                        l.item(i, home),
                        cols(&[col::I_PRICE, col::I_NAME, col::I_DATA]),
                    )
                })
                .collect(),
            vec![],
            vec![],
            false,
        ));
        let write_cols = cols(&[
            col::S_QUANTITY,
            col::S_YTD,
            col::S_ORDER_CNT,
            col::S_REMOTE_CNT,
        ]);
        for (s, keys) in shards.iter().zip(&stock_keys) {
            pieces.push(piece(
                *s,
                PieceKind::Immediate,
                keys.iter().map(|&k| acc(k, stock_cols(d))).collect(),
                keys.iter().map(|&k| acc(k, write_cols)).collect(),
                vec![],
                false,
            ));
        }
        let inputs: Vec<u16> = (0..pieces.len() as u16).collect();
        pieces.push(piece(
            home,
            PieceKind::Deferrable,
            vec![],
            vec![
                acc(Layout::placeholder(schema::ORDER), Insert::order_cols()),
                acc(Layout::placeholder(schema::NEW_ORDER), Insert::all()),
                acc(Layout::placeholder(schema::ORDER_LINE), Insert::all()),
                acc(l.last_order(w, d, c), Insert::all()),
            ],
            inputs,
            true,
        ));
        NewOrder {
            layout,
            w,
            d,
            c,
            lines,
            at,
            stock_lines,
            date,
            pieces,
        }
    }

    pub fn lines(&self) -> &[Line] {
        &self.lines
    }

    /// The home (warehouse, district).
    pub fn home(&self) -> (u32, u32) {
        (self.w, self.d)
    }

    fn insert_piece(&self) -> usize {
        self.pieces.len() - 1
    }

    /// True when some line is supplied by another warehouse.
    pub fn is_remote(&self) -> bool {
        self.lines.iter().any(|l| l.supply_w != self.w)
    }

    fn run_district(&self, reads: &[Option<&Value>]) -> PieceResult {
        let Some(mut dh) = District::decode(reads[0]) else {
            return missing();
        };
        let o_id = dh.next_o_id;
        dh.next_o_id += 1;
        let key = self.layout.district(self.w, self.d);
        PieceResult {
            writes: vec![(key, dh.patch(reads[0].expect("decoded")))],
            output: Out::with_capacity(8).u32(o_id).u32(dh.tax).done(),
            user_abort: false,
        }
    }

    fn warehouse_customer(reads: &[Option<&Value>]) -> PieceResult {
        let (Some(wh), Some(ch)) = (
            Warehouse::decode(reads[0]),
            schema::Customer::decode(reads[1]),
        ) else {
            return missing();
        };
        PieceResult {
            writes: vec![],
            output: Out::with_capacity(8).u32(wh.tax).u32(ch.discount).done(),
            user_abort: false,
        }
    }

    /// Prices of the distinct items; a missing item rolls the order back.
    fn items(reads: &[Option<&Value>]) -> PieceResult {
        let mut out = Out::with_capacity(reads.len() * 8);
        for r in reads {
            match Item::decode(*r) {
                Some(ih) => out.push_i64(ih.price),
                None => return missing(),
            }
        }
        PieceResult {
            writes: vec![],
            output: out.done(),
            user_abort: false,
        }
    }

    /// Update the stock rows of stock piece `p`, one line at a time
    /// (clause 2.4.2.2), and return each line's `S_DIST_xx`.
    fn stock(&self, p: usize, reads: &[Option<&Value>]) -> PieceResult {
        let spec = &self.pieces[P_STOCK + p];
        let mut heads = Vec::with_capacity(reads.len());
        for r in reads {
            match Stock::decode(*r) {
                Some(h) => heads.push(h),
                None => return missing(),
            }
        }
        let lines = &self.stock_lines[p];
        let mut out = Out::with_capacity(lines.len() * schema::tail::S_DIST_LEN);
        for &n in lines {
            let line = self.lines[n as usize];
            let k = self.at[n as usize].key as usize;
            let s = &mut heads[k];
            let q = i32::from(line.quantity);
            s.quantity = if s.quantity >= q + 10 {
                s.quantity - q
            } else {
                s.quantity - q + 91
            };
            s.ytd += i64::from(line.quantity);
            s.order_cnt += 1;
            if line.supply_w != self.w {
                s.remote_cnt += 1;
            }
            out.push_bytes(schema::stock_dist(reads[k].expect("decoded"), self.d));
        }
        let writes = spec
            .reads
            .iter()
            .zip(&heads)
            .zip(reads)
            .map(|((a, h), v)| (a.key, h.patch(v.expect("decoded"))))
            .collect();
        PieceResult {
            writes,
            output: out.done(),
            user_abort: false,
        }
    }

    fn insert(&self, inputs: &[Value]) -> PieceResult {
        let l = &self.layout;
        let (w, d) = (self.w, self.d);
        let mut dist = In::new(&inputs[P_DISTRICT]);
        let (o_id, d_tax) = (dist.u32(), dist.u32());
        let mut wc = In::new(&inputs[P_WC]);
        let (w_tax, discount) = (wc.u32(), wc.u32());
        let prices = &inputs[P_ITEMS];
        let ol_cnt = self.lines.len() as u8;
        let mut writes = Vec::with_capacity(self.lines.len() + 3);
        writes.push((
            l.order(w, d, o_id),
            Order {
                c_id: self.c,
                entry_d: self.date,
                carrier_id: 0,
                ol_cnt,
                all_local: u8::from(!self.is_remote()),
            }
            .with_tail(&[]),
        ));
        writes.push((l.new_order(w, d, o_id), schema::new_order_value()));
        let mut sum = 0i64;
        for (n, (line, at)) in self.lines.iter().zip(&self.at).enumerate() {
            let price = In::new(prices.get(at.item as usize * 8..).unwrap_or_default()).i64();
            let amount = price * i64::from(line.quantity);
            sum += amount;
            let dl = schema::tail::S_DIST_LEN;
            let s = at.slot as usize * dl;
            let dist_info = inputs
                .get(P_STOCK + at.piece as usize)
                .and_then(|o| o.get(s..s + dl))
                .unwrap_or(&[0; 24]);
            writes.push((
                l.order_line(w, d, o_id, n as u32 + 1),
                OrderLine {
                    i_id: line.i_id,
                    supply_w_id: line.supply_w,
                    delivery_d: 0,
                    quantity: line.quantity,
                    amount,
                }
                .with_tail(dist_info),
            ));
        }
        writes.push((
            l.last_order(w, d, self.c),
            LastOrder { o_id, ol_cnt }.with_tail(&[]),
        ));
        // Clause 2.4.2.2: total × (1 − C_DISCOUNT) × (1 + W_TAX + D_TAX).
        let total = (i128::from(sum)
            * i128::from(10_000 - i64::from(discount))
            * i128::from(10_000 + i64::from(w_tax) + i64::from(d_tax))
            / 100_000_000) as i64;
        PieceResult {
            writes,
            output: Out::with_capacity(12).u32(o_id).i64(total).done(),
            user_abort: false,
        }
    }
}

/// Column sets of the insert piece.
struct Insert;

impl Insert {
    fn order_cols() -> tessera_core::txn::Columns {
        cols(&[
            col::O_C_ID,
            col::O_ENTRY_D,
            col::O_CARRIER_ID,
            col::O_OL_CNT,
        ])
    }
    fn all() -> tessera_core::txn::Columns {
        tessera_core::txn::Columns::ALL
    }
}

/// A piece found a record missing that the population guarantees (or an
/// unused item id): roll back.
pub(crate) fn missing() -> PieceResult {
    PieceResult {
        writes: vec![],
        output: Value::new(),
        user_abort: true,
    }
}

impl Procedure for NewOrder {
    fn name(&self) -> &'static str {
        NEWORDER
    }

    fn pieces(&self) -> &[PieceSpec] {
        &self.pieces
    }

    fn execute(&self, piece: usize, reads: &[Option<&Value>], inputs: &[Value]) -> PieceResult {
        match piece {
            P_DISTRICT => self.run_district(reads),
            P_WC => Self::warehouse_customer(reads),
            P_ITEMS => Self::items(reads),
            p if p == self.insert_piece() => self.insert(inputs),
            p => self.stock(p - P_STOCK, reads),
        }
    }

    fn resolve(&self, piece: usize, inputs: &[Value]) -> Cow<'_, PieceSpec> {
        if piece != self.insert_piece() {
            return Cow::Borrowed(&self.pieces[piece]);
        }
        let l = &self.layout;
        let (w, d) = (self.w, self.d);
        let o_id = In::new(&inputs[P_DISTRICT]).u32();
        let spec = &self.pieces[piece];
        let mut writes = Vec::with_capacity(self.lines.len() + 3);
        writes.push(acc(l.order(w, d, o_id), Insert::order_cols()));
        writes.push(acc(l.new_order(w, d, o_id), Insert::all()));
        for n in 1..=self.lines.len() as u32 {
            writes.push(acc(l.order_line(w, d, o_id, n), Insert::all()));
        }
        writes.push(acc(l.last_order(w, d, self.c), Insert::all()));
        Cow::Owned(PieceSpec {
            writes,
            ..spec.clone()
        })
    }
}
