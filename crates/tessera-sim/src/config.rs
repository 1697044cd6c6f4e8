//! What the simulated world looks like.

use crate::Progress;
use tessera_core::ids::{NodeId, Time, US};
use thiserror::Error;

/// A timed partition: messages between a node of `a` and a node of `b`
/// are dropped while `from <= t < until`.
#[derive(Clone, Debug)]
pub struct Partition {
    pub from: Time,
    pub until: Time,
    pub a: Vec<NodeId>,
    pub b: Vec<NodeId>,
}

/// A crash of `node` at `at`; it restarts `restart_after` later (or never).
#[derive(Clone, Debug)]
pub struct Crash {
    pub node: NodeId,
    pub at: Time,
    pub restart_after: Option<Time>,
}

/// The simulated network, CPUs, disks and faults.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// One-way latency between sites, `latency[a][b]` in ns.
    pub latency: Vec<Vec<Time>>,
    /// Uniform extra delay in `[0, jitter]` on every message.
    pub jitter: Time,
    /// Probability that a message is lost.
    pub loss: f64,
    /// Probability that a message is delivered twice.
    pub duplicate: f64,
    /// Probability that a message is held back by up to `reorder_delay`,
    /// so that later messages overtake it.
    pub reorder: f64,
    pub reorder_delay: Time,
    /// CPU time a server spends on one event.
    pub server_cpu: Time,
    /// CPU time a client host spends on one event.
    pub client_cpu: Time,
    /// CPU time a server spends on a message from a node on its own machine
    /// (`--colocate`: a co-located worker's access to its home partition),
    /// or `None` for `server_cpu`. `server_cpu` models a message through
    /// the network stack and the RPC handler; COCO's workers reach their
    /// local partition by a function call instead ("to avoid network
    /// communication, the coordinator node always reads from its local
    /// database", §4.1; 12 worker threads and 2 network threads per node,
    /// §7.1), which skips that stack. Off by default: every measurement
    /// before 2026-11-27 charged `server_cpu`.
    pub local_cpu: Option<Time>,
    /// CPU cost of each byte of a message, in picoseconds, charged to the
    /// sender and again to the receiver (encoding, copies, decoding), on
    /// servers and client hosts. 0 (the default, and every measurement
    /// before 2026-11-28) makes a message cost its fixed per-event CPU
    /// whatever its size, which favours protocols whose messages grow
    /// with contention (Rococo's and Janus's dependency graphs, §3.4): a
    /// non-zero value shows what their size would cost a real CPU.
    pub byte_cpu_ps: u64,
    /// CPU cost of one event at a switch node (per packet; recirculation is
    /// charged by the switch itself).
    pub switch_cpu: Time,
    /// Latency of one flush of a node's log. 0 is no log as far as time
    /// goes (the papers' "logging is turned off"): a record is durable
    /// within the step that wrote it, which hears so without an event
    /// (`sim::flush_now`); the records are still kept for restarts, on the
    /// nodes a crash is planned for (`Disk::for_restarts`).
    pub fsync: Time,
    /// Checkpoint a node's log after this many bytes of records (0: never),
    /// as the `tcp` runtime's log does (`checkpoint_mb`): the node is asked
    /// for its [`tessera_core::node::Node::snapshot`], which replaces the
    /// records before it once every record issued before it is durable
    /// (a crash before that keeps the old log). Only nodes a crash is
    /// planned for keep a log to checkpoint; the snapshot's encoding is not
    /// charged as CPU.
    pub checkpoint_bytes: u64,
    pub partitions: Vec<Partition>,
    pub crashes: Vec<Crash>,
    /// Clock drift bound in parts per million: each node's clock runs at a
    /// rate drawn from the seed in `[1 - d, 1 + d]` (OOCC §VII.B). Nodes
    /// read their own clock; history timestamps use the simulator's.
    pub drift_ppm: u32,
    /// One node whose clock runs at exactly `1 + ppm / 10^6` instead (a
    /// single faulty oscillator, beyond any bound: OOCC §VII.B's stop
    /// switch is tested with it). `ppm` lies in `(-10^6, 10^6]`.
    pub drift_node: Option<(u32, i64)>,
    /// After the duration, keep running up to this much longer until every
    /// node is settled ([`tessera_core::node::Node::settled`]): checked runs
    /// hold the final state to the workload's invariants, which a
    /// transaction cut off halfway would break (Rococo and Janus install an
    /// immediate piece's writes at once and the rest at commit). Faults go
    /// on meanwhile; a run that does not settle is checked as it stands.
    pub settle: Time,
    /// Where the run reports its virtual clock for a progress display
    /// (written, never read by the run).
    pub progress: Progress,
}

impl Default for SimConfig {
    /// One data center: 50 µs one way (a 100 µs round trip), 10 µs jitter,
    /// 5 µs of server CPU per event, a 100 µs fsync, no faults.
    fn default() -> Self {
        SimConfig {
            latency: vec![vec![50 * US]],
            jitter: 10 * US,
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: 500 * US,
            server_cpu: 5 * US,
            client_cpu: US,
            local_cpu: None,
            byte_cpu_ps: 0,
            switch_cpu: 100,
            fsync: 100 * US,
            checkpoint_bytes: 0,
            partitions: Vec::new(),
            crashes: Vec::new(),
            drift_ppm: 0,
            drift_node: None,
            settle: 0,
            progress: Progress::default(),
        }
    }
}

impl SimConfig {
    /// The named network presets `--net` accepts.
    pub const PRESETS: &'static [&'static str] = &["dc", "rdma"];

    /// A named preset: `dc` is [`SimConfig::default`], `rdma` is
    /// [`SimConfig::rdma`].
    pub fn preset(name: &str) -> Option<SimConfig> {
        match name {
            "dc" => Some(SimConfig::default()),
            "rdma" => Some(SimConfig::rdma()),
            _ => None,
        }
    }

    /// An RDMA fabric as OOCC's testbed has (§VIII.A, Fig. 2): 1 µs one
    /// way plus up to 0.5 µs of jitter (a round trip of 2–3 µs), a memory
    /// node's per-message cost of 50 ns (its verbs charge their own NIC
    /// time, atomics far above READs: see the memory node's `NicCosts`),
    /// and 300 ns of coordinator CPU per event.
    pub fn rdma() -> SimConfig {
        SimConfig {
            latency: vec![vec![US]],
            jitter: US / 2,
            server_cpu: 50,
            client_cpu: 300,
            ..SimConfig::default()
        }
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum SimConfigError {
    #[error("sim: latency matrix must be square and non-empty (got {rows} rows, row {row} has {cols} columns)")]
    Latency {
        rows: usize,
        row: usize,
        cols: usize,
    },
    #[error("sim: {name} = {value} is not a probability in [0, 1]")]
    Probability { name: &'static str, value: f64 },
    #[error("sim: node {node} is on site {site}, but the latency matrix has {sites} sites")]
    Site { node: u32, site: u32, sites: usize },
    #[error("sim: fault names node {node}, but the deployment has {nodes} nodes")]
    Node { node: u32, nodes: usize },
    #[error("sim: drift of node {node} is {ppm} ppm; a clock rate needs more than -1000000")]
    DriftNode { node: u32, ppm: i64 },
}

impl SimConfig {
    pub fn validate(&self) -> Result<(), SimConfigError> {
        let n = self.latency.len();
        for (row, r) in self.latency.iter().enumerate() {
            if r.len() != n {
                return Err(SimConfigError::Latency {
                    rows: n,
                    row,
                    cols: r.len(),
                });
            }
        }
        if n == 0 {
            return Err(SimConfigError::Latency {
                rows: 0,
                row: 0,
                cols: 0,
            });
        }
        if let Some((node, ppm)) = self.drift_node {
            if !(-999_999..=1_000_000).contains(&ppm) {
                return Err(SimConfigError::DriftNode { node, ppm });
            }
        }
        for (name, value) in [
            ("loss", self.loss),
            ("duplicate", self.duplicate),
            ("reorder", self.reorder),
        ] {
            if !(0.0..=1.0).contains(&value) {
                return Err(SimConfigError::Probability { name, value });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_named_and_valid() {
        for name in SimConfig::PRESETS {
            SimConfig::preset(name).unwrap().validate().unwrap();
        }
        assert!(SimConfig::preset("infiniband").is_none());
        let r = SimConfig::rdma();
        let rtt = 2 * r.latency[0][0];
        assert!((2 * US..=3 * US).contains(&(rtt + r.jitter)), "{rtt}");
    }
}
