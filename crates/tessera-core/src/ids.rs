//! Identifiers and time.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Virtual or real time in nanoseconds since the start of a run.
pub type Time = u64;

/// Nanoseconds per millisecond, for readable constants.
pub const MS: Time = 1_000_000;
/// Nanoseconds per microsecond.
pub const US: Time = 1_000;

/// A node of the cluster (a server replica or a client host).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
pub struct NodeId(pub u32);

/// A shard: a partition of the data, served by a replica group.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
pub struct ShardId(pub u32);

/// A table of a shard's store.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
pub struct TableId(pub u32);

/// A timer set by a node; the node picks the numbers and interprets them.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct TimerId(pub u64);

/// A record's key: its table and a row number.
///
/// Workloads pack composite keys (TPC-C's warehouse/district/…) into `row`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Key {
    pub table: TableId,
    pub row: u64,
}

impl Key {
    pub const fn new(table: u32, row: u64) -> Self {
        Key {
            table: TableId(table),
            row,
        }
    }

    /// A key whose row number is unique only within its shard (YCSB's and
    /// the micro-benchmark's key ranks): the shard goes into the top 24 bits
    /// so that keys stay unique across the cluster, which the history and
    /// the isolation checker rely on.
    pub const fn in_shard(table: u32, shard: ShardId, row: u64) -> Self {
        Key::new(table, ((shard.0 as u64) << 40) | (row & ((1 << 40) - 1)))
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.table.0, self.row)
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.table.0, self.row)
    }
}

/// One attempt of one transaction, unique across a run.
///
/// Layout: `node (24 bits) | incarnation (8 bits) | sequence (32 bits)`.
/// The incarnation changes each time the coordinator's node restarts, so a
/// restarted coordinator can tell its own old transactions from new ones
/// (presumed abort, see the 2PC coordinator).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TxnId(pub u64);

impl TxnId {
    pub fn new(node: NodeId, incarnation: u8, seq: u32) -> Self {
        TxnId(((node.0 as u64) << 40) | ((incarnation as u64) << 32) | seq as u64)
    }
    pub fn node(self) -> NodeId {
        NodeId((self.0 >> 40) as u32)
    }
    pub fn incarnation(self) -> u8 {
        (self.0 >> 32) as u8
    }
    /// The version this attempt writes: every committed write is unique per
    /// key, which is what the isolation checker (and Elle) needs.
    pub fn version(self) -> Version {
        Version(self.0)
    }
}

impl fmt::Debug for TxnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "T{}.{}.{}",
            self.node().0,
            self.incarnation(),
            self.0 as u32
        )
    }
}

/// The version of a record: the id of the transaction attempt that wrote it,
/// or [`Version::INITIAL`] for loaded data.
#[derive(
    Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default, Serialize, Deserialize,
)]
pub struct Version(pub u64);

impl Version {
    pub const INITIAL: Version = Version(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn txn_id_fields_round_trip() {
        let t = TxnId::new(NodeId(77), 3, 123_456);
        assert_eq!(t.node(), NodeId(77));
        assert_eq!(t.incarnation(), 3);
        assert_eq!(t.0 as u32, 123_456);
        assert_ne!(t.version(), Version::INITIAL);
    }
}
