//! Rococo: reordering conflicts instead of aborting them (Mu et al.,
//! OSDI '14; `/work/shared/papers/rococo-osdi14.txt`).
//!
//! **Guarantee**: strict serializability for workloads that pass the offline
//! checker ([`offline`], §3.1), and no aborts: every read-write transaction
//! that starts commits.
//!
//! **Phases** (§3.2, Fig. 5), by message:
//!
//! 1. **Start** ([`msg::Start`], Fig. 6) — the coordinator sends each piece
//!    as soon as its inputs are ready, in parallel. The server runs an
//!    immediate piece at once and returns its output; it buffers a
//!    deferrable one. Either way it records the edges from the most recent
//!    conflicting transactions on each key ([`tracker`], one-hop tracking,
//!    §3.4) into its dependency graph ([`graph`]), typed `i` or `d`, and
//!    replies with the transaction's undecided ancestors.
//! 2. **Commit** ([`msg::Msg::Commit`], Fig. 7) — the coordinator sends the
//!    union of the start replies to every participant. A server marks the
//!    transaction COMMITTING, waits until each ancestor is COMMITTING too
//!    (asking a server of that ancestor, **Inquire**, when it does not
//!    involve this one), finds the transaction's strongly connected
//!    component (Tarjan, shared with the isolation checker), marks it
//!    DECIDED, sorts it by i-edges with ties broken by transaction id
//!    ([`order`]), waits for the local ancestors outside it to finish, and
//!    runs the deferred pieces in that order. The coordinator reports the
//!    commit once every participant has replied.
//!
//! **Merged pieces** (§4.2): the pieces the offline checker merges
//! ([`offline::MergeSet`], computed once from the workload's profiles when
//! the deployment is built, [`RococoConfig::merges`]) run by OCC+2PC in the
//! start phase — *execute* at their servers without installing anything,
//! then *prepare* (validate and lock) and *commit* led by the server of
//! their lowest shard; a failed validation makes the coordinator execute
//! them again. Their commit is an ordinary start request at each server, so
//! the transaction then joins the dependency graph as usual. See
//! [`driver`] and `server::merged`.
//!
//! **Read-only transactions** (§4.1, Figs. 9–10): rounds of reads, each
//! waiting at the server for the conflicting writers that were unfinished
//! when it arrived, then reading the server's *finished view* — no write of
//! an unfinished transaction (immediate pieces install theirs at start), so
//! writers that came later are neither seen nor waited for (`server::view`)
//! — repeated until two rounds in a row read the same versions. Every round
//! after the first sends all its pieces at once with the previous round's
//! outputs as inputs, and a piece again if this round's differ (one round
//! trip per round that agrees; see [`coordinator`], with a fallback of ours
//! for hot keys).
//!
//! **Garbage collection** (§3.4): servers tag vertices with an epoch that
//! advances with time and drop what was finished two epochs ago.
//!
//! **Faults** (§3.5): requests are resent until answered and handlers are
//! idempotent. Resends back off, but any reply that answers something
//! restarts the backoff ([`driver`]): a transaction whose start phase
//! dragged on must not wait a capped timeout to resend what follows its
//! committed merged pieces. A server that holds a STARTED transaction whose coordinator
//! has been silent for [`RococoConfig::recover_after`] (sooner,
//! [`RococoConfig::recover_blocker_after`], when a committing transaction
//! waits on it) drives it to commit
//! itself with the coordinator's own logic ([`driver`]); re-sent start
//! requests get the same results.
//!
//! **Server crashes** (§3.5, `server::log`): a server logs each start
//! request (the pieces it adds) in arrival order, and each finish of
//! deferred pieces with the transaction's component, and answers
//! `StartOk` only once the record is durable; a `CommitOk` waits for the
//! records before the finish, not for the finish (§3.5 logs commits off
//! the critical path). A restarted
//! server replays the log in order: immediate pieces re-run on the same
//! data give the same outputs, the tracker re-records the same edges, and
//! deferred pieces re-run at their logged place, i.e. in the committed
//! order. A re-sent start request then gets the same reply, without
//! running anything again. The decisions it does not know (transactions
//! left STARTED: their commit requests are not logged) it asks for at once,
//! by driving each to commit as for a silent coordinator: the start
//! requests go to every server of the transaction again (answered
//! idempotently, with their dependencies) and the commit request follows;
//! status requests (**Inquire**) about their ancestors go to peers as
//! usual. A crash loses only a suffix of the log, whose replies never left
//! but for at most one reported finish: until the replayed transactions
//! have finished, the restarted server holds new start requests that touch
//! their keys, so the one whose finish was lost runs its deferred pieces
//! on the same data again and reports the same outputs (`server::guard`);
//! a peer that already collected such a transaction answers `Gone`, and
//! the restarted server asks it for the component (Inquire).
//! Merged pieces' OCC+2PC (§4.2) is logged like 2PC's: a participant's
//! prepare (locked keys) before its yes vote, its release of an aborted
//! attempt before the acknowledgement, the leader's decision before it
//! leaves; a restarted participant holds the locks it voted for, a
//! restarted leader resends its decisions, and an attempt never decided is
//! presumed aborted (`server::merged`). A participant that voted yes and
//! heard no decision for [`RococoConfig::ask_decision_after`] asks the
//! leader (**termination**, resent with backoff); the leader answers from
//! its log, or, with no record of the attempt, logs and sends an abort.
//! A server collects a transaction two epochs after its own coordinator
//! says it has every reply; when a server's recovery driver finished it,
//! only after `forget_after` without a request, so that a coordinator
//! that was merely slow still gets its replies. A request that comes
//! after the collection is answered `Gone`: the driver stops, in doubt.
//!
//! **Runtimes**: `sim`, `local` and `tcp`. On `tcp` messages cross
//! processes through `codec` (a start request is the same bytes on the
//! wire and in the log), and the log is the node's write-ahead log; a
//! server keeps a transaction its recovery driver finished for 20 s
//! rather than `forget_after`'s default 1 s (the registry's `rococo`
//! configuration), since real processes on a loaded machine deliver some
//! messages seconds late.
//!
//! **Deviations from the paper**, each a choice:
//! * Epochs advance on each server's own clock instead of by agreement
//!   among servers; collection is sound as long as no transaction stays
//!   unfinished for two epochs (crashed coordinators' transactions are
//!   recovered well within that).
//! * A crashed coordinator does not replay a log (§3.5): the transaction's
//!   servers finish it instead, which needs no coordinator log at all, since
//!   every server has the transaction's procedure from its start request.
//!   Its client sees the attempt as in doubt (it crashed with it).
//! * Servers log the finish of deferred pieces (with the component and at
//!   its place in the log) rather than the paper's commit decision; the
//!   place is the committed order, so replay needs no re-decision.
//! * The log is never truncated (no checkpoint): a restart replays
//!   everything since the first start, and replayed transactions are
//!   collected again only after [`RococoConfig::forget_after`].
//! * Resends back off to `8 × retransmit` (160 ms) and a silent
//!   coordinator's transaction is recovered after `recover_after`: a
//!   transaction whose client crashed while a participant of its merged
//!   pieces' 2PC was down can take ~300 ms to finish.
//! * Termination asks the leader only, not the other participants
//!   (cooperative termination): a participant whose leader is down waits
//!   for it to restart. A request that arrives after a server forgot the
//!   transaction (`forget_after`, at least two epochs, after its
//!   collection) is still taken as new; drivers stop at the first `Gone`
//!   before that, but nothing enforces it.
//! * A crashed coordinator's request is not logged (see above); neither
//!   is a read-only transaction's (it is simply retried).
//! * Read-only requests (§4.1) read the finished view and wait only for
//!   the conflicting transactions there when they arrived; the paper's
//!   server reads the store, where an unfinished transaction's immediate
//!   write may be (TPC-C seed 155), and waiting for every newcomer instead
//!   starves a read of a hot row. Rounds are compared by the versions read
//!   and the outputs, a stricter test than the paper's results. After
//!   [`RococoConfig::ro_rounds`] rounds that differ, a read-only
//!   transaction runs through the dependency graph instead (its ordered
//!   form, see [`coordinator`]), where the paper retries for ever.
//! * Merged pieces (§4.2): the paper has the coordinator run OCC+2PC;
//!   here the coordinator runs the execute phase and a server (the lowest
//!   merged shard's) leads prepare and commit, so a crashed client never
//!   leaves keys locked. Validation compares each piece's output on
//!   re-execution (not read versions: rows are
//!   shared with deferrable pieces on other columns, whose writes would
//!   fail row versions for nothing), and a piece commits by running again
//!   under the locks. Consequently merged pieces of one transaction at one
//!   server must not read each other's writes (execution installs nothing;
//!   TPC-C's home and stock pieces touch disjoint tables). Start requests
//!   whose immediate pieces touch a locked key wait for the decision. Only
//!   pieces declared immediate are merged, and only when two or more of a
//!   transaction are.
//! * User aborts (§3.1 allows only those that need no undo): honoured when
//!   they come from an immediate piece before anything was written and
//!   before any deferrable piece was sent — the transaction then commits
//!   as a no-op and its client hears `Aborted(User)` (TPC-C's invalid-item
//!   NewOrder); otherwise logged, and the transaction commits ([`driver`]).

mod codec;
pub mod coordinator;
mod driver;
pub mod msg;
pub mod offline;
mod server;
#[cfg(test)]
mod tests;
mod tracker;

pub use coordinator::RococoCoordinator;
pub use msg::Msg;
pub use server::RococoServer;

use std::sync::Arc;
use tessera_core::ids::{Time, MS};
use tessera_core::protocol::{CoordinatorEnv, Protocol, ServerEnv};

/// Timeouts and periods of Rococo.
#[derive(Clone, Debug)]
pub struct RococoConfig {
    /// Resend an unanswered request after this long (doubling up to 8x).
    pub retransmit: Time,
    /// A server drives a STARTED transaction to commit itself after this
    /// long without a word from its coordinator (§3.5).
    pub recover_after: Time,
    /// The same, sooner, for a STARTED transaction that a COMMITTING one
    /// here waits on: it holds up every transaction ordered after it (on a
    /// hot key, the whole server), so a lost reply followed by a partition
    /// must not stall them for `recover_after` plus the coordinator's
    /// backed-off resend. Two drivers of one transaction are harmless
    /// ([`driver`]), so acting early costs only messages.
    pub recover_blocker_after: Time,
    /// A participant that voted yes for merged pieces (§4.2) and heard no
    /// decision for this long asks the 2PC's leader (termination; resent
    /// with backoff to `8 × retransmit`): the leader resends its decisions
    /// itself, so this matters only once the leader lost an undecided
    /// attempt in a crash, and nobody else resends it.
    pub ask_decision_after: Time,
    /// Length of a garbage-collection epoch (§3.4).
    pub epoch: Time,
    /// A server forgets a finished transaction whose coordinator never said
    /// it has all replies (it crashed) after this long without a request.
    pub forget_after: Time,
    /// Period of the server's timer (resends, recovery, collection).
    pub sweep: Time,
    /// Rounds after which a read-only transaction of deferrable pieces runs
    /// as a read-write one, and one with immediate pieces its ordered form
    /// if its procedure has one, after each further round that differs
    /// (see [`coordinator`]); `u32::MAX` never does. Default 4.
    pub ro_rounds: u32,
    /// A read-only transaction whose rounds still differ after this many
    /// rounds waits before the next one (see [`coordinator`]): a random
    /// pause of half to all of `ro_backoff`, doubling per further round up
    /// to 16x. Safe (§4.1 asks only that a round be sent after the
    /// previous one ended), but off by default: measured on TPC-C it
    /// widens the gap between the rounds to compare, so they differ even
    /// more often, and closed-loop clients pile up in StockLevels
    /// (2026-11-27, 20 clients per server: 15.1k → 1.4k–6.4k new-orders/s
    /// by setting; it helps only once the servers saturate, at 100 per
    /// server, +10–33%).
    pub ro_backoff_after: u32,
    /// The base of that pause; zero (the default) never pauses.
    pub ro_backoff: Time,
    /// Compare a read-only transaction's rounds by the versions of the
    /// columns each piece reads (`depgraph::columns`) instead of the rows'
    /// versions, so that a write of other columns of a row read (TPC-C
    /// Payment's `D_YTD` beside StockLevel's `D_NEXT_O_ID`) does not make
    /// rounds differ. Sound for what the pieces read (§4.1's argument,
    /// per column), but off by default: the history records row versions,
    /// and the isolation checker reasons per row, so an accepted round in
    /// which a writer of other columns is seen at one row and not yet at
    /// another is reported as a cycle. Enabling it needs reads and writes
    /// recorded with their columns and a checker that orders versions per
    /// column.
    pub ro_column_versions: bool,
    /// The pieces to run merged, with OCC+2PC in the start phase (§4.2):
    /// the offline checker's verdict on the deployment's workload
    /// ([`offline::MergeSet::of`]); empty when it needs no merge.
    pub merges: Arc<offline::MergeSet>,
    /// Simulated CPU, ns, per vertex and edge of the dependency graph that
    /// a settle walks (`DepGraph::charge_walks`); 0, the default, charges
    /// nothing beyond the runtime's cost per event.
    pub graph_cpu: u64,
}

impl Default for RococoConfig {
    fn default() -> Self {
        RococoConfig {
            retransmit: 20 * MS,
            recover_after: 100 * MS,
            recover_blocker_after: 40 * MS,
            ask_decision_after: 100 * MS,
            epoch: 100 * MS,
            forget_after: 1000 * MS,
            sweep: 5 * MS,
            ro_rounds: 4,
            ro_backoff_after: 2,
            ro_backoff: 0,
            ro_column_versions: false,
            merges: Arc::default(),
            graph_cpu: 0,
        }
    }
}

/// The Rococo protocol.
pub struct Rococo;

impl Protocol for Rococo {
    type Msg = Msg;
    type Config = RococoConfig;
    type Server = RococoServer;
    type Coordinator = RococoCoordinator;

    fn server(config: &Self::Config, env: ServerEnv) -> Self::Server {
        RococoServer::new(config.clone(), env)
    }

    fn coordinator(config: &Self::Config, env: CoordinatorEnv) -> Self::Coordinator {
        RococoCoordinator::new(config.clone(), env)
    }
}
