//! The subcommands.

use crate::{table, Failure, RunArgs};
use indicatif::{ProgressBar, ProgressStyle};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tessera_core::ids::{MS, US};
use tessera_harness::experiment;
use tessera_harness::faults::{replica_plan, RandomFaults};
use tessera_harness::registry;
use tessera_harness::sites::{ClientSites, PrimarySites, Sites};
use tessera_harness::spec::Knobs;
use tessera_harness::sweep::{sweep as run_sweep, sweep_series, Vary};
use tessera_harness::{
    run_bench, BenchOutcome, BenchSpec, ResultRow, RuntimeKind, SimConfig, SpecError, WorkloadSpec,
};
use tessera_workloads::tpcc::{HomeWarehouse, Mix, Partition, RemoteNewOrder};
use tessera_workloads::{
    CounterConfig, MicroConfig, TaoBenchConfig, TatpConfig, TpccConfig, YcsbConfig,
};

type Result<T> = std::result::Result<T, Failure>;

/// Reject flags set for a workload they do not apply to.
fn not_for(workload: &str, flags: &[(&str, bool)], applies_to: &str) -> Result<()> {
    match flags.iter().find(|(_, set)| *set) {
        Some((flag, _)) => Err(Failure::Usage(format!(
            "{flag} applies to --workload {applies_to}, not {workload}"
        ))),
        None => Ok(()),
    }
}

/// The TPC-C flags that are set.
fn tpcc_flags(a: &RunArgs) -> [(&'static str, bool); 11] {
    [
        ("--warehouses", a.warehouses.is_some()),
        ("--districts", a.districts.is_some()),
        ("--customers", a.customers.is_some()),
        ("--items", a.items.is_some()),
        ("--mix", a.mix.is_some()),
        ("--partition", a.partition.is_some()),
        ("--remote-neworder", a.remote_neworder.is_some()),
        ("--remote-payment", a.remote_payment.is_some()),
        ("--immediate-stock", a.immediate_stock),
        ("--home-warehouse", a.home_warehouse.is_some()),
        ("--by-name", a.by_name.is_some()),
    ]
}

/// The flags of the OOCC workloads (tatp, taobench) that are set.
fn graph_flags(a: &RunArgs) -> [(&'static str, bool); 4] {
    [
        ("--subscribers", a.subscribers.is_some()),
        ("--ro-keys", a.ro_keys.is_some()),
        ("--objects", a.objects.is_some()),
        ("--edges", a.edges.is_some()),
    ]
}

/// TPC-C's configuration from the flags: the scheme's defaults (the
/// specification's scale; NOCC's tiny one), then the flags.
fn tpcc_of(a: &RunArgs) -> Result<TpccConfig> {
    let partition = match a.partition.as_deref() {
        None => Partition::Warehouse,
        Some(p) => Partition::parse(p).ok_or_else(|| SpecError::Invalid {
            flag: "--partition",
            value: p.to_string(),
            allowed: Partition::NAMES.join(", "),
        })?,
    };
    let mut c = match partition {
        Partition::Tiny => TpccConfig::tiny(),
        _ => TpccConfig {
            partition,
            ..TpccConfig::spec(a.warehouses.unwrap_or(1))
        },
    };
    c.warehouses = a.warehouses.unwrap_or(c.warehouses);
    c.districts = a.districts.unwrap_or(c.districts);
    c.customers = a.customers.unwrap_or(c.customers);
    c.items = a.items.unwrap_or(c.items);
    c.shards = a.shards.unwrap_or(c.shards);
    if let Some(m) = &a.mix {
        c.mix = Mix::parse(m)?;
    }
    if let Some(r) = &a.remote_neworder {
        c.remote_neworder = RemoteNewOrder::parse(r).ok_or_else(|| SpecError::Invalid {
            flag: "--remote-neworder",
            value: r.clone(),
            allowed: "a percentage of NewOrders (e.g. 10), or PCT/line (e.g. 1/line)".into(),
        })?;
    }
    c.remote_payment = a.remote_payment.unwrap_or(c.remote_payment);
    c.immediate_stock = a.immediate_stock;
    c.by_name = a.by_name.unwrap_or(c.by_name);
    if let Some(h) = &a.home_warehouse {
        c.home_warehouse = HomeWarehouse::parse(h).ok_or_else(|| SpecError::Invalid {
            flag: "--home-warehouse",
            value: h.clone(),
            allowed: HomeWarehouse::NAMES.join(", "),
        })?;
    }
    Ok(c)
}

/// The spec that `RunArgs` describe (protocol left empty).
fn spec_of(a: &RunArgs) -> Result<BenchSpec> {
    let runtime = RuntimeKind::parse(&a.runtime)?;
    match (runtime, &a.config) {
        (RuntimeKind::Tcp, Some(path)) => return tcp_spec_of(a, path),
        (RuntimeKind::Tcp, None) => {
            return Err(Failure::Usage(
                "--runtime tcp needs --config CLUSTER.toml".into(),
            ))
        }
        (_, Some(_)) => return Err(Failure::Usage("--config applies to --runtime tcp".into())),
        _ => {}
    }
    let tpcc_set = tpcc_flags(a);
    let oocc_set = graph_flags(a);
    let ycsb_set = [
        ("--keys", a.keys.is_some()),
        ("--ops", a.ops.is_some()),
        ("--read-ratio", a.read_ratio.is_some()),
        ("--multi-partition", a.multi_partition.is_some()),
    ];
    if !matches!(a.workload.as_str(), "tatp" | "taobench") {
        not_for(&a.workload, &oocc_set[..2], "tatp")?;
        not_for(&a.workload, &oocc_set[2..], "taobench")?;
    }
    let workload = match a.workload.as_str() {
        "micro" => {
            let mut c = MicroConfig::default();
            c.shards = a.shards.unwrap_or(c.shards);
            c.keys_per_shard = a.keys.unwrap_or(c.keys_per_shard);
            c.zipf_theta = a.zipf.unwrap_or(c.zipf_theta);
            not_for(
                "micro",
                &[
                    ("--ops", a.ops.is_some()),
                    ("--read-ratio", a.read_ratio.is_some()),
                    ("--multi-partition", a.multi_partition.is_some()),
                ],
                "ycsb",
            )?;
            not_for("micro", &tpcc_set, "tpcc")?;
            WorkloadSpec::Micro(c)
        }
        "ycsb" => {
            let mut c = YcsbConfig {
                partitions: 2,
                ..YcsbConfig::default()
            };
            c.partitions = a.shards.unwrap_or(c.partitions);
            c.keys_per_partition = a.keys.unwrap_or(c.keys_per_partition);
            c.zipf_theta = a.zipf.unwrap_or(c.zipf_theta);
            c.ops_per_txn = a.ops.unwrap_or(c.ops_per_txn);
            c.read_ratio = a.read_ratio.unwrap_or(c.read_ratio);
            c.multi_partition = a.multi_partition.unwrap_or(c.multi_partition);
            not_for("ycsb", &tpcc_set, "tpcc")?;
            WorkloadSpec::Ycsb(c)
        }
        "counter" => {
            let mut c = CounterConfig::default();
            c.keys = a.keys.unwrap_or(c.keys);
            c.zipf_theta = a.zipf.unwrap_or(c.zipf_theta);
            c.write_ratio = a.write_ratio.unwrap_or(c.write_ratio);
            for (flag, set) in [
                ("--shards", a.shards.is_some_and(|s| s != 1)),
                ("--ops", a.ops.is_some()),
                ("--read-ratio", a.read_ratio.is_some()),
                ("--multi-partition", a.multi_partition.is_some()),
            ] {
                if set {
                    return Err(Failure::Usage(format!(
                        "{flag} does not apply to --workload counter (one store, one key per txn)"
                    )));
                }
            }
            WorkloadSpec::Counter(c)
        }
        "tatp" => {
            let mut c = TatpConfig {
                partitions: 2,
                ..TatpConfig::default()
            };
            c.partitions = a.shards.unwrap_or(c.partitions);
            c.subscribers = a.subscribers.unwrap_or(c.subscribers);
            c.ro_keys = a.ro_keys.unwrap_or(c.ro_keys);
            not_for("tatp", &ycsb_set, "ycsb")?;
            not_for(
                "tatp",
                &[("--zipf", a.zipf.is_some())],
                "ycsb, micro, counter or taobench (TATP draws subscribers by NURand)",
            )?;
            not_for("tatp", &oocc_set[2..], "taobench")?;
            not_for("tatp", &tpcc_set, "tpcc")?;
            WorkloadSpec::Tatp(c)
        }
        "taobench" => {
            let mut c = TaoBenchConfig {
                partitions: 2,
                ..TaoBenchConfig::default()
            };
            c.partitions = a.shards.unwrap_or(c.partitions);
            c.objects = a.objects.unwrap_or(c.objects);
            c.edges = a.edges.unwrap_or(c.edges);
            c.zipf_theta = a.zipf.unwrap_or(c.zipf_theta);
            not_for("taobench", &ycsb_set, "ycsb")?;
            not_for("taobench", &oocc_set[..2], "tatp")?;
            not_for("taobench", &tpcc_set, "tpcc")?;
            WorkloadSpec::TaoBench(c)
        }
        "tpcc" => {
            not_for(
                "tpcc",
                &[
                    ("--zipf", a.zipf.is_some()),
                    ("--keys", a.keys.is_some()),
                    ("--ops", a.ops.is_some()),
                    ("--read-ratio", a.read_ratio.is_some()),
                    ("--multi-partition", a.multi_partition.is_some()),
                ],
                "micro or ycsb",
            )?;
            WorkloadSpec::Tpcc(tpcc_of(a)?)
        }
        other => {
            return Err(SpecError::Invalid {
                flag: "--workload",
                value: other.to_string(),
                allowed: WorkloadSpec::NAMES.join(", "),
            }
            .into())
        }
    };
    let mut s = BenchSpec::new(runtime, "", workload);
    if let Some(d) = a.duration {
        s.duration = d;
        s.warmup = d / 10;
        s.cooldown = d / 20;
    }
    s.warmup = a.warmup.unwrap_or(s.warmup);
    s.cooldown = a.cooldown.unwrap_or(s.cooldown);
    s.clients = a.clients.unwrap_or(0);
    s.seed = a.seed;
    s.check = a.check;
    s.workers = a.workers.unwrap_or(0) as usize;
    s.max_attempts = a.max_attempts.unwrap_or(s.max_attempts);
    s.backoff_base = a.backoff_us.map_or(s.backoff_base, |us| us * US);
    s.max_unreleased = a.max_unreleased.unwrap_or(s.max_unreleased);
    s.commits = a.commits;
    s.timeline = a.timeline;
    s.switches = a.switches;
    s.replicas = a.replicas;
    s.drain = a.drain.unwrap_or(0);
    if let Some(sites) = &a.sites {
        s.sites = Sites::parse(sites)?;
    }
    if let Some(c) = &a.client_sites {
        s.client_sites = Some(ClientSites::parse(c)?);
    }
    if let Some(p) = &a.primary_sites {
        s.primary_sites = PrimarySites::parse(p)?;
    }
    s.colocate = a.colocate;
    s.knobs = knobs_of(a);
    if a.write_ratio.is_some() && !matches!(s.workload, WorkloadSpec::Counter(_)) {
        return Err(Failure::Usage(
            "--write-ratio applies to --workload counter".into(),
        ));
    }
    let sim_flags = a.faults
        || a.replica_faults
        || a.loss.is_some()
        || a.duplicate.is_some()
        || a.reorder.is_some()
        || a.net.is_some()
        || a.drift_ppm.is_some()
        || a.fsync_us.is_some()
        || a.checkpoint_kb.is_some()
        || a.drift_node.is_some()
        || a.server_cpu_ns.is_some()
        || a.client_cpu_ns.is_some()
        || a.local_cpu_ns.is_some()
        || a.byte_cpu_ps.is_some();
    if sim_flags && runtime != RuntimeKind::Sim {
        return Err(Failure::Usage(
            "--faults, --replica-faults, --loss, --duplicate, --reorder, --net, --drift-ppm, \
             --drift-node, --fsync-us, --checkpoint-kb, --server-cpu-ns, --client-cpu-ns, \
             --local-cpu-ns and --byte-cpu-ps need --runtime sim"
                .into(),
        ));
    }
    if a.faults && a.replica_faults {
        return Err(Failure::Usage(
            "--faults and --replica-faults are two fault plans: choose one".into(),
        ));
    }
    if let Some(net) = &a.net {
        s.sim = SimConfig::preset(net).ok_or_else(|| SpecError::Invalid {
            flag: "--net",
            value: net.clone(),
            allowed: SimConfig::PRESETS.join(", "),
        })?;
    }
    if a.faults {
        // Drawn when each run starts, for the topology its protocol runs on
        // (keeping the preset's network).
        s.faults = Some(RandomFaults {
            loss: a.loss,
            duplicate: a.duplicate,
            reorder: a.reorder,
        });
    } else {
        if a.replica_faults {
            if a.replicas.is_none() {
                return Err(Failure::Usage(
                    "--replica-faults needs --replicas (the plan names replicas)".into(),
                ));
            }
            let topo = tessera_harness::deploy::topology(&s);
            let until = s.duration.saturating_sub(s.drain + 20 * MS);
            let plan = replica_plan(s.seed, &topo, until);
            // The fault plan keeps the preset's network.
            s.sim = SimConfig {
                latency: s.sim.latency.clone(),
                jitter: s.sim.jitter,
                server_cpu: s.sim.server_cpu,
                client_cpu: s.sim.client_cpu,
                local_cpu: s.sim.local_cpu,
                byte_cpu_ps: s.sim.byte_cpu_ps,
                ..plan
            };
        }
        s.sim.loss = a.loss.unwrap_or(s.sim.loss);
        s.sim.duplicate = a.duplicate.unwrap_or(s.sim.duplicate);
        s.sim.reorder = a.reorder.unwrap_or(s.sim.reorder);
    }
    s.sim.drift_ppm = a.drift_ppm.unwrap_or(s.sim.drift_ppm);
    s.sim.server_cpu = a.server_cpu_ns.unwrap_or(s.sim.server_cpu);
    s.sim.client_cpu = a.client_cpu_ns.unwrap_or(s.sim.client_cpu);
    s.sim.local_cpu = a.local_cpu_ns.or(s.sim.local_cpu);
    s.sim.byte_cpu_ps = a.byte_cpu_ps.unwrap_or(s.sim.byte_cpu_ps);
    if let Some(us) = a.fsync_us {
        s.sim.fsync = us * tessera_core::ids::US;
    }
    if let Some(kb) = a.checkpoint_kb {
        s.sim.checkpoint_bytes = kb << 10;
    }
    s.sim.drift_node = a.drift_node.or(s.sim.drift_node);
    if let Some((node, _)) = s.sim.drift_node {
        let nodes = tessera_harness::deploy::topology(&s).nodes.len();
        if node as usize >= nodes {
            return Err(Failure::Usage(format!(
                "--drift-node {node}: the deployment has nodes 0 to {}",
                nodes - 1
            )));
        }
    }
    s.validate()?;
    Ok(s)
}

/// The protocol knobs the flags set.
fn knobs_of(a: &RunArgs) -> Knobs {
    Knobs {
        switch_cache: a.switch_cache,
        switch_max_ops: a.switch_max_ops,
        switch_value_width: a.switch_value_width,
        switch_stages: a.switch_stages,
        recirculation_ns: a.recirculation_ns,
        abort_cpu_us: a.abort_cpu_us,
        paxos_batch: a.paxos_batch.map(|n| n as usize),
        graph_cpu_ns: a.graph_cpu_ns,
        wound: a.wound.clone(),
        commit: a.commit.clone(),
        epoch_ms: a.epoch_ms,
        prepare_deadline_ms: a.prepare_deadline_ms,
        isolation: a.isolation.clone(),
        coco_replication: a.coco_replication.clone(),
        epoch_barrier: a.epoch_barrier,
        oocc_lease: a.oocc_lease,
        oocc_write_unlock: a.oocc_write_unlock,
        oocc_delayed_lock: a.oocc_delayed_lock,
        oocc_late_upgrade: a.oocc_late_upgrade,
        lease_us: a.lease_us,
        oocc_lease_adapt: a.oocc_lease_adapt,
        oocc_lease_min_us: a.oocc_lease_min_us,
        oocc_lease_max_us: a.oocc_lease_max_us,
        oocc_lease_period_us: a.oocc_lease_period_us,
        oocc_drift_stop: a.oocc_drift_stop,
        oocc_offset_ns: a.oocc_offset_ns,
        oocc_sync_us: a.oocc_sync_us,
        region_slots_per_record: a.region_slots_per_record,
        ro_rounds: a.ro_rounds,
        forget_epochs: a.forget_epochs,
        per_column: a.per_column,
        fast_path_by_rtt: a.fast_path_by_rtt,
        prefetch_outputs: a.prefetch_outputs,
    }
}

/// A tcp run: the workload and protocol come from the cluster file (the
/// servers already run them); run-length and client flags apply.
fn tcp_spec_of(a: &RunArgs, path: &Path) -> Result<BenchSpec> {
    let c = std::sync::Arc::new(tessera_tcp::ClusterConfig::load(path)?);
    for (flag, set) in [
        ("--workload", a.workload != "ycsb"),
        ("--shards", a.shards.is_some()),
        ("--zipf", a.zipf.is_some()),
        ("--keys", a.keys.is_some()),
        ("--ops", a.ops.is_some()),
        ("--read-ratio", a.read_ratio.is_some()),
        ("--multi-partition", a.multi_partition.is_some()),
        ("--workers", a.workers.is_some()),
        ("--faults", a.faults),
    ] {
        if set {
            return Err(Failure::Usage(format!(
                "{flag} does not apply to --runtime tcp: the servers run the workload of {}",
                path.display()
            )));
        }
    }
    let mut s = tessera_harness::tcp::spec_of(c)?;
    if let Some(d) = a.duration {
        s.duration = d;
        s.warmup = d / 10;
        s.cooldown = d / 20;
    }
    s.warmup = a.warmup.unwrap_or(s.warmup);
    s.cooldown = a.cooldown.unwrap_or(s.cooldown);
    s.clients = a.clients.unwrap_or(0);
    s.seed = a.seed;
    s.check = a.check;
    s.max_attempts = a.max_attempts.unwrap_or(s.max_attempts);
    s.backoff_base = a.backoff_us.map_or(s.backoff_base, |us| us * US);
    s.max_unreleased = a.max_unreleased.unwrap_or(s.max_unreleased);
    s.commits = a.commits;
    s.timeline = a.timeline;
    // Protocol knobs configure the coordinators of this driver's client
    // hosts, not the running servers: a protocol takes only those that
    // need nothing of its servers (the memory-node protocols' lease and
    // ablation flags; their memory nodes run no protocol logic) and refuses
    // the others.
    s.knobs = knobs_of(a);
    s.validate()?;
    Ok(s)
}

fn check_protocols(names: &[String]) -> Result<()> {
    for p in names {
        registry::find(p)?;
    }
    Ok(())
}

/// Open `--out` for appending now, so a bad path fails before any run.
fn open_out(path: Option<&Path>) -> Result<Option<File>> {
    path.map(|p| {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .map_err(|e| Failure::Usage(format!("--out {}: cannot write: {e}", p.display())))
    })
    .transpose()
}

fn write_row(out: &mut Option<File>, row: &ResultRow) -> Result<()> {
    Ok(append_row(out, row)?)
}

/// [`write_row`] for a sweep's per-point callback.
fn append_row(out: &mut Option<File>, row: &ResultRow) -> anyhow::Result<()> {
    if let Some(f) = out {
        serde_json::to_writer(&mut *f, row)?;
        writeln!(f)?;
    }
    Ok(())
}

/// The history file of one protocol: `h.jsonl` → `h.occ.jsonl` when several
/// protocols run.
fn history_path(base: &Path, protocol: &str, several: bool) -> PathBuf {
    if !several {
        return base.to_path_buf();
    }
    let stem = base
        .file_stem()
        .map(|s| s.to_string_lossy())
        .unwrap_or_default();
    let name = match base.extension() {
        Some(ext) => format!("{stem}.{protocol}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{protocol}"),
    };
    base.with_file_name(name)
}

fn check_history_path(p: &Path) -> Result<()> {
    let dir = p
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(Failure::Usage(format!(
            "--history {}: folder {} does not exist",
            p.display(),
            dir.display()
        )));
    }
    Ok(())
}

fn progress(spec: &BenchSpec) -> ProgressBar {
    let secs = spec.duration as f64 / 1e9;
    let pb = ProgressBar::new_spinner();
    pb.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed}] {msg}").expect("valid template"),
    );
    pb.set_message(format!(
        "{} on {} ({}, {} shards, {} clients, {:.1}s{})",
        spec.protocol,
        spec.runtime.name(),
        spec.workload.name(),
        spec.workload.shards(),
        spec.effective_clients(),
        secs,
        if spec.runtime == RuntimeKind::Sim {
            " virtual"
        } else {
            ""
        }
    ));
    pb.enable_steady_tick(Duration::from_millis(120));
    pb
}

/// Run a `sim` spec while a second thread adds its virtual clock to the
/// spinner's line (`sim` runs hold this thread; a long one would
/// otherwise show nothing but wall time).
fn run_watching_clock(spec: &BenchSpec, pb: &ProgressBar) -> anyhow::Result<BenchOutcome> {
    let mut spec = spec.clone();
    let clock = tessera_harness::Progress::shared();
    spec.sim.progress = clock.clone();
    let base = pb.message();
    let total = spec.duration as f64 / 1e9;
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                if let Some(t) = clock.reached() {
                    let at = t as f64 / 1e9;
                    pb.set_message(format!("{base}, at {at:.3}s of {total:.1}s"));
                }
                std::thread::sleep(Duration::from_millis(250));
            }
        });
        let out = run_bench(&spec);
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        out
    })
}

fn run_one(spec: &BenchSpec) -> Result<BenchOutcome> {
    let pb = progress(spec);
    let out = if spec.runtime == RuntimeKind::Sim {
        run_watching_clock(spec, &pb)
    } else {
        run_bench(spec)
    };
    pb.finish_and_clear();
    let out = out?;
    match &out.check {
        Some(r) if !r.ok => eprintln!("{}: isolation check FAILED: {r}", spec.protocol),
        // The isolation checker passed (or did not run) but a check of
        // the run's end state failed it, e.g. lost writes over `tcp`.
        _ if out.row.check == "fail" => eprintln!(
            "{}: check FAILED: {}",
            spec.protocol,
            out.row.check_detail.as_deref().unwrap_or("(no detail)")
        ),
        _ => {}
    }
    if let Some(v) = out.consistency.as_ref().filter(|v| !v.is_empty()) {
        eprintln!(
            "{}: consistency check FAILED ({} shown):",
            spec.protocol,
            v.len()
        );
        for line in v {
            eprintln!("  {line}");
        }
    }
    Ok(out)
}

fn finish(rows: &[ResultRow]) -> Result<()> {
    let failed = |what: fn(&ResultRow) -> bool| -> Vec<&str> {
        rows.iter()
            .filter(|r| what(r))
            .map(|r| r.protocol.as_str())
            .collect()
    };
    let isolation = failed(|r| r.check == "fail");
    let consistency = failed(|r| r.tpcc_consistency == "fail");
    let mut msgs = Vec::new();
    if !isolation.is_empty() {
        msgs.push(format!(
            "isolation check failed for: {}",
            isolation.join(", ")
        ));
    }
    if !consistency.is_empty() {
        msgs.push(format!(
            "TPC-C consistency check failed for: {}",
            consistency.join(", ")
        ));
    }
    if msgs.is_empty() {
        Ok(())
    } else {
        Err(Failure::Run(anyhow::anyhow!(msgs.join("; "))))
    }
}

pub fn bench(a: &RunArgs) -> Result<()> {
    let base = spec_of(a)?;
    let mut a = a.clone();
    if let Some(c) = &base.cluster {
        // The servers run the cluster file's protocol.
        let theirs = &c.cluster.protocol;
        if a.protocol != RunArgs::default_protocols() && a.protocol != [theirs.clone()] {
            return Err(Failure::Usage(format!(
                "--protocol {}: the servers of {} run '{theirs}'",
                a.protocol.join(","),
                c.path.display()
            )));
        }
        a.protocol = vec![theirs.clone()];
    }
    let a = &a;
    check_protocols(&a.protocol)?;
    if let Some(h) = &a.history {
        check_history_path(h)?;
    }
    let mut out = open_out(a.out.as_deref())?;
    let several = a.protocol.len() > 1;
    let mut rows = Vec::new();
    let mut spreads = Vec::new();
    for p in &a.protocol {
        let mut runs = Vec::new();
        for i in 0..a.repeat {
            let mut s = base.clone();
            s.protocol = p.clone();
            s.seed = base.seed.wrapping_add(i as u64);
            s.history = a.history.as_ref().map(|h| history_path(h, p, several));
            let mut o = run_one(&s)?;
            if a.repeat > 1 {
                o.row.extra.insert("repeat".into(), i.into());
            }
            write_row(&mut out, &o.row)?;
            runs.push(o.row);
        }
        // A failed check in any run fails the command, not only the median's.
        rows.extend(runs.iter().filter(|r| r.check == "fail").cloned());
        runs.sort_by(|x, y| x.throughput_tps.total_cmp(&y.throughput_tps));
        if runs.len() > 1 {
            spreads.push(format!(
                "{p}: median {:.0} txn/s over {} runs (min {:.0}, max {:.0})",
                runs[runs.len() / 2].throughput_tps,
                runs.len(),
                runs[0].throughput_tps,
                runs[runs.len() - 1].throughput_tps
            ));
        }
        let median = runs.swap_remove(runs.len() / 2);
        if median.check != "fail" {
            rows.push(median);
        }
    }
    print!("{}", table::render(&rows, &[]));
    for s in &spreads {
        println!("{s}");
    }
    finish(&rows)
}

pub fn sweep(a: &RunArgs, vary: &str) -> Result<()> {
    let base = spec_of(a)?;
    if base.runtime == RuntimeKind::Tcp {
        return Err(Failure::Usage(
            "sweep does not support --runtime tcp: the servers' workload is fixed by the cluster file".into(),
        ));
    }
    check_protocols(&a.protocol)?;
    let vary = Vary::parse(vary)?;
    let mut out = open_out(a.out.as_deref())?;
    let rows = sweep_rows(&base, &a.protocol, &vary, &mut out)?;
    print!("{}", table::render(&rows, &[&vary.name]));
    finish(&rows)
}

fn sweep_rows(
    base: &BenchSpec,
    protocols: &[String],
    vary: &Vary,
    out: &mut Option<File>,
) -> Result<Vec<ResultRow>> {
    let key = vary.name.replace('-', "_");
    let rows = run_sweep(base, protocols, vary, |_, r| {
        debug_assert!(r.extra.contains_key(&key));
        append_row(out, r)
    })?;
    Ok(rows)
}

pub fn plot(file: &Path, x: &str, ys: &[String], out: &Path) -> Result<()> {
    let rows = tessera_plot::read_jsonl(file).map_err(|e| Failure::Usage(format!("{e:#}")))?;
    let spec = tessera_plot::PlotSpec::new(x, ys.iter().cloned());
    tessera_plot::plot(&rows, &spec, out).map_err(|e| Failure::Usage(format!("{e:#}")))?;
    println!("wrote {}", out.display());
    Ok(())
}

pub fn experiment(name: Option<&str>, list: bool, out_dir: &Path) -> Result<()> {
    if list || name.is_none() {
        for e in experiment::experiments() {
            println!("{:<16} {}", e.name, e.description);
        }
        return Ok(());
    }
    let e = experiment::find(name.expect("checked"))?;
    std::fs::create_dir_all(out_dir)
        .map_err(|err| Failure::Usage(format!("--out-dir {}: {err}", out_dir.display())))?;
    let jsonl = out_dir.join(format!("{}.jsonl", e.name));
    let png = out_dir.join(format!("{}.png", e.name));
    // A fresh file per experiment run.
    File::create(&jsonl)
        .map_err(|err| Failure::Usage(format!("{}: cannot write: {err}", jsonl.display())))?;
    let mut out = open_out(Some(&jsonl))?;
    let protocols: Vec<String> = e.protocols.iter().map(|p| p.to_string()).collect();
    println!("experiment {}: {}", e.name, e.description);
    let lines = e.series.as_ref().map_or(1, |s| s.values.len());
    let total = protocols.len() * e.vary.values.len() * lines;
    let pb = ProgressBar::new(total as u64);
    pb.set_style(
        ProgressStyle::with_template("[{elapsed}] {bar:30} {pos}/{len} runs {msg}")
            .expect("valid template"),
    );
    // Each row is written as its point ends: a stopped run keeps them.
    let rows = sweep_series(&e.base, &protocols, &e.vary, e.series.as_ref(), |s, r| {
        append_row(&mut out, r)?;
        pb.inc(1);
        pb.set_message(format!(
            "{} {}: {:.0} txn/s",
            s.protocol, e.vary.name, r.throughput_tps
        ));
        Ok(())
    });
    pb.finish_and_clear();
    let rows = rows?;
    let mut params = vec![e.vary.name.as_str()];
    params.extend(e.series.as_ref().map(|s| s.name.as_str()));
    print!("{}", table::render(&rows, &params));
    let key = e.vary.name.replace('-', "_");
    let (values, mut spec) = if e.base.timeline.is_some() {
        // Over time: one line per run.
        let points = tessera_harness::result::timeline_points(&rows, &key);
        let mut spec = tessera_plot::PlotSpec::new("time_ms", e.plot.iter().copied());
        spec.series = "line".into();
        (points, spec)
    } else {
        let values = rows
            .iter()
            .map(|r| serde_json::to_value(r).expect("rows serialize"))
            .collect();
        (
            values,
            tessera_plot::PlotSpec::new(key, e.plot.iter().copied()),
        )
    };
    if e.series.is_some() {
        spec.series = "line".into();
    }
    tessera_plot::plot(&values, &spec, &png).map_err(Failure::Run)?;
    println!("wrote {} and {}", jsonl.display(), png.display());
    finish(&rows)
}

/// `tessera` with no arguments: a short comparison on the embedded cluster.
pub fn default_comparison() -> Result<()> {
    let a = RunArgs {
        runtime: "local".into(),
        config: None,
        protocol: registry::names().iter().map(|s| s.to_string()).collect(),
        workload: "ycsb".into(),
        shards: None,
        clients: None,
        duration: Some(2_000_000_000),
        warmup: None,
        cooldown: None,
        seed: 1,
        zipf: Some(0.9),
        keys: None,
        ops: None,
        read_ratio: None,
        multi_partition: None,
        warehouses: None,
        districts: None,
        customers: None,
        items: None,
        mix: None,
        partition: None,
        remote_neworder: None,
        remote_payment: None,
        immediate_stock: false,
        home_warehouse: None,
        by_name: None,
        check: false,
        history: None,
        out: None,
        workers: None,
        faults: false,
        loss: None,
        duplicate: None,
        reorder: None,
        max_attempts: None,
        backoff_us: None,
        max_unreleased: None,
        commits: None,
        timeline: None,
        subscribers: None,
        ro_keys: None,
        objects: None,
        edges: None,
        write_ratio: None,
        switches: None,
        replica_faults: false,
        replicas: None,
        sites: None,
        client_sites: None,
        primary_sites: None,
        colocate: false,
        drain: None,
        switch_cache: None,
        switch_max_ops: None,
        switch_value_width: None,
        switch_stages: None,
        recirculation_ns: None,
        abort_cpu_us: None,
        paxos_batch: None,
        graph_cpu_ns: None,
        wound: None,
        commit: None,
        epoch_ms: None,
        prepare_deadline_ms: None,
        isolation: None,
        coco_replication: None,
        epoch_barrier: None,
        oocc_lease: None,
        oocc_write_unlock: None,
        oocc_delayed_lock: None,
        oocc_late_upgrade: None,
        lease_us: None,
        oocc_lease_adapt: None,
        oocc_lease_min_us: None,
        oocc_lease_max_us: None,
        oocc_lease_period_us: None,
        oocc_drift_stop: None,
        oocc_offset_ns: None,
        oocc_sync_us: None,
        region_slots_per_record: None,
        ro_rounds: None,
        forget_epochs: None,
        per_column: None,
        fast_path_by_rtt: None,
        prefetch_outputs: None,
        server_cpu_ns: None,
        client_cpu_ns: None,
        byte_cpu_ps: None,
        local_cpu_ns: None,
        net: None,
        drift_ppm: None,
        fsync_us: None,
        checkpoint_kb: None,
        drift_node: None,
        repeat: 1,
    };
    println!("tessera: YCSB (2 partitions, zipf 0.9) on the embedded cluster, 2 s per protocol");
    println!("(see `tessera --help`; `tessera experiment compare` sweeps skew and plots)\n");
    bench(&a)
}

pub fn protocols() -> Result<()> {
    for e in registry::registry().iter().filter(|e| !e.hidden) {
        println!("{:<12} {}", e.name, e.summary);
    }
    Ok(())
}

/// `tessera check-workload`: print the verdict; true when no piece needs
/// merging.
pub fn check_workload(a: &RunArgs, dot: Option<&Path>) -> Result<bool> {
    let spec = spec_of(a)?;
    let v = tessera_harness::check_workload(&spec.workload).map_err(Failure::Run)?;
    let g = &v.graph;
    println!(
        "SC-graph of {}: {} transactions x 2 instances, {} pieces, {} edges",
        spec.workload.name(),
        g.txns.len(),
        g.vertices.len(),
        g.edges.len()
    );
    if !v.excluded.is_empty() {
        println!("read-only, left out (§4.1): {}", v.excluded.join(", "));
    }
    for (t, imm) in g.txns.iter().zip(&g.immediate) {
        let kinds: String = imm.iter().map(|&i| if i { 'I' } else { 'D' }).collect();
        println!("  {}: pieces {kinds}", t.name);
    }
    if let Some(path) = dot {
        std::fs::write(path, g.to_dot())
            .map_err(|e| Failure::Run(anyhow::anyhow!("--dot {}: {e}", path.display())))?;
        println!("SC-graph written to {}", path.display());
    }
    if v.merges.is_empty() {
        println!("ok: every SC-cycle has a D-D edge; no piece needs merging");
        return Ok(true);
    }
    println!("merge needed: SC-cycles whose C-edges are all I-I (§3.1, §4.2):");
    for m in &v.merges {
        let pieces: Vec<String> = m.pieces.iter().map(|p| format!("p{p}")).collect();
        println!("  {}: merge {}", m.txn, pieces.join(" + "));
    }
    Ok(false)
}
