//! Payment (clause 2.5) as pieces.
//!
//! | # | piece | shard | reads | writes | kind | inputs |
//! |---|---|---|---|---|---|---|
//! | 0 | warehouse | home district's | WAREHOUSE(W_NAME, W_YTD) | WAREHOUSE(W_YTD); none in the `district` scheme | immediate | — |
//! | 1 | district | home district's | DISTRICT(D_NAME, D_YTD) | DISTRICT(D_YTD) | immediate | — |
//! | (2) | by last name: lookup | customer's district's | NAME_INDEX | — | immediate | — |
//! | 2/3 | customer (dynamic when by name) | customer's district's | CUSTOMER(C_BALANCE, C_YTD_PAYMENT, C_PAYMENT_CNT, C_CREDIT, C_DATA) | same but C_CREDIT | immediate | (lookup) |
//! | last | history (dynamic) | customer's district's | — | HISTORY | deferrable | 0, 1, customer |
//!
//! The customer is remote (another warehouse) in `remote_payment` percent
//! of Payments. By last name, the lookup picks the customer at position
//! ⌈n/2⌉ of those with the name, sorted by `C_FIRST` (clause 2.5.2.2).
//!
//! HISTORY has no primary key in the specification; ours is (customer, its
//! new `C_PAYMENT_CNT`), which the customer piece returns: unique, because
//! the count only grows under the customer's lock or validation. The
//! history row therefore lives on the customer's shard and is keyed by the
//! customer piece's output (hence dynamic). `H_DATA` is `W_NAME` + four
//! spaces + `D_NAME`, from the outputs of pieces 0 and 1.

use super::keys::Layout;
use super::neworder::missing;
use super::schema::{self, col, cols, tail, In, Out};
use super::schema::{Customer, District, History, Warehouse};
use super::{acc, piece, PAYMENT};
use std::borrow::Cow;
use tessera_core::txn::{Columns, PieceKind, PieceResult, PieceSpec, Procedure, Value};

/// How the customer is selected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CustomerBy {
    Id(u32),
    /// A last-name number in [0, 999] (see [`super::populate::last_name`]).
    Name(u32),
}

const P_WAREHOUSE: usize = 0;
const P_DISTRICT: usize = 1;

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
    ) -> Self {
        let l = &layout;
        let home = l.district_shard(w, d);
        let cs = l.district_shard(c_w, c_d);
        let wkey = l.warehouse(w, home);
        let mut pieces = Vec::with_capacity(5);
        pieces.push(piece(
            home,
            PieceKind::Immediate,
            vec![acc(wkey, cols(&[col::W_NAME, col::W_YTD]))],
            if l.partition.by_district() {
                vec![]
            } else {
                vec![acc(wkey, cols(&[col::W_YTD]))]
            },
            vec![],
            false,
        ));
        let dkey = l.district(w, d);
        pieces.push(piece(
            home,
            PieceKind::Immediate,
            vec![acc(dkey, cols(&[col::D_NAME, col::D_YTD]))],
            vec![acc(dkey, cols(&[col::D_YTD]))],
            vec![],
            false,
        ));
        let (ckey, inputs, dynamic) = match by {
            CustomerBy::Id(c) => (l.customer(c_w, c_d, c), vec![], false),
            CustomerBy::Name(n) => {
                pieces.push(lookup_piece(l, c_w, c_d, n));
                (
                    Layout::placeholder(schema::CUSTOMER),
                    vec![pieces.len() as u16 - 1],
                    true,
                )
            }
        };
        pieces.push(piece(
            cs,
            PieceKind::Immediate,
            vec![acc(ckey, customer_read_cols())],
            vec![acc(ckey, customer_write_cols())],
            inputs,
            dynamic,
        ));
        let customer = pieces.len() as u16 - 1;
        pieces.push(piece(
            cs,
            PieceKind::Deferrable,
            vec![],
            vec![acc(Layout::placeholder(schema::HISTORY), Columns::ALL)],
            vec![P_WAREHOUSE as u16, P_DISTRICT as u16, customer],
            true,
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
        self.pieces.len() - 2
    }

    fn history_piece(&self) -> usize {
        self.pieces.len() - 1
    }

    fn warehouse(&self, reads: &[Option<&Value>]) -> PieceResult {
        let Some(mut h) = Warehouse::decode(reads[0]) else {
            return missing();
        };
        let v = reads[0].expect("decoded");
        let name = &v[Warehouse::LEN + tail::W_NAME..][..tail::NAME_LEN];
        let writes = if self.layout.partition.by_district() {
            vec![]
        } else {
            h.ytd += self.amount;
            vec![(self.pieces[P_WAREHOUSE].reads[0].key, h.patch(v))]
        };
        PieceResult {
            writes,
            output: Value::copy_from_slice(name),
            user_abort: false,
        }
    }

    fn district(&self, reads: &[Option<&Value>]) -> PieceResult {
        let Some(mut h) = District::decode(reads[0]) else {
            return missing();
        };
        let v = reads[0].expect("decoded");
        let name = &v[District::LEN + tail::D_NAME..][..tail::NAME_LEN];
        h.ytd += self.amount;
        PieceResult {
            writes: vec![(self.layout.district(self.w, self.d), h.patch(v))],
            output: Value::copy_from_slice(name),
            user_abort: false,
        }
    }

    /// Clause 2.5.2.2: balance, year-to-date payment, payment count; for a
    /// bad-credit customer, the payment's details prepended to `C_DATA`
    /// (kept at most 500 characters).
    fn customer(&self, c: u32, reads: &[Option<&Value>]) -> PieceResult {
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
            writes: vec![(self.layout.customer(self.c_w, self.c_d, c), value)],
            output: Out::with_capacity(8).u32(c).u32(h.payment_cnt).done(),
            user_abort: false,
        }
    }

    fn history(&self, inputs: &[Value]) -> PieceResult {
        let mut cust = In::new(&inputs[2]);
        let (c, cnt) = (cust.u32(), cust.u32());
        if c == 0 {
            return missing();
        }
        let trim = |b: &[u8]| -> Vec<u8> { b.iter().copied().take_while(|&x| x != 0).collect() };
        let mut data = trim(&inputs[0]);
        data.extend_from_slice(b"    ");
        data.extend_from_slice(&trim(&inputs[1]));
        data.truncate(tail::H_DATA_MAX);
        let rec = History {
            c_id: c,
            c_d_id: self.c_d,
            c_w_id: self.c_w,
            d_id: self.d,
            w_id: self.w,
            date: self.date,
            amount: self.amount,
        }
        .with_tail(&data);
        PieceResult {
            writes: vec![(self.layout.history(self.c_w, self.c_d, c, cnt), rec)],
            output: Value::new(),
            user_abort: false,
        }
    }
}

impl Procedure for Payment {
    fn name(&self) -> &'static str {
        PAYMENT
    }

    fn pieces(&self) -> &[PieceSpec] {
        &self.pieces
    }

    fn execute(&self, piece: usize, reads: &[Option<&Value>], inputs: &[Value]) -> PieceResult {
        match piece {
            P_WAREHOUSE => self.warehouse(reads),
            P_DISTRICT => self.district(reads),
            p if p == self.history_piece() => self.history(inputs),
            p if p == self.customer_piece() => {
                let c = match self.by {
                    CustomerBy::Id(c) => c,
                    CustomerBy::Name(_) => In::new(&inputs[0]).u32(),
                };
                self.customer(c, reads)
            }
            _ => lookup(reads),
        }
    }

    fn resolve(&self, piece: usize, inputs: &[Value]) -> Cow<'_, PieceSpec> {
        let spec = &self.pieces[piece];
        if !spec.dynamic {
            return Cow::Borrowed(spec);
        }
        let l = &self.layout;
        let (reads, writes) = if piece == self.history_piece() {
            let mut cust = In::new(&inputs[2]);
            let (c, cnt) = (cust.u32(), cust.u32());
            if c == 0 {
                return Cow::Borrowed(spec); // no customer: nothing to write
            }
            (
                vec![],
                vec![acc(l.history(self.c_w, self.c_d, c, cnt), Columns::ALL)],
            )
        } else {
            let c = In::new(&inputs[0]).u32();
            if c == 0 {
                return Cow::Borrowed(spec); // reads a placeholder: rolls back
            }
            let key = l.customer(self.c_w, self.c_d, c);
            (
                vec![acc(key, customer_read_cols())],
                vec![acc(key, customer_write_cols())],
            )
        };
        Cow::Owned(PieceSpec {
            reads,
            writes,
            ..spec.clone()
        })
    }
}
