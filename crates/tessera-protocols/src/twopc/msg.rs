//! The messages of 2PC over pieces.

use super::log::LogRecord;
use crate::paxos::PaxosMsg;
use tessera_core::ids::{Key, NodeId, Time, TxnId};
use tessera_core::node::WireSize;
use tessera_core::txn::{AbortReason, ReadObs, Txn, Value};

/// One executed piece, as the participant reports it.
#[derive(Clone, Debug)]
pub struct PieceReply {
    pub piece: u16,
    pub reads: Vec<ReadObs>,
    pub writes: Vec<Key>,
    pub output: Value,
    pub user_abort: bool,
}

/// Coordinator → participant: run these pieces of `txn`.
#[derive(Clone, Debug)]
pub struct Execute {
    pub txn: TxnId,
    /// The transaction's age (wound-wait priority).
    pub since: Time,
    pub proc: Txn,
    /// Every transaction of this coordinator (same node and incarnation)
    /// with a smaller id has finished there, so a participant may forget
    /// their tombstones and ignore their stale messages.
    pub floor: TxnId,
    pub pieces: Vec<u16>,
    /// Outputs of the pieces' input pieces, per piece in order.
    pub inputs: Vec<Vec<Value>>,
}

#[derive(Clone, Debug)]
pub enum Msg {
    Execute(Execute),
    ExecuteOk {
        txn: TxnId,
        results: Vec<PieceReply>,
    },
    ExecuteFailed {
        txn: TxnId,
        reason: AbortReason,
    },
    /// Lock the write set (protocols with a separate lock round: OCC).
    Lock {
        txn: TxnId,
    },
    Locked {
        txn: TxnId,
        ok: bool,
    },
    Prepare {
        txn: TxnId,
    },
    Vote {
        txn: TxnId,
        yes: bool,
    },
    /// Prepare and commit at the only participant.
    CommitOnePhase {
        txn: TxnId,
    },
    OnePhaseDone {
        txn: TxnId,
        committed: bool,
    },
    Commit {
        txn: TxnId,
    },
    Abort {
        txn: TxnId,
    },
    Ack {
        txn: TxnId,
    },
    /// Participant → coordinator: what became of `txn`?
    Inquire {
        txn: TxnId,
    },
    /// Replica → coordinator: this replica does not lead its shard; ask
    /// `leader` (if known) about `txn` instead.
    NotLeader {
        txn: TxnId,
        leader: Option<NodeId>,
    },
    /// Replica → coordinator, in answer to a resent request: this replica
    /// leads and holds the request (a piece waits for locks, or the replica
    /// is taking over); the answer will come. Keeps the coordinator from
    /// taking a wait for a failure.
    Busy {
        txn: TxnId,
    },
    /// Between the replicas of a shard whose participant log is a Paxos
    /// group (the layered baselines).
    Paxos(PaxosMsg<LogRecord>),
}

impl From<PaxosMsg<LogRecord>> for Msg {
    fn from(m: PaxosMsg<LogRecord>) -> Self {
        Msg::Paxos(m)
    }
}

impl Msg {
    /// The transaction a 2PC message is about (`None` for replication
    /// messages).
    pub fn txn(&self) -> Option<TxnId> {
        Some(match self {
            Msg::Execute(Execute { txn, .. })
            | Msg::ExecuteOk { txn, .. }
            | Msg::ExecuteFailed { txn, .. }
            | Msg::Lock { txn }
            | Msg::Locked { txn, .. }
            | Msg::Prepare { txn }
            | Msg::Vote { txn, .. }
            | Msg::CommitOnePhase { txn }
            | Msg::OnePhaseDone { txn, .. }
            | Msg::Commit { txn }
            | Msg::Abort { txn }
            | Msg::Ack { txn }
            | Msg::Inquire { txn }
            | Msg::NotLeader { txn, .. }
            | Msg::Busy { txn } => *txn,
            Msg::Paxos(_) => return None,
        })
    }
}

/// Header (type, txn id) plus payload, as a compact binary codec would
/// encode it.
impl WireSize for Msg {
    fn wire_size(&self) -> usize {
        const HEADER: usize = 1 + 8;
        if let Msg::Paxos(m) = self {
            return 1 + m.wire_size();
        }
        HEADER
            + match self {
                Msg::Execute(Execute { pieces, inputs, .. }) => {
                    8 + 8
                        + 2
                        + 2 * pieces.len()
                        + inputs
                            .iter()
                            .flat_map(|v| v.iter())
                            .map(|v| 4 + v.len())
                            .sum::<usize>()
                }
                Msg::ExecuteOk { results, .. } => results
                    .iter()
                    .map(|r| 2 + 1 + r.reads.len() * 20 + r.writes.len() * 12 + 4 + r.output.len())
                    .sum(),
                Msg::ExecuteFailed { .. }
                | Msg::Vote { .. }
                | Msg::OnePhaseDone { .. }
                | Msg::Locked { .. } => 1,
                Msg::NotLeader { .. } => 5,
                Msg::Busy { .. } => 0,
                _ => 0,
            }
    }
}
