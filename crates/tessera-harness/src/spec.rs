//! What one benchmark run is.

use crate::sites::{ClientSites, PrimarySites, Sites};
use std::path::PathBuf;
use tessera_core::ids::{Time, MS, US};
use tessera_sim::SimConfig;
use tessera_workloads::{
    CounterConfig, MicroConfig, TaoBenchConfig, TatpConfig, TpccConfig, YcsbConfig,
};
use thiserror::Error;

/// How much longer than its duration a checked simulator run may go on to
/// settle ([`SimConfig::settle`]): far beyond any protocol's backed-off
/// resend and recovery timeouts, so that only a stuck run reaches it.
pub const CHECK_SETTLE: Time = 2_000 * MS;

/// Which runtime drives the nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuntimeKind {
    /// The deterministic simulator (virtual time).
    Sim,
    /// The embedded multi-threaded cluster (real time).
    Local,
    /// Client hosts in this process, servers in their own processes over
    /// TCP, as a cluster file describes ([`BenchSpec::cluster`]).
    Tcp,
}

impl RuntimeKind {
    pub const NAMES: &'static [&'static str] = &["local", "sim", "tcp"];

    pub fn name(self) -> &'static str {
        match self {
            RuntimeKind::Sim => "sim",
            RuntimeKind::Local => "local",
            RuntimeKind::Tcp => "tcp",
        }
    }

    pub fn parse(s: &str) -> Result<Self, SpecError> {
        match s {
            "sim" => Ok(RuntimeKind::Sim),
            "local" => Ok(RuntimeKind::Local),
            "tcp" => Ok(RuntimeKind::Tcp),
            _ => Err(SpecError::Invalid {
                flag: "--runtime",
                value: s.to_string(),
                allowed: RuntimeKind::NAMES.join(", "),
            }),
        }
    }
}

/// The workload and its parameters.
#[derive(Clone, Debug)]
pub enum WorkloadSpec {
    Micro(MicroConfig),
    Ycsb(YcsbConfig),
    Counter(CounterConfig),
    Tpcc(TpccConfig),
    Tatp(TatpConfig),
    TaoBench(TaoBenchConfig),
}

impl WorkloadSpec {
    pub const NAMES: &'static [&'static str] =
        &["micro", "ycsb", "tpcc", "counter", "tatp", "taobench"];

    pub fn name(&self) -> &'static str {
        match self {
            WorkloadSpec::Micro(_) => "micro",
            WorkloadSpec::Ycsb(_) => "ycsb",
            WorkloadSpec::Counter(_) => "counter",
            WorkloadSpec::Tpcc(_) => "tpcc",
            WorkloadSpec::Tatp(_) => "tatp",
            WorkloadSpec::TaoBench(_) => "taobench",
        }
    }

    pub fn shards(&self) -> u32 {
        match self {
            WorkloadSpec::Micro(c) => c.shards,
            WorkloadSpec::Ycsb(c) => c.partitions,
            WorkloadSpec::Counter(_) => 1,
            WorkloadSpec::Tpcc(c) => c.shard_count(),
            WorkloadSpec::Tatp(c) => c.partitions,
            WorkloadSpec::TaoBench(c) => c.partitions,
        }
    }

    /// The key-choice skew (0 for TPC-C and TATP, whose skew is NURand's).
    pub fn zipf(&self) -> f64 {
        match self {
            WorkloadSpec::Micro(c) => c.zipf_theta,
            WorkloadSpec::Ycsb(c) => c.zipf_theta,
            WorkloadSpec::Counter(c) => c.zipf_theta,
            WorkloadSpec::Tpcc(_) | WorkloadSpec::Tatp(_) => 0.0,
            WorkloadSpec::TaoBench(c) => c.zipf_theta,
        }
    }
}

/// One run: a protocol on a workload on a runtime.
#[derive(Clone, Debug)]
pub struct BenchSpec {
    pub runtime: RuntimeKind,
    pub protocol: String,
    pub workload: WorkloadSpec,
    /// Closed-loop clients in total.
    pub clients: u32,
    pub duration: Time,
    /// Trimmed from the start of the measurement.
    pub warmup: Time,
    /// Trimmed from the end of the measurement.
    pub cooldown: Time,
    pub seed: u64,
    /// Record the history and run the isolation checker.
    pub check: bool,
    /// Write the history (Elle rw-register JSON lines) here.
    pub history: Option<PathBuf>,
    /// The simulated world (only for `sim`).
    pub sim: SimConfig,
    /// Replace `sim`'s faults with a random plan drawn from `seed` when the
    /// run starts (`--faults`, only for `sim`).
    pub faults: Option<crate::faults::RandomFaults>,
    /// Worker threads (only for `local`); 0 = one per core.
    pub workers: usize,
    /// Attempts per transaction before the client gives up (Janus §6.1: 20).
    pub max_attempts: u32,
    /// A client's backoff before its first retry: retry k waits a uniform
    /// draw in `[0, base × 2^(k-1)]`, capped at 5 ms (`--backoff-us`,
    /// default 20 µs). 0 retries at once, as the OOCC authors' framework
    /// does for every protocol (its `RetryTask` only counts the retry).
    pub backoff_base: Time,
    /// Transactions a client may have finished but not yet released (epoch
    /// commit, COCO §3.1) before it waits (`--max-unreleased`; see
    /// [`tessera_core::client`]).
    pub max_unreleased: u32,
    /// `--commits N`: each client starts nothing more once it committed its
    /// share, N divided by the clients rounded up, so the run lasts until
    /// the clients made that much progress or the duration ends, whichever
    /// comes first; a `tcp` driver then ends early (for tests whose
    /// liveness bound must not depend on the machine's speed). Rates are
    /// still per second of the configured window.
    pub commits: Option<u64>,
    /// `--timeline DURATION`: the row also carries commits per window of
    /// this length over the whole run (`timeline_tps`) and the protocol's
    /// values over time (`samples`), e.g. for a lease the Lease Manager
    /// adjusts while the run goes on (OOCC Fig. 13d).
    pub timeline: Option<Time>,
    /// Switch nodes between the client hosts and the servers (NOCC's
    /// racks). `None`: the protocol's default (see the registry).
    pub switches: Option<u32>,
    /// Servers per shard, a replica group (`--replicas`). `None`: the
    /// protocol's default (1, or 3 for the replicated protocols: Janus,
    /// COCO, the layered baselines and TAPIR; see the registry).
    pub replicas: Option<u32>,
    /// Sites of the simulated world (`None`: one data center with the
    /// simulator's own latency). See [`crate::sites`].
    pub sites: Option<Sites>,
    /// Where client hosts sit when there are sites. `None`: the protocol's
    /// default (with the leaders for the layered baselines, else spread).
    pub client_sites: Option<ClientSites>,
    /// Where each shard's primary sits when there are sites
    /// (`--primary-sites`): all on the first site (the default), or shard
    /// `s`'s on site `s % sites` (COCO §7.5). See [`PrimarySites`].
    pub primary_sites: PrimarySites,
    /// sim: each client host on the machine of its home shard's primary
    /// (`--colocate`, [`tessera_core::topology::Topology::colocate_clients`]),
    /// as COCO's deployment runs its workers on the nodes that hold the
    /// partitions (§7.1); otherwise client hosts are nodes of their own.
    pub colocate: bool,
    /// Clients start no transaction in the last `drain` of the run, so that
    /// replicas settle before it ends (convergence checks). Must not exceed
    /// the cool-down, which it then lies in: it costs no measurement.
    pub drain: Time,
    /// Knobs of particular protocols, read by their registry entries.
    pub knobs: Knobs,
    /// The cluster (only for `tcp`).
    pub cluster: Option<std::sync::Arc<tessera_tcp::ClusterConfig>>,
}

/// Flags that only some protocols read. Each registry entry takes the ones
/// it knows and refuses a run that sets one it does not, so a flag is never
/// silently ignored.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Knobs {
    /// NOCC: keys the switch's value cache holds.
    pub switch_cache: Option<usize>,
    /// NOCC: operations per transaction the switch can parse; larger
    /// transactions pass unverified.
    pub switch_max_ops: Option<u32>,
    /// NOCC: bytes one register stage holds, and stages per value: a value
    /// wider than their product cannot be cached.
    pub switch_value_width: Option<u32>,
    pub switch_stages: Option<u32>,
    /// NOCC: switch time per operation of a transaction (recirculation), ns.
    pub recirculation_ns: Option<u64>,
    /// 2PL (sim): server CPU charged per participant abort, µs
    /// ([`tessera_protocols::twopl::TwoPlConfig::abort_cpu`]).
    pub abort_cpu_us: Option<u64>,
    /// 2pl-paxos: `--wound janus|textbook`, which wound-wait
    /// ([`tessera_protocols::twopl::Wound`]).
    pub wound: Option<String>,
    /// COCO: `--commit 2pc|2pc-sync|epoch`.
    pub commit: Option<String>,
    /// COCO: epoch length in ms (`--epoch-ms`, 1–1000).
    pub epoch_ms: Option<u64>,
    /// COCO epoch mode: the epoch prepare deadline in ms
    /// (`--prepare-deadline-ms`, 1–60,000; §3.2's failure detection, see
    /// `CocoConfig::epoch_timeout`).
    pub prepare_deadline_ms: Option<u64>,
    /// COCO: `--isolation serializable|snapshot` (§5.3).
    pub isolation: Option<String>,
    /// COCO epoch mode: `--coco-replication coordinator|primary`, who
    /// sends the writes to the backups (§4.2.3).
    pub coco_replication: Option<String>,
    /// COCO epoch mode: `--epoch-barrier on|off`, client hosts stopped from
    /// each epoch's prepare to its commit (§3.1, §7.7).
    pub epoch_barrier: Option<bool>,
    /// OOCC: implicit leases (§III) on or off.
    pub oocc_lease: Option<bool>,
    /// OOCC: one WRITE updates and unlocks, with redo logs (§V).
    pub oocc_write_unlock: Option<bool>,
    /// OOCC: intention locks at execution, write locks at commit (§IV).
    pub oocc_delayed_lock: Option<bool>,
    /// OOCC: the Validate&Logging round in the write-wait's last round
    /// trip, so readers meet write locks for about one (§IV).
    pub oocc_late_upgrade: Option<bool>,
    /// OOCC: the lease, µs.
    pub lease_us: Option<u64>,
    /// OOCC: the Lease Manager adapts the lease (§VII.A).
    pub oocc_lease_adapt: Option<bool>,
    /// OOCC: the adapted lease's bounds and the adjustment period, µs.
    pub oocc_lease_min_us: Option<u64>,
    pub oocc_lease_max_us: Option<u64>,
    pub oocc_lease_period_us: Option<u64>,
    /// OOCC: a coordinator whose clock drifts beyond the bound stops
    /// itself (§VII.B).
    pub oocc_drift_stop: Option<bool>,
    /// OOCC: the drift offset is at least this, ns (§VIII.G's sweep).
    pub oocc_offset_ns: Option<u64>,
    /// OOCC: the clock-drift measurement's sync period, µs (§VII.B's
    /// periodic PTP measurement; default
    /// [`tessera_protocols::oocc::OoccConfig::sync_period`], 50 µs).
    pub oocc_sync_us: Option<u64>,
    /// Memory-node protocols: slots per loaded record in a memory node's
    /// region (default 2); the rest take inserts.
    pub region_slots_per_record: Option<u32>,
    /// Rococo: differing rounds of a read-only transaction before it runs
    /// through the dependency graph (`--ro-rounds`, at least 1; default 4,
    /// [`tessera_protocols::rococo::RococoConfig::ro_rounds`]).
    pub ro_rounds: Option<u32>,
    /// Janus: epochs a forgotten transaction's tombstone is kept
    /// (`--forget-epochs`, at least 1; default 40 of 50 ms,
    /// [`tessera_protocols::janus::JanusConfig::forget_epochs`]); small
    /// values let tombstones expire under the simulator's faults.
    pub forget_epochs: Option<u64>,
    /// Janus: `--per-column on|off`, conflicts tracked per (row, column)
    /// or per row ([`tessera_protocols::janus::JanusConfig::per_column`],
    /// on by default); the run is recorded and checked at the same
    /// granularity (`ProtocolEntry::checks_per_column`).
    pub per_column: Option<bool>,
    /// Janus: `--fast-path-by-rtt on|off`, the coordinator stops waiting
    /// for the fast quorum's last replies where by its measured round
    /// trips the wait cannot pay
    /// ([`tessera_protocols::janus::JanusConfig::fast_path_wait_by_rtt`],
    /// on by default since session 26).
    pub fast_path_by_rtt: Option<bool>,
    /// Janus: `--prefetch-outputs on|off`, a replica asks for the other
    /// shards' outputs (§4) of a decided component's members at once
    /// ([`tessera_protocols::janus::JanusConfig::prefetch_outputs`], off
    /// by default).
    pub prefetch_outputs: Option<bool>,
    /// 2pl-paxos, occ-paxos: most commands in one Multi-Paxos slot
    /// (`--paxos-batch`, default
    /// [`tessera_protocols::paxos::PaxosConfig::max_batch`], 256). 1 makes
    /// every record its own Accept round, so a leader handles messages per
    /// command, as the Janus paper's leaders did (§6.2: a leader "needs to
    /// handle much more communication load (>3×)"): a sensitivity knob for
    /// the layered baselines' cost on `sim`.
    pub paxos_batch: Option<usize>,
    /// janus, rococo: simulated CPU, ns, per vertex and edge of the
    /// dependency graph a settle walks (`--graph-cpu-ns`, `sim` only;
    /// [`tessera_protocols::janus::JanusConfig::graph_cpu`]): the graph's
    /// computation, which the fixed cost per event does not grow with.
    pub graph_cpu_ns: Option<u64>,
}

impl Knobs {
    /// The flags that are set, by name.
    pub fn set_flags(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        let flags: [(&'static str, bool); 33] = [
            ("--switch-cache", self.switch_cache.is_some()),
            ("--switch-max-ops", self.switch_max_ops.is_some()),
            ("--switch-value-width", self.switch_value_width.is_some()),
            ("--switch-stages", self.switch_stages.is_some()),
            ("--recirculation-ns", self.recirculation_ns.is_some()),
            ("--abort-cpu-us", self.abort_cpu_us.is_some()),
            ("--wound", self.wound.is_some()),
            ("--commit", self.commit.is_some()),
            ("--epoch-ms", self.epoch_ms.is_some()),
            ("--prepare-deadline-ms", self.prepare_deadline_ms.is_some()),
            ("--isolation", self.isolation.is_some()),
            ("--coco-replication", self.coco_replication.is_some()),
            ("--epoch-barrier", self.epoch_barrier.is_some()),
            ("--oocc-lease", self.oocc_lease.is_some()),
            ("--oocc-write-unlock", self.oocc_write_unlock.is_some()),
            ("--oocc-delayed-lock", self.oocc_delayed_lock.is_some()),
            ("--oocc-late-upgrade", self.oocc_late_upgrade.is_some()),
            ("--lease-us", self.lease_us.is_some()),
            ("--oocc-lease-adapt", self.oocc_lease_adapt.is_some()),
            ("--oocc-lease-min-us", self.oocc_lease_min_us.is_some()),
            ("--oocc-lease-max-us", self.oocc_lease_max_us.is_some()),
            (
                "--oocc-lease-period-us",
                self.oocc_lease_period_us.is_some(),
            ),
            ("--oocc-drift-stop", self.oocc_drift_stop.is_some()),
            ("--oocc-offset-ns", self.oocc_offset_ns.is_some()),
            ("--oocc-sync-us", self.oocc_sync_us.is_some()),
            (
                "--region-slots-per-record",
                self.region_slots_per_record.is_some(),
            ),
            ("--ro-rounds", self.ro_rounds.is_some()),
            ("--forget-epochs", self.forget_epochs.is_some()),
            ("--per-column", self.per_column.is_some()),
            ("--fast-path-by-rtt", self.fast_path_by_rtt.is_some()),
            ("--prefetch-outputs", self.prefetch_outputs.is_some()),
            ("--paxos-batch", self.paxos_batch.is_some()),
            ("--graph-cpu-ns", self.graph_cpu_ns.is_some()),
        ];
        for (f, set) in flags {
            if set {
                v.push(f);
            }
        }
        v
    }
}

impl BenchSpec {
    /// A spec with the defaults of `tessera bench`.
    pub fn new(runtime: RuntimeKind, protocol: &str, workload: WorkloadSpec) -> Self {
        let duration = match runtime {
            RuntimeKind::Sim => 2_000 * MS,
            RuntimeKind::Local | RuntimeKind::Tcp => 10_000 * MS,
        };
        BenchSpec {
            runtime,
            protocol: protocol.to_string(),
            workload,
            clients: 0,
            duration,
            warmup: duration / 10,
            cooldown: duration / 20,
            seed: 1,
            check: false,
            history: None,
            sim: SimConfig::default(),
            faults: None,
            workers: 0,
            max_attempts: 20,
            backoff_base: 20 * US,
            max_unreleased: tessera_core::client::DEFAULT_MAX_UNRELEASED,
            commits: None,
            timeline: None,
            switches: None,
            replicas: None,
            sites: None,
            client_sites: None,
            primary_sites: PrimarySites::First,
            colocate: false,
            drain: 0,
            knobs: Knobs::default(),
            cluster: None,
        }
    }

    /// Clients per shard when `clients` is 0.
    pub const DEFAULT_CLIENTS_PER_SHARD: u32 = 32;

    pub fn effective_clients(&self) -> u32 {
        if self.clients == 0 {
            match self.runtime {
                // In-process clients never wait on a network: a few per
                // worker keep the pipeline full.
                RuntimeKind::Local => 8 * self.workload.shards().max(1),
                RuntimeKind::Tcp => match &self.cluster {
                    Some(c) if c.clients.clients > 0 => c.clients.clients,
                    _ => 8 * self.workload.shards().max(1),
                },
                RuntimeKind::Sim => Self::DEFAULT_CLIENTS_PER_SHARD * self.workload.shards(),
            }
        } else {
            self.clients
        }
    }

    /// The simulated world: `sim` with the sites' latency matrix.
    pub fn sim_config(&self) -> SimConfig {
        let mut c = self.sim.clone();
        if let Some(s) = &self.sites {
            c.latency = s.one_way();
        }
        if self.check {
            // The final state is checked once nothing is left half done
            // (`SimConfig::settle`); a run that takes longer than this to
            // settle is checked as it stands, and fails if it must.
            c.settle = c.settle.max(CHECK_SETTLE);
        }
        c
    }

    pub fn validate(&self) -> Result<(), SpecError> {
        if self.duration == 0 {
            return Err(SpecError::Invalid {
                flag: "--duration",
                value: "0".into(),
                allowed: "a positive duration such as 500ms, 10s".into(),
            });
        }
        if self.warmup + self.cooldown >= self.duration {
            return Err(SpecError::Invalid {
                flag: "--warmup",
                value: format!(
                    "{}ms (+ cooldown {}ms)",
                    self.warmup / MS,
                    self.cooldown / MS
                ),
                allowed: format!(
                    "warm-up + cool-down shorter than --duration ({}ms)",
                    self.duration / MS
                ),
            });
        }
        if self.drain > self.cooldown {
            return Err(SpecError::Invalid {
                flag: "--drain",
                value: format!("{}ms", self.drain / MS),
                allowed: format!("at most the cool-down ({}ms)", self.cooldown / MS),
            });
        }
        if self.sites.is_some() && self.runtime != RuntimeKind::Sim {
            return Err(SpecError::Invalid {
                flag: "--sites",
                value: self.sites.as_ref().map_or("", |s| &s.name).to_string(),
                allowed: "one with --runtime local (sites exist in the simulator only)".into(),
            });
        }
        if self.primary_sites == PrimarySites::Spread {
            if self.sites.as_ref().is_none_or(|s| s.len() < 2) {
                return Err(SpecError::Invalid {
                    flag: "--primary-sites",
                    value: "spread".into(),
                    allowed: "first, or spread with --sites of two or more sites (sim)".into(),
                });
            }
            if self.client_sites == Some(ClientSites::Leaders) {
                return Err(SpecError::Invalid {
                    flag: "--client-sites",
                    value: "leaders".into(),
                    allowed: "spread with --primary-sites spread (the leaders are on every \
                              site; --colocate puts each client host with its home shard's)"
                        .into(),
                });
            }
        }
        if self.colocate && self.runtime != RuntimeKind::Sim {
            return Err(SpecError::Invalid {
                flag: "--colocate",
                value: "set".into(),
                allowed: "only with --runtime sim (on local a client already runs on its home \
                          shard's worker thread; on tcp the cluster file places nodes)"
                    .into(),
            });
        }
        if self.replicas == Some(0) {
            return Err(SpecError::Invalid {
                flag: "--replicas",
                value: "0".into(),
                allowed: "1 or more".into(),
            });
        }
        if self.runtime == RuntimeKind::Tcp {
            let Some(c) = &self.cluster else {
                return Err(SpecError::Invalid {
                    flag: "--config",
                    value: "(none)".into(),
                    allowed: "a cluster file for --runtime tcp".into(),
                });
            };
            if c.shards.len() as u32 != self.workload.shards() {
                return Err(SpecError::Workload(format!(
                    "{}: the workload has {} shards but [[shards]] lists {}",
                    c.path.display(),
                    self.workload.shards(),
                    c.shards.len()
                )));
            }
        }
        if self.max_attempts == 0 {
            return Err(SpecError::Invalid {
                flag: "--max-attempts",
                value: "0".into(),
                allowed: "1 or more".into(),
            });
        }
        if self.commits == Some(0) {
            return Err(SpecError::Invalid {
                flag: "--commits",
                value: "0".into(),
                allowed: "1 or more".into(),
            });
        }
        if self.timeline == Some(0) {
            return Err(SpecError::Invalid {
                flag: "--timeline",
                value: "0".into(),
                allowed: "a duration above 0".into(),
            });
        }
        if self.max_unreleased == 0 {
            return Err(SpecError::Invalid {
                flag: "--max-unreleased",
                value: "0".into(),
                allowed: "1 or more".into(),
            });
        }
        let r = match &self.workload {
            WorkloadSpec::Micro(c) => c.validate(),
            WorkloadSpec::Ycsb(c) => c.validate(),
            WorkloadSpec::Counter(c) => c.validate(),
            WorkloadSpec::Tpcc(c) => c.validate(),
            WorkloadSpec::Tatp(c) => c.validate(),
            WorkloadSpec::TaoBench(c) => c.validate(),
        };
        r.map_err(|e| SpecError::Workload(e.to_string()))?;
        let mut sim = self.sim_config();
        if let Some(f) = &self.faults {
            // The rates the user fixed for the plan drawn at run time.
            sim.loss = f.loss.unwrap_or(0.0);
            sim.duplicate = f.duplicate.unwrap_or(0.0);
            sim.reorder = f.reorder.unwrap_or(0.0);
        }
        sim.validate()
            .map_err(|e| SpecError::Workload(e.to_string()))?;
        Ok(())
    }
}

/// A spec that cannot run, with the flag to blame.
#[derive(Debug, Error)]
pub enum SpecError {
    #[error("invalid value '{value}' for {flag}: allowed: {allowed}")]
    Invalid {
        flag: &'static str,
        value: String,
        allowed: String,
    },
    #[error("{0}")]
    Workload(String),
}
