//! The messages of Rococo (§3.2, Fig. 5; §4.1 for read-only transactions),
//! and the dependency information they carry.

use std::sync::Arc;
use tessera_core::ids::{Key, ShardId, TxnId};
use tessera_core::node::WireSize;
use tessera_core::txn::{ReadObs, Txn, Value};

/// A transaction's status in a dependency graph, ordered as the paper orders
/// it: STARTED < COMMITTING < DECIDED (§3.2).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Status {
    /// Some server has its start request; its dependencies may still grow.
    Started,
    /// Its start phase is over: every edge into it is known (the commit
    /// request carries the union of its start replies).
    Committing,
    /// Its strongly connected component, and so its place in the execution
    /// order, is fixed.
    Decided,
}

/// The type of a dependency edge T′ → T (§3.2): `I` when both conflicting
/// pieces are immediate (the order is already fixed by execution), `D` when
/// both are deferrable (the order may still be changed). An i-path is
/// stronger than a d-path (§3.4), so merging keeps the stronger type.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Edge {
    D,
    I,
}

/// What a message says about one transaction of a dependency graph.
#[derive(Clone, Debug)]
pub struct Vertex {
    pub txn: TxnId,
    pub status: Status,
    /// The shards the transaction involves: where to send a status request.
    pub shards: Arc<[ShardId]>,
    /// Known edges into the transaction, T′ → T. Complete once the status is
    /// at least [`Status::Committing`].
    pub parents: Vec<(TxnId, Edge)>,
    /// For a [`Status::Decided`] transaction whose component has two or more
    /// members: the members in their execution order.
    pub scc: Option<Arc<[TxnId]>>,
}

/// One executed piece, as a server reports it.
#[derive(Clone, Debug)]
pub struct PieceReply {
    pub piece: u16,
    pub reads: Vec<ReadObs>,
    pub writes: Vec<Key>,
    pub output: Value,
}

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
    /// Coordinator → server: read pieces of a read-only transaction once
    /// the transactions they conflict with have finished (§4.1, Fig. 10).
    RoRead {
        txn: TxnId,
        round: u32,
        proc: Txn,
        pieces: Vec<u16>,
        inputs: Vec<Vec<Value>>,
    },
    RoReadOk {
        txn: TxnId,
        round: u32,
        results: Vec<PieceReply>,
    },
}

fn vertices_size(deps: &[Vertex]) -> usize {
    deps.iter()
        .map(|v| {
            8 + 1
                + 2
                + 4 * v.shards.len()
                + 9 * v.parents.len()
                + v.scc.as_ref().map_or(0, |s| 8 * s.len())
        })
        .sum()
}

fn replies_size(r: &[PieceReply]) -> usize {
    r.iter()
        .map(|r| 2 + r.reads.len() * 20 + r.writes.len() * 12 + 4 + r.output.len())
        .sum()
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
                Msg::Inquire { .. } | Msg::Committed { .. } => 0,
                Msg::InquireOk { deps, .. } => vertices_size(deps),
                Msg::RoRead { pieces, inputs, .. } => 4 + inputs_size(pieces, inputs),
                Msg::RoReadOk { results, .. } => 4 + replies_size(results),
            }
    }
}
