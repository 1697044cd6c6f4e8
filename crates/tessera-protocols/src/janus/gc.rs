//! Garbage collection of a Janus replica's dependency graph. The paper's
//! prototype "truncate[s] the dependency graph as transactions finish"
//! (§5) without saying when that is safe; Rococo's epochs (OSDI '14, §3.4,
//! shared code: [`crate::depgraph::graph::DepGraph::collect`]) say *how*:
//! a vertex untouched for two epochs is dropped, leaving a tombstone of
//! ids. This module says *when*, for Janus.
//!
//! A replica forgets a transaction T with pieces here only when
//!
//! 1. it executed T (`processed_S[T]`, Algorithm 4, l. 56) and T is
//!    DECIDED here with every member of its component here finished;
//! 2. **every replica of every shard T involves announced that it executed
//!    T** ([`super::msg::Msg::Executed`]). Until then one of them may still
//!    need T's Commit (a replica that missed it Inquires, Algorithm 4,
//!    l. 45), T's piece outputs (§4), or its consensus dependencies (a
//!    recovery coordinator's Prepare, §3.3, Algorithm 6, runs only at a
//!    replica that has not seen T committed). Once all of them executed
//!    T, no replica will ever recover it, and every dependency on T that
//!    will ever exist was created by a PreAccept before T executed there
//!    (the tracker names only unexecuted transactions and the last
//!    executed ones, and forgets T with its vertex:
//!    [`super::tracker::Tracker::forget`]);
//! 3. T has been untouched for two epochs and nobody here waits for it.
//!
//! A vertex of a transaction without pieces here (an ancestor learnt by
//! Inquire) is forgotten once it is DECIDED with nothing unexecuted behind
//! it here, untouched for two epochs: no other server asks this one about
//! it.
//!
//! What is kept of a forgotten T is a [`Tombstone`]: committed, the abandon
//! flag, and the members of its strongly connected component, ids only
//! (§3.2: every server computes the same component for a committing
//! transaction, since its dependencies are the consensus ones). It answers
//! what can still come late:
//!
//! * **Commit, PreAccept, Accept retransmissions** and a stale recovery
//!   coordinator's **Prepare**: [`super::msg::Msg::Forgotten`] — the
//!   transaction committed and executed everywhere; a coordinator missing
//!   a shard's results reports it in doubt (never wrong, never retried).
//! * **Inquire** from a server one of whose transactions depends on T:
//!   `Forgotten` with T's component, which the asker adopts as DECIDED,
//!   exactly as from a live answer: T is cut off from later walks, and a
//!   member of T's component there gets its place in the same order.
//! * **A dependency on T** in a later Commit or Inquire answer: T is not
//!   put back into the graph; a missing ancestor is a cut-off in
//!   [`crate::depgraph::graph::DepGraph`]'s walks and finished for
//!   execution (it is DECIDED in a component done here), never a STARTED
//!   vertex to wait for or recover.
//!
//! Tombstones live [`super::JanusConfig::forget_epochs`] epochs. A message
//! about T later than that (a Commit naming T as a dependency delayed
//! longer than any timeout and every recovery of it) would find T unknown:
//! the bound is a timing assumption, as Rococo's own two-epoch one.
//!
//! A replica cut off (or down) while the others announced T learns that
//! they executed it from their echo of its own announcement of T. A
//! replica that executed T a while ago and has not heard a peer of its
//! shard announce T tells that peer about T again
//! ([`super::msg::Announce::Lagging`]): the peer inquires T if it missed
//! it, or echoes that it executed it. A replica announces executing T
//! only once T's Executed record is durable ([`super::wal`]): after a
//! crash it must still hold what the others forgot.

use std::sync::Arc;
use tessera_core::ids::{NodeId, TxnId};
use tessera_core::FastMap;

/// What is kept of a forgotten transaction (ids only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Tombstone {
    /// The epoch it was forgotten in.
    pub epoch: u64,
    pub abandon: bool,
    /// Its component when of two or more members, in execution order.
    pub scc: Option<Arc<[TxnId]>>,
}

/// A replica's garbage-collection state: the epoch, the tombstones, which
/// replicas announced executing which transactions, and what to announce.
#[derive(Default)]
pub(super) struct Gc {
    pub epoch: u64,
    gone: FastMap<TxnId, Tombstone>,
    executed_by: FastMap<TxnId, Vec<NodeId>>,
    /// Executed here since the last announcement, and in the one before.
    fresh: Vec<TxnId>,
    announced: Arc<[TxnId]>,
    /// Forgotten since the last report.
    pub forgotten: u64,
}

impl Gc {
    pub fn gone(&self, t: TxnId) -> Option<&Tombstone> {
        self.gone.get(&t)
    }

    pub fn is_gone(&self, t: TxnId) -> bool {
        self.gone.contains_key(&t)
    }

    /// `from` announced that it executed `t`. True the first time.
    pub fn heard(&mut self, t: TxnId, from: NodeId) -> bool {
        if self.gone.contains_key(&t) {
            return false;
        }
        let by = self.executed_by.entry(t).or_default();
        let new = !by.contains(&from);
        if new {
            by.push(from);
        }
        new
    }

    /// `r` announced executing `t`.
    pub fn announced_by(&self, t: TxnId, r: NodeId) -> bool {
        self.executed_by.get(&t).is_some_and(|v| v.contains(&r))
    }

    /// Every one of `replicas` announced executing `t`.
    pub fn everywhere(&self, t: TxnId, mut replicas: impl Iterator<Item = NodeId>) -> bool {
        let by = self.executed_by.get(&t).map_or(&[][..], |v| v.as_slice());
        replicas.all(|r| by.contains(&r))
    }

    /// `t` executed here: announce it twice.
    pub fn executed(&mut self, t: TxnId) {
        self.fresh.push(t);
    }

    /// What to announce now: executed since the last announcement, and in
    /// the one before.
    pub fn announcement(&mut self) -> Vec<TxnId> {
        let fresh = std::mem::take(&mut self.fresh);
        let mut txns = self.announced.to_vec();
        txns.extend_from_slice(&fresh);
        self.announced = fresh.into();
        txns
    }

    /// `t` is forgotten now.
    pub fn bury(&mut self, t: TxnId, abandon: bool, scc: Option<Arc<[TxnId]>>) {
        self.executed_by.remove(&t);
        self.forgotten += 1;
        self.gone.insert(
            t,
            Tombstone {
                epoch: self.epoch,
                abandon,
                scc,
            },
        );
    }

    /// Drop tombstones older than `keep` epochs.
    pub fn expire(&mut self, keep: u64) {
        let epoch = self.epoch;
        self.gone.retain(|_, g| g.epoch + keep > epoch);
    }

    pub fn tombstones(&self) -> usize {
        self.gone.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(i: u32) -> TxnId {
        TxnId::new(NodeId(9), 0, i)
    }

    #[test]
    fn forgettable_only_once_every_replica_announced() {
        let mut gc = Gc::default();
        let all = [NodeId(1), NodeId(2), NodeId(4)];
        assert!(!gc.everywhere(t(1), all.iter().copied()));
        assert!(gc.heard(t(1), NodeId(1)));
        assert!(gc.heard(t(1), NodeId(2)));
        assert!(!gc.heard(t(1), NodeId(2)));
        assert!(!gc.everywhere(t(1), all.iter().copied()));
        gc.heard(t(1), NodeId(4));
        assert!(gc.everywhere(t(1), all.iter().copied()));
        // Another transaction's announcements do not count.
        assert!(!gc.everywhere(t(2), all.iter().copied()));
    }

    #[test]
    fn announcements_repeat_once_and_tombstones_expire() {
        let mut gc = Gc::default();
        gc.executed(t(1));
        assert_eq!(gc.announcement(), [t(1)]);
        gc.executed(t(2));
        assert_eq!(gc.announcement(), [t(1), t(2)]);
        assert_eq!(gc.announcement(), [t(2)]);
        assert!(gc.announcement().is_empty());

        gc.epoch = 3;
        gc.bury(t(1), true, None);
        assert_eq!(gc.gone(t(1)).map(|g| g.abandon), Some(true));
        // A late announcement of a forgotten one is not recorded again.
        gc.heard(t(1), NodeId(1));
        assert!(gc.executed_by.is_empty());
        gc.epoch = 12;
        gc.expire(10);
        assert!(gc.is_gone(t(1)));
        gc.epoch = 13;
        gc.expire(10);
        assert!(!gc.is_gone(t(1)));
    }
}
