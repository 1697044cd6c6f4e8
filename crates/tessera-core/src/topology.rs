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
    /// A node on the path between a rack of client hosts and the servers
    /// (NOCC's top-of-rack switch). Only protocols with a switch role use
    /// it; see [`Topology::with_switches`].
    Switch { index: u32 },
}

#[derive(Clone, Debug)]
pub struct NodeInfo {
    pub id: NodeId,
    pub role: Role,
    pub site: u32,
    /// The node whose machine this one shares, if another's: a client host
    /// co-located with its home shard's primary
    /// ([`Topology::colocate_clients`]). Messages between nodes of one
    /// machine cross no network.
    pub colocated_with: Option<NodeId>,
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
                    colocated_with: None,
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
                colocated_with: None,
            });
        }
        Topology {
            shards: groups,
            nodes,
        }
    }

    /// Add `n` switches; client host `h` sits in rack `h % n`, behind
    /// switch `h % n`.
    pub fn with_switches(mut self, n: u32) -> Self {
        for index in 0..n {
            let id = NodeId(self.nodes.len() as u32);
            self.nodes.push(NodeInfo {
                id,
                role: Role::Switch { index },
                site: 0,
                colocated_with: None,
            });
        }
        self
    }

    /// Spread the nodes over `sites` sites: replica `r` of every shard on
    /// site `r % sites` (so the initial leaders share site 0), client host
    /// `h` on site `h % sites`, or on site 0 with the leaders when
    /// `clients_with_leaders`. Switches stay with their racks' first host.
    pub fn on_sites(mut self, sites: u32, clients_with_leaders: bool) -> Self {
        let sites = sites.max(1);
        for n in &mut self.nodes {
            n.site = match n.role {
                Role::Server { replica, .. } => replica % sites,
                Role::Client { .. } if clients_with_leaders => 0,
                Role::Client { host } => host % sites,
                Role::Switch { index } => index % sites,
            };
        }
        self
    }

    /// Move shard `s`'s replica `r` to site `(s + r) % sites`, after
    /// [`Topology::on_sites`]: shard `s`'s primary (replica 0) sits on site
    /// `s % sites` and its backups on the sites after it, so with three
    /// replicas over three sites every site holds one replica of every
    /// shard and the primary of every third one. COCO §7.5 (Fig. 12) runs
    /// its wide-area experiment so, one node per region and "the primary
    /// partition is randomly chosen from 3 nodes", where `on_sites` alone
    /// puts every primary on site 0 (as Janus' geo runs want). Call it
    /// before [`Topology::colocate_clients`], which follows the primaries.
    pub fn spread_primaries(mut self, sites: u32) -> Self {
        let sites = sites.max(1);
        for n in &mut self.nodes {
            if let Role::Server { shard, replica } = n.role {
                n.site = ((u64::from(shard.0) + u64::from(replica)) % u64::from(sites)) as u32;
            }
        }
        self
    }

    /// Put client host `h` on the machine (and site) of shard `h`'s
    /// primary, as COCO's workers run on the node that holds their home
    /// partition (§7.1): a coordinator reaches its home primary with no
    /// network latency, the other replicas and shards as before. Hosts
    /// beyond the last shard stay where they are. The deployment gives host
    /// `h` the clients whose home shard is `h` (`tessera-harness`'s
    /// `deploy`), so every client is co-located with its home primary.
    pub fn colocate_clients(mut self) -> Self {
        let leaders: Vec<(NodeId, u32)> = self
            .shards
            .iter()
            .map(|g| (g.leader(), self.nodes[g.leader().0 as usize].site))
            .collect();
        for n in &mut self.nodes {
            if let Role::Client { host } = n.role {
                if let Some(&(leader, site)) = leaders.get(host as usize) {
                    n.colocated_with = Some(leader);
                    n.site = site;
                }
            }
        }
        self
    }

    /// The machine node `n` runs on, named by one of its nodes: nodes with
    /// the same machine exchange messages without the network.
    pub fn machine(&self, n: NodeId) -> NodeId {
        self.nodes[n.0 as usize].colocated_with.unwrap_or(n)
    }

    /// The switch in front of node `n` (a client host), if there are switches.
    pub fn switch_of(&self, n: NodeId) -> Option<NodeId> {
        let Role::Client { host } = self.role(n) else {
            return None;
        };
        let switches: Vec<NodeId> = self
            .nodes
            .iter()
            .filter(|i| matches!(i.role, Role::Switch { .. }))
            .map(|i| i.id)
            .collect();
        (!switches.is_empty()).then(|| switches[host as usize % switches.len()])
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sites_of(t: &Topology, shard: u32) -> Vec<u32> {
        t.shards[shard as usize]
            .replicas
            .iter()
            .map(|n| t.nodes[n.0 as usize].site)
            .collect()
    }

    /// `on_sites` puts every primary on site 0; `spread_primaries` puts
    /// shard `s`'s on site `s % sites` and its backups on the other sites
    /// (COCO §7.5), and co-located client hosts follow their primaries.
    #[test]
    fn spread_primaries_puts_shard_s_primary_on_site_s() {
        let together = Topology::new(4, 3, 4).on_sites(3, false);
        for s in 0..4 {
            assert_eq!(sites_of(&together, s), vec![0, 1, 2], "shard {s}");
        }
        let spread = Topology::new(4, 3, 4)
            .on_sites(3, false)
            .spread_primaries(3)
            .colocate_clients();
        assert_eq!(sites_of(&spread, 0), vec![0, 1, 2]);
        assert_eq!(sites_of(&spread, 1), vec![1, 2, 0]);
        assert_eq!(sites_of(&spread, 2), vec![2, 0, 1]);
        assert_eq!(sites_of(&spread, 3), vec![0, 1, 2]);
        for s in 0..4 {
            let mut all = sites_of(&spread, s);
            all.sort_unstable();
            assert_eq!(all, vec![0, 1, 2], "shard {s}: one replica per site");
        }
        for (h, host) in spread.client_hosts().enumerate() {
            let leader = spread.leader(ShardId(h as u32));
            assert_eq!(host.colocated_with, Some(leader));
            assert_eq!(host.site, h as u32 % 3, "host {h}");
        }
        // Client hosts keep `on_sites`' placement when not co-located, and
        // more replicas than sites wrap around.
        let wide = Topology::new(2, 4, 2)
            .on_sites(3, false)
            .spread_primaries(3);
        assert_eq!(sites_of(&wide, 1), vec![1, 2, 0, 1]);
        let hosts: Vec<u32> = wide.client_hosts().map(|n| n.site).collect();
        assert_eq!(hosts, vec![0, 1]);
    }
}
