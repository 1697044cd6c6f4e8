//! 2PL + 2PC (Rococo §5.1 "2PL"; COCO §7.1.2 "S2PL").
//!
//! A piece takes a shared lock on every key it only reads and an exclusive
//! lock on every key it writes before it runs; locks are held until the
//! transaction commits or aborts (strict 2PL), so prepare always votes yes.
//! Two ways to resolve a conflict, chosen by [`Policy`]:
//!
//! * **wound-wait** (Rosenkrantz et al.; Spanner): an older requester wounds
//!   (aborts) younger holders that are not prepared; a younger requester
//!   waits. Age is the first attempt's start, kept across retries, so every
//!   transaction eventually becomes the oldest and commits. Deadlock-free.
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

#[derive(Clone, Debug)]
pub struct TwoPlConfig {
    pub policy: Policy,
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
    locks: LockTable,
    abort_cpu: Time,
}

impl ConcurrencyControl for TwoPl {
    type Config = TwoPlConfig;

    fn new(config: &TwoPlConfig) -> Self {
        TwoPl {
            policy: config.policy,
            locks: LockTable::default(),
            abort_cpu: config.abort_cpu,
        }
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
        let exclusive = writes.iter().map(|a| (a.key, true));
        let shared = reads
            .iter()
            .filter(|r| !writes.iter().any(|w| w.key == r.key))
            .map(|a| (a.key, false));
        for (key, x) in exclusive.chain(shared) {
            match self.locks.acquire(key, who, x, self.policy, wounded) {
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
            let got = self.locks.acquire(k, who, true, self.policy, &mut wounded);
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
