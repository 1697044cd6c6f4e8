//! The trait a protocol implements, and the environment its roles start in.
//!
//! A protocol names its message type and its roles. The harness's registry
//! (the one place that knows protocol names) instantiates the roles and hands
//! them to a runtime; runtimes are generic over [`Protocol`] and never look
//! inside messages.

use crate::ids::{NodeId, ShardId};
use crate::node::{Ctx, Node, WireSize};
use crate::storage::Store;
use crate::topology::Topology;
use crate::txn::Attempt;
use bytes::Bytes;
use std::fmt::Debug;
use std::sync::Arc;

/// Where a shard replica starts.
pub struct ServerEnv {
    pub me: NodeId,
    pub shard: ShardId,
    pub replica: u32,
    pub topology: Arc<Topology>,
    /// The shard's data, loaded by the workload.
    pub store: Store,
    /// This node's durable log from before a crash (empty at first start).
    pub recovered: Vec<Bytes>,
    /// Whether persisted records survive a crash ([`crate::runtime::Restart::durable`]).
    pub durable: bool,
    /// Decodes procedures from `recovered` (their workload), for protocols
    /// whose durable records name procedures: Rococo logs start requests
    /// (§3.5), Janus the transactions it promised to order (§3).
    pub codec: crate::codec::DecodeCx,
}

/// Where a coordinator starts.
pub struct CoordinatorEnv {
    pub me: NodeId,
    pub topology: Arc<Topology>,
    /// Increases by one at every restart of the node; part of every
    /// [`crate::TxnId`] the coordinator mints.
    pub incarnation: u8,
    /// This node's durable log from before a crash (empty at first start).
    pub recovered: Vec<Bytes>,
}

/// Where a switch starts (see [`crate::topology::Role::Switch`]).
pub struct SwitchEnv {
    pub me: NodeId,
    pub index: u32,
    pub topology: Arc<Topology>,
}

/// The coordinator role: takes transaction attempts from the client host and
/// reports each one's end with [`Ctx::done`].
///
/// Timer ids with the top bit set belong to the client host that wraps the
/// coordinator; a coordinator uses only ids below `1 << 63`.
pub trait Coordinator<M>: Node<M> {
    fn submit(&mut self, ctx: &mut Ctx<M>, attempt: Attempt);
}

/// A concurrency-control protocol: its messages and its roles.
pub trait Protocol: Sized + 'static {
    type Msg: Send + Clone + Debug + WireSize + 'static;
    /// The variant knobs (e.g. wound-wait or no-wait for 2PL).
    type Config: Clone + Send + Sync + Debug + 'static;
    type Server: Node<Self::Msg> + 'static;
    type Coordinator: Coordinator<Self::Msg> + 'static;

    fn server(config: &Self::Config, env: ServerEnv) -> Self::Server;
    fn coordinator(config: &Self::Config, env: CoordinatorEnv) -> Self::Coordinator;

    /// The switch role, for protocols that put a node on the path between a
    /// rack of client hosts and the servers (NOCC). `None`: this protocol
    /// has no switch, and a deployment with switches is refused.
    fn switch(config: &Self::Config, env: SwitchEnv) -> Option<Box<dyn Node<Self::Msg>>> {
        let _ = (config, env);
        None
    }
}
