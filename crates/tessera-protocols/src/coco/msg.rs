//! COCO's messages (§3 epochs, §4 execution and commit, replication).

use tessera_core::ids::{Key, TxnId, Version};
use tessera_core::node::WireSize;
use tessera_core::txn::{Txn, Value};

/// A read as a replica served it: the history version (for the checker)
/// and the record's TID (PT-OCC) or wts (LT-OCC).
#[derive(Clone, Copy, Debug)]
pub struct TsRead {
    pub key: Key,
    pub version: Version,
    pub wts: u64,
}

/// One piece run at a replica. Writes come back to the coordinator, which
/// buffers the write set (§4 execution phase).
#[derive(Clone, Debug)]
pub struct PieceReply {
    pub piece: u16,
    pub reads: Vec<TsRead>,
    /// Snapshot isolation only: the TID (wts) each record the piece writes
    /// had at the replica, so that the commit aborts if another transaction
    /// wrote it since (first committer wins, §5.3). Not reads: the history
    /// does not list them.
    pub written: Vec<(Key, u64)>,
    pub writes: Vec<(Key, Value)>,
    pub output: Value,
    pub user_abort: bool,
}

/// S2PL (§7.1.2): what the primary that ran a **Read** says of its locks.
#[derive(Clone, Copy, Debug)]
pub struct Granted {
    /// Every lock taken; false: a NO_WAIT conflict, and the primary holds
    /// nothing for the transaction any more.
    pub ok: bool,
    /// As in [`Msg::Prepared`]: the primary's current epoch and abort
    /// floor.
    pub epoch: u64,
    pub floor: u64,
}

/// A write-back this coordinator sent a primary and has not yet seen
/// acknowledged (epoch mode). Later requests to that primary carry it, and
/// the primary installs it before serving them: COCO's worker sends its
/// write, then its next transaction's requests, down one ordered
/// connection (§4.2, Fig. 3), so its next transaction never meets its own
/// previous one's locks or reads around its writes. Our network does not
/// keep order, so the request carries what the connection would have
/// delivered first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decided {
    pub txn: TxnId,
    pub ts: u64,
    pub epoch: u64,
}

#[derive(Clone, Debug)]
pub enum Msg {
    /// Coordinator → nearest replica (S2PL: the primary, which locks what
    /// the pieces read and write): run these pieces on your data. `own`
    /// holds the transaction's earlier buffered writes on the shard, which
    /// its pieces read instead of the store. `floor` as in **Prepare**;
    /// `decided`: write-backs to install first (see [`Decided`]).
    Read {
        txn: TxnId,
        floor: TxnId,
        proc: Txn,
        pieces: Vec<u16>,
        inputs: Vec<Vec<Value>>,
        own: Vec<(Key, Value)>,
        decided: Vec<Decided>,
    },
    /// `locks`: S2PL only.
    ReadOk {
        txn: TxnId,
        results: Vec<PieceReply>,
        locks: Option<Granted>,
    },
    /// Coordinator → primary: lock `writes` (NO_WAIT), then validate
    /// `reads` (key, wts seen) at timestamp `ts` (LT-OCC extends rts to it).
    /// Either part may be empty: with several primaries a serializable
    /// transaction's lock round (writes) ends everywhere before its
    /// validation round (reads) starts; a snapshot transaction sends both
    /// parts in one round (§5.3.3), validating at its `TID_SI` (LT-OCC).
    /// `decided`: write-backs to install first (see [`Decided`]).
    Prepare {
        txn: TxnId,
        floor: TxnId,
        decided: Vec<Decided>,
        writes: Vec<(Key, Value)>,
        reads: Vec<(Key, u64)>,
        ts: u64,
        /// Which round this is, echoed in the answer so that a late
        /// duplicate answer of the lock round never counts as a validation.
        round: u8,
    },
    /// `epoch`: the primary's current epoch; `bound`: PT-OCC the largest
    /// TID of the locked records, LT-OCC the smallest timestamp above their
    /// rts.
    ///
    /// `floor`: the first epoch after the last epoch abort the primary has
    /// carried out (§3.2). A transaction whose primaries answer with
    /// different floors saw some of them before an abort and some after,
    /// and aborts.
    Prepared {
        txn: TxnId,
        round: u8,
        ok: bool,
        epoch: u64,
        bound: u64,
        floor: u64,
    },
    /// Install the locked write set with timestamp `ts`, as part of `epoch`.
    WriteBack {
        txn: TxnId,
        ts: u64,
        epoch: u64,
    },
    WrittenBack {
        txn: TxnId,
    },
    /// Coordinator → a primary: drop the transaction's locks (not
    /// answered). S2PL: it has decided and only read there. 2PC(Sync) with
    /// coordinator replication: every replica has the writes the primary
    /// installed with its write locks kept (§7.1.2).
    Release {
        txn: TxnId,
    },
    Abort {
        txn: TxnId,
    },
    /// Primary → coordinator: `txn` has held locks here a long time.
    Inquire {
        txn: TxnId,
    },
    /// To a backup: apply if newer (Thomas write rule, §4.2.3). From the
    /// primary (`seq` > 0), acknowledged by **Replicated**; from the
    /// coordinator in epoch mode with coordinator replication (`seq` 0,
    /// §4.2.3 Fig. 3: the coordinator sends the write set to every
    /// replica), not acknowledged: the primary checks at the epoch's end
    /// that its backups have every write it installed (**EpochSync**).
    /// From the coordinator under 2PC(Sync) (`seq`: the transaction id),
    /// acknowledged to it.
    Replicate {
        seq: u64,
        txn: TxnId,
        ts: u64,
        epoch: u64,
        version: Version,
        writes: Vec<(Key, Value)>,
    },
    Replicated {
        seq: u64,
    },
    /// Primary → backup, once per epoch with coordinator replication
    /// (§3.3: replicas need agree only at epoch boundaries): the
    /// transactions of epochs up to `epoch` it installed. The backup
    /// answers which of them it has not received, once the others are
    /// logged (durably if it has already prepared `epoch`).
    EpochSync {
        epoch: u64,
        txns: Vec<TxnId>,
    },
    /// Backup → primary: `missing` are to be sent again, by the primary,
    /// acknowledged one by one (their coordinator's copy was lost, or the
    /// coordinator crashed before sending it).
    Synced {
        epoch: u64,
        missing: Vec<TxnId>,
    },
    /// Epoch manager → every server: prepare `epoch` (§3.1 phase one).
    EpochPrepare {
        epoch: u64,
    },
    EpochPrepared {
        epoch: u64,
    },
    /// Epoch manager → servers and client hosts: `epoch` committed.
    /// `aborted`: every range of epochs aborted so far, so that a client
    /// host that missed an **EpochAbort** never releases their results.
    EpochCommit {
        epoch: u64,
        aborted: Vec<(u64, u64)>,
    },
    /// Epoch manager → servers (until acknowledged) and client hosts:
    /// a server did not prepare `epoch` in time; every epoch from `epoch`
    /// up to (not including) `next` aborts and its writes are reverted
    /// (§3.2, failure points 1–4).
    EpochAbort {
        epoch: u64,
        next: u64,
    },
    EpochAborted {
        epoch: u64,
        next: u64,
    },
    /// A restarted server → epoch manager: it lost what it had not
    /// prepared; abort the open epochs and say what is committed (§3.2).
    /// Also a restarted client host in epoch mode, whose transactions may
    /// have written back at some primaries and not others (§3.2: a failure
    /// aborts the epoch).
    Rejoin,
    /// Epoch manager → a rejoining node: epochs up to `committed` that
    /// are in no `aborted` range are committed; replay those (see
    /// [`super::redo`]).
    EpochStatus {
        committed: u64,
        aborted: Vec<(u64, u64)>,
    },
}

/// A pair of counter names, `primary_events_<x>` and `backup_events_<x>`.
#[macro_export]
#[doc(hidden)]
macro_rules! coco_event_counters {
    ($x:literal) => {
        (
            concat!("primary_events_", $x),
            concat!("backup_events_", $x),
        )
    };
}

impl Msg {
    /// The counters of the server events this message causes, at a
    /// primary and at a backup (the simulator charges each event the same
    /// CPU, so these say where a server's CPU goes, by paper message
    /// name). A **Prepare** is counted by what it asks: lock writes,
    /// validate reads, or both in one round.
    pub fn event_counters(&self) -> (&'static str, &'static str) {
        match self {
            Msg::Read { .. } => coco_event_counters!("read"),
            Msg::ReadOk { .. } => coco_event_counters!("read_ok"),
            Msg::Prepare { writes, reads, .. } => match (writes.is_empty(), reads.is_empty()) {
                (false, true) => coco_event_counters!("prepare_lock"),
                (true, false) => coco_event_counters!("prepare_validate"),
                _ => coco_event_counters!("prepare_lock_validate"),
            },
            Msg::Prepared { .. } => coco_event_counters!("prepared"),
            Msg::WriteBack { .. } => coco_event_counters!("write_back"),
            Msg::WrittenBack { .. } => coco_event_counters!("written_back"),
            Msg::Release { .. } => coco_event_counters!("release"),
            Msg::Abort { .. } => coco_event_counters!("abort"),
            Msg::Inquire { .. } => coco_event_counters!("inquire"),
            Msg::Replicate { .. } => coco_event_counters!("replicate"),
            Msg::Replicated { .. } => coco_event_counters!("replicated"),
            Msg::EpochSync { .. } => coco_event_counters!("epoch_sync"),
            Msg::Synced { .. } => coco_event_counters!("synced"),
            Msg::EpochPrepare { .. } => coco_event_counters!("epoch_prepare"),
            Msg::EpochPrepared { .. } => coco_event_counters!("epoch_prepared"),
            Msg::EpochCommit { .. } => coco_event_counters!("epoch_commit"),
            Msg::EpochAbort { .. } => coco_event_counters!("epoch_abort"),
            Msg::EpochAborted { .. } => coco_event_counters!("epoch_aborted"),
            Msg::Rejoin => coco_event_counters!("rejoin"),
            Msg::EpochStatus { .. } => coco_event_counters!("epoch_status"),
        }
    }
}

fn kv_size(w: &[(Key, Value)]) -> usize {
    w.iter().map(|(_, v)| 12 + 4 + v.len()).sum()
}

impl WireSize for Msg {
    fn wire_size(&self) -> usize {
        const HEADER: usize = 1 + 8;
        HEADER
            + match self {
                Msg::Read {
                    pieces,
                    inputs,
                    own,
                    decided,
                    ..
                } => {
                    8 + 2
                        + 2 * pieces.len()
                        + inputs.iter().flatten().map(|v| 4 + v.len()).sum::<usize>()
                        + kv_size(own)
                        + 24 * decided.len()
                }
                Msg::ReadOk { results, locks, .. } => {
                    locks.map_or(0, |_| 17)
                        + results
                            .iter()
                            .map(|r| {
                                2 + 1
                                    + r.reads.len() * 28
                                    + r.written.len() * 20
                                    + kv_size(&r.writes)
                                    + 4
                                    + r.output.len()
                            })
                            .sum::<usize>()
                }
                Msg::Prepare {
                    writes,
                    reads,
                    decided,
                    ..
                } => 16 + kv_size(writes) + reads.len() * 20 + 24 * decided.len(),
                Msg::Prepared { .. } => 25,
                Msg::EpochCommit { aborted, .. } | Msg::EpochStatus { aborted, .. } => {
                    8 + 16 * aborted.len()
                }
                Msg::EpochAbort { .. } | Msg::EpochAborted { .. } => 16,
                Msg::WriteBack { .. } => 16,
                Msg::Replicate { writes, .. } => 40 + kv_size(writes),
                Msg::EpochSync { txns, .. } => 8 + 4 + 8 * txns.len(),
                Msg::Synced { missing, .. } => 8 + 4 + 8 * missing.len(),
                Msg::Replicated { .. } | Msg::EpochPrepare { .. } | Msg::EpochPrepared { .. } => 8,
                Msg::WrittenBack { .. }
                | Msg::Release { .. }
                | Msg::Abort { .. }
                | Msg::Inquire { .. }
                | Msg::Rejoin => 0,
            }
    }
}
