//! Per-key version order, inferred from what clients observed.
//!
//! Registers hide their history, so the order of a key's versions has to be
//! inferred (Elle's rw-register analysis with "writes follow reads"): when a
//! committed transaction read `k` at version `v` and also wrote `k`, its
//! version immediately follows `v` — any correct protocol installs a
//! read-modify-write on top of the version it read. Each version thus gets at
//! most one inferred predecessor, and normally at most one successor.
//!
//! What falls out:
//! * two committed writers claiming the same predecessor: a lost update;
//! * a blind write (the writer did not read the key first) has no inferred
//!   predecessor and is reported as unordered. Tessera's workloads always
//!   read before they write, so this only happens for in-doubt writers (which
//!   record no reads) and for writes based on a bad read. One thing is still
//!   known about such a write: every version follows the initial one, and
//!   the chain of immediate successors starting at the initial version is
//!   therefore a prefix of the key's order, so the blind write comes after
//!   that chain's last version `L`. It gets `ww` from `L`'s writer and `rw`
//!   from `L`'s readers (which imply, transitively, everything Elle infers
//!   from "the initial version precedes all others"). Blind writes stay
//!   unordered relative to each other and to the chains hanging off them;
//! * reads of versions no committed transaction wrote: G1a (aborted or
//!   garbage reads), found while resolving each read to its writer.
//!
//! Memory is what bounds the checker at 10^6 transactions, so versions are
//! not hashed: a version is a *slot*, either a committed write (slots
//! `0..writes`, laid out per node) or a key's initial version (slots after
//! those), and successors live in one `Vec<u32>` indexed by slot.

use crate::index::{TxnIndex, Writer, NONE};
use crate::report::{EdgeKind, Violation};
use tessera_core::{fast_map, FastMap, Key, TxnId, Version};

/// One read of a committed transaction, resolved to its writer and slot.
#[derive(Clone, Copy)]
struct ReadRes {
    /// The writer's node; `NONE` for the initial version (or a bad read).
    writer: u32,
    /// The version's slot, `NONE` for a bad read. The top bit is set when
    /// the reader also wrote the key (a read-modify-write), which makes the
    /// reader the slot's successor.
    slot: u32,
}

const RMW: u32 = 1 << 31;

impl ReadRes {
    const BAD: ReadRes = ReadRes {
        writer: NONE,
        slot: NONE,
    };
    fn valid(self) -> bool {
        self.slot != NONE
    }
    fn slot(self) -> u32 {
        self.slot & !RMW
    }
    fn rmw(self) -> bool {
        self.slot != NONE && self.slot & RMW != 0
    }
}

pub(crate) struct Versions {
    /// Node -> offset of its first read in `reads` (one extra entry at the
    /// end).
    read_off: Vec<usize>,
    reads: Vec<ReadRes>,
    /// Slot -> the node whose write follows this version, or `NONE`.
    succ: Vec<u32>,
    /// Further successors of slots with a lost update (rare).
    extra: FastMap<u32, Vec<u32>>,
    /// Blind writes placed after the slot ending their key's initial chain:
    /// they follow it, though not necessarily immediately.
    later: FastMap<u32, Vec<u32>>,
    /// `ww` edges (writer of a chain's last version, blind writer).
    later_ww: Vec<(u32, u32)>,
    pub unordered: Vec<(TxnId, Key)>,
}

impl Versions {
    /// Resolves every read and infers the version order, pushing G1a and
    /// lost-update violations.
    ///
    /// # Panics
    /// If there are 2^31 or more versions (writes plus keys read initially).
    pub fn build(idx: &TxnIndex<'_>, violations: &mut Vec<Violation>) -> Versions {
        let txns = &idx.txns;
        let mut write_off = Vec::with_capacity(txns.len() + 1);
        let mut slots = 0usize;
        for t in txns {
            write_off.push(slots as u32);
            slots += t.writes.len();
        }
        let mut initial: FastMap<Key, u32> = fast_map();
        let mut read_off = Vec::with_capacity(txns.len() + 1);
        let mut reads = Vec::with_capacity(txns.iter().map(|t| t.reads.len()).sum());
        for (node, t) in txns.iter().enumerate() {
            read_off.push(reads.len());
            for r in &t.reads {
                let res = if r.version == Version::INITIAL {
                    let slot = *initial.entry(r.key).or_insert_with(|| {
                        slots += 1;
                        (slots - 1) as u32
                    });
                    ReadRes { writer: NONE, slot }
                } else {
                    match idx.writer_of(r.key, r.version) {
                        Writer::Node { node: w, pos } if w as usize != node => ReadRes {
                            writer: w,
                            slot: write_off[w as usize] + pos,
                        },
                        Writer::Aborted(w) => {
                            violations.push(Violation::AbortedRead {
                                column: None,
                                reader: t.id,
                                key: r.key,
                                version: r.version,
                                writer: w.id,
                            });
                            ReadRes::BAD
                        }
                        Writer::Node { .. } | Writer::Missing => {
                            violations.push(Violation::GarbageRead {
                                column: None,
                                reader: t.id,
                                key: r.key,
                                version: r.version,
                            });
                            ReadRes::BAD
                        }
                    }
                };
                reads.push(res);
            }
        }
        read_off.push(reads.len());
        assert!(slots < RMW as usize, "too many versions to check");

        let mut v = Versions {
            read_off,
            reads,
            succ: vec![NONE; slots],
            extra: fast_map(),
            later: fast_map(),
            later_ww: Vec::new(),
            unordered: Vec::new(),
        };
        let mut blind: Vec<(Key, u32)> = Vec::new();
        for (node, t) in txns.iter().enumerate() {
            let base = v.read_off[node];
            for &k in &t.writes {
                // The predecessor is the version of the transaction's first
                // read of the key. Write and read lists are short, so a scan
                // beats building a set.
                let Some(i) = t.reads.iter().position(|r| r.key == k) else {
                    v.unordered.push((t.id, k));
                    blind.push((k, node as u32));
                    continue;
                };
                let res = &mut v.reads[base + i];
                if !res.valid() {
                    v.unordered.push((t.id, k));
                    blind.push((k, node as u32));
                    continue;
                }
                res.slot |= RMW;
                let slot = res.slot();
                let node = node as u32;
                match v.succ[slot as usize] {
                    NONE => v.succ[slot as usize] = node,
                    s if s == node => {} // the key is listed twice in writes
                    s => {
                        let others = v.extra.entry(slot).or_default();
                        if others.contains(&node) {
                            continue;
                        }
                        others.push(node);
                        violations.push(Violation::LostUpdate {
                            column: None,
                            key: k,
                            version: t.reads[i].version,
                            first: txns[s as usize].id,
                            second: t.id,
                        });
                    }
                }
            }
        }
        v.place_blind_writes(idx, &initial, &write_off, blind);
        v
    }

    /// Puts each blind write after the last version of its key's initial
    /// chain (see the module docs). A key whose chain forks (a lost update,
    /// already reported) gets nothing: its prefix is not a chain.
    fn place_blind_writes(
        &mut self,
        idx: &TxnIndex<'_>,
        initial: &FastMap<Key, u32>,
        write_off: &[u32],
        mut blind: Vec<(Key, u32)>,
    ) {
        blind.sort_unstable();
        blind.dedup();
        let mut i = 0;
        while i < blind.len() {
            let k = blind[i].0;
            let end = i + blind[i..].iter().take_while(|b| b.0 == k).count();
            let writers = &blind[i..end];
            i = end;
            // Nobody read the initial version: nobody could have read it
            // too late, and its chain is empty.
            let Some(&first) = initial.get(&k) else {
                continue;
            };
            let (mut slot, mut last_writer) = (first, NONE);
            let mut forked = false;
            loop {
                if self.extra.contains_key(&slot) {
                    forked = true;
                    break;
                }
                let s = self.succ[slot as usize];
                if s == NONE {
                    break;
                }
                let pos = idx.txns[s as usize]
                    .writes
                    .iter()
                    .position(|&w| w == k)
                    .expect("a successor wrote the key");
                last_writer = s;
                slot = write_off[s as usize] + pos as u32;
            }
            if forked {
                continue;
            }
            let later = self.later.entry(slot).or_default();
            for &(_, w) in writers {
                later.push(w);
                if last_writer != NONE {
                    self.later_ww.push((last_writer, w));
                }
            }
        }
    }

    /// Calls `f(from, to, kind)` for every dependency edge between committed
    /// transactions (nodes): `wr` from a version's writer to each reader,
    /// `ww` from it to its successor, `rw` from each reader to the
    /// successor; blind writes placed after a chain count as further
    /// successors of its last version. A read-modify-write gets only the
    /// `ww` edge, not also the (parallel, weaker) `wr` one. Self-edges are
    /// left out.
    pub fn for_each_edge(&self, mut f: impl FnMut(u32, u32, EdgeKind)) {
        for node in 0..self.read_off.len() - 1 {
            let node = node as u32;
            let reads = &self.reads[self.read_off[node as usize]..self.read_off[node as usize + 1]];
            for &res in reads {
                if !res.valid() {
                    continue;
                }
                if res.writer != NONE {
                    let kind = if res.rmw() {
                        EdgeKind::Ww
                    } else {
                        EdgeKind::Wr
                    };
                    f(res.writer, node, kind);
                }
                let slot = res.slot();
                let s = self.succ[slot as usize];
                if s != NONE && s != node {
                    f(node, s, EdgeKind::Rw);
                }
                for map in [&self.extra, &self.later] {
                    if map.is_empty() {
                        continue;
                    }
                    for &s in map.get(&slot).into_iter().flatten() {
                        if s != node {
                            f(node, s, EdgeKind::Rw);
                        }
                    }
                }
            }
        }
        for &(a, b) in &self.later_ww {
            if a != b {
                f(a, b, EdgeKind::Ww);
            }
        }
    }
}
