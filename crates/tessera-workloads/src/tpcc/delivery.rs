//! Delivery (clause 2.7) as pieces: one district per transaction.
//!
//! | # | piece | shard | reads | writes | kind | inputs |
//! |---|---|---|---|---|---|---|
//! | 0 | queue | district's | DELIVERY_CURSOR | DELIVERY_CURSOR | immediate | — |
//! | 1 | deliver (dynamic: the order and customer at the queue's head) | district's | NEW-ORDER, ORDER(O_C_ID, O_CARRIER_ID, O_OL_CNT), ORDER-LINE × 15 (OL_AMOUNT, OL_DELIVERY_D), CUSTOMER(C_BALANCE, C_DELIVERY_CNT) | NEW-ORDER (deleted), ORDER(O_CARRIER_ID), ORDER-LINE(OL_DELIVERY_D), CUSTOMER(C_BALANCE, C_DELIVERY_CNT) | deferrable | 0 |
//!
//! The district's delivery queue ([`schema::DELIVERY_CURSOR`]) holds the
//! oldest undelivered order id and the customer of each undelivered order,
//! appended by NewOrder's home piece. The queue piece pops the head, or
//! outputs nothing when the district has no undelivered order (it is then
//! skipped, clause 2.7.4.2). The deliver piece delivers that order and
//! credits its customer. It declares all 15 possible order lines (the line
//! count is in the order it reads); it writes those that exist.
//!
//! **Kinds, as Rococo's TPC-C (§3.1, Fig. 13).** The queue piece is
//! immediate: its output keys the deliver piece. Everything else is one
//! deferrable piece: it conflicts with NewOrder's deferrable insert
//! (ORDER, NEW-ORDER, ORDER-LINE) and Payment's deferrable customer piece
//! (`C_BALANCE`), and an immediate piece there would spread immediacy to
//! them (§3.1). Because the queue names the customer too, the deliver piece
//! knows all its keys when issued, as Rococo's dependency tracking needs
//! (§3.2), with no immediate read of the ORDER row NewOrder inserts.
//!
//! **One district per transaction** (a deviation from the single
//! ten-district transaction of clause 2.7.4, whose deferred execution the
//! specification lets run district by district): a Delivery of ten
//! districts has ten immediate queue pieces, and two such instances form an
//! SC-cycle of I–I conflicts (queue 1 of one instance, queue 1 of the
//! other, queue 2 of the other, queue 2 of the first) that only merging
//! them (§4.2) would allow. The mix's Delivery share stays at 4%, so a
//! Delivery does a tenth of the specification's work.

use super::keys::Layout;
use super::schema::{self, col, cols, Cursor, In, Order, OrderLine, Out};
use super::{acc, codec, piece, DELIVERY};
use std::borrow::Cow;
use tessera_core::txn::{Columns, PieceKind, PieceResult, PieceSpec, Procedure, Value};

/// One Delivery transaction (one district).
#[derive(Clone, Debug)]
pub struct Delivery {
    layout: Layout,
    w: u32,
    d: u32,
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
    pub fn new(layout: Layout, w: u32, d: u32, carrier: u8, date: u64) -> Self {
        let l = &layout;
        let shard = l.district_shard(w, d);
        let cursor = acc(l.cursor(w, d), Columns::ALL);
        let pieces = vec![
            piece(
                shard,
                PieceKind::Immediate,
                vec![cursor],
                vec![cursor],
                vec![],
                false,
            ),
            piece(
                shard,
                PieceKind::Deferrable,
                vec![
                    acc(Layout::placeholder(schema::NEW_ORDER), Columns::ALL),
                    acc(Layout::placeholder(schema::ORDER), order_cols()),
                    acc(Layout::placeholder(schema::ORDER_LINE), line_read_cols()),
                    acc(Layout::placeholder(schema::CUSTOMER), customer_cols()),
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
                    acc(Layout::placeholder(schema::CUSTOMER), customer_cols()),
                ],
                vec![0],
                true,
            ),
        ];
        Delivery {
            layout,
            w,
            d,
            carrier,
            date,
            pieces,
        }
    }

    /// The district delivered.
    pub fn district(&self) -> u32 {
        self.d
    }

    /// Pop the queue's head: output (o_id, c_id), or nothing when empty.
    fn queue(&self, reads: &[Option<&Value>]) -> PieceResult {
        let Some(cur) = Cursor::decode(reads[0]) else {
            return PieceResult::default();
        };
        let v = reads[0].expect("decoded");
        let mut ids = schema::decode_ids(&v[Cursor::LEN..]);
        let Some(c) = ids.next() else {
            return PieceResult::default();
        };
        let rest: Vec<u32> = ids.collect();
        PieceResult {
            writes: vec![(
                self.layout.cursor(self.w, self.d),
                Cursor { next: cur.next + 1 }.with_tail(&schema::encode_ids(&rest)),
            )],
            output: Out::with_capacity(8).u32(cur.next).u32(c).done(),
            user_abort: false,
        }
    }

    /// Deliver order `o` of customer `c` (clause 2.7.4.2).
    fn deliver(&self, o: u32, c: u32, reads: &[Option<&Value>]) -> PieceResult {
        let nothing = PieceResult::default();
        let n = reads.len();
        if o == 0 || n < 3 || !schema::present(reads[0]) {
            return nothing;
        }
        let (Some(mut oh), Some(mut ch)) = (
            Order::decode(reads[1]),
            schema::Customer::decode(reads[n - 1]),
        ) else {
            return nothing;
        };
        let (l, w, d) = (&self.layout, self.w, self.d);
        let mut writes = Vec::with_capacity(usize::from(oh.ol_cnt) + 3);
        writes.push((l.new_order(w, d, o), Value::new()));
        oh.carrier_id = self.carrier;
        writes.push((l.order(w, d, o), oh.patch(reads[1].expect("decoded"))));
        let mut sum = 0i64;
        for (k, r) in (1..=MAX_LINES).zip(&reads[2..n - 1]) {
            if let Some(mut ol) = OrderLine::decode(*r) {
                sum += ol.amount;
                ol.delivery_d = self.date;
                writes.push((l.order_line(w, d, o, k), ol.patch(r.expect("decoded"))));
            }
        }
        ch.balance += sum;
        ch.delivery_cnt += 1;
        writes.push((
            l.customer(w, d, c),
            ch.patch(reads[n - 1].expect("decoded")),
        ));
        PieceResult {
            writes,
            output: Out::with_capacity(12).u32(o).i64(sum).done(),
            user_abort: false,
        }
    }
}

impl Procedure for Delivery {
    fn name(&self) -> &'static str {
        DELIVERY
    }

    /// Wire parameters: warehouse, district, carrier, date
    /// ([`super::codec`]).
    fn encode_params(
        &self,
        out: &mut bytes::BytesMut,
    ) -> Result<(), tessera_core::codec::EncodeError> {
        use bytes::BufMut;
        codec::put_ids(out, &[self.w, self.d]);
        out.put_u8(self.carrier);
        out.put_u64_le(self.date);
        Ok(())
    }

    fn pieces(&self) -> &[PieceSpec] {
        &self.pieces
    }

    fn execute(&self, piece: usize, reads: &[Option<&Value>], inputs: &[Value]) -> PieceResult {
        match piece {
            0 => self.queue(reads),
            _ => {
                let mut i = In::new(&inputs[0]);
                let (o, c) = (i.u32(), i.u32());
                self.deliver(o, c, reads)
            }
        }
    }

    fn resolve(&self, piece: usize, inputs: &[Value]) -> Cow<'_, PieceSpec> {
        let spec = &self.pieces[piece];
        if !spec.dynamic {
            return Cow::Borrowed(spec);
        }
        let (l, w, d) = (&self.layout, self.w, self.d);
        let mut i = In::new(&inputs[0]);
        let (o, c) = (i.u32(), i.u32());
        let (reads, writes) = if o == 0 {
            (vec![], vec![])
        } else {
            let mut reads = Vec::with_capacity(3 + MAX_LINES as usize);
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
            let ck = acc(l.customer(w, d, c), customer_cols());
            reads.push(ck);
            writes.push(ck);
            (reads, writes)
        };
        Cow::Owned(PieceSpec {
            reads,
            writes,
            ..spec.clone()
        })
    }
}
