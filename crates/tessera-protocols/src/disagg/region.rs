//! The hash-addressed region of a memory node (OOCC §VIII.A: "hash tables
//! ... the data are stored as fixed-size records for direct access").
//!
//! The region is `buckets × bucket_slots` slots. A key hashes to a bucket;
//! it sits in the first free slot of that bucket or, when the bucket is
//! full, of the next buckets in turn (linear probing over buckets). A slot
//! is `[key | value | version | lock]`: the lock word is the slot's last
//! word, so a WRITE that covers the data and the lock publishes the data no
//! later than the unlock (§V).
//!
//! Values are stored as they come (the slot's value bytes are its capacity
//! in the paper; we keep the value's own length so that workloads with
//! different value sizes need no configuration, and a value that grows —
//! TPC-C's `C_DATA` — needs no bigger slot).
//!
//! The region has [`RegionConfig::slots_per_record`] slots per record
//! loaded (two by default): the free part is where inserts go (see
//! [`super::client`] on inserts). Slots never turn free again, and TPC-C
//! deletes only NEW-ORDER rows while every NewOrder inserts ~12 rows and
//! every Payment one, so a long TPC-C run needs a larger factor. A key
//! whose whole probe path is full cannot be inserted: the coordinator fails
//! the attempt with an error naming the memory node, never a panic.

use super::verbs::{SlotImage, SlotWrite, Verb, VerbResult};
use tessera_core::ids::{Key, Version};
use tessera_core::storage::Store;
use tessera_core::txn::Value;

/// A slot's index in its memory node's region.
pub type Addr = u32;

/// How a memory node lays out its region: the same for every protocol on
/// memory nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionConfig {
    /// Slots per hash bucket (a bucket READ reads them all).
    pub bucket_slots: u32,
    /// Slots per record loaded, at least 1: the rest take inserts.
    pub slots_per_record: u32,
}

impl Default for RegionConfig {
    fn default() -> Self {
        RegionConfig {
            bucket_slots: 8,
            slots_per_record: 2,
        }
    }
}

/// The shape of a region: what a coordinator needs to find a key's bucket.
/// Exchanged when a coordinator connects (as RDMA peers exchange their
/// memory region's address and key at connection setup).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub buckets: u32,
    pub bucket_slots: u32,
}

impl Geometry {
    /// Room for `records` at a load factor of at most `1 /
    /// slots_per_record`.
    pub fn for_records(records: usize, bucket_slots: u32, slots_per_record: u32) -> Self {
        let slots = records.max(1) as u64 * slots_per_record.max(1) as u64;
        let buckets = slots.div_ceil(bucket_slots as u64).next_power_of_two();
        Geometry {
            buckets: buckets as u32,
            bucket_slots,
        }
    }

    pub fn slots(&self) -> u32 {
        self.buckets * self.bucket_slots
    }

    /// The bucket `key` hashes to (splitmix64 of table and row: the same on
    /// every node, independent of the process's hasher seed).
    pub fn bucket_of(&self, key: Key) -> u32 {
        let mut z = ((key.table.0 as u64) << 48 ^ key.row).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z % self.buckets as u64) as u32
    }

    /// The first slot of bucket `b` (wrapping).
    pub fn bucket_start(&self, b: u32) -> Addr {
        (b % self.buckets) * self.bucket_slots
    }
}

#[derive(Clone, Debug, Default)]
struct Slot {
    key: Option<Key>,
    value: Option<Value>,
    version: Version,
    lock: u64,
}

/// The slots of one memory node.
pub struct Region {
    geometry: Geometry,
    slots: Vec<Slot>,
}

impl Region {
    /// Lay out every record of `store` (its versions and lock words as
    /// loaded). The region has at least as many slots as records, so every
    /// record finds one.
    pub fn load(store: &Store, config: RegionConfig) -> Self {
        let records = store.records_sorted();
        let geometry = Geometry::for_records(
            records.len(),
            config.bucket_slots.max(1),
            config.slots_per_record,
        );
        let n = geometry.slots();
        let mut slots = vec![Slot::default(); n as usize];
        for (key, rec) in records {
            let start = geometry.bucket_start(geometry.bucket_of(key));
            let free = (0..n)
                .map(|i| (start + i) % n)
                .find(|&a| slots[a as usize].key.is_none())
                .expect("fewer records than slots");
            slots[free as usize] = Slot {
                key: Some(key),
                value: Some(rec.value.clone()),
                version: rec.meta.version,
                lock: rec.meta.lock,
            };
        }
        Region { geometry, slots }
    }

    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    fn image(&self, addr: Addr) -> SlotImage {
        let s = &self.slots[addr as usize];
        SlotImage {
            addr,
            key: s.key,
            value: s.value.clone(),
            version: s.version,
            lock: s.lock,
        }
    }

    /// Apply one verb. An address outside the region is answered with
    /// [`VerbResult::OutOfRange`] (a remote access error), never a panic.
    pub fn apply(&mut self, verb: &Verb) -> VerbResult {
        let n = self.slots.len() as u64;
        let in_range = |addr: Addr, len: u32| (addr as u64 + len as u64) <= n && len > 0;
        match verb {
            Verb::Read { addr, len } => {
                if !in_range(*addr, *len) {
                    return VerbResult::OutOfRange;
                }
                VerbResult::Read((*addr..addr + len).map(|a| self.image(a)).collect())
            }
            Verb::Write { addr, data } => {
                if !in_range(*addr, 1) {
                    return VerbResult::OutOfRange;
                }
                let s = &mut self.slots[*addr as usize];
                match data {
                    SlotWrite::Lock(l) => s.lock = *l,
                    SlotWrite::Data {
                        key,
                        value,
                        version,
                    } => {
                        s.key = Some(*key);
                        s.value = Some(value.clone());
                        s.version = *version;
                    }
                    SlotWrite::DataAndLock {
                        key,
                        value,
                        version,
                        lock,
                    } => {
                        s.key = Some(*key);
                        s.value = Some(value.clone());
                        s.version = *version;
                        s.lock = *lock;
                    }
                }
                VerbResult::Written
            }
            Verb::Cas { addr, expect, swap } => {
                if !in_range(*addr, 1) {
                    return VerbResult::OutOfRange;
                }
                let s = &mut self.slots[*addr as usize];
                let old = s.lock;
                if old == *expect {
                    s.lock = *swap;
                }
                VerbResult::Atomic { old }
            }
            Verb::Faa { addr, add } => {
                if !in_range(*addr, 1) {
                    return VerbResult::OutOfRange;
                }
                let s = &mut self.slots[*addr as usize];
                let old = s.lock;
                s.lock = old.wrapping_add(*add);
                VerbResult::Atomic { old }
            }
            Verb::Log(_) => VerbResult::Written,
        }
    }

    /// The slot holding `key`, if any (for the memory node's store view).
    pub fn key_at(&self, addr: Addr) -> Option<Key> {
        self.slots.get(addr as usize).and_then(|s| s.key)
    }

    pub fn value_at(&self, addr: Addr) -> Option<(&Value, Version)> {
        let s = self.slots.get(addr as usize)?;
        Some((s.value.as_ref()?, s.version))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(n: u64) -> Store {
        let mut s = Store::new();
        for r in 0..n {
            s.load(Key::new(0, r), Value::from(r.to_le_bytes().to_vec()));
        }
        s
    }

    /// Where a coordinator would find `key`: the first slot from its bucket
    /// on holding it.
    fn find(reg: &mut Region, key: Key) -> Option<Addr> {
        let g = reg.geometry();
        let start = g.bucket_start(g.bucket_of(key));
        let VerbResult::Read(imgs) = reg.apply(&Verb::Read {
            addr: 0,
            len: g.slots(),
        }) else {
            panic!("read failed")
        };
        (0..g.slots())
            .map(|i| (start + i) % g.slots())
            .find(|&a| imgs[a as usize].key == Some(key))
    }

    /// The default layout with `bucket_slots` slots per bucket.
    fn slots(bucket_slots: u32) -> RegionConfig {
        RegionConfig {
            bucket_slots,
            ..RegionConfig::default()
        }
    }

    #[test]
    fn every_record_is_found_from_its_bucket() {
        let mut reg = Region::load(&store(1000), slots(8));
        assert!(reg.geometry().slots() >= 2000);
        for r in 0..1000 {
            let a = find(&mut reg, Key::new(0, r)).expect("present");
            let (v, ver) = reg.value_at(a).unwrap();
            assert_eq!(&v[..], &r.to_le_bytes());
            assert_eq!(ver, Version::INITIAL);
        }
        assert!(find(&mut reg, Key::new(0, 5000)).is_none());
    }

    #[test]
    fn the_region_has_the_configured_slots_per_record() {
        let big = RegionConfig {
            slots_per_record: 8,
            ..slots(8)
        };
        assert!(Region::load(&store(1000), big).geometry().slots() >= 8000);
        let tight = RegionConfig {
            slots_per_record: 1,
            ..slots(8)
        };
        let mut reg = Region::load(&store(1000), tight);
        assert!(reg.geometry().slots() >= 1000);
        assert!(find(&mut reg, Key::new(0, 999)).is_some());
    }

    #[test]
    fn cas_swaps_only_on_match_and_faa_adds() {
        let mut reg = Region::load(&store(4), slots(4));
        let a = find(&mut reg, Key::new(0, 1)).unwrap();
        let cas = |expect, swap| Verb::Cas {
            addr: a,
            expect,
            swap,
        };
        assert_eq!(reg.apply(&cas(0, 7)), VerbResult::Atomic { old: 0 });
        assert_eq!(reg.apply(&cas(0, 9)), VerbResult::Atomic { old: 7 });
        assert_eq!(
            reg.apply(&Verb::Faa { addr: a, add: 3 }),
            VerbResult::Atomic { old: 7 }
        );
        let VerbResult::Read(img) = reg.apply(&Verb::Read { addr: a, len: 1 }) else {
            panic!()
        };
        assert_eq!(img[0].lock, 10);
    }

    #[test]
    fn a_write_unlock_publishes_data_with_the_unlock() {
        let mut reg = Region::load(&store(4), slots(4));
        let a = find(&mut reg, Key::new(0, 2)).unwrap();
        reg.apply(&Verb::Cas {
            addr: a,
            expect: 0,
            swap: 5,
        });
        reg.apply(&Verb::Write {
            addr: a,
            data: SlotWrite::DataAndLock {
                key: Key::new(0, 2),
                value: Value::from_static(b"new"),
                version: Version(42),
                lock: 0,
            },
        });
        let VerbResult::Read(img) = reg.apply(&Verb::Read { addr: a, len: 1 }) else {
            panic!()
        };
        assert_eq!(img[0].lock, 0);
        assert_eq!(img[0].version, Version(42));
        assert_eq!(img[0].value.as_deref(), Some(&b"new"[..]));
    }

    #[test]
    fn out_of_range_is_an_error_result() {
        let mut reg = Region::load(&store(4), slots(4));
        let n = reg.geometry().slots();
        assert_eq!(
            reg.apply(&Verb::Read { addr: n, len: 1 }),
            VerbResult::OutOfRange
        );
        assert_eq!(
            reg.apply(&Verb::Faa { addr: n, add: 1 }),
            VerbResult::OutOfRange
        );
    }
}
