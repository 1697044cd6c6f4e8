//! What clients observed: the evidence the isolation checker reads.
//!
//! Every attempt is recorded from the client's side (Jepsen's rule: check
//! what clients saw, not what servers say they did): real-time start and
//! end, the version of every key read, and the keys written. A write's
//! version is the attempt's [`TxnId`], unique per key by construction.

use crate::ids::{Key, Time, TxnId};
use crate::txn::{Columns, ReadObs};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Committed,
    Aborted,
    /// The client does not know (it crashed, or the run ended first): the
    /// writes may or may not have been installed.
    Unknown,
}

#[derive(Clone, Debug)]
pub struct HistoryTxn {
    pub id: TxnId,
    /// The client process (a client slot in one incarnation of its host).
    pub process: u64,
    pub start: Time,
    /// `Time::MAX` when the outcome is unknown.
    pub end: Time,
    pub reads: Vec<ReadObs>,
    pub writes: Vec<Key>,
    /// The columns each of `writes` covers, for a history checked per
    /// column (`tessera_checker::check_columns`): empty when every write
    /// is of the whole row, else one entry per entry of `writes`.
    pub write_columns: Vec<Columns>,
    pub outcome: Outcome,
}

/// A run's history: all attempts of all clients, in no particular order.
#[derive(Clone, Debug, Default)]
pub struct History {
    pub txns: Vec<HistoryTxn>,
}
