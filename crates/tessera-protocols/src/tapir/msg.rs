//! TAPIR's messages (Zhang et al., SOSP'15, §4–5): reads at one replica,
//! IR's consensus operation Prepare (with its slow-path Finalize/Confirm),
//! and IR's inconsistent operations Commit and Abort.

use tessera_core::ids::{Key, TxnId, Version};
use tessera_core::node::WireSize;
use tessera_core::txn::Value;

/// A replica's answer to Prepare (TAPIR-OCC-CHECK, TAPIR Fig. 8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
#[derive(Clone, Debug, Default)]
pub struct Footprint {
    /// Keys read, with the version seen.
    pub reads: Vec<(Key, Version)>,
    /// Buffered writes, last value per key.
    pub writes: Vec<(Key, Value)>,
}

impl Footprint {
    fn size(&self) -> usize {
        self.reads.len() * 20 + self.writes.iter().map(|(_, v)| 16 + v.len()).sum::<usize>()
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
    PrepareReply {
        txn: TxnId,
        vote: Vote,
    },
    /// IR slow path: the client decided `vote` from a majority; replicas
    /// adopt it.
    Finalize {
        txn: TxnId,
        ts: u64,
        vote: Vote,
        footprint: Footprint,
    },
    Confirm {
        txn: TxnId,
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
                Msg::PrepareReply { .. } => 9,
                Msg::Confirm { .. } | Msg::Abort { .. } | Msg::Done { .. } => 0,
            }
    }
}
