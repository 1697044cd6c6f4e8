//! Order-Status (clause 2.6) as pieces: read-only.
//!
//! | # | piece | shard | reads | kind | inputs |
//! |---|---|---|---|---|---|
//! | (0) | by last name: lookup | district's | NAME_INDEX | immediate | — |
//! | 0/1 | customer (dynamic when by name) | district's | CUSTOMER(C_BALANCE, C_FIRST, C_MIDDLE, C_LAST), LAST_ORDER | immediate | (lookup) |
//! | last | order (dynamic) | district's | ORDER(O_ENTRY_D, O_CARRIER_ID, O_OL_CNT), ORDER-LINE × ol_cnt | deferrable | customer |
//!
//! "The customer's last order" is the LAST_ORDER record, which the NewOrder
//! that created the order wrote (see [`super`] on ordered access); it also
//! holds the order's line count, so the order piece reads exactly the
//! order's lines.

use super::keys::Layout;
use super::neworder::missing;
use super::payment::{lookup, lookup_piece, CustomerBy};
use super::schema::{self, col, cols, In, LastOrder, Order, OrderLine, Out};
use super::{acc, codec, piece, ORDERSTATUS};
use std::borrow::Cow;
use tessera_core::txn::{Columns, PieceKind, PieceResult, PieceSpec, Procedure, Value};

/// One Order-Status transaction.
#[derive(Clone, Debug)]
pub struct OrderStatus {
    layout: Layout,
    w: u32,
    d: u32,
    by: CustomerBy,
    pieces: Vec<PieceSpec>,
}

fn customer_cols() -> Columns {
    cols(&[col::C_BALANCE, col::C_FIRST, col::C_MIDDLE, col::C_LAST])
}

fn order_cols() -> Columns {
    cols(&[col::O_ENTRY_D, col::O_CARRIER_ID, col::O_OL_CNT])
}

fn line_cols() -> Columns {
    Columns::ALL
}

impl OrderStatus {
    pub fn new(layout: Layout, w: u32, d: u32, by: CustomerBy) -> Self {
        let l = &layout;
        let shard = l.district_shard(w, d);
        let mut pieces = Vec::with_capacity(3);
        let (reads, inputs, dynamic) = match by {
            CustomerBy::Id(c) => (
                vec![
                    acc(l.customer(w, d, c), customer_cols()),
                    acc(l.last_order(w, d, c), Columns::ALL),
                ],
                vec![],
                false,
            ),
            CustomerBy::Name(n) => {
                pieces.push(lookup_piece(l, w, d, n));
                (
                    vec![
                        acc(Layout::placeholder(schema::CUSTOMER), customer_cols()),
                        acc(Layout::placeholder(schema::LAST_ORDER), Columns::ALL),
                    ],
                    vec![0],
                    true,
                )
            }
        };
        pieces.push(piece(
            shard,
            PieceKind::Immediate,
            reads,
            vec![],
            inputs,
            dynamic,
        ));
        pieces.push(piece(
            shard,
            PieceKind::Deferrable,
            vec![
                acc(Layout::placeholder(schema::ORDER), order_cols()),
                acc(Layout::placeholder(schema::ORDER_LINE), line_cols()),
            ],
            vec![],
            vec![pieces.len() as u16 - 1],
            true,
        ));
        OrderStatus {
            layout,
            w,
            d,
            by,
            pieces,
        }
    }

    fn customer_piece(&self) -> usize {
        self.pieces.len() - 2
    }

    fn order_piece(&self) -> usize {
        self.pieces.len() - 1
    }

    /// Output: c_id, o_id, ol_cnt, balance.
    fn customer(&self, c: u32, reads: &[Option<&Value>]) -> PieceResult {
        let (Some(ch), Some(lo)) = (
            schema::Customer::decode(reads[0]),
            LastOrder::decode(reads[1]),
        ) else {
            return missing();
        };
        PieceResult {
            writes: vec![],
            output: Out::with_capacity(20)
                .u32(c)
                .u32(lo.o_id)
                .u32(u32::from(lo.ol_cnt))
                .i64(ch.balance)
                .done(),
            user_abort: false,
        }
    }

    /// Output: carrier id, then per line its supply warehouse, item,
    /// quantity, amount and delivery date (clause 2.6.2.2).
    fn order(reads: &[Option<&Value>]) -> PieceResult {
        let Some(oh) = Order::decode(reads[0]) else {
            return missing();
        };
        let mut out = Out::with_capacity(4 + reads.len() * 24);
        out.push_u32(u32::from(oh.carrier_id));
        for r in &reads[1..] {
            let Some(ol) = OrderLine::decode(*r) else {
                return missing();
            };
            out.push_u32(ol.supply_w_id);
            out.push_u32(ol.i_id);
            out.push_u32(u32::from(ol.quantity));
            out.push_i64(ol.amount);
            out.push_i64(ol.delivery_d as i64);
        }
        PieceResult {
            writes: vec![],
            output: out.done(),
            user_abort: false,
        }
    }
}

impl Procedure for OrderStatus {
    fn name(&self) -> &'static str {
        ORDERSTATUS
    }

    /// Wire parameters: warehouse, district, how the customer is selected
    /// ([`super::codec`]).
    fn encode_params(
        &self,
        out: &mut bytes::BytesMut,
    ) -> Result<(), tessera_core::codec::EncodeError> {
        codec::put_ids(out, &[self.w, self.d]);
        codec::put_customer_by(out, self.by);
        Ok(())
    }

    fn pieces(&self) -> &[PieceSpec] {
        &self.pieces
    }

    fn execute(&self, piece: usize, reads: &[Option<&Value>], inputs: &[Value]) -> PieceResult {
        if piece == self.order_piece() {
            Self::order(reads)
        } else if piece == self.customer_piece() {
            let c = match self.by {
                CustomerBy::Id(c) => c,
                CustomerBy::Name(_) => In::new(&inputs[0]).u32(),
            };
            self.customer(c, reads)
        } else {
            lookup(reads)
        }
    }

    fn resolve(&self, piece: usize, inputs: &[Value]) -> Cow<'_, PieceSpec> {
        let spec = &self.pieces[piece];
        if !spec.dynamic {
            return Cow::Borrowed(spec);
        }
        let l = &self.layout;
        let (w, d) = (self.w, self.d);
        let reads = if piece == self.order_piece() {
            let mut i = In::new(&inputs[0]);
            let (_, o, cnt) = (i.u32(), i.u32(), i.u32());
            if o == 0 {
                return Cow::Borrowed(spec);
            }
            let mut r = Vec::with_capacity(cnt as usize + 1);
            r.push(acc(l.order(w, d, o), order_cols()));
            r.extend((1..=cnt.min(15)).map(|n| acc(l.order_line(w, d, o, n), line_cols())));
            r
        } else {
            let c = In::new(&inputs[0]).u32();
            if c == 0 {
                return Cow::Borrowed(spec);
            }
            vec![
                acc(l.customer(w, d, c), customer_cols()),
                acc(l.last_order(w, d, c), Columns::ALL),
            ]
        };
        Cow::Owned(PieceSpec {
            reads,
            ..spec.clone()
        })
    }
}
