//! Janus: consolidating concurrency control and consensus for commits under
//! conflicts (Mu et al., OSDI '16; `/work/shared/papers/janus-osdi16.txt`).
//!
//! **Guarantee**: strict serializability of one-shot transactions (and
//! of §4's transactions with pre-determined keys) over
//! replicated shards, with no aborts for conflicts: every transaction whose
//! coordinator finishes PreAccept commits.
//!
//! **Phases** (§3.1, Algorithms 1–5), by message:
//!
//! 1. **PreAccept** ([`msg::Msg::PreAccept`]) — the coordinator sends the
//!    transaction to every replica of every participating shard in
//!    parallel. A replica records the conflicts with transactions it has
//!    seen ([`tracker`]) and replies with the direct dependencies.
//! 2. **Fast path or Accept** ([`quorum`]) — when every shard's replicas
//!    all returned identical dependencies, the union is the consensus and
//!    the coordinator commits at once; otherwise it sends the union from a
//!    majority in an **Accept** with ballot 0, and commits after a majority
//!    of Accept-OKs per shard (§3.2). Once a majority agrees it waits for
//!    the rest up to a retransmit period (the paper does not say how
//!    long); with [`JanusConfig::fast_path_wait_by_rtt`] only where, by the
//!    round trips it measured, the fast path may save more than it costs
//!    ([`quorum::fast_path_pays`]).
//! 3. **Commit** — every replica puts the consensus dependencies into its
//!    dependency graph (shared with Rococo: [`crate::depgraph`]), waits
//!    until every ancestor is committing, sending an **Inquire** to a
//!    server of an ancestor it does not know, and executes strongly
//!    connected components in one deterministic order (ties by transaction
//!    id). The coordinator answers the client with the first reply of each
//!    shard.
//!
//! **Replicas converge**: a replica that pre-accepted a transaction and
//! never received its Commit inquires the other replicas for it; a
//! restarted one also asks them what committed while it was down.
//!
//! **Deviations and what is not built yet**, each stated:
//! * Conflict tracking keeps every unexecuted conflicting transaction per
//!   key rather than Rococo's one hop; see [`tracker`] for why one hop is
//!   unsound once commits replace dependencies with a quorum's.
//! * Coordinator failure recovery (§3.3) is built: a replica that
//!   pre-accepted a transaction still not committed after
//!   [`JanusConfig::recover_after`] becomes its recovery coordinator
//!   (Algorithm 6): **Prepare** ([`msg::Msg::Prepare`]) with a higher
//!   ballot, [`recovery::decide`] among the Prepare-OKs, then the same
//!   PreAccept (never the fast path) / Accept / Commit as the coordinator's
//!   ([`driver`]), retried with a higher ballot after a back-off when
//!   another recovery coordinator's ballot rejects it. A suspected live
//!   coordinator that meets a higher ballot learns the decision by Inquire.
//!   Replicas promise Prepare ballots also for transactions they never
//!   pre-accepted, so a late PreAccept cannot contradict an abandon.
//! * Not in the paper: replicas announce to their shard's other replicas
//!   what committed lately ([`msg::Msg::Committed`]), so that a replica that
//!   missed a transaction whose coordinator failed mid-Commit converges.
//! * Replica crashes are survived (not in the paper, whose §3.3 recovers
//!   coordinators only): a replica makes durable, in the engine's log
//!   ([`wal`]), what it promised before answering — PreAccept (procedure,
//!   ballot, dependencies), Accept, the ballots of Prepare and of its own
//!   recoveries — and what it committed, executed (with the values
//!   written) and forgot. A restarted replica replays the log into a
//!   freshly loaded store, its graph, tracker, ballots and tombstones, so
//!   it never contradicts a promise; it resumes pending recoveries and
//!   executions, and asks its shard's other replicas what committed while
//!   it was down ([`msg::Msg::CatchUp`]), learning each by Inquire. It
//!   announces executing a transaction only once that is durable, so the
//!   others never forget what it could lose. The runtime checkpoints the
//!   log with the replica's image ([`image`], `Node::snapshot`), and a
//!   restart replays the last image and the records after it; a replica
//!   whose disk is lost is not rebuilt from its peers. A workload without a procedure codec (`counter`) leaves the
//!   replicas without a log (an error is logged).
//! * §4's pre-determined-keys extension is built ([`admit`]): PreAccept,
//!   Accept and Commit fix the transaction's place as for a one-shot one;
//!   at execution a replica whose piece takes another shard's piece's
//!   output asks a replica of that shard for it
//!   ([`msg::Msg::FetchOutput`]), which answers once it executed the piece
//!   (every replica computes the same output). A piece whose input piece
//!   rolled back (a user abort) is skipped and reports the abort, so the
//!   client learns it; this honours a user abort when, as §4 requires, the
//!   aborting piece writes nothing and every other piece takes its output
//!   (TPC-C's NewOrder and Payment home pieces). A user abort elsewhere is
//!   not rolled back: the transaction commits with its writes. Procedures
//!   whose keys depend on values read are refused ([`Refused`]); TPC-C's
//!   Payment by last name is one, so Janus's TPC-C selects customers by id.
//! * Graph garbage collection ([`gc`]; the paper's prototype truncates
//!   the graph "as transactions finish", §5, without the rules): on
//!   Rococo's epochs (the shared
//!   [`crate::depgraph::graph::DepGraph::collect`]), a replica forgets a
//!   transaction two epochs after it executed once every replica of every
//!   shard it involves announced executing it ([`msg::Msg::Executed`]),
//!   leaving a tombstone of ids (abandon flag, component) that answers late
//!   Commit, PreAccept, Accept, Prepare and Inquire messages
//!   ([`msg::Msg::Forgotten`]); a dependency on a forgotten transaction is
//!   a DECIDED cut-off, never a vertex to wait for. Executed ancestors are
//!   also marked DECIDED when a descendant is decided
//!   ([`crate::depgraph::graph::DepGraph::settle`]) so walks stay short.
//! * The client's answer comes from the first replica of each shard to
//!   reply, not the nearest by site.

mod codec;
mod coordinator;
mod done;
mod driver;
mod gc;
mod image;
pub mod msg;
pub mod quorum;
pub mod recovery;
mod server;
mod stats;
#[cfg(test)]
mod tests;
mod tracker;
pub mod wal;

pub use coordinator::JanusCoordinator;
pub use msg::Msg;
pub use server::JanusServer;

use tessera_core::ids::{Time, MS};
use tessera_core::protocol::{CoordinatorEnv, Protocol, ServerEnv};

/// Why Janus cannot run a procedure.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Refused {
    /// §4, "transactions with dependent keys": the coordinator cannot fix
    /// the transaction's place in the graph before it knows its keys; such
    /// a transaction must be rewritten (a read-only transaction that learns
    /// the keys, then a conditional write).
    #[error(
        "{name}: piece {piece}'s keys depend on values read; Janus needs every key before execution (§4: rewrite it as a read-only transaction plus a conditional write)"
    )]
    DependentKeys { name: &'static str, piece: usize },
    /// A piece takes the output of a piece that does not come before it.
    #[error("{name}: piece {piece} takes input from piece {input}, which is not an earlier piece")]
    BadInput {
        name: &'static str,
        piece: usize,
        input: u16,
    },
}

/// Whether Janus can run `proc`: one-shot (§3), or with pre-determined keys
/// (§4): every piece's keys are known before execution, only its inputs
/// wait for earlier pieces' outputs. A dynamic piece passes when its
/// placeholders cover its real keys ([`Procedure::placeholders_cover`]).
///
/// [`Procedure::placeholders_cover`]: tessera_core::txn::Procedure::placeholders_cover
pub fn admit(proc: &dyn tessera_core::txn::Procedure) -> Result<(), Refused> {
    let name = proc.name();
    for (piece, p) in proc.pieces().iter().enumerate() {
        if p.dynamic && !proc.placeholders_cover(piece) {
            return Err(Refused::DependentKeys { name, piece });
        }
        if let Some(&input) = p.inputs.iter().find(|&&j| j as usize >= piece) {
            return Err(Refused::BadInput { name, piece, input });
        }
    }
    Ok(())
}

/// Timeouts and periods of Janus.
#[derive(Clone, Debug)]
pub struct JanusConfig {
    /// Resend an unanswered request after this long (doubling up to 8x);
    /// also how long the coordinator waits for the last replicas before
    /// giving up on the fast path.
    pub retransmit: Time,
    /// A replica asks the others for a transaction it pre-accepted and has
    /// not seen committed after this long.
    pub inquire_after: Time,
    /// A replica becomes the recovery coordinator (§3.3) of a transaction
    /// it pre-accepted that is still not committed after this long (plus
    /// up to half as much again at random, so that replicas do not duel).
    /// Suspecting a live coordinator is safe, only slower.
    pub recover_after: Time,
    /// How often a replica announces to its shard's other replicas the
    /// transactions committed here ([`msg::Msg::Committed`]).
    pub announce: Time,
    /// Period of the server's timer.
    pub sweep: Time,
    /// Length of a garbage-collection epoch ([`gc`]): a transaction
    /// executed at every replica is forgotten after two epochs untouched.
    pub epoch: Time,
    /// Epochs a forgotten transaction's tombstone is kept, answering late
    /// messages about it ([`gc`]).
    pub forget_epochs: u64,
    /// Off by default (experimental): a blocked transaction waits for one
    /// STARTED ancestor at a time instead of each
    /// ([`server::JanusServer`]'s `wait_for_a_blocker`). It removes the
    /// waiters × blockers wait pairs (33.5M at 0.4 s of the three-site
    /// zipf 0.9 micro point), but waiters are then not resumed at the
    /// other blockers' rises, and walks through them go on behind every
    /// blocker that rose meanwhile: that point ran 415 CPU-s without
    /// passing 0.35 s of virtual time (the default passed 0.5 s in 299).
    pub wait_one_blocker: bool,
    /// Conflicts are tracked per column of a row where pieces declare
    /// columns ([`tracker`]'s items), as the authors' code does (the
    /// paper's conflicts are on the data a piece accesses, §3); the store
    /// then keeps each column's last writer and the history is checked per
    /// column (`tessera_checker::check_columns`). Off: per row, the
    /// coarser order this crate had before 2026-11-29 (kept to compare:
    /// TPC-C's NewOrder and Payment then conflict on district rows).
    pub per_column: bool,
    /// On by default since session 26: the coordinator stops waiting for
    /// the fast quorum's last replies when, by the round trips it
    /// measured, they cannot save more than they may cost
    /// ([`quorum::fast_path_pays`]); off, it waits up to a retransmit
    /// period (Algorithm 1 leaves how long to the implementation).
    /// Three-site TPC-C (`docs/results/janus.md`, *session 25*): +16%
    /// new-orders/s at 1,500 clients, −15% / −20% at 3,000 (seeds 1, 2);
    /// since members of forgotten components are asked of every server at
    /// once (*session 26*) +13% at 1,500 and +6.5% / +10% at 3,000, +10%
    /// over a 4.5 s window. Rows measured before session 26 had it off.
    pub fast_path_wait_by_rtt: bool,
    /// A replica asks for the other shards' outputs its pieces need (§4)
    /// for every member of a component once the component is decided,
    /// instead of when execution reaches each member ("once server S_j is
    /// ready to execute α_j, it sends a message to server S_i to wait for
    /// the execution of α_i and fetch the corresponding outputs"). The
    /// request is the same and still waits for α_i's execution; only its
    /// sending moves earlier, so the execution order and the outputs do
    /// not change. Asked member by member, each member that needs an
    /// output stops the members after it for a round trip inside the site
    /// even when the output is ready. Three-site TPC-C, 3,000 clients
    /// (`docs/results/janus.md`, *session 26*): execution after the last
    /// ancestor is known falls from ~5 to ~1.5 ms, but new-orders/s move
    /// by +2% with `fast_path_wait_by_rtt` and −9% without it (the
    /// ancestor wait grows; not explained), hence off.
    pub prefetch_outputs: bool,
    /// Simulated CPU, ns, per vertex and edge of the dependency graph that
    /// a settle or the execution walk visits (`DepGraph::charge_walks`);
    /// 0, the default, charges
    /// nothing beyond the runtime's cost per event.
    pub graph_cpu: u64,
}

impl Default for JanusConfig {
    fn default() -> Self {
        JanusConfig {
            retransmit: 20 * MS,
            inquire_after: 50 * MS,
            recover_after: 150 * MS,
            announce: 20 * MS,
            sweep: 5 * MS,
            epoch: 50 * MS,
            forget_epochs: 40,
            wait_one_blocker: false,
            per_column: true,
            fast_path_wait_by_rtt: true,
            prefetch_outputs: false,
            graph_cpu: 0,
        }
    }
}

/// The Janus protocol.
pub struct Janus;

impl Protocol for Janus {
    type Msg = Msg;
    type Config = JanusConfig;
    type Server = JanusServer;
    type Coordinator = JanusCoordinator;

    fn server(config: &Self::Config, env: ServerEnv) -> Self::Server {
        JanusServer::new(config.clone(), env)
    }

    fn coordinator(config: &Self::Config, env: CoordinatorEnv) -> Self::Coordinator {
        JanusCoordinator::new(config.clone(), env)
    }
}
