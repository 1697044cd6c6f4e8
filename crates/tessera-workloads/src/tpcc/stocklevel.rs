//! Stock-Level (clause 2.8) as pieces: read-only.
//!
//! | # | piece | shard | reads | kind | inputs |
//! |---|---|---|---|---|---|
//! | 0 | district | district's | DISTRICT(D_NEXT_O_ID) | immediate | — |
//! | 1 | orders (dynamic) | district's | ORDER(O_OL_CNT) of the last 20 orders | immediate | 0 |
//! | 2 | lines (dynamic) | district's | their ORDER-LINEs (OL_I_ID) | immediate | 1 |
//! | 3.. | stock, one per shard holding the warehouse's stock (dynamic) | that shard | STOCK(S_QUANTITY) of the distinct items there | deferrable | 2 |
//!
//! **Ordered form** ([`Procedure::ordered`], for Rococo's bounded read-only
//! transactions): the same pieces, under another name, run as a read-write
//! transaction. Its immediate pieces (district, orders, lines) all sit at
//! the district's server and feed the stock pieces, as the procedure
//! requires; Rococo holds their request there until none of the rows they
//! read has an unfinished writer (the coordinator docs have the argument).
//! Then every NewOrder that took an id below the `D_NEXT_O_ID` read has
//! inserted its order and lines, and no later writer of those rows is
//! ordered before the pass, so its immediate reads of rows NewOrder's
//! deferrable insert writes are exact; its stock reads conflict with
//! NewOrder's deferrable stock pieces through deferrable pieces only
//! (d-edges), keyed by the lines piece's output as in the plain form.
//! An earlier form fixed the keys to one round's outputs (a guess) and
//! refused when `D_NEXT_O_ID` had moved: 94% of its passes were refused at
//! 100 clients per server, the guess coming from the finished view, which
//! lags the NewOrders in flight (docs/results/rococo.md). Not with
//! `--immediate-stock`, whose immediate stock writes its deferrable stock
//! reads would meet (see `orderable`).
//!
//! The last 20 orders are `[D_NEXT_O_ID − 20, D_NEXT_O_ID)`: point keys
//! (order ids are dense), so the read set is exact and phantom-free. Each
//! stock piece returns how many of its items are below the threshold; the
//! answer is their sum. In the `district` scheme stock is spread over every
//! shard by item, and which shards hold the items read is only known at
//! run time, so there is a stock piece on every shard (some read nothing).

use super::keys::Layout;
use super::schema::{self, col, cols, District, In, Order, OrderLine, Out, Stock};
use super::{acc, codec, piece, STOCKLEVEL, STOCKLEVEL_ORDERED};
use std::borrow::Cow;
use std::sync::Arc;
use tessera_core::txn::{Columns, PieceKind, PieceResult, PieceSpec, Procedure, Txn, Value};

/// Orders examined (clause 2.8.2.2).
pub const LAST_ORDERS: u32 = 20;

const P_DISTRICT: usize = 0;
const P_ORDERS: usize = 1;
const P_LINES: usize = 2;
const P_STOCK: usize = 3;

/// One Stock-Level transaction.
#[derive(Clone, Debug)]
pub struct StockLevel {
    layout: Layout,
    w: u32,
    d: u32,
    threshold: i32,
    pieces: Vec<PieceSpec>,
    /// This is the ordered form (see the module doc).
    ordered: bool,
    /// Whether it has an ordered form: only while NewOrder's stock pieces
    /// are deferrable (not `--immediate-stock`), or its deferrable stock
    /// reads would meet immediate stock writes. Set by the generator (off
    /// in [`StockLevel::new`]), carried on the wire.
    orderable: bool,
}

fn stock_cols() -> Columns {
    cols(&[col::S_QUANTITY])
}

impl StockLevel {
    pub fn new(layout: Layout, w: u32, d: u32, threshold: i32) -> Self {
        let l = &layout;
        let shard = l.district_shard(w, d);
        let mut pieces = vec![
            piece(
                shard,
                PieceKind::Immediate,
                vec![acc(l.district(w, d), cols(&[col::D_NEXT_O_ID]))],
                vec![],
                vec![],
                false,
            ),
            piece(
                shard,
                PieceKind::Immediate,
                vec![acc(
                    Layout::placeholder(schema::ORDER),
                    cols(&[col::O_OL_CNT]),
                )],
                vec![],
                vec![P_DISTRICT as u16],
                true,
            ),
            piece(
                shard,
                PieceKind::Immediate,
                vec![acc(
                    Layout::placeholder(schema::ORDER_LINE),
                    cols(&[col::OL_I_ID]),
                )],
                vec![],
                vec![P_ORDERS as u16],
                true,
            ),
        ];
        debug_assert_eq!(pieces.len(), P_STOCK);
        for s in l.stock_shards(w) {
            pieces.push(piece(
                s,
                PieceKind::Deferrable,
                vec![acc(Layout::placeholder(schema::STOCK), stock_cols())],
                vec![],
                vec![P_LINES as u16],
                true,
            ));
        }
        StockLevel {
            layout,
            w,
            d,
            threshold,
            pieces,
            ordered: false,
            orderable: false,
        }
    }

    /// With an ordered form or without (see `orderable`).
    pub(super) fn orderable(mut self, orderable: bool) -> Self {
        self.orderable = orderable;
        self
    }

    /// The ordered form (see the module doc).
    pub(super) fn into_ordered(mut self) -> Self {
        self.ordered = true;
        self
    }

    /// The orders examined, given the district's next order id.
    fn orders(next: u32) -> std::ops::Range<u32> {
        next.saturating_sub(LAST_ORDERS).max(1)..next
    }
}

impl Procedure for StockLevel {
    fn name(&self) -> &'static str {
        if self.ordered {
            STOCKLEVEL_ORDERED
        } else {
            STOCKLEVEL
        }
    }

    /// Wire parameters: warehouse, district, threshold and whether it has
    /// an ordered form ([`super::codec`]); the name says which form it is.
    fn encode_params(
        &self,
        out: &mut bytes::BytesMut,
    ) -> Result<(), tessera_core::codec::EncodeError> {
        codec::put_ids(out, &[self.w, self.d, self.threshold.max(0) as u32]);
        bytes::BufMut::put_u8(out, u8::from(self.orderable));
        Ok(())
    }

    /// `None` for an ordered form, or without one (`orderable`).
    fn ordered(&self) -> Option<Txn> {
        if !self.orderable || self.ordered {
            return None;
        }
        Some(Arc::new(self.clone().into_ordered()))
    }

    fn pieces(&self) -> &[PieceSpec] {
        &self.pieces
    }

    fn execute(&self, piece: usize, reads: &[Option<&Value>], inputs: &[Value]) -> PieceResult {
        let mut out = Out::default();
        match piece {
            P_DISTRICT => {
                out.push_u32(District::decode(reads[0]).map_or(0, |h| h.next_o_id));
            }
            // Output: (o_id, ol_cnt) pairs.
            P_ORDERS => {
                let next = In::new(&inputs[0]).u32();
                for (o, r) in Self::orders(next).zip(reads) {
                    if let Some(h) = Order::decode(*r) {
                        out.push_u32(o);
                        out.push_u32(u32::from(h.ol_cnt));
                    }
                }
            }
            // Output: the distinct item ids, sorted.
            P_LINES => {
                let mut items: Vec<u32> = reads
                    .iter()
                    .filter_map(|r| OrderLine::decode(*r).map(|h| h.i_id))
                    .collect();
                items.sort_unstable();
                items.dedup();
                for i in items {
                    out.push_u32(i);
                }
            }
            // Output: how many items here are below the threshold.
            _ => {
                let low = reads
                    .iter()
                    .filter_map(|r| Stock::decode(*r))
                    .filter(|s| s.quantity < self.threshold)
                    .count();
                out.push_u32(low as u32);
            }
        }
        PieceResult {
            writes: vec![],
            output: out.done(),
            user_abort: false,
        }
    }

    fn resolve(&self, piece: usize, inputs: &[Value]) -> Cow<'_, PieceSpec> {
        let spec = &self.pieces[piece];
        if !spec.dynamic {
            return Cow::Borrowed(spec);
        }
        let l = &self.layout;
        let (w, d) = (self.w, self.d);
        let mut input = In::new(&inputs[0]);
        let reads = match piece {
            P_ORDERS => Self::orders(input.u32())
                .map(|o| acc(l.order(w, d, o), cols(&[col::O_OL_CNT])))
                .collect(),
            P_LINES => {
                let mut r = Vec::with_capacity(LAST_ORDERS as usize * 15);
                while !input.is_empty() {
                    let (o, cnt) = (input.u32(), input.u32());
                    r.extend(
                        (1..=cnt.min(15))
                            .map(|n| acc(l.order_line(w, d, o, n), cols(&[col::OL_I_ID]))),
                    );
                }
                r
            }
            // A stock piece (index P_STOCK and up).
            _ => {
                let shard = spec.shard;
                let mut r = Vec::new();
                while !input.is_empty() {
                    let i = input.u32();
                    if (1..=l.items).contains(&i) && l.stock_shard(w, i) == shard {
                        r.push(acc(l.stock(w, i), stock_cols()));
                    }
                }
                r
            }
        };
        Cow::Owned(PieceSpec {
            reads,
            ..spec.clone()
        })
    }
}
