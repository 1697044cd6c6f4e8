//! The STARTED ancestors a blocked COMMITTING vertex waits for
//! ([`super::graph::DepGraph::settle`]), as bits by [`Numbers`].
//!
//! A resumed settle adds to the set the STARTED vertices kept behind a
//! risen blocker and returns those it did not hold: over three sites with
//! 10,800 clients at zipf 0.9 a hot key's blocker has many waiters and
//! hundreds of vertices behind it, almost all already in each waiter's
//! set, and comparing each waiter's set with the kept list element by
//! element (hash look-ups, then a merge of two lists in creation order)
//! was 84–89% of a run (`perf`). With both as bits, one word compares 64
//! of them at once. A vertex is numbered only while STARTED or some set
//! holds it (the numbers of those that rose are used again once no set
//! holds them), so a set spans the vertices of the moment, not every
//! vertex created since the oldest one it holds (bits by creation order
//! took gigabytes).
//!
//! A set keeps the bit of a blocker after it rose: the holder finds it
//! risen (its number given up by the vertex) at its next settle
//! ([`super::graph::DepGraph`]).
//! Clearing every waiter's bit at each rise needed a list of the waiters
//! per blocker, waiters × blockers entries (9M at 0.3 s of the three-site
//! zipf 0.9 point, and as many again in the server's wait pairs); each
//! number now counts the sets holding it instead, and is given back only
//! when its vertex rose and no set holds it, so a bit never names another
//! vertex than the one it was set for.

use tessera_core::ids::TxnId;

/// Numbers for the STARTED vertices in some [`Blockers`] or kept list:
/// taken when first needed, given back once the vertex rose (or left) and
/// no [`Blockers`] holds it.
#[derive(Default)]
pub(crate) struct Numbers {
    /// The vertex of each number in use (stale for the free ones).
    txns: Vec<TxnId>,
    /// How many [`Blockers`] hold each number.
    holders: Vec<u32>,
    /// Bit `i % 64` of word `i / 64` is set when number `i`'s vertex no
    /// longer owns it (rose or left; or the number is free): as words, so
    /// a set finds its risen members a word (64 numbers) at a time. A
    /// waiter resumes at each of its B blockers' rises, and testing its
    /// whole set bit by bit each time was O(B²) per waiter, ~40% of the
    /// three-site zipf 0.9 point once its wait pairs were cut (`perf`,
    /// `docs/results/janus.md`, *Issue 6, branch `janus17`*).
    risen: Vec<u64>,
    free: Vec<u32>,
}

impl Numbers {
    /// A number for `t`.
    pub fn take(&mut self, t: TxnId) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.txns[i as usize] = t;
                self.risen[i as usize / 64] &= !(1u64 << (i % 64));
                i
            }
            None => {
                self.txns.push(t);
                self.holders.push(0);
                let i =
                    u32::try_from(self.txns.len() - 1).expect("fewer than 2^32 STARTED vertices");
                if i % 64 == 0 {
                    self.risen.push(0);
                }
                i
            }
        }
    }

    /// `i`'s vertex rose or left: the number is free once no set holds it.
    pub fn release(&mut self, i: u32) {
        self.risen[i as usize / 64] |= 1u64 << (i % 64);
        self.free_if_unused(i);
    }

    fn hold(&mut self, i: u32) {
        self.holders[i as usize] += 1;
    }

    fn unhold(&mut self, i: u32) {
        self.holders[i as usize] -= 1;
        self.free_if_unused(i);
    }

    fn free_if_unused(&mut self, i: u32) {
        if self.risen(i as usize) && self.holders[i as usize] == 0 {
            self.free.push(i);
        }
    }

    /// Numbers ever handed out (the highest in use is below).
    pub fn len(&self) -> usize {
        self.txns.len()
    }

    fn txn(&self, i: usize) -> TxnId {
        self.txns[i]
    }

    /// Whether number `i`'s vertex rose (or left) since it was numbered:
    /// an array read, where the vertex's status is a hash look-up (once
    /// per bit of every set a walk passes).
    fn risen(&self, i: usize) -> bool {
        self.risen[i / 64] & (1u64 << (i % 64)) != 0
    }

    /// The numbers of word `w` whose vertices rose (or left).
    fn risen_in(&self, w: u32) -> u64 {
        self.risen[w as usize]
    }
}

/// Every number in the word `(w, bits)`.
fn each_bit(w: u32, mut bits: u64, mut f: impl FnMut(u32)) {
    while bits != 0 {
        f(w * 64 + bits.trailing_zeros());
        bits &= bits - 1;
    }
}

/// A set of numbered vertices as its non-zero words, `(word, bits)` in
/// word order: what [`super::graph::DepGraph::started_behind`] keeps.
pub(crate) type Kept = Vec<(u32, u64)>;

/// `numbers` as a [`Kept`] list.
pub(crate) fn kept(mut numbers: Vec<u32>) -> Kept {
    numbers.sort_unstable();
    let mut out: Kept = Vec::new();
    for i in numbers {
        let (w, b) = (i / 64, 1u64 << (i % 64));
        match out.last_mut() {
            Some(last) if last.0 == w => last.1 |= b,
            _ => out.push((w, b)),
        }
    }
    out
}

/// A set of numbered vertices, bit `i` of word `i / 64` for number `i`,
/// its words kept as [`Kept`] (those with a vertex, and some emptied): a
/// waiter with a few blockers of high numbers takes a few words, not all
/// up to its highest (a dense vector of words took 22 GB in 11 CPU-min of
/// the three-site zipf 0.9 point).
#[derive(Default)]
pub(crate) struct Blockers {
    words: Kept,
    /// How many bits are set.
    live: usize,
    /// How many of `words` are empty: removed when they are the most.
    empty: usize,
}

impl Blockers {
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Words held (and their capacity), for memory statistics.
    pub fn words(&self) -> (usize, usize) {
        (self.words.len(), self.words.capacity())
    }

    /// The vertices in the set, by number.
    #[cfg(test)]
    pub fn iter<'a>(&'a self, numbers: &'a Numbers) -> impl Iterator<Item = TxnId> + 'a {
        self.iter_risen(numbers).map(|(t, _)| t)
    }

    /// The vertices in the set, by number, each with whether it rose (or
    /// left the graph) since it was set.
    pub fn iter_risen<'a>(
        &'a self,
        numbers: &'a Numbers,
    ) -> impl Iterator<Item = (TxnId, bool)> + 'a {
        self.words.iter().flat_map(move |&(w, bits)| {
            let mut bits = bits;
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let i = w as usize * 64 + b;
                Some((numbers.txn(i), numbers.risen(i)))
            })
        })
    }

    /// The vertices in the set that rose (or left) since they were set, in
    /// number order: `iter_risen`'s risen ones, a word at a time.
    pub fn risen(&self, numbers: &Numbers) -> Vec<TxnId> {
        let mut out = Vec::new();
        for &(w, bits) in &self.words {
            each_bit(w, bits & numbers.risen_in(w), |i| {
                out.push(numbers.txn(i as usize));
            });
        }
        out
    }

    /// Replace the set with `kept`.
    pub fn set(&mut self, kept: &[(u32, u64)], numbers: &mut Numbers) {
        self.clear(numbers);
        for &(w, bits) in kept {
            each_bit(w, bits, |i| numbers.hold(i));
        }
        self.words = kept.to_vec();
        self.live = kept.iter().map(|&(_, b)| b.count_ones() as usize).sum();
    }

    /// Empty the set.
    pub fn clear(&mut self, numbers: &mut Numbers) {
        for (w, bits) in std::mem::take(&mut self.words) {
            each_bit(w, bits, |i| numbers.unhold(i));
        }
        self.live = 0;
        self.empty = 0;
    }

    /// Add `kept` to the set; the vertices it did not hold go to `missing`
    /// (by number) when given. One pass over both lists of words.
    pub fn add(
        &mut self,
        kept: &[(u32, u64)],
        numbers: &mut Numbers,
        mut missing: Option<&mut Vec<TxnId>>,
    ) {
        let mut report = |w: u32, new: u64| {
            each_bit(w, new, |i| {
                numbers.hold(i);
                if let Some(missing) = missing.as_deref_mut() {
                    missing.push(numbers.txn(i as usize));
                }
            });
        };
        let mut extra: Kept = Vec::new();
        let mut i = 0;
        for &(w, bits) in kept {
            while i < self.words.len() && self.words[i].0 < w {
                i += 1;
            }
            match self.words.get_mut(i) {
                Some(word) if word.0 == w => {
                    let new = bits & !word.1;
                    if word.1 == 0 && new != 0 {
                        self.empty -= 1;
                    }
                    word.1 |= bits;
                    self.live += new.count_ones() as usize;
                    report(w, new);
                }
                _ => {
                    extra.push((w, bits));
                    self.live += bits.count_ones() as usize;
                    report(w, bits);
                }
            }
        }
        if extra.is_empty() {
            return;
        }
        let mut merged = Vec::with_capacity(self.words.len() + extra.len());
        let mut old = std::mem::take(&mut self.words).into_iter().peekable();
        for e in extra {
            while let Some(o) = old.next_if(|o| o.0 < e.0) {
                merged.push(o);
            }
            merged.push(e);
        }
        merged.extend(old);
        self.words = merged;
    }

    /// Remove the vertices that rose (or left) since they were set, and
    /// return them in number order.
    pub fn take_risen(&mut self, numbers: &mut Numbers) -> Vec<TxnId> {
        let mut out = Vec::new();
        for word in self.words.iter_mut() {
            let (w, bits) = *word;
            let gone = bits & numbers.risen_in(w);
            word.1 &= !gone;
            each_bit(w, gone, |i| {
                out.push(numbers.txn(i as usize));
                numbers.unhold(i);
            });
            if bits != 0 && word.1 == 0 {
                self.empty += 1;
            }
        }
        self.live -= out.len();
        if self.live == 0 {
            self.words = Vec::new();
            self.empty = 0;
        } else if 2 * self.empty > self.words.len() + 8 {
            self.words.retain(|&(_, b)| b != 0);
            self.empty = 0;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random adds against a plain set, vertices rising and their bits
    /// taken out at random later (so numbers of risen vertices stay held a
    /// while), numbers given back and taken again as new vertices come: a
    /// number held by the set must never name another vertex.
    #[test]
    fn adds_return_exactly_the_missing() {
        use rand::{Rng, SeedableRng};
        use std::collections::{BTreeSet, HashMap, HashSet};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let mut numbers = Numbers::default();
        // The STARTED vertices numbered so far, and the set as a plain one.
        let mut numbered: Vec<(TxnId, u32)> = Vec::new();
        let mut risen: HashSet<TxnId> = HashSet::new();
        let mut b = Blockers::default();
        let mut model: BTreeSet<TxnId> = BTreeSet::new();
        let mut next = 0u64;
        for _ in 0..5_000 {
            let r = rng.random_range(0..10);
            if r < 5 {
                let mut add: HashMap<TxnId, u32> = HashMap::new();
                for _ in 0..rng.random_range(0..70) {
                    // An old STARTED vertex or a new one.
                    let (t, i) = if !numbered.is_empty() && rng.random_bool(0.8) {
                        numbered[rng.random_range(0..numbered.len())]
                    } else {
                        next += 1;
                        let t = TxnId(next);
                        let i = numbers.take(t);
                        numbered.push((t, i));
                        (t, i)
                    };
                    add.insert(t, i);
                }
                let mut got = Vec::new();
                b.add(
                    &kept(add.values().copied().collect()),
                    &mut numbers,
                    Some(&mut got),
                );
                got.sort_unstable();
                let mut want: Vec<TxnId> =
                    add.keys().copied().filter(|t| !model.contains(t)).collect();
                want.sort_unstable();
                assert_eq!(got, want);
                model.extend(add.keys());
            } else if r < 8 && !numbered.is_empty() {
                // A vertex rises: its number is given back once no set
                // holds it.
                let (t, i) = numbered.swap_remove(rng.random_range(0..numbered.len()));
                risen.insert(t);
                numbers.release(i);
            } else {
                let named = b.risen(&numbers);
                let mut got = b.take_risen(&mut numbers);
                assert_eq!(named, got, "the risen ones, in number order");
                got.sort_unstable();
                let want: Vec<TxnId> = model
                    .iter()
                    .copied()
                    .filter(|t| risen.contains(t))
                    .collect();
                model.retain(|t| !risen.contains(t));
                assert_eq!(got, want);
            }
            let mut all: Vec<TxnId> = b.iter(&numbers).collect();
            all.sort_unstable();
            assert_eq!(all, model.iter().copied().collect::<Vec<_>>());
            assert_eq!(b.is_empty(), model.is_empty());
        }
        b.clear(&mut numbers);
        assert_eq!(numbers.free.len(), numbers.len() - numbered.len());
    }
}
