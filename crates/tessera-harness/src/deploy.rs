//! Build a runtime deployment for a protocol type and run it.
//!
//! Layout: shard `s` is served by a replica group of
//! [`BenchSpec::replicas`] servers (one unless the protocol's registry entry
//! asks for more: the foundation protocols are not replicated); clients are
//! spread over client hosts. Client `i` prefers shard `i % shards` and lives on host
//! `(i % shards) % hosts`, so on `local`, where shard `s` and host `h` sit on
//! workers `s % W` and `h % W`, a client runs on the worker of its home
//! shard: a single-partition transaction never crosses threads. On `sim`,
//! `--colocate` puts host `h` on the machine of shard `h`'s primary (COCO
//! §7.1's workers), where its messages to that primary cross no network.

use crate::spec::{BenchSpec, RuntimeKind, SpecError, CHECK_SETTLE};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tessera_core::client::{ClientConfig, ClientHost, ClientReport};
use tessera_core::codec::{Codec, DecodeCx};
use tessera_core::ids::{NodeId, ShardId, Time, US};
use tessera_core::node::Node;
use tessera_core::protocol::{CoordinatorEnv, Protocol, ServerEnv, SwitchEnv};
use tessera_core::runtime::{Deployment, NetCounters, NodeFactory, RunOutput};
use tessera_core::storage::Store;
use tessera_core::topology::{Role, Topology};
use tessera_core::txn::Columns;
use tessera_core::workload::{ClientSlot, Workload};

/// What a run produced, independent of the protocol's types.
pub struct RawRun {
    pub clients: Vec<ClientReport>,
    /// Each shard's store at the end (its first replica).
    pub stores: Vec<Store>,
    /// Every replica's store at the end, per shard, when shards have more
    /// than one replica (for convergence checks); empty otherwise.
    pub replica_stores: Vec<Vec<Store>>,
    pub net: NetCounters,
    pub events: u64,
    pub elapsed: Time,
    pub client_config: ClientConfig,
    pub topology: Arc<Topology>,
    /// Protocols' own counters, summed over nodes and incarnations.
    pub counters: BTreeMap<&'static str, u64>,
    /// Protocols' values over time from every node (see
    /// [`tessera_core::node::NodeReport::samples`]), in time order.
    pub samples: Vec<(&'static str, Time, u64)>,
    /// CPU time of the server nodes (simulator only; 0 elsewhere).
    pub server_busy: Time,
    /// Bytes of each shard's store right after loading
    /// ([`Store::approx_bytes`]), summed over shards (first replicas).
    pub loaded_bytes: u64,
}

/// Bytes per shard measured right after loading, shared with the server
/// factories (a restarted server loads the same data and stores the same
/// number again).
pub type LoadedBytes = Arc<Vec<AtomicU64>>;

/// Number of worker threads for a `local` run.
pub fn local_workers(spec: &BenchSpec) -> usize {
    if spec.workers > 0 {
        spec.workers
    } else {
        std::thread::available_parallelism().map_or(2, |n| n.get())
    }
}

/// The cluster layout of a spec.
pub fn topology(spec: &BenchSpec) -> Topology {
    if let (RuntimeKind::Tcp, Some(c)) = (spec.runtime, &spec.cluster) {
        return c.topology();
    }
    let shards = spec.workload.shards();
    let hosts = match spec.runtime {
        RuntimeKind::Local => local_workers(spec) as u32,
        RuntimeKind::Sim | RuntimeKind::Tcp => shards,
    }
    .min(spec.effective_clients())
    .max(1);
    let topo = Topology::new(shards, spec.replicas.unwrap_or(1).max(1), hosts)
        .with_switches(spec.switches.unwrap_or(0));
    let topo = match &spec.sites {
        Some(sites) => {
            let topo = topo.on_sites(
                sites.len() as u32,
                spec.client_sites == Some(crate::sites::ClientSites::Leaders),
            );
            match spec.primary_sites {
                crate::sites::PrimarySites::First => topo,
                crate::sites::PrimarySites::Spread => topo.spread_primaries(sites.len() as u32),
            }
        }
        None => topo,
    };
    if spec.colocate {
        topo.colocate_clients()
    } else {
        topo
    }
}

/// Client slots of host `h`.
fn clients_of(spec: &BenchSpec, hosts: u32, h: u32) -> Vec<ClientSlot> {
    let shards = spec.workload.shards();
    (0..spec.effective_clients())
        .map(|i| ClientSlot {
            id: i,
            home: ShardId(i % shards),
        })
        .filter(|c| c.home.0 % hosts == h)
        .collect()
}

pub fn client_config(spec: &BenchSpec) -> ClientConfig {
    ClientConfig {
        measure_from: spec.warmup,
        measure_until: spec.duration - spec.cooldown,
        // A checked run stops issuing at the end of the window: transactions
        // in flight finish during the cool-down, so the final stores are
        // quiescent for the workload's consistency checks and few attempts
        // end in doubt. Otherwise `--drain` (at most the cool-down) stops
        // them that much before the end, so that replicas settle.
        stop_at: spec.duration
            - if spec.check {
                spec.cooldown
            } else {
                spec.drain
            },
        max_attempts: spec.max_attempts,
        backoff_base: spec.backoff_base,
        backoff_cap: 5_000 * US,
        record_history: spec.check || spec.history.is_some(),
        record_columns: crate::registry::find(&spec.protocol)
            .is_ok_and(|e| e.checks_per_column(spec)),
        max_unreleased: spec.max_unreleased,
        timeline: spec.timeline,
        commits_per_slot: spec
            .commits
            .map(|n| n.div_ceil(spec.effective_clients().max(1) as u64)),
    }
}

/// Build the deployment of protocol `P` for `spec`; servers record their
/// store's size after loading in `loaded`.
pub fn deployment<P: Protocol>(
    config: &P::Config,
    spec: &BenchSpec,
    workload: Arc<dyn Workload>,
    loaded: &LoadedBytes,
) -> anyhow::Result<Deployment<P::Msg>> {
    let topology = Arc::new(topology(spec));
    let hosts = topology.client_hosts().count() as u32;
    let ccfg = client_config(spec);
    let mut factories: Vec<NodeFactory<P::Msg>> = Vec::new();
    for info in &topology.nodes {
        let me = info.id;
        let topo = topology.clone();
        let cfg = config.clone();
        let wl = workload.clone();
        match info.role {
            Role::Server { shard, replica } => {
                let loaded = loaded.clone();
                factories.push(Box::new(move |restart| {
                    let mut store = Store::new();
                    wl.load(shard, &mut store);
                    if replica == 0 {
                        if let Some(b) = loaded.get(shard.0 as usize) {
                            b.store(store.approx_bytes() as u64, Ordering::Relaxed);
                        }
                    }
                    Box::new(P::server(
                        &cfg,
                        ServerEnv {
                            me,
                            shard,
                            replica,
                            topology: topo.clone(),
                            store,
                            recovered: restart.recovered,
                            durable: restart.durable,
                            codec: tessera_core::codec::DecodeCx::new(wl.clone()),
                        },
                    )) as Box<dyn Node<P::Msg>>
                }));
            }
            Role::Switch { index } => {
                let env = move |topology| SwitchEnv {
                    me,
                    index,
                    topology,
                };
                if P::switch(&cfg, env(topo.clone())).is_none() {
                    return Err(SpecError::Invalid {
                        flag: "--switches",
                        value: spec.switches.unwrap_or(0).to_string(),
                        allowed: format!("0 for {}, which has no switch role", spec.protocol),
                    }
                    .into());
                }
                factories.push(Box::new(move |_restart| {
                    P::switch(&cfg, env(topo.clone())).expect("checked when deploying")
                }));
            }
            Role::Client { host } => {
                let slots = clients_of(spec, hosts, host);
                let ccfg = ccfg.clone();
                factories.push(Box::new(move |restart| {
                    let coord = P::coordinator(
                        &cfg,
                        CoordinatorEnv {
                            me,
                            topology: topo.clone(),
                            incarnation: restart.incarnation,
                            recovered: restart.recovered,
                        },
                    );
                    let clients = slots.iter().map(|s| (*s, wl.generator(*s))).collect();
                    Box::new(ClientHost::new(
                        coord,
                        me,
                        restart.incarnation,
                        ccfg.clone(),
                        clients,
                    )) as Box<dyn Node<P::Msg>>
                }));
            }
        }
    }
    Ok(Deployment {
        topology,
        factories,
        seed: spec.seed,
        duration: spec.duration,
    })
}

/// Run protocol `P` as `spec` says.
pub fn run_protocol<P: Protocol>(
    config: &P::Config,
    spec: &BenchSpec,
    workload: Arc<dyn Workload>,
) -> anyhow::Result<RawRun> {
    run_protocol_with::<P>(config, spec, workload, None)
}

/// [`run_protocol`] for a protocol that also runs on `tcp`: a checked
/// `sim` run sends every message through the wire codec (encoded, then
/// decoded at the receiver) and fails on the first one a `tcp` receiver
/// would refuse. The simulator otherwise hands messages over as values,
/// so a message only `tcp` cannot carry goes unnoticed (as 2026-11-27's
/// Rococo reply naming no shard did: a `tcp` receiver closed the
/// connection at each resend and transactions never finished). Unchecked
/// runs, the measurements, skip the codec's cost.
pub fn run_protocol_on_wire<P: Protocol>(
    config: &P::Config,
    spec: &BenchSpec,
    workload: Arc<dyn Workload>,
) -> anyhow::Result<RawRun>
where
    P::Msg: Codec,
{
    if !spec.check {
        return run_protocol::<P>(config, spec, workload);
    }
    let cx = DecodeCx::new(workload.clone());
    let wire = move |m: &P::Msg| -> Result<P::Msg, String> {
        let bytes = m
            .to_bytes()
            .map_err(|e| format!("cannot encode {m:?}: {e}"))?;
        P::Msg::from_bytes(&bytes, &cx).map_err(|e| format!("cannot decode {m:?}: {e}"))
    };
    run_protocol_with::<P>(config, spec, workload, Some(&wire))
}

fn run_protocol_with<P: Protocol>(
    config: &P::Config,
    spec: &BenchSpec,
    workload: Arc<dyn Workload>,
    wire: Option<tessera_sim::Wire<'_, P::Msg>>,
) -> anyhow::Result<RawRun> {
    let loaded: LoadedBytes = Arc::new(
        (0..spec.workload.shards())
            .map(|_| AtomicU64::new(0))
            .collect(),
    );
    let dep = deployment::<P>(config, spec, workload, &loaded)?;
    let topology = dep.topology.clone();
    let out: RunOutput<P::Msg> = match spec.runtime {
        RuntimeKind::Sim => {
            let sim = match &spec.faults {
                Some(f) => f.plan(&spec.sim_config(), spec.seed, &topology, spec.duration),
                None => spec.sim_config(),
            };
            tessera_sim::run_wire(dep, &sim, wire)?
        }
        RuntimeKind::Local => {
            let workers = local_workers(spec);
            let mut cfg = tessera_local::LocalConfig::new(&topology, workers);
            if spec.check {
                // As a checked `sim` run (`BenchSpec::sim_config`): the
                // checks read the stores once nothing is half done.
                cfg.settle = CHECK_SETTLE;
            }
            tessera_local::run(dep, &cfg)?
        }
        RuntimeKind::Tcp => anyhow::bail!(
            "protocol '{}' has no wire codec: it cannot run on --runtime tcp",
            spec.protocol
        ),
    };
    let stores = topology
        .shards
        .iter()
        .map(|g| {
            out.nodes[g.leader().0 as usize]
                .store()
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    let replicated = topology.shards.iter().any(|g| g.replicas.len() > 1);
    let groups = || {
        topology.shards.iter().map(|g| {
            g.replicas
                .iter()
                .map(|r| out.nodes[r.0 as usize].store())
                .collect::<Vec<_>>()
        })
    };
    let replica_stores = if replicated {
        groups()
            .map(|g| {
                g.into_iter()
                    .map(|s| s.cloned().unwrap_or_default())
                    .collect()
            })
            .collect()
    } else {
        Vec::new()
    };
    let mut counters = BTreeMap::new();
    if replicated {
        counters.insert("replica_divergent_keys", divergent_keys(groups()));
    }
    if out.net.local_messages > 0 {
        counters.insert("local_messages", out.net.local_messages);
    }
    for r in &out.reports {
        for (name, n) in r.values() {
            *counters.entry(*name).or_insert(0) += n;
        }
    }
    let samples = time_ordered(out.reports.iter().flat_map(|r| &r.samples));
    let busy = |server: bool| {
        topology
            .nodes
            .iter()
            .filter(move |n| matches!(n.role, Role::Server { .. }) == server)
            .filter_map(|n| out.busy.get(n.id.0 as usize).copied())
    };
    let server_busy = busy(true).sum();
    if matches!(spec.runtime, RuntimeKind::Sim) {
        // The busiest node of each role, in µs of the whole run: a mean
        // hides a hot server, whose queue is every transaction's latency.
        counters.insert(
            "sim_server_busy_max_us",
            busy(true).max().unwrap_or(0) / 1_000,
        );
        counters.insert(
            "sim_client_busy_max_us",
            busy(false).max().unwrap_or(0) / 1_000,
        );
        counters.insert("sim_elapsed_us", out.elapsed / 1_000);
    }
    let clients = out.reports.into_iter().filter_map(|r| r.client).collect();
    Ok(RawRun {
        clients,
        stores,
        replica_stores,
        net: out.net,
        events: out.events,
        elapsed: out.elapsed,
        client_config: client_config(spec),
        topology,
        counters,
        samples,
        server_busy,
        loaded_bytes: loaded.iter().map(|b| b.load(Ordering::Relaxed)).sum(),
    })
}

/// Every node's samples, in time order (stable: one node's order kept).
pub fn time_ordered<'a>(
    samples: impl Iterator<Item = &'a (&'static str, Time, u64)>,
) -> Vec<(&'static str, Time, u64)> {
    let mut v: Vec<_> = samples.copied().collect();
    v.sort_by_key(|&(_, t, _)| t);
    v
}

impl RawRun {
    /// Per shard, a digest of every replica's store at the end (see
    /// [`store_digest`]): all equal when the replicas converged. Empty
    /// when shards are not replicated.
    pub fn replica_digests(&self) -> Vec<Vec<u64>> {
        self.replica_stores
            .iter()
            .map(|g| g.iter().map(store_digest).collect())
            .collect()
    }
}

/// A digest of a store's data: every record's key, version (per column
/// where the store keeps column versions: [`Store::writers`]) and value,
/// in key order. Lock words are left out (only a leader holds locks), and so
/// are the empty placeholders OCC locks for inserts (they read as missing).
pub fn store_digest(store: &Store) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for (k, r) in store.records_sorted() {
        if r.meta.version == tessera_core::ids::Version::INITIAL && r.value.is_empty() {
            continue;
        }
        k.hash(&mut h);
        match store.writers(k)[..] {
            [(Columns::ALL, v)] => v.0.hash(&mut h),
            ref w => w.iter().for_each(|(c, v)| (c.0, v.0).hash(&mut h)),
        }
        r.value.hash(&mut h);
    }
    h.finish()
}

/// The keys of `a` whose value or version (per column where the stores
/// keep column versions: [`Store::writers`]) differs in `b`. A missing
/// record equals an empty one: a never-written placeholder (locked by a
/// transaction that aborted) or a deleted record one replica has collected
/// and another not yet (COCO §6.3).
pub(crate) fn differing_keys(a: &Store, b: &Store) -> Vec<tessera_core::ids::Key> {
    a.records_sorted()
        .into_iter()
        .filter(|(k, rec)| {
            b.get(*k).map_or(!rec.value.is_empty(), |o| {
                o.value != rec.value || (!rec.value.is_empty() && a.writers(*k) != b.writers(*k))
            })
        })
        .map(|(k, _)| k)
        .collect()
}

/// Keys whose value or version differs between a shard's first replica
/// and another of its replicas (0 once replication has converged), over
/// each shard's replicas' stores (`None`: a replica without one, left
/// out).
pub(crate) fn divergent_keys<'a>(groups: impl IntoIterator<Item = Vec<Option<&'a Store>>>) -> u64 {
    let mut n = 0;
    for g in groups {
        let Some((Some(first), rest)) = g.split_first() else {
            continue;
        };
        for other in rest.iter().flatten() {
            let d = differing_keys(first, other)
                .len()
                .max(differing_keys(other, first).len());
            n += d as u64;
        }
    }
    n
}

/// The node id of client host `h` (for fault plans).
pub fn client_host_id(topology: &Topology, h: u32) -> Option<NodeId> {
    topology
        .nodes
        .iter()
        .find(|n| n.role == Role::Client { host: h })
        .map(|n| n.id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::codec::DecodeError;
    use tessera_core::ids::MS;
    use tessera_core::storage::Store;
    use tessera_core::txn::Txn;
    use tessera_core::workload::TxnGenerator;
    use tessera_workloads::MicroConfig;

    /// The micro workload, except that no procedure survives decoding: a
    /// `tcp` receiver would refuse every message that carries one.
    struct Undecodable(Arc<dyn Workload>);

    impl Workload for Undecodable {
        fn name(&self) -> &'static str {
            self.0.name()
        }
        fn shards(&self) -> u32 {
            self.0.shards()
        }
        fn load(&self, shard: ShardId, store: &mut Store) {
            self.0.load(shard, store)
        }
        fn generator(&self, client: ClientSlot) -> Box<dyn TxnGenerator> {
            self.0.generator(client)
        }
        fn decode_txn(&self, name: &str, _: &[u8]) -> Result<Txn, DecodeError> {
            Err(DecodeError::invalid("procedure", name))
        }
    }

    /// A checked `sim` run of a protocol with a wire codec sends its
    /// messages through it (and fails on one a receiver would refuse); an
    /// unchecked one, a measurement, does not pay for the codec.
    #[test]
    fn checked_sim_runs_of_a_tcp_protocol_go_through_its_wire_codec() {
        let mut spec = BenchSpec::new(
            RuntimeKind::Sim,
            "2pl-ww",
            crate::WorkloadSpec::Micro(MicroConfig {
                shards: 3,
                keys_per_shard: 100,
                zipf_theta: 0.0,
            }),
        );
        spec.clients = 2;
        spec.duration = 20 * MS;
        spec.warmup = 0;
        spec.cooldown = 0;
        let micro = crate::run::workload(&spec.workload).unwrap();
        let wl: Arc<dyn Workload> = Arc::new(Undecodable(micro.clone()));
        let entry = crate::registry::find("2pl-ww").unwrap();
        spec.check = true;
        let Err(e) = entry.run(&spec, wl.clone()) else {
            panic!("a checked run ignored the wire codec");
        };
        assert!(
            format!("{e:#}").contains("does not survive its wire codec"),
            "{e:#}"
        );
        assert!(entry.run(&spec, micro).is_ok());
        spec.check = false;
        assert!(entry.run(&spec, wl).is_ok());
    }
}
