//! The messages of Multi-Paxos, named after the phases of "Paxos made
//! simple" (Lamport 2001): Prepare/Promise (phase 1), Accept/Accepted
//! (phase 2), Commit (the learners' message, which doubles as the leader's
//! heartbeat), and the catch-up messages of lagging replicas.

use super::ballot::Ballot;
use super::codec::Command;
use super::Slot;
use bytes::Bytes;
use tessera_core::node::WireSize;

/// The application state covering every slot up to `slot` (compaction).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub slot: Slot,
    pub data: Bytes,
}

/// One slot of an acceptor's log as reported in a Promise.
#[derive(Clone, Debug)]
pub struct PromisedEntry<C> {
    pub slot: Slot,
    /// The ballot the value was accepted in.
    pub ballot: Ballot,
    pub batch: Vec<C>,
    /// The acceptor knows the value is chosen.
    pub chosen: bool,
}

/// A Paxos message between the replicas of one group.
#[derive(Clone, Debug)]
pub enum PaxosMsg<C> {
    /// Phase 1a: a candidate asks for a promise for every slot from `from`
    /// on (all slots the candidate does not know to be chosen).
    Prepare { ballot: Ballot, from: Slot },
    /// Phase 1b: the acceptor promises to ignore ballots below `ballot` and
    /// reports what it accepted from `from` on, plus its snapshot when it has
    /// compacted slots the candidate lacks.
    Promise {
        ballot: Ballot,
        entries: Vec<PromisedEntry<C>>,
        snapshot: Option<Snapshot>,
    },
    /// Phase 2a: accept `batches[i]` at slot `first + i`. `commit` is the
    /// leader's commit point: every slot up to it is chosen.
    Accept {
        ballot: Ballot,
        first: Slot,
        batches: Vec<Vec<C>>,
        commit: Slot,
    },
    /// Phase 2b: the acceptor made slots `first..first + count` durable at
    /// `ballot`.
    Accepted {
        ballot: Ballot,
        first: Slot,
        count: u32,
    },
    /// A request at `ballot` was refused: the acceptor promised `promised`.
    Nack { ballot: Ballot, promised: Ballot },
    /// The leader's commit point, sent every heartbeat interval.
    Commit { ballot: Ballot, commit: Slot },
    /// A replica that lags asks for the chosen values from `from` on.
    CatchUp { from: Slot },
    /// Chosen values for slots `first..first + batches.len()`.
    Learn { first: Slot, batches: Vec<Vec<C>> },
    /// The sender compacted the slots asked for: here is its snapshot.
    InstallSnapshot { snapshot: Snapshot },
}

fn batches_size<C: WireSize>(batches: &[Vec<C>]) -> usize {
    batches
        .iter()
        .map(|b| 4 + b.iter().map(WireSize::wire_size).sum::<usize>())
        .sum()
}

/// Header (type, ballot) plus payload, as a compact binary codec would
/// encode it.
impl<C: Command> WireSize for PaxosMsg<C> {
    fn wire_size(&self) -> usize {
        const HEADER: usize = 1 + 12;
        HEADER
            + match self {
                PaxosMsg::Prepare { .. } | PaxosMsg::CatchUp { .. } => 8,
                PaxosMsg::Promise {
                    entries, snapshot, ..
                } => {
                    entries
                        .iter()
                        .map(|e| 8 + 12 + 1 + batches_size(std::slice::from_ref(&e.batch)))
                        .sum::<usize>()
                        + snapshot.as_ref().map_or(1, |s| 9 + s.data.len())
                }
                PaxosMsg::Accept { batches, .. } => 16 + batches_size(batches),
                PaxosMsg::Accepted { .. } => 12,
                PaxosMsg::Nack { .. } => 12,
                PaxosMsg::Commit { .. } => 8,
                PaxosMsg::Learn { batches, .. } => 8 + batches_size(batches),
                PaxosMsg::InstallSnapshot { snapshot } => 8 + snapshot.data.len(),
            }
    }
}
