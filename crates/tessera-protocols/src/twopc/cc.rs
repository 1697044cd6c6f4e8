//! The difference between 2PL and OCC, as one trait the participant drives.

use tessera_core::ids::{Key, Time, TxnId, Version};
use tessera_core::storage::Store;
use tessera_core::txn::{AbortReason, Access};

/// A transaction's age for wound-wait: its first attempt's start, ties
/// broken by id. Smaller is older.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Priority {
    pub since: Time,
    pub txn: TxnId,
}

/// May a piece run now?
#[derive(Debug, PartialEq, Eq)]
pub enum Admit {
    /// Run it.
    Go,
    /// Not yet: the participant retries when [`ConcurrencyControl::release`]
    /// names this transaction as granted.
    Wait,
    /// The transaction must abort.
    Abort(AbortReason),
}

/// Concurrency control at one shard.
pub trait ConcurrencyControl: Send + 'static {
    type Config: Clone + Send + Sync + std::fmt::Debug + 'static;

    fn new(config: &Self::Config) -> Self;

    /// True when a transaction's priority is its client's rank, not its
    /// age: its coordinator then sends the client in the Execute's
    /// `since`. The Janus authors' 2PL ranks by coordinator (Janus §6.1,
    /// [`crate::twopl::Wound::JanusBaseline`]).
    fn rank_by_client(_config: &Self::Config) -> bool {
        false
    }

    /// Server CPU the participant charges per abort it carries out
    /// (`Ctx::charge`; see [`crate::twopl::TwoPlConfig::abort_cpu`]).
    fn abort_cpu(&self) -> Time {
        0
    }

    /// Admit a piece that reads `reads` and writes `writes`. Called again
    /// after a `Wait` once the transaction is granted; must then skip what
    /// it already holds. Transactions it must abort to make progress
    /// (wound-wait) go to `wounded`.
    fn admit(
        &mut self,
        store: &mut Store,
        who: Priority,
        reads: &[Access],
        writes: &[Access],
        wounded: &mut Vec<TxnId>,
    ) -> Admit;

    /// True when a transaction with several participants must hold its write
    /// locks at every participant before any participant validates its reads
    /// (OCC). Validating one shard while another is not yet locked lets two
    /// transactions each read what the other then writes, a cycle (FaRM §4
    /// locks, then validates; COCO §4 likewise).
    const LOCK_ROUND: bool = false;

    /// The lock round: lock `writes` for `txn`. Only called when
    /// [`Self::LOCK_ROUND`] is true.
    fn lock(&mut self, _store: &mut Store, _txn: TxnId, _writes: &[Key]) -> bool {
        true
    }

    /// Phase one of 2PC: may `txn`, which read `reads` (key, version seen)
    /// and buffered writes to `writes`, commit? On yes it must stay
    /// committable until commit or abort.
    fn prepare(
        &mut self,
        store: &mut Store,
        txn: TxnId,
        reads: &[(Key, Version)],
        writes: &[Key],
    ) -> bool;

    /// Take the write locks of `txn` again: it was prepared under an earlier
    /// leader of this replicated shard, and this replica has just taken over
    /// with no locks held. Prepared write sets never overlap, so this
    /// always succeeds. Read locks are not re-taken: a prepared
    /// transaction is past its lock point (its reads were locked, or
    /// validated, until it was prepared), and keeping only its write locks
    /// keeps every later reader behind its writes.
    fn relock(&mut self, store: &mut Store, txn: TxnId, writes: &[Key]);

    /// Release everything `txn` holds here (after its writes are installed on
    /// commit, or on abort). Transactions whose waits may now succeed go to
    /// `granted`.
    fn release(&mut self, store: &mut Store, txn: TxnId, writes: &[Key], granted: &mut Vec<TxnId>);
}
