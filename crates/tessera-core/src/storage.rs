//! Per-shard in-memory tables (DESIGN §3).
//!
//! A [`Store`] holds one hash-indexed [`Table`] per table id. A [`Record`] is
//! a value plus protocol metadata: the version (the writer's transaction id,
//! which doubles as a TID for OCC), a lock word, and two spare words that
//! timestamp-ordering protocols use (COCO's LT-OCC keeps `wts`/`rts` there;
//! OOCC keeps its lease there).

use crate::ids::{Key, TableId, Version};
use crate::txn::{Columns, Value};
use crate::FastMap;

/// Protocol metadata kept beside a record's value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Meta {
    pub version: Version,
    /// The protocol's lock word (owner, mode, count: the protocol decides).
    pub lock: u64,
    pub wts: u64,
    pub rts: u64,
}

#[derive(Clone, Debug)]
pub struct Record {
    pub value: Value,
    pub meta: Meta,
}

/// One table: a hash index from row number to record.
#[derive(Default, Debug, Clone)]
pub struct Table {
    rows: FastMap<u64, Record>,
}

impl Table {
    pub fn len(&self) -> usize {
        self.rows.len()
    }
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// Table ids below this are indexed directly; the workloads' tables all
/// are. Any other id (a key decoded from a peer's bytes may carry any
/// `u32`) goes to a map, so no table id makes the store allocate more than
/// its rows: a dense vector up to id 2^32 - 1 would be 137 GB.
const DENSE_TABLES: usize = 64;

/// The last writer of each column of a row written with declared columns
/// ([`Store::install_columns`]): `groups` are disjoint column sets with
/// their last writer, `base` the writer of every other column (the row's
/// version before its first write of declared columns).
#[derive(Debug, Clone)]
struct ColumnVersions {
    base: Version,
    groups: Vec<(u64, Version)>,
}

/// One row's per-column last writers ([`Store::column_groups`]): its key,
/// its base version, and each column group (a bit mask) with its writer.
pub type ColumnGroups<'a> = (Key, Version, &'a [(u64, Version)]);

/// The data of one shard replica.
#[derive(Default, Debug, Clone)]
pub struct Store {
    tables: Vec<Table>,
    /// Tables with ids of [`DENSE_TABLES`] or more.
    sparse: FastMap<u32, Table>,
    /// Per-column last writers, only for rows whose last writes declared
    /// columns: empty, and free, for every protocol that orders conflicts
    /// per row.
    columns: FastMap<Key, ColumnVersions>,
}

impl Store {
    pub fn new() -> Self {
        Store::default()
    }

    fn table_mut(&mut self, t: TableId) -> &mut Table {
        let i = t.0 as usize;
        if i >= DENSE_TABLES {
            return self.sparse.entry(t.0).or_default();
        }
        if self.tables.len() <= i {
            self.tables.resize_with(i + 1, Table::default);
        }
        &mut self.tables[i]
    }

    #[inline]
    fn table(&self, t: TableId) -> Option<&Table> {
        match t.0 as usize {
            i if i < DENSE_TABLES => self.tables.get(i),
            _ => self.sparse.get(&t.0),
        }
    }

    #[inline]
    fn existing_table_mut(&mut self, t: TableId) -> Option<&mut Table> {
        match t.0 as usize {
            i if i < DENSE_TABLES => self.tables.get_mut(i),
            _ => self.sparse.get_mut(&t.0),
        }
    }

    /// Every table with its id.
    fn all_tables(&self) -> impl Iterator<Item = (u32, &Table)> + '_ {
        let dense = self.tables.iter().enumerate().map(|(i, t)| (i as u32, t));
        dense.chain(self.sparse.iter().map(|(i, t)| (*i, t)))
    }

    /// Reserve room for `rows` more rows of table `t` (bulk loading).
    pub fn reserve(&mut self, t: TableId, rows: usize) {
        self.table_mut(t).rows.reserve(rows);
    }

    /// Insert or replace a record with the initial version (loading).
    pub fn load(&mut self, key: Key, value: Value) {
        if !self.columns.is_empty() {
            self.columns.remove(&key);
        }
        self.table_mut(key.table).rows.insert(
            key.row,
            Record {
                value,
                meta: Meta::default(),
            },
        );
    }

    #[inline]
    pub fn get(&self, key: Key) -> Option<&Record> {
        self.table(key.table)?.rows.get(&key.row)
    }

    #[inline]
    pub fn get_mut(&mut self, key: Key) -> Option<&mut Record> {
        self.existing_table_mut(key.table)?.rows.get_mut(&key.row)
    }

    /// Install `value` as version `version` of `key`, creating the record
    /// when missing. Metadata other than the version is kept. A write of
    /// the whole row: `version` is the last writer of every column.
    pub fn install(&mut self, key: Key, value: Value, version: Version) {
        if !self.columns.is_empty() {
            self.columns.remove(&key);
        }
        self.put(key, value, version);
    }

    /// Install `value` as version `version` of `key`, a write of `columns`
    /// only: the value's other columns are the current ones (the piece
    /// computed it from the row as it is now), and keep their last
    /// writers, which [`Self::column_versions`] reports. For protocols
    /// that order conflicts per column (Janus, see `janus::tracker`), whose
    /// histories are checked per column (`tessera_checker::check_columns`).
    /// The record's `meta.version` is still the row's last writer.
    pub fn install_columns(&mut self, key: Key, value: Value, version: Version, columns: Columns) {
        let m = columns.bits();
        if m == u64::MAX {
            return self.install(key, value, version);
        }
        let base = self.get(key).map_or(Version::INITIAL, |r| r.meta.version);
        let cv = self.columns.entry(key).or_insert_with(|| ColumnVersions {
            base,
            groups: Vec::new(),
        });
        cv.groups.retain_mut(|(g, _)| {
            *g &= !m;
            *g != 0
        });
        cv.groups.push((m, version));
        self.put(key, value, version);
    }

    /// The last writers of `columns` of `key`: one `(columns, version)` per
    /// distinct last writer, covering `columns` (the row's version for
    /// every column when the row's last write was of the whole row;
    /// [`Version::INITIAL`] when there is no record).
    pub fn column_versions(&self, key: Key, columns: Columns) -> Vec<(Columns, Version)> {
        let Some(r) = self.get(key) else {
            return vec![(columns, Version::INITIAL)];
        };
        let Some(cv) = self.columns.get(&key) else {
            return vec![(columns, r.meta.version)];
        };
        let m = columns.bits();
        let mut out = Vec::with_capacity(2);
        let mut rest = m;
        for &(g, v) in &cv.groups {
            rest &= !g;
            if g & m != 0 {
                out.push((Columns(g & m), v));
            }
        }
        if rest != 0 {
            out.push((Columns(rest), cv.base));
        }
        out
    }

    /// The columns of `key` whose last writer is `version`
    /// ([`Columns::ALL`] when the row's last write was of the whole row).
    pub fn columns_written_by(&self, key: Key, version: Version) -> Columns {
        match self.columns.get(&key) {
            None => Columns::ALL,
            Some(cv) => Columns(
                cv.groups
                    .iter()
                    .filter(|(_, v)| *v == version)
                    .fold(0, |a, (g, _)| a | g),
            ),
        }
    }

    /// Every row's per-column last writers, as [`Self::install_columns`]
    /// kept them (the row's base version, then each column group and its
    /// writer), sorted by key: with [`Self::records_sorted`], what a
    /// checkpoint of a protocol that orders conflicts per column holds.
    pub fn column_groups(&self) -> Vec<ColumnGroups<'_>> {
        let mut out: Vec<_> = self
            .columns
            .iter()
            .map(|(k, cv)| (*k, cv.base, cv.groups.as_slice()))
            .collect();
        out.sort_unstable_by_key(|(k, ..)| *k);
        out
    }

    /// Restore what [`Self::column_groups`] reported of `key` (a
    /// checkpoint's replay, after the record itself).
    pub fn set_column_groups(&mut self, key: Key, base: Version, groups: Vec<(u64, Version)>) {
        self.columns.insert(key, ColumnVersions { base, groups });
    }

    /// Who wrote `key` last, as the replicas of a shard must agree on it:
    /// `[(ALL, version)]` for a row whose last write was of the whole row
    /// (or loaded); per column, the last writers sorted by column set
    /// otherwise. Replicas that order conflicts per column may execute
    /// writers of disjoint columns of a row in either order, so they agree
    /// on this, not on `meta.version`. Empty when there is no record.
    pub fn writers(&self, key: Key) -> Vec<(Columns, Version)> {
        if self.get(key).is_none() {
            return Vec::new();
        }
        let mut w = self.column_versions(key, Columns::ALL);
        w.sort_unstable_by_key(|(c, _)| c.0);
        w
    }

    fn put(&mut self, key: Key, value: Value, version: Version) {
        let rows = &mut self.table_mut(key.table).rows;
        match rows.get_mut(&key.row) {
            Some(r) => {
                r.value = value;
                r.meta.version = version;
            }
            None => {
                rows.insert(
                    key.row,
                    Record {
                        value,
                        meta: Meta {
                            version,
                            ..Meta::default()
                        },
                    },
                );
            }
        }
    }

    /// Remove `key`'s record and return it (garbage collection of deleted
    /// records and insert placeholders; COCO §6.3).
    pub fn remove(&mut self, key: Key) -> Option<Record> {
        self.columns.remove(&key);
        self.existing_table_mut(key.table)?.rows.remove(&key.row)
    }

    /// Number of records over all tables.
    pub fn len(&self) -> usize {
        self.all_tables().map(|(_, t)| t.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rows of table `t`, in no particular order.
    pub fn rows(&self, t: TableId) -> impl Iterator<Item = (Key, &Record)> + '_ {
        self.table(t).into_iter().flat_map(move |tab| {
            tab.rows.iter().map(move |(row, r)| {
                (
                    Key {
                        table: t,
                        row: *row,
                    },
                    r,
                )
            })
        })
    }

    /// Approximate heap bytes the store takes: every hash slot allocated
    /// (row number + record: value handle and metadata) plus every value's
    /// bytes. Values shared between records are counted once per record.
    pub fn approx_bytes(&self) -> usize {
        let slot = std::mem::size_of::<(u64, Record)>();
        self.all_tables()
            .map(|(_, t)| {
                t.rows.capacity() * slot + t.rows.values().map(|r| r.value.len()).sum::<usize>()
            })
            .sum()
    }

    /// Every record, in a deterministic order (for convergence checks and
    /// end-of-run consistency checks).
    pub fn records_sorted(&self) -> Vec<(Key, &Record)> {
        let mut v: Vec<(Key, &Record)> = self
            .all_tables()
            .flat_map(|(t, tab)| tab.rows.iter().map(move |(row, r)| (Key::new(t, *row), r)))
            .collect();
        v.sort_by_key(|(k, _)| *k);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_creates_and_replaces() {
        let mut s = Store::new();
        let k = Key::new(2, 9);
        assert!(s.get(k).is_none());
        s.install(k, Value::from_static(b"a"), Version(5));
        assert_eq!(s.get(k).unwrap().meta.version, Version(5));
        s.get_mut(k).unwrap().meta.lock = 7;
        s.install(k, Value::from_static(b"b"), Version(6));
        let r = s.get(k).unwrap();
        assert_eq!(&r.value[..], b"b");
        assert_eq!(r.meta.version, Version(6));
        assert_eq!(r.meta.lock, 7, "install keeps the lock word");
        assert_eq!(s.len(), 1);
        assert_eq!(&s.remove(k).unwrap().value[..], b"b");
        assert!(s.get(k).is_none() && s.is_empty());
        assert!(s.remove(k).is_none() && s.remove(Key::new(40, 1)).is_none());
    }

    /// A write of declared columns keeps the other columns' last writers;
    /// a write of the whole row, or a removal, forgets them.
    #[test]
    fn column_writes_keep_the_other_columns_last_writers() {
        let mut s = Store::new();
        let k = Key::new(1, 3);
        let v = |n| Version(n);
        assert_eq!(
            s.column_versions(k, Columns(0b11)),
            vec![(Columns(0b11), Version::INITIAL)]
        );
        s.load(k, Value::from_static(b"x"));
        s.install_columns(k, Value::from_static(b"a"), v(5), Columns(0b001));
        s.install_columns(k, Value::from_static(b"b"), v(6), Columns(0b110));
        s.install_columns(k, Value::from_static(b"c"), v(7), Columns(0b100));
        assert_eq!(
            s.get(k).unwrap().meta.version,
            v(7),
            "the row's last writer"
        );
        assert_eq!(
            s.column_versions(k, Columns(0b1111)),
            vec![
                (Columns(0b001), v(5)),
                (Columns(0b010), v(6)),
                (Columns(0b100), v(7)),
                (Columns(0b1000), Version::INITIAL)
            ]
        );
        assert_eq!(
            s.column_versions(k, Columns(0b10)),
            vec![(Columns(0b10), v(6))]
        );
        assert_eq!(s.columns_written_by(k, v(6)), Columns(0b010));
        assert_eq!(s.columns_written_by(k, v(9)), Columns(0));
        assert_eq!(
            s.writers(k),
            vec![
                (Columns(0b001), v(5)),
                (Columns(0b010), v(6)),
                (Columns(0b100), v(7)),
                (Columns(!0b111), Version::INITIAL)
            ]
        );
        s.install(k, Value::from_static(b"d"), v(8));
        assert_eq!(s.writers(k), vec![(Columns::ALL, v(8))]);
        assert_eq!(
            s.column_versions(k, Columns(0b11)),
            vec![(Columns(0b11), v(8))]
        );
        assert_eq!(s.columns_written_by(k, v(8)), Columns::ALL);
        s.install_columns(k, Value::from_static(b"e"), v(9), Columns::one(0));
        assert!(s.remove(k).is_some());
        s.load(k, Value::from_static(b"f"));
        assert_eq!(
            s.column_versions(k, Columns(1)),
            vec![(Columns(1), Version::INITIAL)]
        );
    }

    /// A key of any table id (a peer's bytes may carry any) is stored
    /// without allocating for the ids below it, and reads back everywhere.
    #[test]
    fn any_table_id_is_stored_without_a_dense_table_up_to_it() {
        let mut s = Store::new();
        let far = Key::new(u32::MAX, 3);
        let near = Key::new(1, 4);
        s.install(far, Value::from_static(b"x"), Version(1));
        s.load(near, Value::from_static(b"y"));
        assert_eq!(&s.get(far).unwrap().value[..], b"x");
        s.get_mut(far).unwrap().meta.lock = 1;
        assert_eq!(s.len(), 2);
        assert!(s.approx_bytes() < 1 << 20, "no table vector up to u32::MAX");
        let keys: Vec<Key> = s.records_sorted().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, vec![near, far]);
        assert_eq!(s.rows(far.table).count(), 1);
        assert!(s.remove(far).is_some() && s.get(far).is_none());
    }
}
