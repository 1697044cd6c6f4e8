//! Payment (clause 2.5) as pieces.
//!
//! | # | piece | shard | reads | writes | kind | inputs |
//! |---|---|---|---|---|---|---|
//! | 0 | home: warehouse + district | home district's | WAREHOUSE(W_NAME, W_YTD), DISTRICT(D_NAME, D_YTD) | DISTRICT(D_YTD), WAREHOUSE(W_YTD) but not in the `district` scheme | immediate | — |
//! | (1) | by last name: lookup | customer's district's | NAME_INDEX | — | immediate | — |
//! | last | customer + history (dynamic when by name) | customer's district's | CUSTOMER(C_BALANCE, C_YTD_PAYMENT, C_PAYMENT_CNT, C_CREDIT, C_DATA) | same but C_CREDIT; HISTORY | deferrable | 0, (lookup) |
//!
//! The customer is remote (another warehouse) in `remote_payment` percent
//! of Payments. By last name, the lookup picks the customer at position
//! ⌈n/2⌉ of those with the name, sorted by `C_FIRST` (clause 2.5.2.2).
//!
//! **Kinds, as Rococo's TPC-C (§3.1, §4.1, Fig. 13).** The home piece is
//! immediate: its output (`W_NAME`, `D_NAME`) feeds `H_DATA`. It is the
//! only piece of Payment that conflicts with other immediate pieces (other
//! Payments' home pieces on `D_YTD`/`W_YTD`), so no SC-cycle of I–I
//! conflicts passes through a Payment. The warehouse and district updates
//! are one piece: both rows live on the home district's shard in every
//! scheme (the warehouse row is a read-only replica in the `district`
//! scheme), and as two immediate pieces they would close an I–I SC-cycle
//! between two Payments (the checker would merge them, §4.2). The lookup
//! reads a static index. The customer update is deferrable: Delivery
//! updates `C_BALANCE` in a deferrable piece, and a C-edge between an
//! immediate and a deferrable piece would make both immediate (§3.1).
//! Since its output may feed no piece, the history row is written by the
//! same piece (HISTORY lives on the customer's shard).
//!
//! HISTORY has no primary key in the specification; ours is (customer, a
//! payment id the client draws at random — a UUID, unique with
//! overwhelming probability: the row has at least 24 bits below the
//! customer, usually 40 or more), known when the piece is issued, as
//! Rococo's dependency tracking needs (§3.2). `H_DATA` is `W_NAME` + four
//! spaces + `D_NAME`, from the home piece's output.

use super::keys::Layout;
use super::neworder::missing;
use super::schema::{self, col, cols, tail, In, Out};
use super::schema::{Customer, District, History, Warehouse};
use super::{acc, codec, piece, PAYMENT};
use std::borrow::Cow;
use tessera_core::txn::{Columns, PieceKind, PieceResult, PieceSpec, Procedure, Value};

/// How the customer is selected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CustomerBy {
    Id(u32),
    /// A last-name number in [0, 999] (see [`super::populate::last_name`]).
    Name(u32),
}

const P_HOME: usize = 0;

/// One Payment transaction.
#[derive(Clone, Debug)]
pub struct Payment {
    layout: Layout,
    w: u32,
    d: u32,
    c_w: u32,
    c_d: u32,
    by: CustomerBy,
    /// In cents.
    amount: i64,
    date: u64,
    /// The history row's id below the customer (see the module docs).
    hid: u64,
    pieces: Vec<PieceSpec>,
}

/// The customer piece's columns.
fn customer_read_cols() -> Columns {
    cols(&[
        col::C_BALANCE,
        col::C_YTD_PAYMENT,
        col::C_PAYMENT_CNT,
        col::C_CREDIT,
        col::C_DATA,
    ])
}

fn customer_write_cols() -> Columns {
    cols(&[
        col::C_BALANCE,
        col::C_YTD_PAYMENT,
        col::C_PAYMENT_CNT,
        col::C_DATA,
    ])
}

/// The lookup piece: read a name-index record, output the c_id at position
/// ⌈n/2⌉ (shared with Order-Status).
pub(crate) fn lookup(reads: &[Option<&Value>]) -> PieceResult {
    let ids: Vec<u32> = match reads[0] {
        Some(v) => schema::decode_ids(v).collect(),
        None => Vec::new(),
    };
    if ids.is_empty() {
        return missing();
    }
    let c = ids[ids.len().div_ceil(2) - 1];
    PieceResult {
        writes: vec![],
        output: Out::with_capacity(4).u32(c).done(),
        user_abort: false,
    }
}

/// The lookup piece's spec.
pub(crate) fn lookup_piece(l: &Layout, c_w: u32, c_d: u32, name: u32) -> PieceSpec {
    piece(
        l.district_shard(c_w, c_d),
        PieceKind::Immediate,
        vec![acc(l.name_index(c_w, c_d, name), Columns::ALL)],
        vec![],
        vec![],
        false,
    )
}

impl Payment {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        layout: Layout,
        w: u32,
        d: u32,
        c_w: u32,
        c_d: u32,
        by: CustomerBy,
        amount: i64,
        date: u64,
        hid: u64,
    ) -> Self {
        let l = &layout;
        let home = l.district_shard(w, d);
        let cs = l.district_shard(c_w, c_d);
        let wkey = l.warehouse(w, home);
        let dkey = l.district(w, d);
        let mut pieces = Vec::with_capacity(3);
        let mut home_writes = Vec::with_capacity(2);
        if !l.partition.by_district() {
            home_writes.push(acc(wkey, cols(&[col::W_YTD])));
        }
        home_writes.push(acc(dkey, cols(&[col::D_YTD])));
        pieces.push(piece(
            home,
            PieceKind::Immediate,
            vec![
                acc(wkey, cols(&[col::W_NAME, col::W_YTD])),
                acc(dkey, cols(&[col::D_NAME, col::D_YTD])),
            ],
            home_writes,
            vec![],
            false,
        ));
        let (c, inputs) = match by {
            CustomerBy::Id(c) => (Some(c), vec![P_HOME as u16]),
            CustomerBy::Name(n) => {
                pieces.push(lookup_piece(l, c_w, c_d, n));
                (None, vec![P_HOME as u16, pieces.len() as u16 - 1])
            }
        };
        let (reads, writes) = match c {
            Some(c) => customer_accesses(l, c_w, c_d, c, hid),
            None => (
                vec![acc(
                    Layout::placeholder(schema::CUSTOMER),
                    customer_read_cols(),
                )],
                vec![
                    acc(Layout::placeholder(schema::CUSTOMER), customer_write_cols()),
                    acc(Layout::placeholder(schema::HISTORY), Columns::ALL),
                ],
            ),
        };
        pieces.push(piece(
            cs,
            PieceKind::Deferrable,
            reads,
            writes,
            inputs,
            c.is_none(),
        ));
        Payment {
            layout,
            w,
            d,
            c_w,
            c_d,
            by,
            amount,
            date,
            hid,
            pieces,
        }
    }

    pub fn by(&self) -> CustomerBy {
        self.by
    }

    /// The customer's (warehouse, district).
    pub fn customer_district(&self) -> (u32, u32) {
        (self.c_w, self.c_d)
    }

    fn customer_piece(&self) -> usize {
        self.pieces.len() - 1
    }

    /// The home piece: `D_YTD` (and `W_YTD` outside the `district` scheme)
    /// grow by the amount; outputs `W_NAME` and `D_NAME`.
    fn home(&self, reads: &[Option<&Value>]) -> PieceResult {
        let (Some(mut wh), Some(mut dh)) =
            (Warehouse::decode(reads[0]), District::decode(reads[1]))
        else {
            return missing();
        };
        let (wv, dv) = (reads[0].expect("decoded"), reads[1].expect("decoded"));
        let mut out = Vec::with_capacity(2 * tail::NAME_LEN);
        out.extend_from_slice(&wv[Warehouse::LEN + tail::W_NAME..][..tail::NAME_LEN]);
        out.extend_from_slice(&dv[District::LEN + tail::D_NAME..][..tail::NAME_LEN]);
        dh.ytd += self.amount;
        let mut writes = vec![(self.pieces[P_HOME].reads[1].key, dh.patch(dv))];
        if !self.layout.partition.by_district() {
            wh.ytd += self.amount;
            writes.push((self.pieces[P_HOME].reads[0].key, wh.patch(wv)));
        }
        PieceResult {
            writes,
            output: Value::from(out),
            user_abort: false,
        }
    }

    /// Clause 2.5.2.2: balance, year-to-date payment, payment count; for a
    /// bad-credit customer, the payment's details prepended to `C_DATA`
    /// (kept at most 500 characters).
    fn customer(&self, c: u32, reads: &[Option<&Value>], names: &[u8]) -> PieceResult {
        let Some(mut h) = Customer::decode(reads[0]).filter(|_| c > 0) else {
            return missing();
        };
        let v = reads[0].expect("decoded");
        h.balance -= self.amount;
        h.ytd_payment += self.amount;
        h.payment_cnt += 1;
        let value = if h.bad_credit != 0 {
            let at = Customer::LEN + tail::C_DATA;
            let entry = format!(
                "{c} {} {} {} {} {}.{:02}|",
                self.c_d,
                self.c_w,
                self.d,
                self.w,
                self.amount / 100,
                self.amount % 100
            );
            let old = v.get(at..).unwrap_or_default();
            let keep = old.len().min(tail::C_DATA_MAX.saturating_sub(entry.len()));
            let mut nv = Vec::with_capacity(at + entry.len() + keep);
            nv.extend_from_slice(&v[..at]);
            nv.extend_from_slice(entry.as_bytes());
            nv.extend_from_slice(&old[..keep]);
            h.write(&mut nv);
            Value::from(nv)
        } else {
            h.patch(v)
        };
        PieceResult {
            writes: vec![
                (self.layout.customer(self.c_w, self.c_d, c), value),
                (
                    self.layout.history(self.c_w, self.c_d, c, self.hid),
                    self.history_row(c, names),
                ),
            ],
            output: Value::new(),
            user_abort: false,
        }
    }

    /// The history row; `names` is the home piece's output.
    fn history_row(&self, c: u32, names: &[u8]) -> Value {
        let trim = |b: &[u8]| -> Vec<u8> { b.iter().copied().take_while(|&x| x != 0).collect() };
        let half = names.len().min(tail::NAME_LEN);
        let mut data = trim(&names[..half]);
        data.extend_from_slice(b"    ");
        data.extend_from_slice(&trim(&names[half..]));
        data.truncate(tail::H_DATA_MAX);
        History {
            c_id: c,
            c_d_id: self.c_d,
            c_w_id: self.c_w,
            d_id: self.d,
            w_id: self.w,
            date: self.date,
            amount: self.amount,
        }
        .with_tail(&data)
    }
}

/// The customer piece's accesses for customer `c`: its row and its new
/// history row.
fn customer_accesses(
    l: &Layout,
    c_w: u32,
    c_d: u32,
    c: u32,
    hid: u64,
) -> (
    Vec<tessera_core::txn::Access>,
    Vec<tessera_core::txn::Access>,
) {
    let key = l.customer(c_w, c_d, c);
    (
        vec![acc(key, customer_read_cols())],
        vec![
            acc(key, customer_write_cols()),
            acc(l.history(c_w, c_d, c, hid), Columns::ALL),
        ],
    )
}

impl Procedure for Payment {
    fn name(&self) -> &'static str {
        PAYMENT
    }

    /// Wire parameters: warehouse, district, the customer's warehouse and
    /// district, how the customer is selected, the amount, the date, the
    /// history row's id ([`super::codec`]).
    fn encode_params(
        &self,
        out: &mut bytes::BytesMut,
    ) -> Result<(), tessera_core::codec::EncodeError> {
        use bytes::BufMut;
        codec::put_ids(out, &[self.w, self.d, self.c_w, self.c_d]);
        codec::put_customer_by(out, self.by);
        tessera_core::codec::put_varint(out, self.amount as u64);
        out.put_u64_le(self.date);
        tessera_core::codec::put_varint(out, self.hid);
        Ok(())
    }

    fn pieces(&self) -> &[PieceSpec] {
        &self.pieces
    }

    fn execute(&self, piece: usize, reads: &[Option<&Value>], inputs: &[Value]) -> PieceResult {
        match piece {
            P_HOME => self.home(reads),
            p if p == self.customer_piece() => {
                let c = match self.by {
                    CustomerBy::Id(c) => c,
                    CustomerBy::Name(_) => In::new(&inputs[1]).u32(),
                };
                self.customer(c, reads, &inputs[0])
            }
            _ => lookup(reads),
        }
    }

    fn resolve(&self, piece: usize, inputs: &[Value]) -> Cow<'_, PieceSpec> {
        let spec = &self.pieces[piece];
        if !spec.dynamic {
            return Cow::Borrowed(spec);
        }
        let c = In::new(&inputs[1]).u32();
        if c == 0 {
            return Cow::Borrowed(spec); // reads a placeholder: rolls back
        }
        let (reads, writes) = customer_accesses(&self.layout, self.c_w, self.c_d, c, self.hid);
        Cow::Owned(PieceSpec {
            reads,
            writes,
            ..spec.clone()
        })
    }
}
