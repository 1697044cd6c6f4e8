//! Column versions: which write a read of some columns of a row saw, finer
//! than the row's version (Rococo §4.1, read-only rounds).
//!
//! A read-only transaction's rounds agree when every read saw the same
//! writes. Versions are per row, so a write of columns a read does not
//! read (TPC-C Payment's `D_YTD`, beside StockLevel's `D_NEXT_O_ID`) makes
//! rounds differ for nothing. §4.1's argument holds per column as well:
//! two rounds that saw the same last writer of the columns each piece
//! reads saw the same writes of what they read.
//!
//! Two spare words of the record's metadata keep what is needed: `wts`,
//! the columns the last write declared (0: unknown, i.e. all), and `rts`,
//! a writer that changes whenever a write of columns outside those is
//! installed — the last earlier writer of other columns when that is
//! known, else the new writer itself. [`column_version`] answers the last
//! write's version when it touched the columns read, else `rts`. Either
//! answer is a write installed after any write of the columns read: a read
//! after such a write gets another version than a read before it
//! (sound), and may get another one for nothing when the guess was the
//! writer itself (only slower). The row version stays what the history
//! records: the isolation checker reasons per row.

use tessera_core::ids::Version;
use tessera_core::storage::{Meta, Record};
use tessera_core::txn::Columns;

fn written(meta: &Meta) -> u64 {
    if meta.wts == 0 {
        u64::MAX
    } else {
        meta.wts
    }
}

/// The metadata of a record `before` (`None`: absent) once `version`
/// wrote `columns` of it (`after`: the installed record's metadata).
pub(crate) fn after_write(before: Option<Meta>, columns: Columns, after: &mut Meta) {
    let cols = if columns.0 == 0 { u64::MAX } else { columns.0 };
    after.rts = match before {
        // Absent before: no earlier writer to name.
        None => after.version.0,
        Some(b) => {
            let old = written(&b);
            if old == cols {
                b.rts
            } else if old & !cols != 0 {
                b.version.0
            } else {
                after.version.0
            }
        }
    };
    after.wts = cols;
}

/// The version a read of `columns` of `record` (`None`: absent) saw, as
/// fine as the metadata tells (see the module docs).
pub(crate) fn column_version(record: Option<&Record>, columns: Columns) -> Version {
    match record {
        None => Version::INITIAL,
        Some(r) if written(&r.meta) & columns.0 != 0 => r.meta.version,
        Some(r) => Version(r.meta.rts),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::ids::Key;
    use tessera_core::storage::Store;
    use tessera_core::txn::Value;

    const A: Columns = Columns(1);
    const B: Columns = Columns(2);

    fn write(s: &mut Store, k: Key, v: u64, c: Columns) {
        let before = s.get(k).map(|r| r.meta);
        s.install(k, Value::from_static(b"x"), Version(v));
        after_write(before, c, &mut s.get_mut(k).unwrap().meta);
    }

    fn seen(s: &Store, k: Key, c: Columns) -> Version {
        column_version(s.get(k), c)
    }

    #[test]
    fn a_read_sees_a_new_version_exactly_when_its_columns_were_written() {
        let k = Key::new(0, 1);
        let mut s = Store::new();
        s.load(k, Value::from_static(b"0"));
        assert_eq!(seen(&s, k, A), Version::INITIAL);
        write(&mut s, k, 1, B);
        assert_eq!(seen(&s, k, A), Version::INITIAL, "B's write is not A's");
        assert_eq!(seen(&s, k, B), Version(1));
        write(&mut s, k, 2, B);
        assert_eq!(seen(&s, k, A), Version::INITIAL);
        write(&mut s, k, 3, A);
        assert_eq!(seen(&s, k, A), Version(3));
        assert_eq!(seen(&s, k, B), Version(2));
        write(&mut s, k, 4, B);
        write(&mut s, k, 5, B);
        assert_eq!(seen(&s, k, A), Version(3), "A unchanged under writes of B");
        // A write of A followed by one of both: A's reader must move.
        write(&mut s, k, 6, A);
        write(&mut s, k, 7, Columns::ALL);
        assert_eq!(seen(&s, k, A), Version(7));
        write(&mut s, k, 8, B);
        assert_eq!(seen(&s, k, A), Version(7));
    }

    #[test]
    fn a_wider_write_then_a_narrower_one_makes_the_others_move() {
        // A then A|B then A: a reader of B saw A|B's write, then must see
        // a version no earlier read saw (here the narrower writer's).
        let k = Key::new(0, 1);
        let mut s = Store::new();
        s.load(k, Value::from_static(b"0"));
        write(&mut s, k, 1, A);
        let b0 = seen(&s, k, B);
        write(&mut s, k, 2, Columns(3));
        let b1 = seen(&s, k, B);
        assert_ne!(b0, b1);
        write(&mut s, k, 3, A);
        assert_ne!(seen(&s, k, B), b0);
        // An insert names its own writer for every column.
        let n = Key::new(0, 2);
        write(&mut s, n, 9, A);
        assert_eq!(seen(&s, n, B), Version(9));
        assert_eq!(column_version(None, B), Version::INITIAL);
    }
}
