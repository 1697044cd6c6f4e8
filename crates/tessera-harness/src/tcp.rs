//! The `tcp` runtime's three parts: a server process per node
//! ([`serve`]); the bench driver ([`bench`]) that runs the client hosts
//! in its own process against running servers and gathers their reports
//! into the same [`RawRun`] as the other runtimes; and the embedded client
//! host ([`embed`]) that runs an application's transactions (the client
//! library, `tessera txn`).
//!
//! Server and bench build the deployment exactly as `sim` and `local` do
//! ([`crate::deploy::deployment`]) and keep only their own nodes'
//! factories, so a server loads the same data and runs the same role. All
//! three decode procedures with the workload plus the built-in `kv.*`
//! procedures ([`tessera_workloads::kv::with_builtins`]).

use crate::deploy::{client_config, client_host_id, deployment, RawRun};
use crate::spec::{BenchSpec, WorkloadSpec};
use anyhow::{anyhow, Context};
use std::sync::Arc;
use tessera_core::codec::{decode_store, Codec, DecodeCx};
use tessera_core::embedded::{EmbeddedHost, Request, RetryPolicy};
use tessera_core::protocol::{CoordinatorEnv, Protocol};
use tessera_core::runtime::NodeFactory;
use tessera_core::storage::Store;
use tessera_core::topology::Role;
use tessera_core::workload::Workload;
use tessera_tcp::{claim, run_process, ClusterConfig, LocalNode, ProcessSpec, Stop, Wakeups};
use tessera_workloads::kv::with_builtins;
use tessera_workloads::{MicroConfig, TaoBenchConfig, TatpConfig, TpccConfig, YcsbConfig};

/// The workload a cluster file names, with its parameters.
pub fn workload_spec(c: &ClusterConfig) -> anyhow::Result<WorkloadSpec> {
    let params = toml::Value::Table(c.workload.params.clone());
    let bad = |e: toml::de::Error| anyhow!("{}: [workload]: {e}", c.path.display());
    Ok(match c.workload.name.as_str() {
        "ycsb" => WorkloadSpec::Ycsb(params.try_into::<YcsbConfig>().map_err(bad)?),
        "micro" => WorkloadSpec::Micro(params.try_into::<MicroConfig>().map_err(bad)?),
        "tpcc" => WorkloadSpec::Tpcc(params.try_into::<TpccConfig>().map_err(bad)?),
        "tatp" => WorkloadSpec::Tatp(params.try_into::<TatpConfig>().map_err(bad)?),
        "taobench" => WorkloadSpec::TaoBench(params.try_into::<TaoBenchConfig>().map_err(bad)?),
        other => {
            return Err(crate::spec::SpecError::Invalid {
                flag: "[workload] name",
                value: other.to_string(),
                allowed: WorkloadSpec::NAMES.join(", "),
            }
            .into())
        }
    })
}

/// The spec a cluster file describes (runtime `tcp`, its protocol, its
/// workload, its seed).
pub fn spec_of(c: Arc<ClusterConfig>) -> anyhow::Result<BenchSpec> {
    let wl = workload_spec(&c)?;
    let mut s = BenchSpec::new(crate::RuntimeKind::Tcp, &c.cluster.protocol, wl);
    s.seed = c.cluster.seed;
    s.cluster = Some(c);
    Ok(s)
}

fn cluster(spec: &BenchSpec) -> anyhow::Result<&Arc<ClusterConfig>> {
    spec.cluster
        .as_ref()
        .ok_or_else(|| anyhow!("--runtime tcp needs --config"))
}

/// Load-size counters for a deployment whose loads happen elsewhere (or
/// are not reported from this process).
fn unmeasured(spec: &BenchSpec) -> crate::deploy::LoadedBytes {
    Arc::new(
        (0..spec.workload.shards())
            .map(|_| std::sync::atomic::AtomicU64::new(0))
            .collect(),
    )
}

/// Run node `name` of the cluster until SIGTERM or SIGINT.
pub fn serve<P: Protocol>(
    config: &P::Config,
    spec: &BenchSpec,
    workload: Arc<dyn Workload>,
    name: &str,
) -> anyhow::Result<()>
where
    P::Msg: Codec,
{
    let c = cluster(spec)?;
    let me = c.require_node(name)?;
    let mut dep = deployment::<P>(config, spec, workload.clone(), &unmeasured(spec))?;
    let factory = dep.factories.swap_remove(me.0 as usize);
    let servers = c.servers();
    let listen = servers[me.0 as usize].1;
    tracing::info!(node = name, %listen, protocol = %spec.protocol, "serving");
    let out = run_process::<P::Msg>(ProcessSpec {
        nodes: vec![LocalNode {
            id: me,
            factory,
            wal: c.wal_settings(name),
            state_dir: Some(c.cluster.run_dir.join("state").join(name)),
        }],
        listen: Some(listen),
        peers: servers.into_iter().filter(|(n, _)| *n != me).collect(),
        cx: DecodeCx::new(with_builtins(workload)),
        seed: spec.seed,
        stop: Stop::Signal,
        net: c.net_config(),
        stats_every: c.stats_every(),
        wakeups: None,
    })?;
    // The protocol's counters (what is left unfinished here, for one) are
    // in no bench row: a server outlives its bench drivers.
    let counters: Vec<String> = out
        .reports
        .iter()
        .flat_map(|(_, r)| r.values().map(|(k, v)| format!("{k}={v}")))
        .collect();
    tracing::info!(
        node = name,
        messages = out.net.messages,
        dropped = out.dropped,
        rejected = out.rejected,
        counters = counters.join(" "),
        "stopped"
    );
    Ok(())
}

/// How long past its duration a checked `tcp` bench waits for its
/// attempts in flight to end: real time on a shared machine, so beyond
/// the simulator's [`crate::spec::CHECK_SETTLE`]; only a stuck attempt
/// reaches it, and it is then checked as it stands (in doubt).
const CHECK_SETTLE: std::time::Duration = std::time::Duration::from_secs(10);

/// Run the cluster's client hosts here for `spec.duration` against the
/// running servers (for a checked run, until their attempts in flight
/// ended), then fetch every shard leader's store.
pub fn bench<P: Protocol>(
    config: &P::Config,
    spec: &BenchSpec,
    workload: Arc<dyn Workload>,
) -> anyhow::Result<RawRun>
where
    P::Msg: Codec,
{
    let c = cluster(spec)?.clone();
    let dep = deployment::<P>(config, spec, workload.clone(), &unmeasured(spec))?;
    let topology = dep.topology.clone();
    let mut nodes = Vec::new();
    let mut claims = Vec::new();
    for (info, factory) in topology.nodes.iter().zip(dep.factories) {
        if let Role::Client { host } = info.role {
            claims.push(claim(&client_dir(&c, host))?);
            nodes.push(client_node(&c, host, info.id, factory));
        }
    }
    let servers = c.servers();
    let out = run_process::<P::Msg>(ProcessSpec {
        nodes,
        listen: None,
        peers: servers.clone(),
        cx: DecodeCx::new(with_builtins(workload)),
        seed: spec.seed,
        stop: if spec.check {
            // The checks read the final stores: let the attempts in flight
            // at the deadline end first (the clients stop issuing at the
            // cool-down), as a checked `sim` run settles.
            Stop::AfterSettled {
                after: std::time::Duration::from_nanos(spec.duration),
                grace: CHECK_SETTLE,
            }
        } else {
            Stop::After(std::time::Duration::from_nanos(spec.duration))
        },
        net: c.net_config(),
        stats_every: c.stats_every(),
        wakeups: None,
    })?;
    if out.dropped > 0 {
        tracing::warn!(
            dropped = out.dropped,
            "messages dropped (no route or full queue)"
        );
    }
    let mut counters = std::collections::BTreeMap::new();
    let (stores, replica_stores) = if c.shards.iter().any(|s| s.replicas.len() > 1) {
        let (groups, divergent) = settled_replica_stores(&c)?;
        counters.insert("replica_divergent_keys", divergent);
        (groups.iter().map(|g| g[0].clone()).collect(), groups)
    } else {
        (fetch_stores(&c)?, Vec::new())
    };
    for (_, r) in &out.reports {
        for (name, n) in r.values() {
            *counters.entry(*name).or_insert(0) += n;
        }
    }
    let samples = crate::deploy::time_ordered(out.reports.iter().flat_map(|(_, r)| &r.samples));
    Ok(RawRun {
        clients: out
            .reports
            .into_iter()
            .filter_map(|(_, r)| r.client)
            .collect(),
        counters,
        samples,
        // The servers load and run in their own processes.
        loaded_bytes: 0,
        server_busy: 0,
        replica_stores,
        stores,
        net: out.net,
        events: out.events,
        elapsed: out.elapsed,
        client_config: client_config(spec),
        topology,
    })
}

/// The name of client host `host` (its log and state directories).
fn client_name(host: u32) -> String {
    format!("client-{host}")
}

/// Where client host `host` keeps its incarnation counter and its claim.
fn client_dir(c: &ClusterConfig, host: u32) -> std::path::PathBuf {
    c.cluster.run_dir.join("state").join(client_name(host))
}

/// Client host `host` as a node of this process, with its log and its
/// state directory: a new incarnation per session, since servers keep the
/// floors of earlier sessions' coordinators.
fn client_node<M>(
    c: &ClusterConfig,
    host: u32,
    id: tessera_core::NodeId,
    factory: NodeFactory<M>,
) -> LocalNode<M> {
    LocalNode {
        id,
        factory,
        wal: c.wal_settings(&client_name(host)),
        state_dir: Some(client_dir(c, host)),
    }
}

/// What an application hands an embedded client host.
pub struct Embedding {
    /// The client host (of the cluster file's `[clients] hosts`) to run as.
    pub host: u32,
    pub policy: RetryPolicy,
    /// The application's requests; the host takes them when woken.
    pub inbox: std::sync::mpsc::Receiver<Request>,
    /// Wake-ups for the host; the process ends once every sender is gone.
    pub wakeups: Wakeups,
    /// Called once the host has started.
    pub ready: Box<dyn FnOnce() + Send>,
}

/// Run client host `e.host` of the cluster as an [`EmbeddedHost`] around
/// protocol `P`'s coordinator, on this thread, until the application drops
/// its wake-up sender. Fails at once with [`tessera_tcp::TcpError::Busy`]
/// if another process runs that host.
pub fn embed<P: Protocol>(
    config: &P::Config,
    spec: &BenchSpec,
    workload: Arc<dyn Workload>,
    e: Embedding,
) -> anyhow::Result<()>
where
    P::Msg: Codec,
{
    let c = cluster(spec)?.clone();
    let topology = Arc::new(c.topology());
    let me = client_host_id(&topology, e.host).ok_or_else(|| {
        anyhow!(
            "{}: client host {} does not exist ([clients] hosts = {})",
            c.path.display(),
            e.host,
            topology.client_hosts().count()
        )
    })?;
    let _claim = claim(&client_dir(&c, e.host))?;
    let cfg = config.clone();
    let policy = e.policy;
    let mut parts = Some((e.inbox, e.ready));
    let factory: NodeFactory<P::Msg> = Box::new(move |restart| {
        // A tcp process starts each of its nodes once and never restarts
        // them (a restart is a new process).
        let (inbox, ready) = parts.take().expect("an embedded host starts once");
        let coord = P::coordinator(
            &cfg,
            CoordinatorEnv {
                me,
                topology: topology.clone(),
                incarnation: restart.incarnation,
                recovered: restart.recovered,
            },
        );
        Box::new(EmbeddedHost::new(
            coord,
            me,
            restart.incarnation,
            policy,
            inbox,
            ready,
        ))
    });
    run_process::<P::Msg>(ProcessSpec {
        nodes: vec![client_node(&c, e.host, me, factory)],
        listen: None,
        peers: c.servers(),
        cx: DecodeCx::new(with_builtins(workload)),
        seed: spec.seed,
        stop: Stop::Released,
        net: c.net_config(),
        stats_every: None,
        wakeups: Some(e.wakeups),
    })?;
    Ok(())
}

/// Every shard leader's store, fetched from its server process.
pub fn fetch_stores(c: &ClusterConfig) -> anyhow::Result<Vec<Store>> {
    let servers = c.servers();
    c.topology()
        .shards
        .iter()
        .enumerate()
        .map(|(s, g)| fetch_one(c, &servers, s, g.leader()))
        .collect()
}

/// Every replica's store, per shard (the leader, replica 0, first): what
/// the replica convergence count (`replica_divergent_keys`) compares.
pub fn fetch_replica_stores(c: &ClusterConfig) -> anyhow::Result<Vec<Vec<Store>>> {
    let servers = c.servers();
    c.topology()
        .shards
        .iter()
        .enumerate()
        .map(|(s, g)| {
            g.replicas
                .iter()
                .map(|&r| fetch_one(c, &servers, s, r))
                .collect()
        })
        .collect()
}

/// How long [`settled_replica_stores`] waits for the replicas to agree.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(5);

/// Every replica's store once the replicas of each shard agree, or as they
/// are after [`SETTLE`], with the number of keys on which they differ.
/// Replicas of a leaderless protocol settle after the clients stop: a
/// replica that missed a Commit learns it from the others (Janus's
/// announcements and Inquires, at their own periods), and a transaction
/// whose coordinator stopped with the bench driver is finished by a
/// replica's recovery (§3.3).
fn settled_replica_stores(c: &ClusterConfig) -> anyhow::Result<(Vec<Vec<Store>>, u64)> {
    let until = std::time::Instant::now() + SETTLE;
    loop {
        let groups = fetch_replica_stores(c)?;
        let divergent = crate::deploy::divergent_keys(
            groups
                .iter()
                .map(|g| g.iter().map(Some).collect::<Vec<_>>()),
        );
        if divergent == 0 || std::time::Instant::now() >= until {
            if divergent > 0 {
                warn_divergence(&groups);
            }
            return Ok((groups, divergent));
        }
        tracing::info!(divergent, "replicas not settled yet; fetching again");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// Log the first keys on which a shard's replicas differ, with each
/// replica's version and value there.
fn warn_divergence(groups: &[Vec<Store>]) {
    for (shard, g) in groups.iter().enumerate() {
        for (i, other) in g.iter().enumerate().skip(1) {
            let mut keys = crate::deploy::differing_keys(&g[0], other);
            keys.extend(crate::deploy::differing_keys(other, &g[0]));
            keys.sort_unstable();
            keys.dedup();
            for k in keys.into_iter().take(4) {
                let at = |s: &Store| s.get(k).map(|r| (r.meta.version, r.value.clone()));
                tracing::warn!(shard, replica = i, key = ?k, first = ?at(&g[0]), this = ?at(other), "replicas differ");
            }
        }
    }
}

/// The store of `node`, a replica of shard `s`.
fn fetch_one(
    c: &ClusterConfig,
    servers: &[(tessera_core::NodeId, std::net::SocketAddr)],
    s: usize,
    node: tessera_core::NodeId,
) -> anyhow::Result<Store> {
    let addr = servers[node.0 as usize].1;
    let img = tessera_tcp::fetch_store(addr, node, c.net.max_frame_bytes.max(1 << 30))
        .with_context(|| {
            format!("fetching shard {s}'s store from {addr} (is its server still running?)")
        })?
        .ok_or_else(|| anyhow!("{addr} has no store for shard {s}"))?;
    decode_store(&mut &img[..]).with_context(|| format!("shard {s}'s store image"))
}
