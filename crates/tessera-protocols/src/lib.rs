//! The concurrency-control protocols, one folder each.
//!
//! * [`twopc`] — the part 2PL and OCC share: a two-phase-commit coordinator
//!   that dispatches pieces in parallel (Janus §5), and a participant that
//!   executes pieces at the shard and drives a pluggable
//!   [`twopc::ConcurrencyControl`]. Variants configure the difference; they
//!   do not copy the skeleton.
//! * [`twopl`] — two-phase locking with shared and exclusive locks, under
//!   wound-wait (Spanner; Rococo §5.1) or NO_WAIT (COCO §7.1.2).
//! * [`occ`] — optimistic concurrency control: execute returning versions,
//!   prepare locks the write set and validates the reads, commit writes back
//!   (Rococo §5.1; COCO §4).
//!
//! * [`paxos`] — Multi-Paxos, a replicated log per shard (Janus §5's layered
//!   baselines), as a component other server roles embed.
//!
//! The harness's registry is the one place that maps protocol names to these
//! types.

pub mod occ;
pub mod paxos;
pub mod twopc;
pub mod twopl;
