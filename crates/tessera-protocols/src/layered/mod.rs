//! The layered baselines of Janus (§5, Table 1): 2PL + Multi-Paxos and
//! OCC + Multi-Paxos, as Spanner and Percolator layer them.
//!
//! Each shard is a Paxos group ([`crate::paxos`]). Coordinators run the
//! unchanged 2PC skeleton ([`crate::twopc`]) against the shards' leaders;
//! the leader executes pieces under 2PL or OCC exactly as the unreplicated
//! participant does. The one difference is the participant's log
//! ([`PaxosLog`]): its Prepare record (the buffered writes) and its
//! Commit/Abort records are replicated through the shard's Paxos log, and
//! the leader votes or acknowledges only once the record is chosen — two
//! replication round trips per distributed transaction, in series with
//! 2PC's own (Janus Table 1: "2*").
//!
//! Followers apply the same records in log order, so their store equals
//! the leader's and they hold the same prepared transactions. A replica
//! that takes over ([`crate::twopc::log::LogEvent::Leading`], raised only
//! once every earlier slot is applied) re-takes the write locks of the
//! prepared transactions it inherits; a deposed leader drops its locks and
//! the transactions the log does not know as prepared. Coordinators follow
//! the leader: a follower answers **NotLeader** with its hint, and a
//! coordinator whose requests go unanswered tries the next replica.
//!
//! # Deviations
//! * Janus' implementation has no leader failover and no failure recovery
//!   (§5); ours survives leader loss, minority crashes and partitions.
//! * Under 2PL, the authors' lock is per column and always exclusive; ours
//!   is per key, shared for reads. A participant aborts a wounded
//!   transaction at once (theirs lets it run on and refuses its Prepare),
//!   and the coordinator aborts on the first failed piece.
//! * Read-only pieces are not served by followers: every transaction,
//!   reads included, goes through the leader and its Prepare record, which
//!   also proves the leader was still leading when it voted.
//! * Snapshots carry the store, the prepared transactions and the commits
//!   still remembered, not the aborts: a replica restored from one answers
//!   a late duplicate of an aborted transaction as a stranger (no, or a
//!   fresh execution that times out), which the coordinator ignores.

mod log;

pub use log::{PaxosLog, PaxosLogConfig};

use crate::occ::Occ;
use crate::twopc::TwoPc;
use crate::twopl::TwoPl;

/// 2PL (wound-wait) + 2PC over Multi-Paxos. Which wound-wait is
/// configured ([`crate::twopl::Wound`]): the registry's `2pl-paxos` runs
/// the Janus authors' baseline (§6.1), Spanner's textbook one on request.
pub type TwoPlPaxos = TwoPc<TwoPl, PaxosLog>;
/// OCC + 2PC over Multi-Paxos.
pub type OccPaxos = TwoPc<Occ, PaxosLog>;
