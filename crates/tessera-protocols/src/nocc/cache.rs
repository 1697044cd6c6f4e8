//! The switch's value cache: a bounded map from key to its latest value
//! (`None`: the key is known to be absent) and that value's version,
//! evicting with CLOCK (second
//! chance) as a switch would with a small register array and a reference
//! bit per slot (§2: "it is sufficient to reserve enough space for hot data
//! items"; "NOCC could use a cache eviction policy").

use tessera_core::ids::{Key, Version};
use tessera_core::txn::Value;
use tessera_core::FastMap;

struct Slot {
    key: Key,
    entry: (Option<Value>, Version),
    referenced: bool,
}

pub struct ValueCache {
    capacity: usize,
    /// Values wider than this do not fit the register stages.
    max_value: usize,
    index: FastMap<Key, usize>,
    slots: Vec<Slot>,
    hand: usize,
}

impl ValueCache {
    pub fn new(capacity: usize, max_value: usize) -> Self {
        ValueCache {
            capacity,
            max_value,
            index: tessera_core::fast_map(),
            slots: Vec::with_capacity(capacity.min(1 << 16)),
            hand: 0,
        }
    }

    /// The cached value of `key`. (Only updates set the reference bit: the
    /// keys worth keeping are the ones written often.)
    pub fn get(&self, key: Key) -> Option<&(Option<Value>, Version)> {
        self.index.get(&key).map(|&i| &self.slots[i].entry)
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Cache `value` for `key`, evicting another key when full. A value too
    /// wide for the registers is not cached, and drops any older value of
    /// the key (which would be stale).
    pub fn put(&mut self, key: Key, value: Option<Value>, version: Version) {
        if value.as_ref().is_some_and(|v| v.len() > self.max_value) {
            self.remove(key);
            return;
        }
        if let Some(&i) = self.index.get(&key) {
            let s = &mut self.slots[i];
            s.entry = (value, version);
            s.referenced = true;
            return;
        }
        if self.capacity == 0 {
            return;
        }
        let slot = Slot {
            key,
            entry: (value, version),
            referenced: true,
        };
        if self.slots.len() < self.capacity {
            self.index.insert(key, self.slots.len());
            self.slots.push(slot);
            return;
        }
        let victim = self.victim();
        self.index.remove(&self.slots[victim].key);
        self.index.insert(key, victim);
        self.slots[victim] = slot;
    }

    pub fn remove(&mut self, key: Key) {
        let Some(i) = self.index.remove(&key) else {
            return;
        };
        let last = self.slots.len() - 1;
        self.slots.swap_remove(i);
        if i != last {
            self.index.insert(self.slots[i].key, i);
        }
        if self.hand >= self.slots.len() {
            self.hand = 0;
        }
    }

    /// CLOCK: sweep, clearing reference bits, to the first slot without one.
    fn victim(&mut self) -> usize {
        loop {
            let i = self.hand;
            self.hand = (self.hand + 1) % self.slots.len();
            if self.slots[i].referenced {
                self.slots[i].referenced = false;
            } else {
                return i;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(r: u64) -> Key {
        Key::new(0, r)
    }
    fn v(b: &'static [u8]) -> Option<Value> {
        Some(Value::from_static(b))
    }
    const V: Version = Version(9);

    #[test]
    fn bounded_with_second_chance() {
        let mut c = ValueCache::new(2, 8);
        c.put(k(1), v(b"a"), V);
        c.put(k(2), v(b"b"), V);
        c.put(k(3), v(b"c"), V);
        assert_eq!(c.len(), 2);
        assert!(c.get(k(3)).is_some());
        // k(1) and k(2) both had their bit set; the sweep cleared both and
        // took the first, k(1).
        assert!(c.get(k(1)).is_none());
        // The sweep cleared k(2)'s bit; k(3) came in with its own set. The
        // next victim is k(2), which was not updated since.
        c.put(k(4), None, V);
        assert!(c.get(k(2)).is_none());
        assert_eq!(c.get(k(3)), Some(&(v(b"c"), V)));
        assert_eq!(c.get(k(4)), Some(&(None, V)), "absence is cached too");
    }

    #[test]
    fn too_wide_values_are_not_cached_and_drop_the_old_one() {
        let mut c = ValueCache::new(4, 2);
        c.put(k(1), v(b"ab"), V);
        c.put(k(1), v(b"abc"), V);
        assert!(c.get(k(1)).is_none());
        c.put(k(2), v(b"x"), V);
        c.remove(k(2));
        assert!(c.is_empty());
    }
}
