//! Delivery (clause 2.7) as pieces: three per district of the warehouse,
//! all districts in parallel.
//!
//! | # | piece | shard | reads | writes | kind | inputs |
//! |---|---|---|---|---|---|---|
//! | 3k | cursor | district's | DELIVERY_CURSOR | DELIVERY_CURSOR (declared, written by 3k+1) | immediate | — |
//! | 3k+1 | deliver (dynamic: the order at the cursor) | district's | NEW-ORDER, ORDER(O_C_ID, O_CARRIER_ID, O_OL_CNT), ORDER-LINE × 15 (OL_AMOUNT, OL_DELIVERY_D) | NEW-ORDER (deleted), ORDER(O_CARRIER_ID), ORDER-LINE(OL_DELIVERY_D), DELIVERY_CURSOR | immediate | 3k |
//! | 3k+2 | customer (dynamic: the order's customer) | district's | CUSTOMER(C_BALANCE, C_DELIVERY_CNT) | same | deferrable | 3k+1 |
//!
//! The cursor names the district's oldest undelivered order; the deliver
//! piece delivers it if its NEW-ORDER row exists — otherwise the district
//! has no undelivered order and is skipped (clause 2.7.4.2) — and advances
//! the cursor. The cursor piece declares the cursor as a write so that 2PL
//! locks it exclusively at once: two deliveries of a district would
//! otherwise both share-lock it and deadlock on the upgrade. The deliver
//! piece declares all 15 possible order lines (the line count is in the
//! order it reads); it writes those that exist.

use super::keys::Layout;
use super::schema::{self, col, cols, Cursor, In, Order, OrderLine, Out};
use super::{acc, piece, DELIVERY};
use std::borrow::Cow;
use tessera_core::txn::{Columns, PieceKind, PieceResult, PieceSpec, Procedure, Value};

/// One Delivery transaction.
#[derive(Clone, Debug)]
pub struct Delivery {
    layout: Layout,
    w: u32,
    carrier: u8,
    date: u64,
    pieces: Vec<PieceSpec>,
}

const MAX_LINES: u32 = 15;

fn order_cols() -> Columns {
    cols(&[col::O_C_ID, col::O_CARRIER_ID, col::O_OL_CNT])
}

fn line_read_cols() -> Columns {
    cols(&[col::OL_AMOUNT, col::OL_DELIVERY_D])
}

fn customer_cols() -> Columns {
    cols(&[col::C_BALANCE, col::C_DELIVERY_CNT])
}

impl Delivery {
    pub fn new(layout: Layout, w: u32, carrier: u8, date: u64) -> Self {
        let l = &layout;
        let mut pieces = Vec::with_capacity(3 * l.districts as usize);
        for d in 1..=l.districts {
            let shard = l.district_shard(w, d);
            let cursor = acc(l.cursor(w, d), Columns::ALL);
            let base = pieces.len() as u16;
            pieces.push(piece(
                shard,
                PieceKind::Immediate,
                vec![cursor],
                vec![cursor],
                vec![],
                false,
            ));
            pieces.push(piece(
                shard,
                PieceKind::Immediate,
                vec![
                    acc(Layout::placeholder(schema::NEW_ORDER), Columns::ALL),
                    acc(Layout::placeholder(schema::ORDER), order_cols()),
                    acc(Layout::placeholder(schema::ORDER_LINE), line_read_cols()),
                ],
                vec![
                    acc(Layout::placeholder(schema::NEW_ORDER), Columns::ALL),
                    acc(
                        Layout::placeholder(schema::ORDER),
                        cols(&[col::O_CARRIER_ID]),
                    ),
                    acc(
                        Layout::placeholder(schema::ORDER_LINE),
                        cols(&[col::OL_DELIVERY_D]),
                    ),
                    cursor,
                ],
                vec![base],
                true,
            ));
            pieces.push(piece(
                shard,
                PieceKind::Deferrable,
                vec![acc(Layout::placeholder(schema::CUSTOMER), customer_cols())],
                vec![acc(Layout::placeholder(schema::CUSTOMER), customer_cols())],
                vec![base + 1],
                true,
            ));
        }
        Delivery {
            layout,
            w,
            carrier,
            date,
            pieces,
        }
    }

    fn cursor(reads: &[Option<&Value>]) -> PieceResult {
        let next = Cursor::decode(reads[0]).map_or(0, |c| c.next);
        PieceResult {
            writes: vec![],
            output: Out::with_capacity(4).u32(next).done(),
            user_abort: false,
        }
    }

    /// Deliver the order at the cursor, if any. Output: (c_id, Σ OL_AMOUNT),
    /// or nothing when the district had no undelivered order.
    fn deliver(&self, d: u32, o: u32, reads: &[Option<&Value>]) -> PieceResult {
        let nothing = PieceResult::default();
        if o == 0 || reads.len() < 2 || !schema::present(reads[0]) {
            return nothing;
        }
        let Some(mut oh) = Order::decode(reads[1]) else {
            return nothing;
        };
        let l = &self.layout;
        let w = self.w;
        let mut writes = Vec::with_capacity(usize::from(oh.ol_cnt) + 3);
        writes.push((l.new_order(w, d, o), Value::new()));
        oh.carrier_id = self.carrier;
        writes.push((l.order(w, d, o), oh.patch(reads[1].expect("decoded"))));
        let mut sum = 0i64;
        for (n, r) in (1..=MAX_LINES).zip(&reads[2..]) {
            if let Some(mut ol) = OrderLine::decode(*r) {
                sum += ol.amount;
                ol.delivery_d = self.date;
                writes.push((l.order_line(w, d, o, n), ol.patch(r.expect("decoded"))));
            }
        }
        writes.push((l.cursor(w, d), Cursor { next: o + 1 }.with_tail(&[])));
        PieceResult {
            writes,
            output: Out::with_capacity(12).u32(oh.c_id).i64(sum).done(),
            user_abort: false,
        }
    }

    fn customer(&self, d: u32, inputs: &[Value], reads: &[Option<&Value>]) -> PieceResult {
        let mut i = In::new(&inputs[0]);
        let (c, sum) = (i.u32(), i.i64());
        let Some(mut ch) = reads.first().and_then(|r| schema::Customer::decode(*r)) else {
            return PieceResult::default();
        };
        ch.balance += sum;
        ch.delivery_cnt += 1;
        PieceResult {
            writes: vec![(
                self.layout.customer(self.w, d, c),
                ch.patch(reads[0].expect("decoded")),
            )],
            output: Value::new(),
            user_abort: false,
        }
    }
}

impl Procedure for Delivery {
    fn name(&self) -> &'static str {
        DELIVERY
    }

    fn pieces(&self) -> &[PieceSpec] {
        &self.pieces
    }

    fn execute(&self, piece: usize, reads: &[Option<&Value>], inputs: &[Value]) -> PieceResult {
        let d = (piece / 3) as u32 + 1;
        match piece % 3 {
            0 => Self::cursor(reads),
            1 => self.deliver(d, In::new(&inputs[0]).u32(), reads),
            _ => self.customer(d, inputs, reads),
        }
    }

    fn resolve(&self, piece: usize, inputs: &[Value]) -> Cow<'_, PieceSpec> {
        let spec = &self.pieces[piece];
        if !spec.dynamic {
            return Cow::Borrowed(spec);
        }
        let l = &self.layout;
        let (w, d) = (self.w, (piece / 3) as u32 + 1);
        let (reads, writes) = if piece % 3 == 1 {
            let o = In::new(&inputs[0]).u32();
            if o == 0 {
                (vec![], vec![])
            } else {
                let mut reads = Vec::with_capacity(2 + MAX_LINES as usize);
                reads.push(acc(l.new_order(w, d, o), Columns::ALL));
                reads.push(acc(l.order(w, d, o), order_cols()));
                let mut writes = Vec::with_capacity(3 + MAX_LINES as usize);
                writes.push(acc(l.new_order(w, d, o), Columns::ALL));
                writes.push(acc(l.order(w, d, o), cols(&[col::O_CARRIER_ID])));
                for n in 1..=MAX_LINES {
                    let k = l.order_line(w, d, o, n);
                    reads.push(acc(k, line_read_cols()));
                    writes.push(acc(k, cols(&[col::OL_DELIVERY_D])));
                }
                writes.push(acc(l.cursor(w, d), Columns::ALL));
                (reads, writes)
            }
        } else {
            let c = In::new(&inputs[0]).u32();
            if c == 0 {
                (vec![], vec![])
            } else {
                let k = acc(l.customer(w, d, c), customer_cols());
                (vec![k], vec![k])
            }
        };
        Cow::Owned(PieceSpec {
            reads,
            writes,
            ..spec.clone()
        })
    }
}
