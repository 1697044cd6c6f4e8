//! The acceptor: the state Paxos needs to survive a crash, the rules that
//! change it, and its durable records.
//!
//! Rules (Lamport, "Paxos made simple", §2.2 and the Multi-Paxos extension
//! of §3): an acceptor promises a ballot at least as high as any it promised
//! before, accepts a value only at a ballot at least as high as its promise,
//! and reports in its promise every value it accepted with the ballot it
//! accepted it in. Every change is written as a [`Record`] and the reply
//! that reveals it is sent only once the record is durable; records are
//! made durable in order, so recovery replays them in order.
//!
//! Slots up to the snapshot's are compacted away: they are chosen, the
//! snapshot holds their effect, and no acceptor state about them is needed
//! any more.

use super::ballot::Ballot;
use super::codec::{
    get_bytes, get_u32, get_u64, get_u8, put_bytes, put_u32, put_u64, put_u8, Command, DecodeError,
};
use super::msg::{PromisedEntry, Snapshot};
use super::Slot;
use bytes::Bytes;
use std::collections::BTreeMap;
use tessera_core::ids::NodeId;

/// One slot of the log.
#[derive(Clone, Debug)]
pub(crate) struct Entry<C> {
    /// The ballot the batch was accepted in (meaningless once `chosen`).
    pub ballot: Ballot,
    pub batch: Vec<C>,
    /// The batch is known to be chosen at this slot.
    pub chosen: bool,
}

/// A change of acceptor state, as persisted.
#[derive(Clone, Debug)]
pub(crate) enum Record<C> {
    Promise(Ballot),
    Accept {
        ballot: Ballot,
        first: Slot,
        batches: Vec<Vec<C>>,
    },
    Snapshot(Snapshot),
}

/// First byte of every Paxos record: an embedder that keeps records of its
/// own in the same node log tells them apart by it.
pub const RECORD_TAG: u8 = 0x50;
const PROMISE: u8 = 1;
const ACCEPT: u8 = 2;
const SNAPSHOT: u8 = 3;

fn put_ballot(out: &mut Vec<u8>, b: Ballot) {
    put_u64(out, b.round);
    put_u32(out, b.node.0);
}

fn get_ballot(input: &mut &[u8]) -> Result<Ballot, DecodeError> {
    Ok(Ballot {
        round: get_u64(input)?,
        node: NodeId(get_u32(input)?),
    })
}

impl<C: Command> Record<C> {
    pub fn encode(&self) -> Bytes {
        let mut out = vec![RECORD_TAG];
        match self {
            Record::Promise(b) => {
                put_u8(&mut out, PROMISE);
                put_ballot(&mut out, *b);
            }
            Record::Accept {
                ballot,
                first,
                batches,
            } => {
                put_u8(&mut out, ACCEPT);
                put_ballot(&mut out, *ballot);
                put_u64(&mut out, *first);
                put_u32(&mut out, batches.len() as u32);
                for b in batches {
                    put_u32(&mut out, b.len() as u32);
                    for c in b {
                        c.encode(&mut out);
                    }
                }
            }
            Record::Snapshot(s) => {
                put_u8(&mut out, SNAPSHOT);
                put_u64(&mut out, s.slot);
                put_bytes(&mut out, &s.data);
            }
        }
        Bytes::from(out)
    }

    /// `Ok(None)` for a record that is not a Paxos record.
    pub fn decode(mut input: &[u8]) -> Result<Option<Self>, DecodeError> {
        let r = &mut input;
        if get_u8(r)? != RECORD_TAG {
            return Ok(None);
        }
        let rec = match get_u8(r)? {
            PROMISE => Record::Promise(get_ballot(r)?),
            ACCEPT => {
                let ballot = get_ballot(r)?;
                let first = get_u64(r)?;
                let n = get_u32(r)? as usize;
                let mut batches = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    let m = get_u32(r)? as usize;
                    let mut b = Vec::with_capacity(m.min(1024));
                    for _ in 0..m {
                        b.push(C::decode(r)?);
                    }
                    batches.push(b);
                }
                Record::Accept {
                    ballot,
                    first,
                    batches,
                }
            }
            SNAPSHOT => Record::Snapshot(Snapshot {
                slot: get_u64(r)?,
                data: get_bytes(r)?,
            }),
            tag => {
                return Err(DecodeError::Tag {
                    what: "paxos record",
                    tag,
                })
            }
        };
        Ok(Some(rec))
    }
}

/// The acceptor's state.
#[derive(Debug)]
pub(crate) struct Acceptor<C> {
    pub promised: Ballot,
    /// Slots above the snapshot's.
    pub entries: BTreeMap<Slot, Entry<C>>,
    pub snapshot: Snapshot,
}

impl<C: Command> Acceptor<C> {
    pub fn new() -> Self {
        Acceptor {
            promised: Ballot::ZERO,
            entries: BTreeMap::new(),
            snapshot: Snapshot {
                slot: 0,
                data: Bytes::new(),
            },
        }
    }

    /// Rebuild from durable records, in the order they were persisted. A
    /// record that cannot be read ends the replay (a torn tail: it was never
    /// acknowledged), with an error in the log.
    pub fn recover(records: &[Bytes]) -> Self {
        let mut a = Acceptor::new();
        for (i, r) in records.iter().enumerate() {
            match Record::<C>::decode(r) {
                Ok(Some(rec)) => a.apply(rec),
                Ok(None) => {}
                Err(e) => {
                    tracing::error!(record = i, error = %e, "paxos: unreadable record ends recovery");
                    break;
                }
            }
        }
        a
    }

    fn apply(&mut self, rec: Record<C>) {
        match rec {
            Record::Promise(b) => self.promised = self.promised.max(b),
            Record::Accept {
                ballot,
                first,
                batches,
            } => {
                self.promised = self.promised.max(ballot);
                self.store(ballot, first, batches);
            }
            Record::Snapshot(s) => {
                self.install(s);
            }
        }
    }

    /// Phase 1b rule: may this acceptor promise `b`? Raises the promise if
    /// so; `Err` carries the higher promise that refuses it.
    pub fn prepare(&mut self, b: Ballot) -> Result<bool, Ballot> {
        if b < self.promised {
            return Err(self.promised);
        }
        let raised = b > self.promised;
        self.promised = b;
        Ok(raised)
    }

    /// Phase 2b rule: accept `batches` at `first..` in ballot `b` unless a
    /// higher ballot was promised. Chosen and compacted slots keep their
    /// value (a higher ballot can only propose the chosen value again).
    /// Returns the record to persist.
    pub fn accept(
        &mut self,
        b: Ballot,
        first: Slot,
        batches: Vec<Vec<C>>,
    ) -> Result<Record<C>, Ballot> {
        if b < self.promised {
            return Err(self.promised);
        }
        self.promised = b;
        self.store(b, first, batches.clone());
        Ok(Record::Accept {
            ballot: b,
            first,
            batches,
        })
    }

    fn store(&mut self, b: Ballot, first: Slot, batches: Vec<Vec<C>>) {
        for (i, batch) in batches.into_iter().enumerate() {
            let slot = first + i as Slot;
            if slot <= self.snapshot.slot {
                continue;
            }
            match self.entries.get_mut(&slot) {
                Some(e) if e.chosen => e.ballot = b,
                Some(e) => {
                    e.ballot = b;
                    e.batch = batch;
                }
                None => {
                    self.entries.insert(
                        slot,
                        Entry {
                            ballot: b,
                            batch,
                            chosen: false,
                        },
                    );
                }
            }
        }
    }

    /// Record that `batch` is chosen at `slot` (learned, not accepted).
    pub fn learn(&mut self, slot: Slot, batch: Vec<C>) {
        if slot <= self.snapshot.slot {
            return;
        }
        let e = self.entries.entry(slot).or_insert(Entry {
            ballot: Ballot::ZERO,
            batch: Vec::new(),
            chosen: false,
        });
        if !e.chosen {
            e.batch = batch;
            e.chosen = true;
        }
    }

    /// What this acceptor reports in a Promise for slots from `from` on.
    pub fn promised_entries(&self, from: Slot) -> Vec<PromisedEntry<C>> {
        self.entries
            .range(from..)
            .map(|(&slot, e)| PromisedEntry {
                slot,
                ballot: e.ballot,
                batch: e.batch.clone(),
                chosen: e.chosen,
            })
            .collect()
    }

    /// Replace every slot up to `s.slot` by the snapshot. No-op for an
    /// older snapshot.
    pub fn install(&mut self, s: Snapshot) -> bool {
        if s.slot <= self.snapshot.slot {
            return false;
        }
        self.entries = self.entries.split_off(&(s.slot + 1));
        self.snapshot = s;
        true
    }
}

/// The value a new leader proposes at each slot above `commit` (phase 1's
/// choice, "Paxos made simple" §2.2 P2c): a value any promiser knows chosen,
/// else the value accepted in the highest ballot, else a no-op (an empty
/// batch) for a hole below the highest slot reported.
pub(crate) fn choose<'a, C: Clone + 'a>(
    commit: Slot,
    reports: impl IntoIterator<Item = &'a PromisedEntry<C>>,
) -> Vec<(Slot, Vec<C>)> {
    let mut best: BTreeMap<Slot, (bool, Ballot, &'a Vec<C>)> = BTreeMap::new();
    for e in reports {
        if e.slot <= commit {
            continue;
        }
        let key = (e.chosen, e.ballot);
        match best.get(&e.slot) {
            Some(&(chosen, ballot, _)) if (chosen, ballot) >= key => {}
            _ => {
                best.insert(e.slot, (e.chosen, e.ballot, &e.batch));
            }
        }
    }
    let Some(&last) = best.keys().next_back() else {
        return Vec::new();
    };
    (commit + 1..=last)
        .map(|s| (s, best.get(&s).map_or_else(Vec::new, |v| v.2.clone())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paxos::kv::{KvCmd, KvOp};
    use tessera_core::ids::{Key, TxnId};

    fn b(round: u64, node: u32) -> Ballot {
        Ballot {
            round,
            node: NodeId(node),
        }
    }

    fn cmd(n: u32) -> KvCmd {
        KvCmd {
            process: 1,
            id: TxnId::new(NodeId(9), 0, n),
            op: KvOp::Write(Key::new(0, n as u64)),
        }
    }

    #[test]
    fn promises_only_grow_and_lower_ballots_are_refused() {
        let mut a = Acceptor::<KvCmd>::new();
        assert_eq!(a.prepare(b(2, 1)), Ok(true));
        assert_eq!(a.prepare(b(2, 1)), Ok(false), "a duplicate Prepare");
        assert_eq!(a.prepare(b(1, 5)), Err(b(2, 1)));
        assert_eq!(a.prepare(b(2, 0)), Err(b(2, 1)), "same round, lower node");
        assert!(a.accept(b(1, 9), 1, vec![vec![cmd(1)]]).is_err());
        assert!(a.entries.is_empty(), "a refused accept changes nothing");
        assert!(a.accept(b(3, 0), 1, vec![vec![cmd(1)]]).is_ok());
        assert_eq!(a.promised, b(3, 0), "accepting raises the promise");
        assert_eq!(a.prepare(b(2, 9)), Err(b(3, 0)));
    }

    #[test]
    fn a_higher_ballot_replaces_an_accepted_value_but_not_a_chosen_one() {
        let mut a = Acceptor::<KvCmd>::new();
        a.accept(b(1, 0), 1, vec![vec![cmd(1)], vec![cmd(2)]])
            .unwrap();
        a.learn(2, vec![cmd(2)]);
        a.accept(b(2, 1), 1, vec![vec![cmd(3)], vec![cmd(4)]])
            .unwrap();
        let e = a.promised_entries(1);
        assert_eq!(e.len(), 2);
        assert_eq!((e[0].ballot, e[0].batch[0].id), (b(2, 1), cmd(3).id));
        assert!(e[1].chosen);
        assert_eq!(e[1].batch[0].id, cmd(2).id, "chosen value kept");
        assert_eq!(a.promised_entries(2).len(), 1);
    }

    #[test]
    fn phase_one_picks_chosen_then_highest_ballot_and_fills_holes() {
        let e = |slot, ballot, n, chosen| PromisedEntry {
            slot,
            ballot,
            batch: vec![cmd(n)],
            chosen,
        };
        let reports = [
            e(3, b(1, 0), 30, false),
            e(3, b(2, 1), 31, false),
            e(4, b(5, 2), 40, false),
            e(4, b(1, 0), 41, true),
            e(6, b(1, 0), 60, false),
            e(2, b(9, 9), 20, false),
        ];
        let v = choose(2, reports.iter());
        let ids: Vec<_> = v
            .iter()
            .map(|(s, batch)| (*s, batch.first().map(|c| c.id)))
            .collect();
        assert_eq!(
            ids,
            vec![
                (3, Some(cmd(31).id)),
                (4, Some(cmd(41).id)),
                (5, None),
                (6, Some(cmd(60).id)),
            ]
        );
        assert!(choose::<KvCmd>(7, reports.iter()).is_empty());
    }

    #[test]
    fn recovery_replays_promises_accepts_and_snapshots_in_order() {
        let recs = [
            Record::Promise(b(1, 0)),
            Record::Accept {
                ballot: b(1, 0),
                first: 1,
                batches: vec![vec![cmd(1)], vec![cmd(2)], vec![]],
            },
            Record::Snapshot(Snapshot {
                slot: 2,
                data: Bytes::from_static(b"state"),
            }),
            Record::Promise(b(4, 2)),
            Record::Accept {
                ballot: b(3, 1),
                first: 2,
                batches: vec![vec![cmd(5)], vec![cmd(6)]],
            },
        ];
        let mut bytes: Vec<Bytes> = recs.iter().map(Record::encode).collect();
        bytes.insert(1, Bytes::from_static(b"\x01not paxos"));
        let a = Acceptor::<KvCmd>::recover(&bytes);
        assert_eq!(a.promised, b(4, 2), "an older accept does not lower it");
        assert_eq!(a.snapshot.slot, 2);
        assert_eq!(&a.snapshot.data[..], b"state");
        let e = a.promised_entries(0);
        assert_eq!(e.len(), 1, "slots up to the snapshot are compacted");
        assert_eq!((e[0].slot, e[0].ballot), (3, b(3, 1)));
        assert_eq!(e[0].batch[0].id, cmd(6).id);

        // A torn record ends the replay without a panic.
        let mut torn = bytes.clone();
        let last = torn.pop().unwrap();
        torn.push(last.slice(..last.len() - 3));
        let a = Acceptor::<KvCmd>::recover(&torn);
        assert_eq!(a.promised, b(4, 2));
        let e = a.promised_entries(0);
        assert_eq!((e.len(), e[0].slot, e[0].ballot), (1, 3, b(1, 0)));
        assert!(e[0].batch.is_empty(), "the first accept's no-op");
    }
}
