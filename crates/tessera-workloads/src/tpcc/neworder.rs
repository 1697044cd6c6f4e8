//! NewOrder (clause 2.4) as pieces.
//!
//! | # | piece | shard | reads | writes | kind | inputs |
//! |---|---|---|---|---|---|---|
//! | 0 | home | home district's | DISTRICT(D_TAX, D_NEXT_O_ID), WAREHOUSE(W_TAX), DELIVERY_CURSOR, ITEM(I_PRICE, I_NAME, I_DATA) per distinct item | DISTRICT(D_NEXT_O_ID), DELIVERY_CURSOR | immediate | — |
//! | 1.. | stock, one per supplying shard | that shard | STOCK(S_QUANTITY, S_YTD, S_ORDER_CNT, S_REMOTE_CNT, S_DATA) | STOCK(S_QUANTITY, S_YTD, S_ORDER_CNT, S_REMOTE_CNT) | deferrable | 0 |
//! | last | insert (dynamic: keyed by the o_id of piece 0) | home district's | CUSTOMER(C_DISCOUNT, C_LAST, C_CREDIT) | ORDER, NEW-ORDER, ORDER-LINE × ol_cnt, LAST_ORDER | deferrable | 0 |
//!
//! The home piece hands out `o_id`, appends the customer to the district's
//! delivery queue (for Delivery, see [`super::delivery`]) and returns
//! `o_id`, `D_TAX`, `W_TAX` and the item prices. It checks the items first
//! and rolls back with a user abort, writing nothing, when an item id is
//! unused (clause 2.4.2.3). The insert piece writes the order and returns
//! `o_id` and the total amount. `OL_DIST_INFO` is the supplying stock row's
//! `S_DIST_xx`, a column no transaction writes: it is read from the static
//! copy ([`super::populate::stock_dist`]), as ITEM is.
//!
//! **Kinds, as Rococo's TPC-C (§3.1, Fig. 3–4, Fig. 13).** Only the home
//! piece is immediate: its `o_id` keys the insert piece (the paper's p1).
//! The stock pieces are deferrable (the paper's p2): their outputs feed
//! nothing, and two instances' immediate stock pieces would close an I–I
//! SC-cycle with the district pieces (§4.2's example of a needed merge;
//! [`NewOrder::with_immediate_stock`] builds that variant, and Rococo then
//! runs the home and stock pieces merged).
//! The insert piece is deferrable (p3) and takes inputs from the immediate
//! home piece only. The customer's `C_DISCOUNT` is read by the insert piece
//! rather than immediately, because Payment and Delivery update the
//! customer row in deferrable pieces: Rococo tracks dependencies by row
//! (§3.4), and a row touched by an immediate and a deferrable piece gives
//! an edge the runtime cannot honour. The item check and the district
//! update share one piece so that a rollback happens before any write: an
//! immediate piece that wrote cannot be undone (the paper's "simple
//! termination", §3.1). The other pieces wait for the home piece's output,
//! so a rolled-back NewOrder reaches no other piece.

use super::keys::Layout;
use super::populate;
use super::schema::{self, col, cols, In, Out};
use super::schema::{Cursor, District, Item, LastOrder, Order, OrderLine, Stock, Warehouse};
use super::{acc, codec, piece, NEWORDER};
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

const P_HOME: usize = 0;
const P_STOCK: usize = 1;

/// Where a line's item and stock are: its distinct item `item` (among the
/// home piece's) and its stock key `key` within its stock piece.
#[derive(Clone, Copy, Debug)]
struct LineAt {
    item: u16,
    key: u16,
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

fn stock_cols() -> tessera_core::txn::Columns {
    cols(&[
        col::S_QUANTITY,
        col::S_YTD,
        col::S_ORDER_CNT,
        col::S_REMOTE_CNT,
        col::S_DATA,
    ])
}

fn customer_cols() -> tessera_core::txn::Columns {
    cols(&[col::C_DISCOUNT, col::C_LAST, col::C_CREDIT])
}

impl NewOrder {
    pub fn new(layout: Layout, w: u32, d: u32, c: u32, lines: Vec<Line>, date: u64) -> Self {
        let l = &layout;
        let home = l.district_shard(w, d);
        let mut pieces = Vec::with_capacity(4);
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
                    key: 0,
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
                key: k as u16,
            });
            stock_lines[p].push(n as u16);
        }
        // Keys in the order Payment's home piece takes them (warehouse,
        // then district), so that lock-based protocols do not deadlock on
        // the two pieces.
        let mut home_reads = vec![
            acc(l.warehouse(w, home), cols(&[col::W_TAX])),
            acc(l.district(w, d), cols(&[col::D_TAX, col::D_NEXT_O_ID])),
            acc(l.cursor(w, d), tessera_core::txn::Columns::ALL),
        ];
        home_reads.extend(items.iter().map(|&i| {
            acc(
                l.item(i, home),
                cols(&[col::I_PRICE, col::I_NAME, col::I_DATA]),
            )
        }));
        pieces.push(piece(
            home,
            PieceKind::Immediate,
            home_reads,
            vec![
                acc(l.district(w, d), cols(&[col::D_NEXT_O_ID])),
                acc(l.cursor(w, d), tessera_core::txn::Columns::ALL),
            ],
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
                PieceKind::Deferrable,
                keys.iter().map(|&k| acc(k, stock_cols())).collect(),
                keys.iter().map(|&k| acc(k, write_cols)).collect(),
                vec![P_HOME as u16],
                false,
            ));
        }
        pieces.push(piece(
            home,
            PieceKind::Deferrable,
            vec![acc(l.customer(w, d, c), customer_cols())],
            vec![
                acc(Layout::placeholder(schema::ORDER), Insert::order_cols()),
                acc(Layout::placeholder(schema::NEW_ORDER), Insert::all()),
                acc(Layout::placeholder(schema::ORDER_LINE), Insert::all()),
                acc(l.last_order(w, d, c), Insert::all()),
            ],
            vec![P_HOME as u16],
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

    /// The variant of Rococo §4.2's example: the stock pieces made
    /// immediate. Two instances' district and stock pieces then close an
    /// SC-cycle of I–I conflicts, which Rococo's runtime cannot reorder:
    /// the offline checker asks to merge them (`--immediate-stock`).
    pub fn with_immediate_stock(mut self) -> Self {
        let stock = P_STOCK..self.insert_piece();
        for p in &mut self.pieces[stock] {
            p.kind = PieceKind::Immediate;
        }
        self
    }

    /// True when the stock pieces are immediate
    /// ([`Self::with_immediate_stock`]).
    pub fn immediate_stock(&self) -> bool {
        self.pieces[P_STOCK..self.insert_piece()]
            .iter()
            .any(|p| p.kind == PieceKind::Immediate)
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

    /// The home piece: check the items (roll back before any write when
    /// one is unused), take the next order id, queue the order for
    /// delivery; output `o_id`, `D_TAX`, `W_TAX` and the item prices.
    fn run_home(&self, reads: &[Option<&Value>]) -> PieceResult {
        let (items, rows) = (&reads[3..], &reads[..3]);
        let mut out = Out::with_capacity(12 + items.len() * 8);
        let (Some(wh), Some(mut dh), Some(_)) = (
            Warehouse::decode(rows[0]),
            District::decode(rows[1]),
            Cursor::decode(rows[2]),
        ) else {
            return missing();
        };
        let mut prices = Vec::with_capacity(items.len());
        for r in items {
            match Item::decode(*r) {
                Some(ih) => prices.push(ih.price),
                None => return missing(),
            }
        }
        let o_id = dh.next_o_id;
        dh.next_o_id += 1;
        out = out.u32(o_id).u32(dh.tax).u32(wh.tax);
        for p in prices {
            out.push_i64(p);
        }
        let spec = &self.pieces[P_HOME];
        let mut queue = rows[2].expect("decoded").to_vec();
        queue.extend_from_slice(&self.c.to_le_bytes());
        PieceResult {
            writes: vec![
                (spec.writes[0].key, dh.patch(rows[1].expect("decoded"))),
                (spec.writes[1].key, Value::from(queue)),
            ],
            output: out.done(),
            user_abort: false,
        }
    }

    /// Update the stock rows of stock piece `p`, one line at a time
    /// (clause 2.4.2.2).
    fn stock(&self, p: usize, reads: &[Option<&Value>]) -> PieceResult {
        let spec = &self.pieces[P_STOCK + p];
        let mut heads = Vec::with_capacity(reads.len());
        for r in reads {
            match Stock::decode(*r) {
                Some(h) => heads.push(h),
                None => return missing(),
            }
        }
        for &n in &self.stock_lines[p] {
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
            output: Value::new(),
            user_abort: false,
        }
    }

    fn insert(&self, reads: &[Option<&Value>], inputs: &[Value]) -> PieceResult {
        let l = &self.layout;
        let (w, d) = (self.w, self.d);
        let Some(ch) = schema::Customer::decode(reads[0]) else {
            return missing();
        };
        let discount = ch.discount;
        let mut home = In::new(&inputs[0]);
        let (o_id, d_tax, w_tax) = (home.u32(), home.u32(), home.u32());
        let prices = inputs[0].get(12..).unwrap_or_default();
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
            let dist_info = populate::stock_dist(line.supply_w, line.i_id, d);
            writes.push((
                l.order_line(w, d, o_id, n as u32 + 1),
                OrderLine {
                    i_id: line.i_id,
                    supply_w_id: line.supply_w,
                    delivery_d: 0,
                    quantity: line.quantity,
                    amount,
                }
                .with_tail(&dist_info),
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

    /// Wire parameters: warehouse, district, customer; the lines (item,
    /// supplying warehouse, quantity); the date ([`super::codec`]).
    fn encode_params(
        &self,
        out: &mut bytes::BytesMut,
    ) -> Result<(), tessera_core::codec::EncodeError> {
        use bytes::BufMut;
        codec::put_ids(out, &[self.w, self.d, self.c]);
        tessera_core::codec::put_varint(out, self.lines.len() as u64);
        for l in &self.lines {
            codec::put_ids(out, &[l.i_id, l.supply_w]);
            out.put_u8(l.quantity);
        }
        out.put_u64_le(self.date);
        out.put_u8(u8::from(self.immediate_stock()));
        Ok(())
    }

    fn pieces(&self) -> &[PieceSpec] {
        &self.pieces
    }

    fn execute(&self, piece: usize, reads: &[Option<&Value>], inputs: &[Value]) -> PieceResult {
        match piece {
            P_HOME => self.run_home(reads),
            p if p == self.insert_piece() => self.insert(reads, inputs),
            p => self.stock(p - P_STOCK, reads),
        }
    }

    /// The insert piece's real keys are ORDER, NEW-ORDER and ORDER-LINE
    /// rows of its fresh `o_id` (the rest is static): every piece that
    /// reads or writes such rows finds their `o_id` at run time too and
    /// declares the same table placeholders.
    fn placeholders_cover(&self, piece: usize) -> bool {
        piece == self.insert_piece()
    }

    fn resolve(&self, piece: usize, inputs: &[Value]) -> Cow<'_, PieceSpec> {
        if piece != self.insert_piece() {
            return Cow::Borrowed(&self.pieces[piece]);
        }
        let l = &self.layout;
        let (w, d) = (self.w, self.d);
        let o_id = In::new(&inputs[0]).u32();
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
