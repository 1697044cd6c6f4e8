//! TAPIR: the Transactional Application Protocol for Inconsistent
//! Replication (Zhang et al., SOSP'15), as Janus §5–6 compares against it.
//!
//! TAPIR unifies concurrency control and replication: there is no leader
//! and no replicated log. Each replica of a shard validates on its own and
//! IR (inconsistent replication) only needs the replicas' answers to agree
//! often enough.
//!
//! # Phases
//! 1. **Read / execute** — the client reads each piece's keys at one
//!    replica (the closest), runs the piece itself and buffers its writes.
//! 2. **Prepare** (IR consensus operation) — at every replica of every
//!    participant shard, at a timestamp from the client's loosely
//!    synchronized clock; each replica runs TAPIR-OCC-CHECK (Fig. 8) and
//!    votes Ok, Abort, Abstain or Retry. *Fast path*: ⌈3f/2⌉+1 matching Ok
//!    votes decide a shard. *Slow path*: with a majority of votes but no
//!    fast quorum ([`TapirConfig::fast_wait`] after the majority answered,
//!    or longer when the servers queue), the client decides —
//!    Ok with f+1 Ok votes, else abort — and an Ok must be **Finalize**d at
//!    f+1 replicas (they adopt it) before it counts. Any Abort vote aborts.
//! 3. **Commit / Abort** (IR inconsistent operations) — the client tells
//!    the application at once and every replica in the background,
//!    resending until each one has made it durable. Replicas install
//!    writes by timestamp (Thomas' write rule), so they converge whatever
//!    the order.
//!
//! Aborted attempts (stale reads, conflicting prepared transactions, a
//! timestamp below a reader's) are retried by the client host with a new
//! timestamp. Replicas make every vote, finalized vote and outcome durable
//! before they answer; records issued while a flush runs share the next
//! one (group commit).
//!
//! # Views and replica recovery (IR §3.2.2, TAPIR §5.2.3)
//! Replicas answer clients only in the NORMAL status of a view, and every
//! reply carries the view: clients count replies of one view towards a
//! quorum, and a reply from a newer view voids the older ones (those
//! replicas are asked again). A replica that restarts after a crash is
//! RECOVERING: it replays its durable record, answers nobody, and asks for
//! a view change (StartViewChange, view + 1). Replicas that hear of a
//! higher view stop answering and send their record to the new view's
//! leader (replica `view mod n`) in DoViewChange; the leader merges f+1
//! records into the master record (IR-MERGE-RECORDS with TAPIR's merge,
//! see `replica::merge`: outcomes and finalized results are kept, a
//! tentative result in ⌈f/2⌉+1 of the records is kept (it may have been a
//! fast-path decision), the other tentative prepares are re-decided by
//! TAPIR-OCC-CHECK in timestamp order), and sends it in StartView. Every
//! replica adopts the master record — commits it missed while down
//! included — and resumes. A slow-path Finalize that reaches a replica
//! whose master record finalized another result is confirmed with that
//! result, and the client takes it. A view change that does not finish in
//! [`TapirConfig::view_timeout`] (its leader is down) moves to the next
//! view; a replica that learns it is behind joins the current view and
//! gets the leader's settled record.
//!
//! # Deviations
//! * **Recovery keeps the durable record.** IR recovers replicas without
//!   stable storage; here a restarted replica replays its log first and
//!   sends that record to the view change (it is valid: it answered only
//!   what was durable). A replica that lost its disk would need the
//!   shard's data by state transfer, which is not implemented.
//! * **No periodic synchronization.** IR's leader also runs view changes
//!   periodically to bring lagging replicas' records up to date; here view
//!   changes happen only on recovery (or a stalled view change), and a
//!   replica that was partitioned away catches up through the clients'
//!   resent Commit/Abort.
//! * **Kept fast-path results are not re-checked.** TAPIR-MERGE re-runs
//!   TAPIR-OCC-CHECK on a majority PREPARE-OK; we keep it as is, because a
//!   transaction committed on the fast path can fail that check after a
//!   later writer of its read set commits (see `replica::merge`).
//! * Outcomes travel in view changes only while replicas remember them
//!   ([`TapirConfig::keep`]): a replica down longer misses older commits.
//! * **No coordinator recovery.** TAPIR's cooperative termination of a
//!   transaction whose client failed is not implemented: a client host
//!   crash leaves its prepared transactions prepared at the replicas.
//! * Retry votes abort the attempt (the client host retries with a fresh
//!   timestamp) instead of re-preparing at the suggested one.

mod client;
mod msg;
mod replica;

pub use client::{fast_quorum, TapirClient};
pub use msg::{Footprint, Msg, Vote};
pub use replica::TapirReplica;

use tessera_core::ids::{Time, MS, US};
use tessera_core::protocol::{CoordinatorEnv, Protocol, ServerEnv};

/// Timeouts and clocks of TAPIR.
#[derive(Clone, Debug)]
pub struct TapirConfig {
    /// Unanswered reads, prepares, finalizes and outcomes are resent after
    /// this long (prepares, finalizes and outcomes then back off:
    /// [`Self::resend_after`]).
    pub retransmit: Time,
    /// How long the client waits for a fast quorum once a majority has
    /// answered (at least; see `TapirClient::fast_wait_over`) before the
    /// slow path.
    pub fast_wait: Time,
    /// Clocks are loosely synchronized: each client host's clock is ahead
    /// by up to this much.
    pub clock_skew: Time,
    /// A client stops resending an outcome this long after the decision.
    pub give_up: Time,
    /// How long replicas remember finished transactions.
    pub keep: Time,
    /// A view change that has not finished after this long (its leader is
    /// down) moves on to the next view.
    pub view_timeout: Time,
}

impl Default for TapirConfig {
    fn default() -> Self {
        TapirConfig {
            retransmit: 20 * MS,
            fast_wait: 2 * MS,
            clock_skew: 100 * US,
            give_up: 2_000 * MS,
            keep: 2_000 * MS,
            view_timeout: 80 * MS,
        }
    }
}

impl TapirConfig {
    /// How long a client waits for replies after the `resends`-th resend
    /// of what they answer: [`Self::retransmit`], doubling with every
    /// resend up to four times that. Replies that are slow because servers
    /// queue, not lost, are otherwise asked for again every period, and
    /// each duplicate is one more event in the queue that delays them.
    pub fn resend_after(&self, resends: u32) -> Time {
        self.retransmit << resends.min(2)
    }

    /// The defaults, with timeouts covering a slowest round trip of `rtt`.
    pub fn for_round_trip(rtt: Time) -> Self {
        let d = TapirConfig::default();
        TapirConfig {
            retransmit: d.retransmit.max(2 * rtt),
            fast_wait: d.fast_wait.max(rtt + rtt / 5),
            give_up: d.give_up.max(40 * rtt),
            keep: d.keep.max(40 * rtt),
            view_timeout: d.view_timeout.max(8 * rtt),
            ..d
        }
    }
}

/// The TAPIR protocol.
pub struct Tapir;

impl Protocol for Tapir {
    type Msg = Msg;
    type Config = TapirConfig;
    type Server = TapirReplica;
    type Coordinator = TapirClient;

    fn server(config: &TapirConfig, env: ServerEnv) -> TapirReplica {
        TapirReplica::new(config, env)
    }

    fn coordinator(config: &TapirConfig, env: CoordinatorEnv) -> TapirClient {
        TapirClient::new(config.clone(), env)
    }
}
