//! The contract between the harness and a runtime (`sim`, `local`, later
//! `tcp`): the harness builds a [`Deployment`] — the topology and one factory
//! per node — and a runtime drives the nodes for a while and returns a
//! [`RunOutput`].

use crate::ids::{NodeId, Time};
use crate::node::{Node, NodeReport};
use crate::topology::Topology;
use bytes::Bytes;
use std::sync::Arc;

/// What a node is (re)built from.
pub struct Restart {
    /// 0 at the first start, +1 at each restart after a crash.
    pub incarnation: u8,
    /// The node's durable records, in the order they were persisted.
    pub recovered: Vec<Bytes>,
    /// Whether this runtime keeps persisted records across a crash. When
    /// it does not (`local` has no disk), a node may skip building log
    /// records that nobody will ever read back.
    pub durable: bool,
}

/// Builds a node; called once at start and again after every crash.
pub type NodeFactory<M> = Box<dyn FnMut(Restart) -> Box<dyn Node<M>> + Send>;

/// Everything a runtime needs to run a cluster.
pub struct Deployment<M> {
    pub topology: Arc<Topology>,
    /// One factory per node, indexed by [`NodeId`].
    pub factories: Vec<NodeFactory<M>>,
    /// Seed of the run; each node's RNG is derived from it and its id.
    pub seed: u64,
    /// How long to run (virtual time in `sim`, wall time in `local`).
    pub duration: Time,
}

/// Message counters of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetCounters {
    /// Messages that crossed the network (and their bytes).
    pub messages: u64,
    pub bytes: u64,
    /// Messages between two nodes of one machine
    /// ([`crate::topology::Topology::colocate_clients`]): not in `messages`,
    /// as COCO's message counts leave out a worker's local accesses (§7.1).
    pub local_messages: u64,
}

/// What a runtime returns.
pub struct RunOutput<M> {
    /// Reports of every node incarnation (crashed ones included).
    pub reports: Vec<NodeReport>,
    /// The nodes as they are at the end, indexed by [`NodeId`].
    pub nodes: Vec<Box<dyn Node<M>>>,
    pub net: NetCounters,
    /// Events processed (all nodes).
    pub events: u64,
    /// Per node (by [`NodeId`]), the CPU time its events cost, summed over
    /// incarnations. Only the simulator models this; other runtimes leave
    /// it empty.
    pub busy: Vec<Time>,
    /// Time the run covered.
    pub elapsed: Time,
}

/// The RNG seed of one node of a run (SplitMix64 of the pair), so that node
/// RNGs are independent and stable whatever the runtime.
pub fn node_seed(seed: u64, node: NodeId, incarnation: u8) -> u64 {
    let mut z =
        seed ^ (node.0 as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ((incarnation as u64) << 56);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
