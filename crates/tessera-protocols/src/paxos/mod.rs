//! Multi-Paxos: a replicated log for one replica group (shard), as an
//! embeddable sans-IO component.
//!
//! The layered baselines of Janus (§5, Table 1: 2PL/OCC + Multi-Paxos)
//! replicate each shard's log with Multi-Paxos; so do ours. This module is
//! the log alone, generic over the command type; [`kv`] is a replicated
//! register service built on it and tested for linearizability.
//!
//! # Protocol
//! * **Stable leader.** A replica wins an election by running phase 1
//!   (Prepare/Promise) once, over every slot it does not know to be chosen,
//!   then proposes with phase 2 only (Accept/Accepted) for as long as it
//!   keeps its ballot. Slots phase 1 finds accepted are proposed again with
//!   the value of the highest ballot; holes below them get no-ops.
//! * **Passive batching** (Janus §6, "passive batching" of the RPC layer):
//!   the leader has at most [`PaxosConfig::pipeline`] Accept batches in
//!   flight; everything proposed while they are goes out as one batch in
//!   one slot.
//! * **Commit** messages carry the leader's commit point and double as
//!   heartbeats. A follower marks chosen the slots it accepted in the
//!   leader's ballot; it fetches others with **CatchUp**, answered by
//!   **Learn** or, for compacted slots, **InstallSnapshot**.
//! * **Elections**: a follower that hears no leader within a randomized
//!   timeout (`[t, 2t)`, drawn from the context's RNG) stands with a ballot
//!   above every one it has seen. A lower ballot is answered with **Nack**,
//!   which makes a stale leader or candidate step down.
//! * **Durability**: promises and accepted values are persisted through
//!   [`Ctx::persist`]; the reply that reveals them goes out only once the
//!   record (and every earlier one) is durable. A candidate persists its
//!   own promise before sending Prepare, so no ballot is ever reused after a
//!   crash. Learned (chosen) values are not persisted: a restarted replica
//!   learns them again.
//! * **Compaction**: every [`PaxosConfig::snapshot_every`] slots the
//!   replica asks its embedder for a snapshot ([`Output::SnapshotDue`]),
//!   then drops the slots it covers from memory.
//!
//! # Embedding
//! A [`Replica`] is owned by a node (its *embedder*) and driven through the
//! embedder's own [`Ctx<M>`]:
//! * **messages**: the embedder's message type `M` implements
//!   `From<PaxosMsg<C>>` (typically one variant wrapping it); the embedder
//!   passes Paxos messages to [`Replica::on_message`];
//! * **timers and persistence**: the replica uses timer ids and persist
//!   tokens whose top byte is [`PaxosConfig::id_space`]; the embedder
//!   forwards every timer and durable-write completion to
//!   [`Replica::on_timer`] / [`Replica::on_persisted`], which say whether
//!   they were the replica's. Durable records start with
//!   [`RECORD_TAG`]; [`Replica::new`] skips records without it, so an
//!   embedder may keep records of its own in the same log;
//! * **start**: the embedder calls [`Replica::start`] from `on_start`;
//! * **proposing**: [`Replica::propose`] on the leader;
//! * **learning**: after every call into the replica, the embedder drains
//!   [`Replica::poll_output`]: chosen batches in slot order, snapshots to
//!   restore, snapshots to take, and changes of leadership.
//!
//! # Deviations
//! * The runtime offers no way to truncate a node's durable log, so
//!   compaction frees memory but not disk; a restart replays every record.
//! * Pre-vote is not implemented: a replica partitioned away keeps raising
//!   its ballot and deposes the leader when it returns (safe, costs one
//!   election).

mod acceptor;
mod ballot;
pub mod codec;
pub mod kv;
mod msg;
mod replica;

pub use acceptor::RECORD_TAG;
pub use ballot::Ballot;
pub use codec::{Command, DecodeError};
pub use msg::{PaxosMsg, PromisedEntry, Snapshot};
pub use replica::Replica;

use tessera_core::ids::{NodeId, Time, MS};

/// A position in the log. Slot 0 is before the first command.
pub type Slot = u64;

/// Timeouts and sizes of a Multi-Paxos group.
#[derive(Clone, Debug)]
pub struct PaxosConfig {
    /// The leader sends Commit (its heartbeat) this often; every replica
    /// checks its timeouts this often.
    pub heartbeat: Time,
    /// A follower stands for election after `[t, 2t)` without a leader.
    pub election_timeout: Time,
    /// Unacknowledged Accepts and catch-up requests are resent after this.
    pub retransmit: Time,
    /// Most commands in one slot.
    pub max_batch: usize,
    /// Most Accept batches in flight at once (1: pure passive batching).
    pub pipeline: usize,
    /// Ask for a snapshot every this many slots (0: never compact).
    pub snapshot_every: u64,
    /// Most slots in one Learn message.
    pub max_learn: usize,
    /// Top byte of this replica's timer ids and persist tokens; keep it
    /// below 0x80 inside a coordinator (the client host owns ids with the
    /// top bit set) and apart from the embedder's own ids.
    pub id_space: u8,
}

impl Default for PaxosConfig {
    fn default() -> Self {
        PaxosConfig {
            heartbeat: 2 * MS,
            election_timeout: 20 * MS,
            retransmit: 4 * MS,
            max_batch: 256,
            pipeline: 1,
            snapshot_every: 1000,
            max_learn: 64,
            id_space: 0x50,
        }
    }
}

impl PaxosConfig {
    /// The defaults, with timeouts scaled to a group whose slowest round
    /// trip between replicas is `rtt` (the defaults suit one data center;
    /// Janus' three regions need `rtt` = 243 ms): retransmit after two round
    /// trips, heartbeat every half, stand for election after ten.
    pub fn for_round_trip(rtt: Time) -> Self {
        let d = PaxosConfig::default();
        PaxosConfig {
            heartbeat: d.heartbeat.max(rtt / 2),
            retransmit: d.retransmit.max(2 * rtt),
            election_timeout: d.election_timeout.max(10 * rtt),
            ..d
        }
    }
}

/// What the replica hands its embedder, in order.
#[derive(Debug)]
pub enum Output<C> {
    /// Replace the application state by this snapshot (a restart, or a
    /// replica too far behind to catch up from the log).
    Restore(Snapshot),
    /// Apply `batch` (possibly empty: a no-op), chosen at `slot`. Slots come
    /// exactly once each, in order, above the last restored snapshot.
    Chosen { slot: Slot, batch: Vec<C> },
    /// Call [`Replica::compact`] with the state as of `slot` (everything up
    /// to it has been handed out).
    SnapshotDue { slot: Slot },
    /// This replica leads at `ballot`, and every slot chosen before its
    /// election has been handed out: its state is current.
    Leading { ballot: Ballot },
    /// This replica stopped leading; its unchosen proposals may or may not
    /// be chosen later. `leader` is the new leader if known.
    Following { leader: Option<NodeId> },
}

/// [`Replica::propose`] on a replica that does not lead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotLeader {
    /// The leader this replica believes in, if any.
    pub leader: Option<NodeId>,
}
