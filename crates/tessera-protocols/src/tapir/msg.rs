//! TAPIR's messages (Zhang et al., SOSP'15, §3–5): reads at one replica,
//! IR's consensus operation Prepare (with its slow-path Finalize/Confirm),
//! IR's inconsistent operations Commit and Abort, and IR's view change
//! (StartViewChange, DoViewChange, StartView; IR §3.2.2).

use tessera_core::ids::{Key, TxnId, Version};
use tessera_core::node::WireSize;
use tessera_core::txn::Value;

/// A replica's answer to Prepare (TAPIR-OCC-CHECK, TAPIR Fig. 8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Vote {
    Ok,
    /// A read is stale: the transaction cannot commit.
    Abort,
    /// A conflicting transaction is prepared: not now.
    Abstain,
    /// The timestamp is too low; a retry above `0` could succeed.
    Retry(u64),
}

/// What a transaction read and wrote at one shard, for its validation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Keys read, with the version seen.
    pub reads: Vec<(Key, Version)>,
    /// Buffered writes, last value per key.
    pub writes: Vec<(Key, Value)>,
}

impl Footprint {
    pub(super) fn size(&self) -> usize {
        self.reads.len() * 20 + self.writes.iter().map(|(_, v)| 16 + v.len()).sum::<usize>()
    }
}

/// Where an operation stands in a replica's IR record (IR §3.1): a
/// consensus operation's result is TENTATIVE until the client finalizes it
/// (or a view change's merge does); inconsistent operations (the outcome)
/// end the transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpState {
    Tentative(Vote),
    Finalized(Vote),
    Committed,
    Aborted,
}

/// One transaction's entry of an IR record, as a view change ships it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordOp {
    pub txn: TxnId,
    /// The Prepare's timestamp (the commit timestamp once committed).
    pub ts: u64,
    pub footprint: Footprint,
    pub state: OpState,
}

impl RecordOp {
    fn size(&self) -> usize {
        8 + 8 + 9 + self.footprint.size()
    }
}

#[derive(Clone, Debug)]
pub enum Msg {
    /// Client → one replica: the current values of `keys` (piece `piece`).
    Read {
        txn: TxnId,
        piece: u16,
        keys: Vec<Key>,
    },
    ReadReply {
        txn: TxnId,
        piece: u16,
        values: Vec<(Option<Value>, Version)>,
    },
    /// IR consensus operation: validate at timestamp `ts`.
    Prepare {
        txn: TxnId,
        ts: u64,
        footprint: Footprint,
    },
    /// The vote, in the replica's view: IR's quorums count replies of one
    /// view only.
    PrepareReply {
        txn: TxnId,
        vote: Vote,
        view: u64,
    },
    /// IR slow path: the client decided `vote` from a majority; replicas
    /// adopt it.
    Finalize {
        txn: TxnId,
        ts: u64,
        vote: Vote,
        footprint: Footprint,
    },
    /// The replica's finalized result: the client's, or the one a view
    /// change's merge decided first (IR §3.2.1), which then wins.
    Confirm {
        txn: TxnId,
        vote: Vote,
        view: u64,
    },
    /// IR inconsistent operations: the outcome, sent to every replica.
    Commit {
        txn: TxnId,
        ts: u64,
        footprint: Footprint,
    },
    Abort {
        txn: TxnId,
    },
    /// A replica made the Commit or Abort of `txn` durable.
    Done {
        txn: TxnId,
    },
    /// Replica → replicas: move to `view` (a restarted replica asks for
    /// it; the others pass it on). Replicas stop answering until the view
    /// starts.
    StartViewChange {
        view: u64,
    },
    /// Replica → the leader of `view`: its record.
    DoViewChange {
        view: u64,
        record: Vec<RecordOp>,
    },
    /// The leader of `view` → replicas: the master record (IR-MERGE-RECORDS
    /// with TAPIR's merge); they adopt it and resume.
    StartView {
        view: u64,
        record: Vec<RecordOp>,
    },
}

impl WireSize for Msg {
    fn wire_size(&self) -> usize {
        const HEADER: usize = 1 + 8;
        HEADER
            + match self {
                Msg::Read { keys, .. } => 2 + keys.len() * 12,
                Msg::ReadReply { values, .. } => {
                    2 + values
                        .iter()
                        .map(|(v, _)| 9 + v.as_ref().map_or(0, |v| v.len()))
                        .sum::<usize>()
                }
                Msg::Prepare { footprint, .. } | Msg::Commit { footprint, .. } => {
                    8 + footprint.size()
                }
                Msg::Finalize { footprint, .. } => 17 + footprint.size(),
                Msg::PrepareReply { .. } | Msg::Confirm { .. } => 17,
                Msg::Abort { .. } | Msg::Done { .. } => 0,
                Msg::StartViewChange { .. } => 8,
                Msg::DoViewChange { record, .. } | Msg::StartView { record, .. } => {
                    8 + record.iter().map(RecordOp::size).sum::<usize>()
                }
            }
    }
}
