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
//! * [`nocc`] — NOCC: OCC by compares at one store, with a switch per rack
//!   that aborts doomed transactions early.
//! * [`disagg`] — passive memory nodes serving one-sided verbs (READ,
//!   WRITE, CAS, FAA) from a hash-addressed region: the disaggregated
//!   memory that OOCC and its baselines run on.
//! * [`oocc`] — OOCC (one-round read-only OCC with implicit leases, delayed
//!   write locks, write unlock) and its FORD-style OCC baseline, configured
//!   apart.
//! * [`paxos`] — Multi-Paxos, a replicated log per shard (Janus §5's layered
//!   baselines), as a component other server roles embed.
//! * [`layered`] — the layered baselines of Janus §5: 2PL and OCC whose
//!   participants replicate their prepare and commit records through their
//!   shard's Paxos log before they answer.
//! * [`tapir`] — TAPIR: OCC validated at every replica over inconsistent
//!   replication, fast path on a super-majority (Janus §5–6's unified
//!   baseline).
//! * [`tombstones`] — remembering finished transactions until their
//!   coordinator's floor passes them.
//! * [`depgraph`] — the dependency graph, SCCs and deterministic order
//!   that Rococo and Janus share.
//! * [`janus`] — Janus (OSDI '16): PreAccept / Accept / Commit over replica
//!   groups, fast path with identical dependencies, no aborts for
//!   conflicts.
//! * [`rococo`] — Rococo (OSDI '14): dependency tracking at start, deferred
//!   pieces reordered into one deterministic order at commit, no aborts;
//!   read-only transactions; the offline SC-graph checker.
//!
//! The harness's registry is the one place that maps protocol names to these
//! types.

mod by_type;
pub mod coco;
#[cfg(test)]
mod codec_laws;
pub mod depgraph;
pub mod disagg;
pub mod drtm;
pub mod dslr;
pub mod janus;
pub mod layered;
pub mod nocc;
pub mod occ;
pub mod oocc;
pub mod paxos;
pub mod piece;
pub mod rococo;
pub mod tapir;
pub mod tombstones;
pub mod twopc;
pub mod twopl;
