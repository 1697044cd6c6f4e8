//! 2PL + 2PC (Rococo §5.1 "2PL"; COCO §7.1.2 "S2PL").
//!
//! A piece takes a shared lock on every key it only reads and an exclusive
//! lock on every key it writes before it runs; locks are held until the
//! transaction commits or aborts (strict 2PL), so prepare always votes yes.
//! Two ways to resolve a conflict, chosen by [`Policy`]:
//!
//! * **wound-wait** (Rosenkrantz et al.; Spanner): an older requester wounds
//!   (aborts) younger holders that are not prepared; a younger requester
//!   waits. Deadlock-free. What "older" means and whether younger *waiters*
//!   are wounded too is [`Wound`]: the textbook's age, kept across retries
//!   (every transaction eventually becomes the oldest and commits), or the
//!   Janus authors' baseline (Janus §6.1), whose priority is the attempt's
//!   id and whose older requester also aborts the younger waiters.
//! * **NO_WAIT**: any conflict aborts the requester at once.

mod locks;

use crate::twopc::{Admit, ConcurrencyControl, Priority};
use locks::LockTable;
use tessera_core::ids::{Key, Time, TxnId, Version};
use tessera_core::storage::Store;
use tessera_core::txn::{AbortReason, Access};

/// How a lock conflict is resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    WoundWait,
    NoWait,
}

/// Which wound-wait: who is older, and whom an older requester aborts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wound {
    /// Rosenkrantz et al., as Spanner runs it: a transaction's age is its
    /// first attempt's start, kept across retries; an older requester
    /// wounds the younger holders that are not prepared and queues ahead of
    /// the younger waiters, who keep waiting.
    Textbook,
    /// The 2PL baseline of the Janus paper as its authors' code runs it
    /// (§6.1: pieces dispatched in parallel, "the wound-wait mechanism
    /// results in many false positives for deadlocks"; Fig. 3b: 2PL's
    /// commit rate no higher than OCC's). Two differences from
    /// [`Wound::Textbook`]: the priority is the attempt's transaction id,
    /// `(coordinator << 32) + counter`, a new one at each retry, so a retry
    /// does not keep its age and the order of two transactions is fixed by
    /// their coordinators, not by which arrived first (ours: the client's
    /// rank, then the attempt's [`TxnId`]; the participant gets the rank
    /// in place of the age, [`ConcurrencyControl::rank_by_client`]); and an
    /// older requester aborts every younger
    /// request on the key, waiting or holding, that is not prepared — a
    /// younger waiter dies rather than waits. Under parallel dispatch the
    /// two make a wound of nearly every conflict whose arrival order
    /// disagrees with the ids, deadlock or not.
    JanusBaseline,
}

#[derive(Clone, Debug)]
pub struct TwoPlConfig {
    pub policy: Policy,
    /// Which wound-wait, under [`Policy::WoundWait`].
    pub wound: Wound,
    /// Server CPU charged per abort at a participant, ns (sim only; 0, the
    /// default, charges nothing beyond the abort's messages). A sensitivity
    /// knob, not a model: Rococo §5.5 explains 2PL's collapse under
    /// contention by its aborts, which cost a real system undo and
    /// lock-queue work that the simulator's flat per-event cost leaves out.
    pub abort_cpu: Time,
}

/// 2PL's concurrency control at one shard.
pub struct TwoPl {
    policy: Policy,
    wound: Wound,
    locks: LockTable,
    abort_cpu: Time,
}

impl ConcurrencyControl for TwoPl {
    type Config = TwoPlConfig;

    fn new(config: &TwoPlConfig) -> Self {
        TwoPl {
            policy: config.policy,
            wound: config.wound,
            locks: LockTable::default(),
            abort_cpu: config.abort_cpu,
        }
    }

    fn rank_by_client(config: &TwoPlConfig) -> bool {
        config.policy == Policy::WoundWait && config.wound == Wound::JanusBaseline
    }

    fn abort_cpu(&self) -> Time {
        self.abort_cpu
    }

    fn admit(
        &mut self,
        _store: &mut Store,
        who: Priority,
        reads: &[Access],
        writes: &[Access],
        wounded: &mut Vec<TxnId>,
    ) -> Admit {
        // Under the Janus baseline `who.since` is the client's rank (see
        // `rank_by_client`), so the order is (client, attempt id).
        let wound_waiters = self.wound == Wound::JanusBaseline;
        let exclusive = writes.iter().map(|a| (a.key, true));
        let shared = reads
            .iter()
            .filter(|r| !writes.iter().any(|w| w.key == r.key))
            .map(|a| (a.key, false));
        for (key, x) in exclusive.chain(shared) {
            match self
                .locks
                .acquire(key, who, x, self.policy, wound_waiters, wounded)
            {
                locks::Acquire::Granted => {}
                locks::Acquire::Queued => return Admit::Wait,
                locks::Acquire::Conflict => return Admit::Abort(AbortReason::LockConflict),
            }
        }
        Admit::Go
    }

    fn prepare(&mut self, _: &mut Store, txn: TxnId, _: &[(Key, Version)], _: &[Key]) -> bool {
        self.locks.set_prepared(txn);
        true
    }

    fn relock(&mut self, _: &mut Store, txn: TxnId, writes: &[Key]) {
        let who = Priority { since: 0, txn };
        let mut wounded = Vec::new();
        for &k in writes {
            let got = self
                .locks
                .acquire(k, who, true, self.policy, false, &mut wounded);
            debug_assert!(
                matches!(got, locks::Acquire::Granted) && wounded.is_empty(),
                "prepared write sets overlap"
            );
        }
        self.locks.set_prepared(txn);
    }

    fn release(&mut self, _: &mut Store, txn: TxnId, _: &[Key], granted: &mut Vec<TxnId>) {
        self.locks.release(txn, granted);
    }
}

/// 2PL + 2PC.
pub type TwoPlProtocol = crate::twopc::TwoPc<TwoPl>;

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::ids::NodeId;

    fn shard(wound: Wound) -> TwoPl {
        TwoPl::new(&TwoPlConfig {
            policy: Policy::WoundWait,
            wound,
            abort_cpu: 0,
        })
    }

    /// The priority a participant gets: the first attempt's start, or under
    /// the Janus baseline the client's rank (`rank_by_client`).
    fn prio(wound: Wound, age: Time, rank: u32, txn: TxnId) -> Priority {
        let since = match wound {
            Wound::Textbook => age,
            Wound::JanusBaseline => rank.into(),
        };
        Priority { since, txn }
    }

    /// One piece that writes `key` (the micro-benchmark's read-modify-write).
    fn write(cc: &mut TwoPl, who: Priority, key: Key, wounded: &mut Vec<TxnId>) -> Admit {
        let w = [Access::all(key)];
        cc.admit(&mut Store::new(), who, &w, &w, wounded)
    }

    #[test]
    fn only_the_janus_baseline_ranks_by_client() {
        let config = |policy, wound| TwoPlConfig {
            policy,
            wound,
            abort_cpu: 0,
        };
        assert!(TwoPl::rank_by_client(&config(
            Policy::WoundWait,
            Wound::JanusBaseline
        )));
        assert!(!TwoPl::rank_by_client(&config(
            Policy::WoundWait,
            Wound::Textbook
        )));
        assert!(!TwoPl::rank_by_client(&config(
            Policy::NoWait,
            Wound::JanusBaseline
        )));
    }

    /// Janus §6.1: both transactions' pieces are dispatched in parallel to
    /// shards A and B and reach them in opposite orders, a deadlock in the
    /// making. `early` started first, from client 7; `late` started 1 ms
    /// later, from client 3. The textbook wounds the younger by start time
    /// (`late`, at B); the Janus authors' baseline ranks by client, so
    /// `early` is the lower and is wounded at A.
    #[test]
    fn under_parallel_dispatch_the_older_wounds_the_younger_at_the_shard_it_reached_second() {
        let key_a = Key::new(0, 1);
        let key_b = Key::new(1, 1);
        let early = TxnId::new(NodeId(2), 0, 1);
        let late = TxnId::new(NodeId(1), 0, 7);
        for (wound, victim) in [(Wound::Textbook, late), (Wound::JanusBaseline, early)] {
            let early_p = prio(wound, 1_000, 7, early);
            let late_p = prio(wound, 2_000, 3, late);
            let (mut a, mut b) = (shard(wound), shard(wound));
            let mut wounded = Vec::new();
            // A: early, then late. B: late, then early.
            assert_eq!(write(&mut a, early_p, key_a, &mut wounded), Admit::Go);
            assert_eq!(write(&mut b, late_p, key_b, &mut wounded), Admit::Go);
            assert_eq!(write(&mut a, late_p, key_a, &mut wounded), Admit::Wait);
            let at_a = std::mem::take(&mut wounded);
            assert_eq!(write(&mut b, early_p, key_b, &mut wounded), Admit::Wait);
            let at_b = std::mem::take(&mut wounded);
            let (expect_a, expect_b) = if victim == early {
                (vec![early], vec![])
            } else {
                (vec![], vec![late])
            };
            assert_eq!((at_a, at_b), (expect_a, expect_b), "{wound:?}");
            // The victim's abort frees its lock for the survivor.
            let (cc, survivor) = if victim == early {
                (&mut a, late)
            } else {
                (&mut b, early)
            };
            let mut granted = Vec::new();
            cc.release(&mut Store::new(), victim, &[], &mut granted);
            assert_eq!(granted, vec![survivor], "{wound:?}");
        }
    }

    /// The Janus authors' lock aborts a younger *waiter* when an older
    /// request arrives (it dies instead of waiting, a false positive: no
    /// deadlock), where the textbook lets the older one queue ahead of it.
    /// A prepared holder is wounded by neither.
    #[test]
    fn an_older_requester_wounds_younger_waiters_only_in_the_janus_baseline() {
        let key = Key::new(0, 1);
        let holder = TxnId::new(NodeId(3), 0, 1);
        let young = TxnId::new(NodeId(2), 0, 1);
        let old = TxnId::new(NodeId(1), 0, 1);
        for (wound, expect) in [
            (Wound::Textbook, vec![]),
            (Wound::JanusBaseline, vec![young]),
        ] {
            let at = |n: u32, txn| prio(wound, n.into(), n, txn);
            let mut cc = shard(wound);
            let mut wounded = Vec::new();
            assert_eq!(write(&mut cc, at(0, holder), key, &mut wounded), Admit::Go);
            assert!(cc.prepare(&mut Store::new(), holder, &[], &[key]));
            assert_eq!(write(&mut cc, at(2, young), key, &mut wounded), Admit::Wait);
            assert!(wounded.is_empty());
            assert_eq!(write(&mut cc, at(1, old), key, &mut wounded), Admit::Wait);
            assert_eq!(wounded, expect, "{wound:?}");
            for w in &wounded {
                cc.release(&mut Store::new(), *w, &[], &mut Vec::new());
            }
            // The holder commits: the old requester is next either way.
            let mut granted = Vec::new();
            cc.release(&mut Store::new(), holder, &[key], &mut granted);
            assert_eq!(granted, vec![old], "{wound:?}");
        }
    }

    /// A retry keeps its age in the textbook (its first start), not in the
    /// Janus baseline, where its new attempt id decides between two
    /// transactions of one client rank: `retry` started at 100, before the
    /// holder (500), but its attempt id is larger.
    #[test]
    fn a_retry_keeps_its_age_only_in_the_textbook() {
        let key = Key::new(0, 1);
        let holder = TxnId::new(NodeId(1), 0, 5);
        let retry = TxnId::new(NodeId(1), 0, 9);
        let wounds = |wound| {
            let mut cc = shard(wound);
            let mut wounded = Vec::new();
            let h = prio(wound, 500, 4, holder);
            let r = prio(wound, 100, 4, retry);
            assert_eq!(write(&mut cc, h, key, &mut wounded), Admit::Go);
            assert_eq!(write(&mut cc, r, key, &mut wounded), Admit::Wait);
            wounded
        };
        assert_eq!(wounds(Wound::Textbook), vec![holder]);
        assert_eq!(wounds(Wound::JanusBaseline), vec![]);
    }
}
