//! Who serves what, and where.
//!
//! Every shard is a replica group from day one. The foundation protocols use
//! groups of one; replicated protocols (Janus, the Paxos baselines, COCO) use
//! three. Nodes sit on sites; the simulator's latency matrix is per site pair.

use crate::ids::{NodeId, ShardId};

/// The replicas of one shard. `replicas[0]` is the initial leader.
#[derive(Clone, Debug)]
pub struct ReplicaGroup {
    pub replicas: Vec<NodeId>,
}

impl ReplicaGroup {
    pub fn leader(&self) -> NodeId {
        self.replicas[0]
    }
}

/// What kind of node a [`NodeId`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Replica `replica` of shard `shard`.
    Server { shard: ShardId, replica: u32 },
    /// A client host running closed-loop clients and a coordinator.
    Client { host: u32 },
}

#[derive(Clone, Debug)]
pub struct NodeInfo {
    pub id: NodeId,
    pub role: Role,
    pub site: u32,
}

/// The cluster's layout. Node ids are dense: `nodes[i].id == NodeId(i)`.
#[derive(Clone, Debug)]
pub struct Topology {
    pub shards: Vec<ReplicaGroup>,
    pub nodes: Vec<NodeInfo>,
}

impl Topology {
    /// `shards` groups of `replicas` servers, then `client_hosts` client
    /// hosts; all on site 0.
    pub fn new(shards: u32, replicas: u32, client_hosts: u32) -> Self {
        let mut nodes = Vec::new();
        let mut groups = Vec::new();
        for s in 0..shards {
            let mut g = Vec::new();
            for r in 0..replicas {
                let id = NodeId(nodes.len() as u32);
                nodes.push(NodeInfo {
                    id,
                    role: Role::Server {
                        shard: ShardId(s),
                        replica: r,
                    },
                    site: 0,
                });
                g.push(id);
            }
            groups.push(ReplicaGroup { replicas: g });
        }
        for h in 0..client_hosts {
            let id = NodeId(nodes.len() as u32);
            nodes.push(NodeInfo {
                id,
                role: Role::Client { host: h },
                site: 0,
            });
        }
        Topology {
            shards: groups,
            nodes,
        }
    }

    pub fn num_shards(&self) -> u32 {
        self.shards.len() as u32
    }

    pub fn leader(&self, shard: ShardId) -> NodeId {
        self.shards[shard.0 as usize].leader()
    }

    pub fn client_hosts(&self) -> impl Iterator<Item = &NodeInfo> {
        self.nodes
            .iter()
            .filter(|n| matches!(n.role, Role::Client { .. }))
    }

    pub fn role(&self, n: NodeId) -> Role {
        self.nodes[n.0 as usize].role
    }
}
