//! NOCC's messages (§2 "Data Store"): a transaction request of compares,
//! reads and writes, and its answer.

use tessera_core::ids::{Key, NodeId, TxnId, Version};
use tessera_core::node::WireSize;
use tessera_core::txn::Value;

/// `compare(k, v)`: the key still holds the write the client read.
///
/// The paper compares values, because its switch learns of a write before
/// the store has numbered it (§2 "Detecting Stale Values"). Here a write's
/// version is its transaction's id, fixed by the client before the request
/// leaves, so the switch knows the version of every value it caches,
/// speculative or not, and a compare names the version read. That is exact
/// where value compares are not (a value changed and changed back reads as
/// unchanged), and it lets the isolation checker see what each transaction
/// read. Values still travel with corrections, so a client retries at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compare {
    pub key: Key,
    /// The version read; `None`: the client has never seen the key, so the
    /// compare fails and the correction brings the value.
    pub version: Option<Version>,
}

impl Compare {
    /// Does a key whose current version is `current` satisfy this compare?
    pub fn holds(&self, current: Version) -> bool {
        self.version == Some(current)
    }
}

/// A transaction request. Every field but `floor` passes the switch
/// unchanged (§2 "Correctness" (b)).
#[derive(Clone, Debug)]
pub struct Request {
    pub txn: TxnId,
    /// The client host that sent it: replies go back to it through its switch.
    pub client: NodeId,
    /// The client's floor (see [`crate::tombstones`]).
    pub floor: TxnId,
    pub compares: Vec<Compare>,
    pub reads: Vec<Key>,
    pub writes: Vec<(Key, Value)>,
}

impl Request {
    pub fn ops(&self) -> usize {
        self.compares.len() + self.reads.len() + self.writes.len()
    }
}

/// A key's value (`None`: absent) and version, as the store holds it or a
/// switch last saw it written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    pub key: Key,
    pub value: Option<Value>,
    pub version: Version,
}

/// Who aborted a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AbortedBy {
    Switch,
    Store,
}

#[derive(Clone, Debug)]
pub enum Outcome {
    /// Committed; the values of the compared and read keys as of the commit
    /// (before the transaction's own writes).
    Committed { observed: Vec<Observed> },
    /// Aborted, with the current values of the keys whose compares failed.
    Aborted {
        by: AbortedBy,
        corrections: Vec<Observed>,
    },
}

#[derive(Clone, Debug)]
pub struct Reply {
    pub txn: TxnId,
    pub client: NodeId,
    pub outcome: Outcome,
}

#[derive(Clone, Debug)]
pub enum Msg {
    Request(Request),
    Reply(Reply),
    /// Metrics only, switch → store: would this request, which the switch
    /// aborted, have committed had it been forwarded? The simulator delivers
    /// it like any message but charges no CPU and counts no traffic for it
    /// (see [`WireSize::instrumentation`]).
    Probe(Vec<Compare>),
}

fn value_size(v: &Option<Value>) -> usize {
    1 + v.as_ref().map_or(0, |v| 4 + v.len())
}

impl WireSize for Msg {
    fn wire_size(&self) -> usize {
        const HEADER: usize = 1 + 8 + 4;
        const KEY: usize = 8;
        HEADER
            + match self {
                Msg::Request(r) => {
                    8 + r
                        .compares
                        .iter()
                        .map(|c| KEY + 1 + if c.version.is_some() { 8 } else { 0 })
                        .sum::<usize>()
                        + r.reads.len() * KEY
                        + r.writes
                            .iter()
                            .map(|(_, v)| KEY + 4 + v.len())
                            .sum::<usize>()
                }
                Msg::Reply(r) => {
                    let obs = match &r.outcome {
                        Outcome::Committed { observed } => observed,
                        Outcome::Aborted { corrections, .. } => corrections,
                    };
                    1 + obs
                        .iter()
                        .map(|o| KEY + 8 + value_size(&o.value))
                        .sum::<usize>()
                }
                Msg::Probe(_) => 0,
            }
    }

    fn instrumentation(&self) -> bool {
        matches!(self, Msg::Probe(_))
    }
}
