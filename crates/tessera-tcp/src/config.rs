//! The cluster file (TOML): who runs where, what runs, how it logs.
//!
//! `examples/cluster-3.toml` documents every key. In short:
//!
//! ```toml
//! [cluster]
//! protocol = "occ"          # a name from `tessera protocols`
//! seed = 1
//! run_dir = "run"           # pid files, logs, write-ahead logs (relative to this file)
//!
//! [workload]                # every server loads the same data from it
//! name = "ycsb"
//! partitions = 3            # the workload's own keys (YcsbConfig, MicroConfig)
//!
//! [[sites]]
//! name = "local"
//!
//! [[nodes]]
//! name = "s0"
//! site = "local"
//! addr = "127.0.0.1:7100"
//!
//! [[shards]]                # shard i is the i-th entry; replicas[0] leads
//! replicas = ["s0"]
//!
//! [clients]                 # client hosts run by `tessera bench` / `tessera txn`
//! hosts = 1
//! clients = 16
//!
//! [wal]
//! enabled = true
//! fsync = true
//! group_window_us = 1000
//! checkpoint_mb = 64
//!
//! [net]
//! max_frame_bytes = 16777216
//! ```

use crate::net::NetConfig;
use crate::process::WalSettings;
use serde::Deserialize;
use std::collections::HashSet;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tessera_core::ids::{NodeId, ShardId};
use tessera_core::topology::{NodeInfo, ReplicaGroup, Role, Topology};
use tessera_wal::WalConfig;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read cluster file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cluster file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("duplicate node name '{0}' in [[nodes]]")]
    DuplicateNode(String),
    #[error("nodes '{a}' and '{b}' share the address {addr}")]
    DuplicateAddr { a: String, b: String, addr: String },
    #[error("node '{node}' is on site '{site}', which no [[sites]] entry names")]
    UnknownSite { node: String, site: String },
    #[error("duplicate site name '{0}' in [[sites]]")]
    DuplicateSite(String),
    #[error("shard {0} ([[shards]] entry {0}) has no replicas")]
    ShardWithoutReplicas(usize),
    #[error("shard {shard} names replica '{node}', which no [[nodes]] entry defines")]
    UnknownReplica { shard: usize, node: String },
    #[error("node '{0}' serves more than one shard replica (one node serves one)")]
    NodeServesTwo(String),
    #[error("node '{0}' serves no shard: list it in a [[shards]] entry or remove it")]
    NodeServesNone(String),
    #[error("node '{node}': address '{addr}' is not a reachable host:port ({reason})")]
    BadAddr {
        node: String,
        addr: String,
        reason: String,
    },
    #[error("no node named '{name}' (nodes: {known})")]
    UnknownNode { name: String, known: String },
    #[error("invalid value {value} for {key}: {allowed}")]
    Invalid {
        key: &'static str,
        value: String,
        allowed: &'static str,
    },
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSection {
    /// Registry name of the protocol every node runs.
    pub protocol: String,
    #[serde(default = "one")]
    pub seed: u64,
    /// Pid files, server logs and write-ahead logs; relative paths are
    /// relative to the cluster file.
    #[serde(default = "default_run_dir")]
    pub run_dir: PathBuf,
}

fn one() -> u64 {
    1
}

fn default_run_dir() -> PathBuf {
    PathBuf::from("tessera-run")
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Site {
    pub name: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeDecl {
    pub name: String,
    /// Defaults to the first site (or none when there are no sites).
    pub site: Option<String>,
    pub addr: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardDecl {
    pub replicas: Vec<String>,
}

/// The workload: its name plus its own parameters (the harness reads them
/// into the workload's configuration type, rejecting unknown keys).
#[derive(Clone, Debug, Deserialize)]
pub struct WorkloadSection {
    pub name: String,
    #[serde(flatten)]
    pub params: toml::Table,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClientsSection {
    /// Client-host nodes (each a coordinator with closed-loop clients).
    pub hosts: u32,
    /// Closed-loop clients in total for `tessera bench` (0: 8 per shard).
    pub clients: u32,
    pub site: Option<String>,
}

impl Default for ClientsSection {
    fn default() -> Self {
        ClientsSection {
            hosts: 1,
            clients: 0,
            site: None,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WalSection {
    pub enabled: bool,
    pub fsync: bool,
    /// Group-commit window in microseconds (Rococo §5.7: 1 ms).
    pub group_window_us: u64,
    /// Checkpoint a node's log after this many MiB of records (0: never).
    pub checkpoint_mb: u64,
}

impl Default for WalSection {
    fn default() -> Self {
        WalSection {
            enabled: true,
            fsync: true,
            group_window_us: 1000,
            checkpoint_mb: 64,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NetSection {
    pub max_frame_bytes: usize,
    pub queue: usize,
    pub inbound: usize,
    pub batch_bytes: usize,
    /// A stats line (throughput, drops, queue depths) every this many
    /// seconds at level info; 0: none.
    pub stats_every_s: u64,
}

impl Default for NetSection {
    fn default() -> Self {
        let d = NetConfig::default();
        NetSection {
            max_frame_bytes: d.max_frame,
            queue: d.queue,
            inbound: d.inbound,
            batch_bytes: d.batch_bytes,
            stats_every_s: 10,
        }
    }
}

/// A parsed, validated cluster file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    pub cluster: ClusterSection,
    pub workload: WorkloadSection,
    #[serde(default)]
    pub sites: Vec<Site>,
    pub nodes: Vec<NodeDecl>,
    pub shards: Vec<ShardDecl>,
    #[serde(default)]
    pub clients: ClientsSection,
    #[serde(default)]
    pub wal: WalSection,
    #[serde(default)]
    pub net: NetSection,
    /// Where the file was read from (for messages and relative paths).
    #[serde(skip)]
    pub path: PathBuf,
    #[serde(skip)]
    addrs: Vec<SocketAddr>,
}

impl ClusterConfig {
    /// Read, parse and validate `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parse and validate `text`, read from `path`.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let mut c: ClusterConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        c.path = path.to_path_buf();
        if c.cluster.run_dir.is_relative() {
            let base = path.parent().unwrap_or(Path::new("."));
            c.cluster.run_dir = base.join(&c.cluster.run_dir);
        }
        c.validate()?;
        Ok(c)
    }

    fn validate(&mut self) -> Result<(), ConfigError> {
        let mut sites = HashSet::new();
        for s in &self.sites {
            if !sites.insert(s.name.as_str()) {
                return Err(ConfigError::DuplicateSite(s.name.clone()));
            }
        }
        let mut names = HashSet::new();
        let mut addrs: Vec<SocketAddr> = Vec::new();
        for n in &self.nodes {
            if !names.insert(n.name.as_str()) {
                return Err(ConfigError::DuplicateNode(n.name.clone()));
            }
            if let Some(site) = &n.site {
                if !sites.contains(site.as_str()) {
                    return Err(ConfigError::UnknownSite {
                        node: n.name.clone(),
                        site: site.clone(),
                    });
                }
            }
            let bad = |reason: String| ConfigError::BadAddr {
                node: n.name.clone(),
                addr: n.addr.clone(),
                reason,
            };
            let addr = n
                .addr
                .to_socket_addrs()
                .map_err(|e| bad(e.to_string()))?
                .next()
                .ok_or_else(|| bad("resolves to no address".into()))?;
            if addr.port() == 0 {
                return Err(bad("port 0 is not a fixed port".into()));
            }
            if let Some(i) = addrs.iter().position(|a| *a == addr) {
                return Err(ConfigError::DuplicateAddr {
                    a: self.nodes[i].name.clone(),
                    b: n.name.clone(),
                    addr: addr.to_string(),
                });
            }
            addrs.push(addr);
        }
        if let Some(site) = &self.clients.site {
            if !sites.contains(site.as_str()) {
                return Err(ConfigError::UnknownSite {
                    node: "[clients]".into(),
                    site: site.clone(),
                });
            }
        }
        if self.shards.is_empty() {
            return Err(ConfigError::Invalid {
                key: "[[shards]]",
                value: "none".into(),
                allowed: "at least one shard",
            });
        }
        let mut serves = vec![0u32; self.nodes.len()];
        for (i, s) in self.shards.iter().enumerate() {
            if s.replicas.is_empty() {
                return Err(ConfigError::ShardWithoutReplicas(i));
            }
            for r in &s.replicas {
                let j = self
                    .nodes
                    .iter()
                    .position(|n| &n.name == r)
                    .ok_or_else(|| ConfigError::UnknownReplica {
                        shard: i,
                        node: r.clone(),
                    })?;
                serves[j] += 1;
            }
        }
        for (n, &k) in self.nodes.iter().zip(&serves) {
            match k {
                0 => return Err(ConfigError::NodeServesNone(n.name.clone())),
                1 => {}
                _ => return Err(ConfigError::NodeServesTwo(n.name.clone())),
            }
        }
        if self.clients.hosts == 0 {
            return Err(ConfigError::Invalid {
                key: "clients.hosts",
                value: "0".into(),
                allowed: "1 or more",
            });
        }
        if self.net.max_frame_bytes < 1024 || self.net.queue == 0 || self.net.inbound == 0 {
            return Err(ConfigError::Invalid {
                key: "[net]",
                value: format!(
                    "max_frame_bytes = {}, queue = {}, inbound = {}",
                    self.net.max_frame_bytes, self.net.queue, self.net.inbound
                ),
                allowed: "max_frame_bytes >= 1024, queue and inbound >= 1",
            });
        }
        self.addrs = addrs;
        Ok(())
    }

    fn site_index(&self, site: Option<&String>) -> u32 {
        site.and_then(|s| self.sites.iter().position(|x| &x.name == s))
            .unwrap_or(0) as u32
    }

    /// Servers are nodes `0..n` in `[[nodes]]` order, then the client
    /// hosts.
    pub fn topology(&self) -> Topology {
        let mut nodes: Vec<NodeInfo> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let (shard, replica) = self
                    .shards
                    .iter()
                    .enumerate()
                    .find_map(|(s, d)| d.replicas.iter().position(|r| *r == n.name).map(|r| (s, r)))
                    .expect("validated: every node serves one shard");
                NodeInfo {
                    id: NodeId(i as u32),
                    role: Role::Server {
                        shard: ShardId(shard as u32),
                        replica: replica as u32,
                    },
                    site: self.site_index(n.site.as_ref()),
                    colocated_with: None,
                }
            })
            .collect();
        let shards = self
            .shards
            .iter()
            .map(|s| ReplicaGroup {
                replicas: s
                    .replicas
                    .iter()
                    .map(|r| self.node_id(r).expect("validated"))
                    .collect(),
            })
            .collect();
        for h in 0..self.clients.hosts {
            nodes.push(NodeInfo {
                id: NodeId(nodes.len() as u32),
                role: Role::Client { host: h },
                site: self.site_index(self.clients.site.as_ref()),
                colocated_with: None,
            });
        }
        Topology { shards, nodes }
    }

    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.nodes
            .iter()
            .position(|n| n.name == name)
            .map(|i| NodeId(i as u32))
    }

    /// The id of node `name`, or an error listing the known names.
    pub fn require_node(&self, name: &str) -> Result<NodeId, ConfigError> {
        self.node_id(name).ok_or_else(|| ConfigError::UnknownNode {
            name: name.to_string(),
            known: self
                .nodes
                .iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    /// Every server with its address.
    pub fn servers(&self) -> Vec<(NodeId, SocketAddr)> {
        self.addrs
            .iter()
            .enumerate()
            .map(|(i, a)| (NodeId(i as u32), *a))
            .collect()
    }

    pub fn net_config(&self) -> NetConfig {
        NetConfig {
            max_frame: self.net.max_frame_bytes,
            queue: self.net.queue,
            inbound: self.net.inbound,
            batch_bytes: self.net.batch_bytes.max(1024),
            ..NetConfig::default()
        }
    }

    pub fn stats_every(&self) -> Option<Duration> {
        (self.net.stats_every_s > 0).then(|| Duration::from_secs(self.net.stats_every_s))
    }

    /// The log settings of a node whose log lives in `run_dir/wal/<dir>`.
    pub fn wal_settings(&self, dir: &str) -> Option<WalSettings> {
        if !self.wal.enabled {
            return None;
        }
        let mut config = WalConfig::new(self.cluster.run_dir.join("wal").join(dir));
        config.fsync = self.wal.fsync;
        config.group_window = Duration::from_micros(self.wal.group_window_us);
        Some(WalSettings {
            config,
            checkpoint_bytes: self.wal.checkpoint_mb << 20,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[cluster]
protocol = "occ"
[workload]
name = "ycsb"
partitions = 2
[[sites]]
name = "a"
[[nodes]]
name = "s0"
site = "a"
addr = "127.0.0.1:7100"
[[nodes]]
name = "s1"
addr = "127.0.0.1:7101"
[[shards]]
replicas = ["s0"]
[[shards]]
replicas = ["s1"]
"#;

    fn parse(text: &str) -> Result<ClusterConfig, ConfigError> {
        ClusterConfig::parse(text, Path::new("/tmp/c.toml"))
    }

    #[test]
    fn a_good_file_gives_a_topology_of_servers_then_client_hosts() {
        let c = parse(GOOD).unwrap();
        let t = c.topology();
        assert_eq!(t.num_shards(), 2);
        assert_eq!(t.nodes.len(), 3);
        assert_eq!(t.leader(ShardId(1)), NodeId(1));
        assert!(matches!(t.nodes[2].role, Role::Client { host: 0 }));
        assert_eq!(c.cluster.run_dir, Path::new("/tmp/tessera-run"));
        assert_eq!(c.workload.params["partitions"].as_integer(), Some(2));
        assert_eq!(c.servers()[1].1.port(), 7101);
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        let cases = [
            (
                GOOD.replace("name = \"s1\"", "name = \"s0\""),
                "duplicate node name 's0'",
            ),
            (GOOD.replace("site = \"a\"", "site = \"b\""), "site 'b'"),
            (
                GOOD.replace("replicas = [\"s1\"]", "replicas = []"),
                "shard 1",
            ),
            (
                GOOD.replace("replicas = [\"s1\"]", "replicas = [\"s9\"]"),
                "'s9'",
            ),
            (GOOD.replace("7101", "7100"), "share the address"),
            (GOOD.replace("127.0.0.1:7101", "nonsense"), "'nonsense'"),
            (
                GOOD.replace("replicas = [\"s1\"]", "replicas = [\"s0\"]"),
                "more than one",
            ),
            (GOOD.replace("protocol", "protocl"), "protocl"),
        ];
        for (text, want) in cases {
            let err = parse(&text).unwrap_err().to_string();
            assert!(err.contains(want), "{want:?} not in {err:?}");
        }
    }
}
