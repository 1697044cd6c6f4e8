//! Janus: consolidating concurrency control and consensus for commits under
//! conflicts (Mu et al., OSDI '16; `/work/shared/papers/janus-osdi16.txt`).
//!
//! **Guarantee**: strict serializability of one-shot transactions over
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
//!    of Accept-OKs per shard (§3.2).
//! 3. **Commit** — every replica puts the consensus dependencies into its
//!    dependency graph (shared with Rococo: [`crate::depgraph`]), waits
//!    until every ancestor is committing, sending an **Inquire** to a
//!    server of an ancestor it does not know, and executes strongly
//!    connected components in one deterministic order (ties by transaction
//!    id). The coordinator answers the client with the first reply of each
//!    shard.
//!
//! **Replicas converge**: a replica that pre-accepted a transaction and
//! never received its Commit inquires the other replicas for it.
//!
//! **Deviations and what is not built yet**, each stated:
//! * Conflict tracking keeps every unexecuted conflicting transaction per
//!   key rather than Rococo's one hop; see [`tracker`] for why one hop is
//!   unsound once commits replace dependencies with a quorum's.
//! * Coordinator failure recovery (§3.3) is half built: replicas answer a
//!   **Prepare** ([`msg::Msg::Prepare`]) with a higher ballot by promising
//!   it (also for transactions they never pre-accepted, so a late PreAccept
//!   cannot contradict an abandon) and reporting the accepted ballot and
//!   dependencies they hold; [`recovery::decide`] is Algorithm 6's choice
//!   among the Prepare-OKs (Accept the highest accepted value, keep a
//!   possible fast path's union, PreAccept again, or abandon). The recovery
//!   coordinator that a replica would start for a silent transaction, which
//!   sends the Prepares and drives that choice, is not built yet: a transaction whose
//!   coordinator dies after PreAccept stays pre-accepted, and its
//!   conflicting successors wait.
//! * §4's pre-determined-keys extension is not built: a procedure whose
//!   pieces take other pieces' outputs is refused.
//! * No garbage collection of the dependency graph yet.
//! * The client's answer comes from the first replica of each shard to
//!   reply, not the nearest by site.

mod coordinator;
pub mod msg;
pub mod quorum;
pub mod recovery;
mod server;
#[cfg(test)]
mod tests;
mod tracker;

pub use coordinator::JanusCoordinator;
pub use msg::Msg;
pub use server::JanusServer;

use tessera_core::ids::{Time, MS};
use tessera_core::protocol::{CoordinatorEnv, Protocol, ServerEnv};

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
    /// Period of the server's timer.
    pub sweep: Time,
}

impl Default for JanusConfig {
    fn default() -> Self {
        JanusConfig {
            retransmit: 20 * MS,
            inquire_after: 50 * MS,
            sweep: 5 * MS,
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
