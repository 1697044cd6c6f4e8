//! Two-phase commit over pieces: the skeleton 2PL and OCC share.
//!
//! Phases, by message:
//!
//! 1. **Execute** — the coordinator sends every piece whose inputs are ready
//!    to its shard, one message per shard, in parallel. The participant asks
//!    its [`ConcurrencyControl`] to admit the piece (2PL takes locks, OCC
//!    admits at once), runs the piece's function on the shard's data, buffers
//!    the writes and returns the reads with their versions.
//! 2. **Lock** (only for protocols that validate, i.e. OCC, and only with
//!    several participants) — every participant that writes locks its write
//!    set; validation starts only when all hold their locks.
//! 3. **Prepare** — the coordinator asks each participant to vote. 2PL
//!    already holds its locks; OCC validates its reads here. A transaction
//!    with one participant skips the vote: **CommitOnePhase** locks,
//!    validates and commits in one step.
//!    **One-shot**: the Execute that carries such a transaction's last
//!    pieces asks the participant to do that as soon as they ran, and
//!    its ExecuteOk says `committed`: two messages a transaction instead
//!    of four (COCO runs single-partition transactions without 2PC for
//!    the same reason). The participant keeps the replies in the
//!    transaction's tombstone, since that one answer may be lost; one
//!    restarted since has lost them and answers a duplicate with the bare
//!    commit, which the client records as in doubt
//!    ([`tessera_core::txn::TxnOutcome::InDoubt`]).
//! 4. **Commit / Abort** — the coordinator makes a commit decision durable
//!    before it sends it or tells the client (presumed abort: aborts are not
//!    logged). Participants install the buffered writes and release.
//!
//! Faults: every request is retransmitted until answered and every handler is
//! idempotent: a finished transaction leaves a tombstone at its participants
//! until its coordinator's *floor* passes it (every Execute carries the
//! oldest transaction its coordinator still works on; anything older is
//! over, and its late messages are ignored) or, if the coordinator falls
//! silent, until `Timeouts::tombstone` has passed. So tombstones number the
//! transactions in flight, not the throughput times a timeout. A
//! participant aborts a transaction that is not prepared when its
//! coordinator falls silent, and asks the coordinator (**Inquire**) about a
//! prepared one; a restarted coordinator answers from its log, and aborts
//! what it does not find there.
//!
//! Durability and replication are a configured difference, not a copy: the
//! participant puts its prepare and decision records into a
//! [`ParticipantLog`] and answers when they come back ([`log`]).
//! Unreplicated, they come back once durable in the node's write-ahead log
//! ([`WalLog`], which a restarted participant replays); in the layered
//! baselines ([`crate::layered`]) they come back once chosen by the shard's
//! Paxos group, and coordinators follow the group's leader (**NotLeader**
//! redirects them).

mod cc;
mod coordinator;
mod image;
pub mod log;
mod msg;
mod participant;
mod wal;

pub use cc::{Admit, ConcurrencyControl, Priority};
pub use coordinator::TwoPcCoordinator;
pub use log::{LogRecord, ParticipantLog};
pub use msg::Msg;
pub use participant::Participant;
pub use wal::WalLog;

use tessera_core::ids::{Time, MS};

/// Timeouts of the 2PC skeleton.
#[derive(Clone, Debug)]
pub struct Timeouts {
    /// A coordinator resends an unanswered request after this long (doubling
    /// at each resend, up to 8x).
    pub retransmit: Time,
    /// A participant aborts a transaction that is not prepared after this
    /// long without a word from its coordinator.
    pub participant: Time,
    /// A participant inquires about a prepared transaction after this long
    /// without a decision.
    pub inquire: Time,
    /// How long finished transactions are remembered (to answer duplicates)
    /// when their coordinator's floor does not pass them first.
    pub tombstone: Time,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            retransmit: 20 * MS,
            participant: 1000 * MS,
            inquire: 50 * MS,
            tombstone: 2000 * MS,
        }
    }
}

/// A protocol made of the 2PC skeleton, a concurrency control `C` and a
/// participant log `L`.
pub struct TwoPc<C, L = WalLog>(std::marker::PhantomData<(C, L)>);

/// Configuration of a [`TwoPc`] protocol.
#[derive(Clone, Debug)]
pub struct TwoPcConfig<X, LC = ()> {
    pub cc: X,
    pub timeouts: Timeouts,
    /// The participant log's configuration.
    pub log: LC,
}

impl<C: ConcurrencyControl, L: ParticipantLog> tessera_core::protocol::Protocol for TwoPc<C, L> {
    type Msg = Msg;
    type Config = TwoPcConfig<C::Config, L::Config>;
    type Server = Participant<C, L>;
    type Coordinator = TwoPcCoordinator;

    fn server(config: &Self::Config, env: tessera_core::protocol::ServerEnv) -> Self::Server {
        let log = L::open(&config.log, &env);
        Participant::new(C::new(&config.cc), log, config.timeouts.clone(), env)
    }

    fn coordinator(
        config: &Self::Config,
        env: tessera_core::protocol::CoordinatorEnv,
    ) -> Self::Coordinator {
        TwoPcCoordinator::new(
            config.timeouts.clone(),
            C::LOCK_ROUND,
            C::rank_by_client(&config.cc),
            env,
        )
    }
}
