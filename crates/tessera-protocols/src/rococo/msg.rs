//! The messages of Rococo (§3.2, Fig. 5; §4.1 for read-only transactions),
//! and the dependency information they carry.

use std::sync::Arc;
use tessera_core::ids::{NodeId, TxnId, Version};
use tessera_core::node::WireSize;
use tessera_core::txn::{Txn, Value};

use crate::depgraph::{replies_size, vertices_size};
pub use crate::depgraph::{Edge, PieceReply, Status, Vertex};

/// Coordinator → server: the start request of some pieces of `txn`
/// (Fig. 6), with each piece's inputs.
#[derive(Clone, Debug)]
pub struct Start {
    pub txn: TxnId,
    pub proc: Txn,
    pub pieces: Vec<u16>,
    pub inputs: Vec<Vec<Value>>,
}

#[derive(Clone, Debug)]
pub enum Msg {
    Start(Start),
    /// Server → coordinator: the pieces of the request were received; the
    /// immediate ones ran (their replies are here). `deps` holds the
    /// transaction and its undecided ancestors at this server (§3.4).
    StartOk {
        txn: TxnId,
        /// Replies of the immediate pieces among the request's.
        immediate: Vec<PieceReply>,
        /// Every piece of the request, immediate or not.
        received: Vec<u16>,
        deps: Vec<Vertex>,
    },
    /// Coordinator → server: the commit request (Fig. 7) with the union of
    /// the start replies' dependency graphs.
    Commit {
        txn: TxnId,
        deps: Arc<Vec<Vertex>>,
    },
    /// Server → coordinator: the transaction's deferred pieces here ran.
    CommitOk {
        txn: TxnId,
        deferred: Vec<PieceReply>,
    },
    /// Coordinator → server: every participant replied, so the transaction
    /// is committed (§3.4) and no one will ask this server for its results
    /// again: it may be collected. No reply.
    Committed {
        txn: TxnId,
    },
    /// Server → driver: `txn` committed and this server has collected it
    /// (§3.4), so it answers the driver's late request with this instead
    /// of results it no longer has: another driver (a server recovering
    /// for a coordinator it thought silent, §3.5) finished the
    /// transaction. The driver stops, its outcome in doubt. Without this
    /// answer the driver resent until the server forgot the collection
    /// too and ran its pieces again as a new transaction's (TPC-C seed
    /// 577 with merged pieces and crashes: a NewOrder's stock written
    /// twice, 640 ms apart).
    Gone {
        txn: TxnId,
    },
    /// Server → server: what do you know of `txn`? Answered once `txn` is
    /// at least COMMITTING there (§3.2).
    Inquire {
        txn: TxnId,
    },
    /// The answer: `txn` and, unless it is DECIDED, its undecided ancestors.
    InquireOk {
        txn: TxnId,
        deps: Vec<Vertex>,
    },
    /// The other answer: `txn` has not started here (it may never: a
    /// transaction whose user abort was honoured contacts only some of its
    /// servers), so ask another of its servers now rather than after a
    /// retransmission timeout.
    NotHere {
        txn: TxnId,
    },
    /// Coordinator → server: read pieces of a read-only transaction once
    /// the transactions they conflict with have finished (§4.1, Fig. 10).
    RoRead {
        txn: TxnId,
        /// Names this request among the transaction's (each round's, and a
        /// piece sent again within a round with other inputs); echoed.
        tag: u32,
        proc: Txn,
        pieces: Vec<u16>,
        inputs: Vec<Vec<Value>>,
    },
    RoReadOk {
        txn: TxnId,
        tag: u32,
        results: Vec<PieceReply>,
        /// Per result, per read: the version of the columns read
        /// (`depgraph::columns`), what rounds are compared by.
        seen: Vec<Vec<Version>>,
    },
    /// Restarted server → a server of `txn` (§3.5, `server::guard`): do you
    /// hold a start request of `txn` with pieces new to you? `nonce` names
    /// the asker's incarnation. Answered only by `Held`.
    AskHeld {
        txn: TxnId,
        nonce: u64,
    },
    /// Yes, now: `txn` was never COMMITTING before this answer, so the
    /// asker, restarted before it (`nonce` is its incarnation's), never
    /// reported it nor anything behind it.
    Held {
        txn: TxnId,
        nonce: u64,
    },
    // ---- merged pieces: OCC+2PC in the start phase (§4.2) ----
    /// Coordinator → server: the OCC *execute* phase of merged pieces: run
    /// them on the current data without installing anything.
    OccExecute(Start),
    /// Their tentative outputs (reads and writes left empty).
    OccExecuteOk {
        txn: TxnId,
        results: Vec<PieceReply>,
    },
    /// Coordinator → the 2PC leader (the server of the lowest shard among
    /// the merged pieces'): commit every merged piece, with the inputs and
    /// the outputs its execution saw.
    OccCommit {
        req: Start,
        outputs: Vec<Value>,
    },
    /// Leader → server: *prepare* attempt `attempt`: validate that the
    /// pieces still give `outputs`, lock their keys, vote.
    OccPrepare {
        attempt: u32,
        req: Start,
        outputs: Vec<Value>,
    },
    OccVote {
        txn: TxnId,
        attempt: u32,
        ok: bool,
    },
    /// Leader → server: the decision on `attempt`. On commit the server
    /// unlocks and runs the pieces as a start request of `reply_to`'s
    /// (its dependency information goes there in a `StartOk`).
    OccDecide {
        attempt: u32,
        commit: bool,
        reply_to: NodeId,
        req: Start,
    },
    OccDecideOk {
        txn: TxnId,
        attempt: u32,
    },
    /// Leader → coordinator: validation failed; execute the merged pieces
    /// again.
    OccRetry {
        txn: TxnId,
    },
    /// Participant → leader: *termination* of a 2PC (§4.2's OCC+2PC, §3.5):
    /// this participant voted yes for `attempt` long ago and heard no
    /// decision; what is it? Resent with backoff until answered by an
    /// `OccDecide` or an `OccAbort`.
    OccAsk {
        txn: TxnId,
        attempt: u32,
    },
    /// Leader → participant: `attempt` is aborted: release its locks. The
    /// answer to an `OccAsk` about an attempt the leader has no record of
    /// (presumed abort) or aborted, and to a late yes vote for an aborted
    /// attempt; acknowledged by `OccDecideOk`.
    OccAbort {
        txn: TxnId,
        attempt: u32,
    },
}

fn inputs_size(pieces: &[u16], inputs: &[Vec<Value>]) -> usize {
    8 + 2
        + 2 * pieces.len()
        + inputs
            .iter()
            .flat_map(|v| v.iter())
            .map(|v| 4 + v.len())
            .sum::<usize>()
}

/// Header (type, txn id) plus payload, as a compact binary codec would
/// encode it.
impl WireSize for Msg {
    fn wire_size(&self) -> usize {
        const HEADER: usize = 1 + 8;
        HEADER
            + match self {
                Msg::Start(s) => inputs_size(&s.pieces, &s.inputs),
                Msg::StartOk {
                    immediate,
                    received,
                    deps,
                    ..
                } => replies_size(immediate) + 2 * received.len() + vertices_size(deps),
                Msg::Commit { deps, .. } => vertices_size(deps),
                Msg::CommitOk { deferred, .. } => replies_size(deferred),
                Msg::Inquire { .. }
                | Msg::Committed { .. }
                | Msg::NotHere { .. }
                | Msg::Gone { .. } => 0,
                Msg::InquireOk { deps, .. } => vertices_size(deps),
                Msg::RoRead { pieces, inputs, .. } => 4 + inputs_size(pieces, inputs),
                Msg::RoReadOk { results, seen, .. } => {
                    4 + replies_size(results) + seen.iter().map(|s| 1 + 8 * s.len()).sum::<usize>()
                }
                Msg::OccExecute(s) => inputs_size(&s.pieces, &s.inputs),
                Msg::OccExecuteOk { results, .. } => replies_size(results),
                Msg::OccCommit { req, outputs } | Msg::OccPrepare { req, outputs, .. } => {
                    4 + inputs_size(&req.pieces, &req.inputs)
                        + outputs.iter().map(|v| 4 + v.len()).sum::<usize>()
                }
                Msg::OccVote { .. } => 5,
                Msg::OccDecide { req, .. } => 9 + inputs_size(&req.pieces, &req.inputs),
                Msg::OccDecideOk { .. } | Msg::OccAsk { .. } | Msg::OccAbort { .. } => 4,
                Msg::OccRetry { .. } => 0,
                Msg::AskHeld { .. } | Msg::Held { .. } => 8,
            }
    }
}
