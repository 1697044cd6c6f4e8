//! The five procedures' wire parameters, for runtimes that send a
//! transaction as its name and parameters (`tcp`). Each procedure writes
//! its drawn inputs (ids, amounts, dates) in its `encode_params`; [`decode`]
//! checks every id against the receiver's layout and rebuilds the
//! procedure with its constructor, so bytes from the network can neither
//! name a row outside the database nor make a piece panic.

use super::delivery::Delivery;
use super::keys::Layout;
use super::neworder::{Line, NewOrder};
use super::orderstatus::OrderStatus;
use super::payment::{CustomerBy, Payment};
use super::populate::name_range;
use super::stocklevel::StockLevel;
use super::{DELIVERY, NEWORDER, ORDERSTATUS, PAYMENT, STOCKLEVEL, STOCKLEVEL_ORDERED};
use bytes::{BufMut, BytesMut};
use std::sync::Arc;
use tessera_core::codec::{get_len, get_u64, get_u8, get_varint, put_varint, DecodeError};
use tessera_core::txn::Txn;

/// Order lines of a NewOrder (clause 2.4.1.3: 5 to 15).
const MAX_LINES: usize = 15;

/// Writes ids as varints.
pub(super) fn put_ids(out: &mut BytesMut, ids: &[u32]) {
    for &id in ids {
        put_varint(out, u64::from(id));
    }
}

pub(super) fn put_customer_by(out: &mut BytesMut, by: CustomerBy) {
    match by {
        CustomerBy::Id(c) => {
            out.put_u8(0);
            put_varint(out, u64::from(c));
        }
        CustomerBy::Name(n) => {
            out.put_u8(1);
            put_varint(out, u64::from(n));
        }
    }
}

/// Reads ids and checks them against the layout.
struct Reader<'a, 'b> {
    buf: &'a mut &'b [u8],
    l: &'a Layout,
}

impl Reader<'_, '_> {
    /// A 1-based id in `[1, max]`.
    fn id(&mut self, max: u32, what: &'static str) -> Result<u32, DecodeError> {
        let v = get_varint(self.buf, what)?;
        if v == 0 || v > u64::from(max) {
            return Err(DecodeError::invalid(what, format!("{v} not in 1..={max}")));
        }
        Ok(v as u32)
    }

    fn warehouse(&mut self) -> Result<u32, DecodeError> {
        self.id(self.l.warehouses, "tpcc warehouse")
    }

    fn district(&mut self) -> Result<u32, DecodeError> {
        self.id(self.l.districts, "tpcc district")
    }

    fn customer(&mut self) -> Result<u32, DecodeError> {
        self.id(self.l.customers, "tpcc customer")
    }

    fn customer_by(&mut self) -> Result<CustomerBy, DecodeError> {
        match get_u8(self.buf, "tpcc customer selector")? {
            0 => Ok(CustomerBy::Id(self.customer()?)),
            1 => {
                let n = get_varint(self.buf, "tpcc last name")?;
                let names = name_range(self.l.customers);
                if n >= u64::from(names) {
                    return Err(DecodeError::invalid(
                        "tpcc last name",
                        format!("{n} >= {names}"),
                    ));
                }
                Ok(CustomerBy::Name(n as u32))
            }
            t => Err(DecodeError::UnknownTag {
                what: "tpcc customer selector",
                tag: u64::from(t),
            }),
        }
    }

    fn new_order(&mut self) -> Result<NewOrder, DecodeError> {
        let (w, d, c) = (self.warehouse()?, self.district()?, self.customer()?);
        let n = get_len(self.buf, 3, "tpcc order lines")?;
        if n == 0 || n > MAX_LINES {
            return Err(DecodeError::invalid(
                "tpcc order lines",
                format!("{n} not in 1..={MAX_LINES}"),
            ));
        }
        let mut lines = Vec::with_capacity(n);
        for _ in 0..n {
            // items + 1 is the unused item of a rolled-back NewOrder
            // (clause 2.4.1.4).
            let i_id = self.id(self.l.items + 1, "tpcc item")?;
            let supply_w = self.warehouse()?;
            let quantity = get_u8(self.buf, "tpcc quantity")?;
            if !(1..=10).contains(&quantity) {
                return Err(DecodeError::invalid(
                    "tpcc quantity",
                    format!("{quantity} not in 1..=10"),
                ));
            }
            lines.push(Line {
                i_id,
                supply_w,
                quantity,
            });
        }
        let date = get_u64(self.buf, "tpcc date")?;
        let n = NewOrder::new(*self.l, w, d, c, lines, date);
        match get_u8(self.buf, "tpcc immediate stock")? {
            0 => Ok(n),
            1 => Ok(n.with_immediate_stock()),
            t => Err(DecodeError::UnknownTag {
                what: "tpcc immediate stock",
                tag: u64::from(t),
            }),
        }
    }

    fn payment(&mut self) -> Result<Payment, DecodeError> {
        let (w, d) = (self.warehouse()?, self.district()?);
        let (c_w, c_d) = (self.warehouse()?, self.district()?);
        let by = self.customer_by()?;
        let amount = get_varint(self.buf, "tpcc amount")?;
        if amount == 0 || amount > 500_000 {
            return Err(DecodeError::invalid(
                "tpcc amount",
                format!("{amount} cents not in 1..=500000"),
            ));
        }
        let date = get_u64(self.buf, "tpcc date")?;
        let hid = get_varint(self.buf, "tpcc history id")?;
        let bits = self.l.history_id_bits().min(63);
        if hid == 0 || hid >= 1 << bits {
            return Err(DecodeError::invalid(
                "tpcc history id",
                format!("{hid} not in 1..2^{bits}"),
            ));
        }
        Ok(Payment::new(
            *self.l,
            w,
            d,
            c_w,
            c_d,
            by,
            amount as i64,
            date,
            hid,
        ))
    }

    fn order_status(&mut self) -> Result<OrderStatus, DecodeError> {
        let (w, d) = (self.warehouse()?, self.district()?);
        Ok(OrderStatus::new(*self.l, w, d, self.customer_by()?))
    }

    fn delivery(&mut self) -> Result<Delivery, DecodeError> {
        let (w, d) = (self.warehouse()?, self.district()?);
        let carrier = get_u8(self.buf, "tpcc carrier")?;
        if !(1..=10).contains(&carrier) {
            return Err(DecodeError::invalid(
                "tpcc carrier",
                format!("{carrier} not in 1..=10"),
            ));
        }
        let date = get_u64(self.buf, "tpcc date")?;
        Ok(Delivery::new(*self.l, w, d, carrier, date))
    }

    fn stock_level(&mut self) -> Result<StockLevel, DecodeError> {
        let (w, d) = (self.warehouse()?, self.district()?);
        let threshold = get_varint(self.buf, "tpcc threshold")?;
        if !(10..=20).contains(&threshold) {
            return Err(DecodeError::invalid(
                "tpcc threshold",
                format!("{threshold} not in 10..=20"),
            ));
        }
        let orderable = match get_u8(self.buf, "tpcc stock-level orderable")? {
            0 => false,
            1 => true,
            other => {
                return Err(DecodeError::invalid(
                    "tpcc stock-level orderable",
                    format!("{other} not 0 or 1"),
                ))
            }
        };
        Ok(StockLevel::new(*self.l, w, d, threshold as i32).orderable(orderable))
    }
}

/// Rebuild procedure `name` from its parameters, for `layout`.
pub(super) fn decode(layout: &Layout, name: &str, mut params: &[u8]) -> Result<Txn, DecodeError> {
    let mut r = Reader {
        buf: &mut params,
        l: layout,
    };
    let txn: Txn = match name {
        NEWORDER => Arc::new(r.new_order()?),
        PAYMENT => Arc::new(r.payment()?),
        ORDERSTATUS => Arc::new(r.order_status()?),
        DELIVERY => Arc::new(r.delivery()?),
        STOCKLEVEL => Arc::new(r.stock_level()?),
        STOCKLEVEL_ORDERED => Arc::new(r.stock_level()?.into_ordered()),
        other => {
            return Err(DecodeError::invalid(
                "procedure",
                format!("tpcc has no procedure '{other}'"),
            ))
        }
    };
    if !params.is_empty() {
        return Err(DecodeError::invalid(
            "tpcc parameters",
            format!("{} bytes after the end", params.len()),
        ));
    }
    Ok(txn)
}
