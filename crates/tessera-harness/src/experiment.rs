//! Named experiments: checked-in sweep definitions that `tessera experiment
//! NAME` runs, writing `NAME.jsonl` and `NAME.png` into a results folder.
//! The protocol issues add their papers' experiments here.

use crate::spec::{BenchSpec, RuntimeKind, WorkloadSpec};
use crate::sweep::Vary;
use tessera_core::ids::MS;
use tessera_workloads::tpcc::Mix;
use tessera_workloads::{
    CounterConfig, MicroConfig, TaoBenchConfig, TatpConfig, TpccConfig, YcsbConfig,
};

/// A named sweep.
pub struct Experiment {
    pub name: &'static str,
    pub description: &'static str,
    pub protocols: &'static [&'static str],
    pub base: BenchSpec,
    pub vary: Vary,
    /// A second parameter whose values make separate lines (one per
    /// protocol and value), e.g. the isolation level of COCO Fig. 15.
    pub series: Option<Vary>,
    /// Metrics to plot against the varied parameter.
    pub plot: &'static [&'static str],
}

/// COCO's testbed as §7.1 describes it, for the Figs. 5-9 experiments
/// (`coco-commit`, `coco-commit-local-cpu`, `coco-tpcc`, `coco-aborts`) and
/// those of §7.4, §7.6 and §7.7 that run on the same cluster
/// (`coco-durability`, whose sweep sets the log's latency, `coco-snapshot`,
/// `coco-epoch`, `coco-epoch-barrier`), every protocol and commit mode
/// alike: **one worker per partition** ("the
/// number of partitions to 96, which equals to the total number of worker
/// threads in the cluster", §7.1.1 — a client per YCSB shard; the TPC-C
/// deployments already run a client per warehouse) and **logging off** ("we
/// disable logging and checkpointing for 2PC and epoch-based commit by
/// default", §7.1: a durable write costs nothing). Why these and not a
/// cheaper co-located access: docs/results/coco.md, *COCO Fig. 5: the
/// calibration, from the paper's own numbers*.
///
/// Results are released at their epoch's end (§3.1) and COCO's workers do
/// not stop for them, so our bound on a client's unreleased results must
/// not bind: one worker per partition finishes ~120-128 transactions per
/// 10 ms epoch, and the default bound (128) capped every epoch-mode row
/// at it (S2PL's at exactly 3 x 128 x 100 txn/s on YCSB; measured in
/// docs/results/coco.md, *COCO on the testbed: the release bound caps
/// epoch mode*).
fn coco_testbed(spec: &mut BenchSpec) {
    if let WorkloadSpec::Ycsb(c) = &spec.workload {
        spec.clients = c.partitions;
    }
    spec.sim.fsync = 0;
    spec.max_unreleased = spec.max_unreleased.max(8_192);
}

/// Every experiment, in the order `--list` shows them.
pub fn experiments() -> Vec<Experiment> {
    let mut compare = BenchSpec::new(
        RuntimeKind::Local,
        "",
        WorkloadSpec::Ycsb(YcsbConfig {
            partitions: 2,
            ..YcsbConfig::default()
        }),
    );
    compare.duration = 2_000 * MS;
    compare.warmup = 300 * MS;
    compare.cooldown = 100 * MS;

    let mut contention = BenchSpec::new(
        RuntimeKind::Sim,
        "",
        WorkloadSpec::Micro(MicroConfig::default()),
    );
    contention.clients = 96;
    contention.duration = 1_500 * MS;
    contention.warmup = 200 * MS;
    contention.cooldown = 100 * MS;
    contention.check = true;

    // NOCC §4: one store, clients behind one switch, 1 s of virtual time.
    let counter = |keys, write_ratio, clients| {
        let mut s = BenchSpec::new(
            RuntimeKind::Sim,
            "",
            WorkloadSpec::Counter(CounterConfig {
                keys,
                write_ratio,
                zipf_theta: 0.0,
            }),
        );
        s.clients = clients;
        s.duration = 1_000 * MS;
        s.warmup = 100 * MS;
        s.cooldown = 50 * MS;
        s.check = true;
        s
    };

    // NOCC §4 "TPC-C": Payment only on 1 warehouse, 2 districts, 10
    // customers, 10 items; contention grows with the clients.
    let mut tpcc_tiny =
        BenchSpec::new(RuntimeKind::Sim, "", WorkloadSpec::Tpcc(TpccConfig::tiny()));
    tpcc_tiny.duration = 1_000 * MS;
    tpcc_tiny.warmup = 100 * MS;
    tpcc_tiny.cooldown = 50 * MS;
    tpcc_tiny.check = true;
    // The default register budget (16 stages × 4 B) holds no TPC-C row, so
    // the switch would verify nothing; 64 stages (256 B) hold the contended
    // WAREHOUSE and DISTRICT rows but not CUSTOMER's (C_DATA is 300–500 B).
    tpcc_tiny.knobs.switch_stages = Some(64);

    // Janus §6.2's contention-free micro-benchmark: 3 shards of 3
    // replicas, zipf 0.5, one data center.
    let mut replicated = BenchSpec::new(
        RuntimeKind::Sim,
        "",
        WorkloadSpec::Micro(MicroConfig {
            shards: 3,
            keys_per_shard: 100_000,
            zipf_theta: 0.5,
        }),
    );
    replicated.replicas = Some(3);
    replicated.duration = 1_000 * MS;
    replicated.warmup = 200 * MS;
    replicated.cooldown = 100 * MS;

    // Janus §6.2 / Fig. 8: the same deployment with 1M keys per shard and
    // 900 clients, contention swept; and over Table 2's three regions with
    // 10,800 clients (the paper's client count there).
    let mut janus_micro = replicated.clone();
    janus_micro.workload = WorkloadSpec::Micro(MicroConfig {
        shards: 3,
        keys_per_shard: 1_000_000,
        zipf_theta: 0.5,
    });
    janus_micro.clients = 900;
    // Over three sites commits come in bursts ~0.5–0.8 s apart (Janus) or
    // drift for seconds (TAPIR's rate rises 745 → 1,631 txn/s from the
    // first 1.5 s of the window to the last at zipf 0.9): a 1.5 s window
    // read Janus's zipf 1.0 rate anywhere in 10,399–23,573 txn/s by its
    // phase (issue 6, session 28). A 4.5 s window spans several bursts,
    // at about twice the CPU (docs/results/janus.md, session 29).
    let mut janus_micro_wan = janus_micro.clone();
    janus_micro_wan.sites = Some(crate::sites::Sites::three_regions());
    janus_micro_wan.clients = 10_800;
    janus_micro_wan.duration = 6_000 * MS;
    janus_micro_wan.warmup = 1_000 * MS;
    janus_micro_wan.cooldown = 500 * MS;

    // Rococo §5.5: 8 servers of 10 districts each, all of one warehouse
    // (the district/item partitioning), the full TPC-C mix in closed loops.
    // 300 customers a district instead of 3,000: contention is on the
    // warehouse and district rows, and the load stays under a second.
    let mut rococo_contention = BenchSpec::new(
        RuntimeKind::Sim,
        "",
        WorkloadSpec::Tpcc(TpccConfig {
            customers: 300,
            ..TpccConfig::rococo(8, 80)
        }),
    );
    rococo_contention.duration = 1_000 * MS;
    rococo_contention.warmup = 200 * MS;
    rococo_contention.cooldown = 100 * MS;
    // "Logging is turned off for all experiments" (§5.2): the log is still
    // written, but a flush completes at once. The §5.7 logging comparison
    // (Table 2) is `tessera bench` with the default flush latency.
    rococo_contention.sim.fsync = 0;

    // Janus §6.3: 6 shards of 3 replicas, one warehouse of 10 districts
    // each (warehouse partitioning), NewOrder and Payment (the read-write
    // transactions whose keys Janus knows before execution, §4; Payment
    // selects customers by id, as a by-name one's keys depend on a read),
    // the specification's remote shares. 300 customers a district and 10k
    // items instead of 3,000 and 100k keep the population small; the
    // contention is on the district's next order id either way.
    let mut janus_tpcc = BenchSpec::new(
        RuntimeKind::Sim,
        "",
        WorkloadSpec::Tpcc(TpccConfig {
            customers: 300,
            items: 10_000,
            mix: Mix::NEWORDER_PAYMENT,
            by_name: 0,
            ..TpccConfig::spec(6)
        }),
    );
    janus_tpcc.replicas = Some(3);
    // 300 ms of virtual time. The sweep reaches the paper's 100 clients
    // per partition since the dependency-graph walks stopped being
    // super-linear (2026-11-28: the six points of four protocols in 139 s
    // of CPU, 3 GB).
    janus_tpcc.duration = 300 * MS;
    janus_tpcc.warmup = 50 * MS;
    janus_tpcc.cooldown = 50 * MS;
    // Janus §6.3 over Table 2's three regions: 3 s of virtual time so that
    // transactions of several wide-area round trips finish many times.
    let mut janus_tpcc_wan = janus_tpcc.clone();
    janus_tpcc_wan.sites = Some(crate::sites::Sites::three_regions());
    janus_tpcc_wan.duration = 3_000 * MS;
    janus_tpcc_wan.warmup = 1_000 * MS;
    janus_tpcc_wan.cooldown = 500 * MS;

    // COCO's YCSB: 3 shards with 3 replicas each, 20% multi-partition.
    let mut coco_ycsb = BenchSpec::new(
        RuntimeKind::Sim,
        "",
        WorkloadSpec::Ycsb(YcsbConfig {
            partitions: 3,
            multi_partition: 0.2,
            ..YcsbConfig::default()
        }),
    );
    coco_ycsb.clients = 48;

    // COCO §7.2, Figs. 5-9 (YCSB part): 8 reads + 2 read-modify-writes per
    // transaction (YCSB's defaults), 20% multi-partition, 3 shards with 3
    // replicas, every commit mode (S2PL's epoch line has no counterpart in
    // the paper, which runs S2PL with 2PC only); docs/results/coco.md's 48 clients,
    // 1 s of virtual time per point. Clients are co-located with their home
    // primaries, as the paper's workers run on the node of their partition
    // (§7.1): what the commit modes differ in is then the round trips to
    // backups and other partitions, not one to the home partition that
    // every mode pays alike.
    let mut coco_commit = coco_ycsb;
    coco_commit.duration = 1_000 * MS;
    coco_commit.warmup = 100 * MS;
    coco_commit.cooldown = 50 * MS;
    coco_commit.colocate = true;
    // Figs. 5-8 on COCO's testbed (one worker per partition, no logging).
    let mut coco_fig5 = coco_commit.clone();
    coco_testbed(&mut coco_fig5);

    // COCO §7.6, Fig. 15: the testbed's YCSB (§7.6 names no other
    // deployment), epoch commit, each access zipfian; snapshot isolation
    // vs serializability.
    let coco_snapshot = coco_fig5.clone();

    // COCO §7.2, Figs. 5-9 (TPC-C part): NewOrder and Payment (the
    // paper: 50/50; ours `Mix::NEWORDER_PAYMENT`, the standard mix's
    // weights 45:43, i.e. 51/49, as every TPC-C run here has used), 10%
    // of NewOrders and 15% of Payments touching another warehouse, a
    // warehouse per partition and a client per warehouse (§7.1.1: as many
    // partitions as workers), 3 replicas. 300 customers a district and 10k
    // items keep 24 warehouses x 3 replicas at ~1 GB.
    //
    // Payment selects its customer by id (`by_name: 0`), as the COCO
    // authors' TPC-C does by default: their `bench_tpcc` takes
    // `--payment_look_up` (off by default; "look up C_ID on secondary
    // index"), without which every Payment draws a C_ID; an earlier version
    // looked 60% up by name, but in a node-local copy of the index with no
    // message and no validation (`search_local_index`; §6.1: a secondary
    // index lookup is two local hash probes). Neither waits a round trip,
    // which our lookup piece at the customer's shard does (Rococo's piece
    // structure), so the COCO experiments run without it; the other
    // papers' TPC-C keeps clause 2.5.1.2's 60%.
    let mut coco_tpcc = BenchSpec::new(
        RuntimeKind::Sim,
        "",
        WorkloadSpec::Tpcc(TpccConfig {
            customers: 300,
            items: 10_000,
            mix: Mix::NEWORDER_PAYMENT,
            remote_neworder: tessera_workloads::tpcc::RemoteNewOrder::PerTxn(10.0),
            remote_payment: 15.0,
            by_name: 0,
            ..TpccConfig::spec(24)
        }),
    );
    coco_tpcc.clients = 24;
    coco_tpcc.colocate = true;
    coco_tpcc.duration = 1_000 * MS;
    coco_tpcc.warmup = 100 * MS;
    coco_tpcc.cooldown = 50 * MS;

    // COCO §7.2, Fig. 9: TPC-C abort rates with the paper's placement of
    // workers. The authors' workers draw each transaction's home warehouse
    // among their node's (§7.1: 12 workers and 12 warehouses a node), so
    // workers of a node collide on warehouse and district rows; coco-tpcc's
    // one client per warehouse never does. Here a node (shard) holds 3 of
    // the 24 warehouses and runs 3 workers: `fixed` gives each its own
    // warehouse (the control), `per-node` draws per transaction. 8 shards,
    // not the paper's 96 warehouses on 8 nodes: a simulated server is one
    // event loop (the paper's node has 12 workers), so 12 clients per
    // primary would measure its queue, not the protocols.
    let mut coco_aborts = coco_tpcc.clone();
    if let WorkloadSpec::Tpcc(c) = &mut coco_aborts.workload {
        c.shards = 8;
    }

    // COCO §7.7, Fig. 16: PT-OCC on TPC-C on the testbed (the coco-tpcc
    // mix, a co-located worker per warehouse, logging off), epoch size
    // 1 → 100 ms. Workers go on executing while their
    // results wait for the epoch, as COCO's do: the bound on unreleased
    // results must not bind at 100 ms epochs (~14k txn/s per worker and
    // ~0.1 s to release; 1,024 capped every worker at 1,024 per epoch).
    // Six warehouses, not 24, chosen when the simulated disk kept every
    // log record (24 warehouses ran out of 23 GB in 2.6 s of virtual
    // time); it keeps them now only for nodes that crash, and six stay so
    // that the twelve 1.3 s points (1 s of measurement, ten 100 ms epochs)
    // run in minutes, and the rows stay comparable with those before.
    coco_testbed(&mut coco_tpcc);
    coco_testbed(&mut coco_aborts);
    let mut coco_epoch = coco_tpcc.clone();
    if let WorkloadSpec::Tpcc(c) = &mut coco_epoch.workload {
        c.warehouses = 6;
    }
    coco_epoch.clients = 6;
    coco_epoch.max_unreleased = 8_192;
    coco_epoch.duration = 1_300 * MS;
    coco_epoch.warmup = 150 * MS;
    coco_epoch.cooldown = 150 * MS;

    // COCO §7.7, Fig. 16 with the epoch boundary as the paper's: a global
    // barrier (§3.1, §7.7) — client hosts start nothing from an epoch's
    // prepare until its commit.
    let mut coco_epoch_barrier = coco_epoch.clone();
    coco_epoch_barrier.knobs.epoch_barrier = Some(true);

    // COCO §7.4, Fig. 11 (YCSB part): the testbed (§7.4 names no other
    // deployment), durable writes of 1 µs → 2 ms on every node (the
    // simulator's disk, group commit; the sweep replaces the testbed's 0).
    let coco_durability = coco_fig5.clone();

    // COCO §7.5, Fig. 12 (YCSB part), as the paper deploys it: three
    // nodes, one per region (North Virginia, Ohio, North California), every
    // partition replicated on all three with its primary "randomly chosen
    // from 3 nodes" — here shard s's primary in region s, its backups in the
    // other two (`--primary-sites spread`) — and each node running §7.1's
    // 12 worker threads beside the primaries it holds: 12 co-located
    // clients per shard, 36 in all (a shard per node, not 12: a simulated
    // server is one event loop, and 12 workers a node at these wide-area
    // latencies keep it < 5% busy). Logging off and the release bound
    // lifted (§7.1's testbed), epochs of one second. 2PC(Sync) pays the
    // wide-area round trips per transaction, the epoch once per second.
    // 6 s of virtual time so that several epochs commit in the window.
    let mut coco_wan = coco_fig5.clone();
    coco_wan.sites = Some(crate::sites::Sites::coco_wan());
    coco_wan.primary_sites = crate::sites::PrimarySites::Spread;
    coco_wan.clients = 36;
    coco_wan.knobs.epoch_ms = Some(1_000);
    coco_wan.duration = 6_000 * MS;
    coco_wan.warmup = 1_500 * MS;
    coco_wan.cooldown = 1_000 * MS;

    // OOCC §VIII.B: YCSB with 8-byte records on two memory nodes, the RDMA
    // network preset, 20 ms of virtual time (tens of thousands of
    // transactions at µs latencies).
    let mut rdma_ycsb = BenchSpec::new(
        RuntimeKind::Sim,
        "",
        WorkloadSpec::Ycsb(YcsbConfig {
            partitions: 2,
            keys_per_partition: 100_000,
            ops_per_txn: 4,
            read_ratio: 1.0,
            fields: 1,
            field_size: 8,
            zipf_theta: 0.0,
            multi_partition: 0.0,
        }),
    );
    rdma_ycsb.sim = tessera_sim::SimConfig::rdma();
    rdma_ycsb.clients = 32;
    rdma_ycsb.duration = 20 * MS;
    rdma_ycsb.warmup = 2 * MS;
    rdma_ycsb.cooldown = MS;
    // OOCC §VIII.B, Fig. 10c/d: TATP (100k subscribers, NURand, two-key
    // reads) and the TAOBench-like graph (1M objects, 500k edges) on the
    // same two memory nodes; the paper varies the coordinators and reports
    // the best, so the sweep is over clients.
    let mut rdma_tatp = rdma_ycsb.clone();
    rdma_tatp.workload = WorkloadSpec::Tatp(TatpConfig {
        partitions: 2,
        ..TatpConfig::default()
    });
    let mut rdma_taobench = rdma_ycsb.clone();
    rdma_taobench.workload = WorkloadSpec::TaoBench(TaoBenchConfig {
        partitions: 2,
        ..TaoBenchConfig::default()
    });
    // OOCC §VIII.E, Fig. 12: TPC-C, 8 warehouses of 10 districts, Table
    // IV's mix (45/40/4/4/4), the specification's remote shares, a memory
    // node per warehouse. 300 customers a district and 10k items (the
    // specification: 3,000 and 100k) keep the regions at ~1.1M slots; the
    // paper's 32 coordinators are the middle of the client sweep.
    let mut rdma_tpcc = rdma_ycsb.clone();
    rdma_tpcc.workload = WorkloadSpec::Tpcc(TpccConfig {
        customers: 300,
        items: 10_000,
        mix: Mix {
            neworder: 45,
            payment: 40,
            orderstatus: 4,
            delivery: 4,
            stocklevel: 4,
        },
        ..TpccConfig::spec(8)
    });
    // How clients retry: at once (the OOCC authors' framework: an abort's
    // `RetryTask` only counts it, for OCC and OOCC alike; a TPC-C client
    // gives up after 20 tries) or the harness's randomized exponential
    // backoff from 20 µs.
    let retry_policies = Vary {
        name: "backoff-us".into(),
        values: vec![0.0, 20.0],
    };
    // The same YCSB in the steady state the paper measures: the address
    // cache (§VIII.A) starts empty, and over 20 ms a uniform choice from
    // 200k keys misses it on about half of its reads, so every protocol
    // pays a bucket READ round first (~2.2 per read-only transaction). A
    // 250 ms warm-up fills it (measured: ~0.1 bucket READs per
    // transaction over the whole run, none at its end).
    let mut rdma_ycsb_warm = rdma_ycsb.clone();
    rdma_ycsb_warm.duration = 300 * MS;
    rdma_ycsb_warm.warmup = 250 * MS;
    rdma_ycsb_warm.cooldown = 5 * MS;
    // Fig. 10a's points: read-only, ~90% read-only, ~80% read-only.
    let read_heavy = Vary {
        name: "read-ratio".into(),
        values: vec![1.0, 0.975, 0.95],
    };
    let mut lease = rdma_ycsb.clone();
    if let WorkloadSpec::Ycsb(c) = &mut lease.workload {
        c.read_ratio = 0.975;
        c.zipf_theta = 0.9;
    }

    // OOCC §VIII.D, Fig. 11: the same YCSB at zipf 0.99, the paper's
    // share of transactions that write (0 → 20%) given by the read ratio
    // per operation: with 4 operations a transaction is read-only with
    // probability r^4, so r = (1 - w)^(1/4). Then the read-intensive mix
    // (~10% writing) over θ.
    let mut ablation = rdma_ycsb.clone();
    if let WorkloadSpec::Ycsb(c) = &mut ablation.workload {
        c.zipf_theta = 0.99;
    }
    let mut ablation_skew = rdma_ycsb.clone();
    if let WorkloadSpec::Ycsb(c) = &mut ablation_skew.workload {
        c.read_ratio = 0.974;
    }
    let writing = |w: f64| (1.0f64 - w).powf(0.25);
    let ablation_steps = Vary {
        name: "ablation".into(),
        values: vec![0.0, 1.0, 2.0, 3.0],
    };
    let write_shares = Vary {
        name: "read-ratio".into(),
        values: [0.0, 0.05, 0.1, 0.15, 0.2]
            .iter()
            .map(|&w| (writing(w) * 1000.0).round() / 1000.0)
            .collect(),
    };
    // Fig. 11a in the steady state (the warm-up of `rdma_ycsb_warm`): at
    // zipf 0.99 the hot keys are cached within 20 ms, the tail is not.
    let mut ablation_warm = rdma_ycsb_warm.clone();
    ablation_warm.workload = ablation.workload.clone();
    // §VIII.G, Fig. 14a: read-intensive YCSB (~90% read-only), a 10 µs
    // lease, the drift offset widened from the bound's 10 ns (the paper's
    // 0.5–1.5 µs, then on to the whole lease, where every read-only
    // transaction validates).
    let mut offset = rdma_ycsb.clone();
    offset.knobs.lease_us = Some(10);
    if let WorkloadSpec::Ycsb(c) = &mut offset.workload {
        c.read_ratio = 0.975;
    }
    // OOCC Fig. 13d: the Lease Manager grows a 4 µs lease while the run
    // goes on (~80% read-only YCSB, the Lease Manager table's), every 5 ms
    // so that a few windows pass at 4 µs first; throughput per 1 ms.
    let mut lease_adapt = rdma_ycsb.clone();
    if let WorkloadSpec::Ycsb(c) = &mut lease_adapt.workload {
        c.read_ratio = 0.95;
    }
    lease_adapt.duration = 50 * MS;
    lease_adapt.knobs.lease_us = Some(4);
    lease_adapt.knobs.oocc_lease_period_us = Some(5_000);
    lease_adapt.timeline = Some(MS);

    vec![
        Experiment {
            name: "replicated-micro",
            description: "Janus §6.2 on sim: micro-benchmark, 3 shards x 3 replicas, zipf 0.5, \
                          30 → 900 clients; the layered baselines vs TAPIR and Janus",
            protocols: &["2pl-paxos", "occ-paxos", "tapir", "janus"],
            base: replicated,
            vary: Vary {
                name: "clients".into(),
                values: vec![30.0, 90.0, 300.0, 900.0],
            },
            series: None,
            plot: &["throughput", "commit_rate", "p90"],
        },
        Experiment {
            name: "rococo-contention",
            description: "Rococo §5.5 Fig. 14 on sim: TPC-C full mix, 1 warehouse of 80 \
                          districts over 8 servers (district/item partitioning), 1 → 100 clients \
                          per server; Rococo vs 2PL (wound-wait) vs OCC, new-orders/s",
            protocols: &["rococo", "2pl-ww", "occ"],
            base: rococo_contention,
            vary: Vary {
                name: "clients".into(),
                values: vec![8.0, 40.0, 80.0, 160.0, 320.0, 800.0],
            },
            series: None,
            plot: &["neworders", "commit_rate", "p50", "p90", "p99"],
        },
        Experiment {
            name: "janus-micro",
            description: "Janus §6.2 Fig. 8 (one site) on sim: micro-benchmark, 3 shards x 3 \
                          replicas, 1M keys per shard, 900 clients, zipf 0.5 → 1.0; Janus vs \
                          TAPIR vs 2PL and OCC over Multi-Paxos",
            protocols: &["janus", "tapir", "2pl-paxos", "occ-paxos"],
            base: janus_micro,
            vary: Vary {
                name: "zipf".into(),
                values: vec![0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
            },
            series: None,
            plot: &["throughput", "commit_rate", "p90"],
        },
        Experiment {
            name: "janus-micro-wan",
            description: "Janus §6.2 Fig. 8 (three sites) on sim: as janus-micro over Table 2's \
                          three regions with 10,800 clients",
            protocols: &["janus", "tapir", "2pl-paxos", "occ-paxos"],
            base: janus_micro_wan,
            vary: Vary {
                name: "zipf".into(),
                values: vec![0.5, 0.7, 0.9, 1.0],
            },
            series: None,
            plot: &["throughput", "commit_rate", "p90"],
        },
        Experiment {
            name: "janus-tpcc",
            description: "Janus §6.3 Fig. 5 on sim: TPC-C NewOrder + Payment, 6 shards x 3 \
                          replicas, one warehouse per shard, 1 → 100 clients per partition \
                          (x axis: all clients); Janus vs TAPIR vs 2PL and OCC over Multi-Paxos",
            protocols: &["janus", "tapir", "2pl-paxos", "occ-paxos"],
            base: janus_tpcc.clone(),
            vary: Vary {
                name: "clients".into(),
                values: vec![6.0, 30.0, 60.0, 120.0, 300.0, 600.0],
            },
            series: None,
            plot: &["neworders", "commit_rate", "p90"],
        },
        Experiment {
            name: "janus-tpcc-large",
            description: "Janus §6.3 Fig. 5 past 100 clients per partition, where the paper's \
                          Janus stabilizes and its baselines collapse: the janus-tpcc spec at \
                          250 and 500 clients per partition (1,500 and 3,000 in all). Separate \
                          from janus-tpcc because it costs more than that whole sweep: Janus \
                          at 1,500 clients alone takes 136 CPU-s and 9 GB, at 3,000 126 \
                          CPU-s and 7 GB (2026-11-29, after the Inquire fix, per row; per \
                          column it passed 4 GB at 1,500 clients)",
            protocols: &["janus", "tapir", "2pl-paxos", "occ-paxos"],
            base: janus_tpcc,
            vary: Vary {
                name: "clients".into(),
                values: vec![1_500.0, 3_000.0],
            },
            series: None,
            plot: &["neworders", "commit_rate", "p90"],
        },
        Experiment {
            name: "janus-tpcc-wan",
            description: "Janus §6.3 Fig. 5 over Table 2's three regions on sim: the janus-tpcc \
                          deployment, one replica of each shard per region, 1 → 100 clients \
                          per partition",
            protocols: &["janus", "tapir", "2pl-paxos", "occ-paxos"],
            base: janus_tpcc_wan.clone(),
            vary: Vary {
                name: "clients".into(),
                values: vec![6.0, 30.0, 60.0, 300.0, 600.0],
            },
            series: None,
            plot: &["neworders", "commit_rate", "p90"],
        },
        Experiment {
            name: "janus-tpcc-wan-large",
            description: "Janus §6.3 Fig. 6 past 100 clients per partition, towards the paper's \
                          10,000 clients: the janus-tpcc-wan spec at 250 and 500 clients per \
                          partition (1,500 and 3,000 in all). Separate from janus-tpcc-wan for \
                          its cost: 175 CPU-s and 1.8 GB peak (2026-11-29, per column; ~16 \
                          CPU-min and 4.2 GB per row before the Inquire fix); larger counts \
                          did not fit a session",
            protocols: &["janus", "tapir", "2pl-paxos", "occ-paxos"],
            base: janus_tpcc_wan,
            vary: Vary {
                name: "clients".into(),
                values: vec![1_500.0, 3_000.0],
            },
            series: None,
            plot: &["neworders", "commit_rate", "p90"],
        },
        Experiment {
            name: "coco-epoch",
            description: "COCO Fig. 16 on sim: PT-OCC, epoch size 1 → 100 ms (--commit epoch, \
                          3 replicas), TPC-C NewOrder + Payment as coco-tpcc on 6 warehouses \
                          (one per shard), 6 co-located workers that do not wait for results \
                          (at most 8,192 unreleased each), logging off (COCO's testbed, \
                          §7.1); p99 latency ≈ the epoch",
            protocols: &["pt-occ"],
            base: coco_epoch,
            vary: Vary {
                name: "epoch-ms".into(),
                values: vec![1.0, 5.0, 10.0, 20.0, 50.0, 100.0],
            },
            series: None,
            plot: &["throughput", "commit_rate", "p99"],
        },
        Experiment {
            name: "coco-epoch-barrier",
            description: "coco-epoch with COCO's barrier at each epoch boundary (§3.1, §7.7: \
                          client hosts start no transaction from an epoch's prepare to its \
                          commit; --epoch-barrier on); epoch size 1 → 100 ms",
            protocols: &["pt-occ"],
            base: coco_epoch_barrier,
            vary: Vary {
                name: "epoch-ms".into(),
                values: vec![1.0, 5.0, 10.0, 20.0, 50.0, 100.0],
            },
            series: None,
            plot: &["throughput", "commit_rate", "p99"],
        },
        Experiment {
            name: "coco-commit",
            description: "COCO Figs. 5-9 (YCSB) on sim: 8 reads + 2 RMW, 20% multi-partition, \
                          3 shards x 3 replicas, a client per shard co-located with its home \
                          primary, logging off (COCO's testbed, §7.1); commit 0 = 2pc (no \
                          replication), \
                          1 = 2pc-sync, 2 = epoch (async, clients do not wait for results); \
                          throughput, commit rate, messages per txn",
            protocols: &["s2pl", "pt-occ", "lt-occ"],
            base: coco_fig5.clone(),
            vary: Vary {
                name: "commit".into(),
                values: vec![0.0, 1.0, 2.0],
            },
            series: None,
            plot: &["throughput", "commit_rate", "msgs"],
        },
        Experiment {
            name: "coco-commit-local-cpu",
            description: "coco-commit with a co-located worker's access to its home primary \
                          charged 5000 ns (a network message's cost, as coco-commit) or 1000 \
                          ns (a function call, COCO §4.1: local-cpu-ns); commit 0 = 2pc, \
                          1 = 2pc-sync, 2 = epoch, one line per protocol and local-cpu-ns",
            protocols: &["s2pl", "pt-occ", "lt-occ"],
            base: coco_fig5,
            vary: Vary {
                name: "commit".into(),
                values: vec![0.0, 1.0, 2.0],
            },
            series: Some(Vary {
                name: "local-cpu-ns".into(),
                values: vec![5000.0, 1000.0],
            }),
            plot: &["throughput", "commit_rate", "server_cpu_us_per_txn"],
        },
        Experiment {
            name: "coco-snapshot",
            description: "COCO Fig. 15 on sim: YCSB 8 reads + 2 RMW, 20% multi-partition, \
                          3 shards x 3 replicas, epoch commit, COCO's testbed (a client per \
                          shard co-located with its home primary, logging off), skew 0 / 0.8 / \
                          0.999; isolation 0 = serializable, 1 = snapshot (parallel locking \
                          and validation, §5.3), one line per protocol and isolation",
            protocols: &["pt-occ", "lt-occ"],
            base: coco_snapshot,
            vary: Vary {
                name: "zipf".into(),
                values: vec![0.0, 0.8, 0.999],
            },
            series: Some(Vary {
                name: "isolation".into(),
                values: vec![0.0, 1.0],
            }),
            plot: &["throughput", "commit_rate", "msgs"],
        },
        Experiment {
            name: "coco-tpcc",
            description: "COCO Figs. 5-9 (TPC-C) on sim: NewOrder + Payment 45:43, 10% / 15% \
                          remote, customers by id (the authors' default), 24 warehouses (one per shard, 3 replicas), 24 clients \
                          co-located with their home primaries, logging off (§7.1); \
                          commit 0 = 2pc (no replication), 1 = 2pc-sync, 2 = epoch",
            protocols: &["s2pl", "pt-occ", "lt-occ"],
            base: coco_tpcc,
            vary: Vary {
                name: "commit".into(),
                values: vec![0.0, 1.0, 2.0],
            },
            series: None,
            plot: &["throughput", "commit_rate", "msgs"],
        },
        Experiment {
            name: "coco-aborts",
            description: "COCO Fig. 9 on sim: the coco-tpcc mix with 24 warehouses on 8 shards \
                          (3 replicas), 24 co-located clients, 3 per shard, logging off (§7.1); home-warehouse \
                          fixed (one warehouse per client) or per-node (drawn per transaction \
                          among the shard's 3, as COCO's workers, §7.1); commit 0 = 2pc, \
                          1 = 2pc-sync, 2 = epoch; abort rate = 1 - commit rate",
            protocols: &["pt-occ", "lt-occ"],
            base: coco_aborts,
            vary: Vary {
                name: "commit".into(),
                values: vec![0.0, 1.0, 2.0],
            },
            series: Some(Vary {
                name: "home-warehouse".into(),
                values: vec![0.0, 1.0],
            }),
            plot: &["commit_rate", "throughput", "msgs"],
        },
        Experiment {
            name: "coco-durability",
            description: "COCO Fig. 11 (YCSB) on sim: durable-write latency 1 µs → 2 ms on \
                          every node; coco-commit's YCSB on COCO's testbed (a client per \
                          shard co-located with its home primary); one line per \
                          protocol and commit mode (1 = 2pc-sync, 2 = epoch); the paper's \
                          lines are S2PL 2PC(Sync) and PT-OCC epoch",
            protocols: &["s2pl", "pt-occ", "lt-occ"],
            base: coco_durability,
            vary: Vary {
                name: "fsync-us".into(),
                values: vec![1.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0],
            },
            series: Some(Vary {
                name: "commit".into(),
                values: vec![1.0, 2.0],
            }),
            plot: &["throughput", "p50", "p99"],
        },
        Experiment {
            name: "coco-wan",
            description: "COCO Fig. 12 (YCSB) on sim: three regions (coco-wan: 11.3 / 60.9 / \
                          50.0 ms round trips), one replica of each shard per region, shard \
                          s's primary in region s, 12 co-located clients per primary, \
                          logging off, epochs of 1 s; x = commit mode (1 = 2pc-sync, \
                          2 = epoch)",
            protocols: &["s2pl", "pt-occ", "lt-occ"],
            base: coco_wan,
            vary: Vary {
                name: "commit".into(),
                values: vec![1.0, 2.0],
            },
            series: None,
            plot: &["throughput", "p50", "p99"],
        },
        Experiment {
            name: "oocc-read-heavy",
            description: "OOCC Fig. 10 (YCSB part) on sim, RDMA preset: 4 ops of 8-byte records, \
                          read ratio per op 1.0 (read-only) → 0.95; 0.975 gives ~90% read-only \
                          transactions (read-intensive); OOCC vs FORD-style OCC, DrTM, DSLR",
            protocols: &["oocc", "ford-occ", "drtm", "dslr"],
            base: rdma_ycsb,
            vary: read_heavy.clone(),
            series: None,
            plot: &["throughput", "p50", "p99"],
        },
        Experiment {
            name: "oocc-read-heavy-warm",
            description: "oocc-read-heavy with a warm address cache: 300 ms runs of which the \
                          first 250 ms are warm-up (Fig. 10a's steady state; the 20 ms runs \
                          miss the cache on about half of their reads)",
            protocols: &["oocc", "ford-occ", "drtm", "dslr"],
            base: rdma_ycsb_warm,
            vary: read_heavy,
            series: None,
            plot: &["throughput", "p50", "p99"],
        },
        Experiment {
            name: "oocc-tatp",
            description: "OOCC Fig. 10 (TATP) on sim, RDMA preset: 100k subscribers on 2 memory \
                          nodes, NURand ids, 80% read-only with two-key reads; 8 → 64 clients; \
                          OOCC vs FORD-style OCC, DrTM, DSLR",
            protocols: &["oocc", "ford-occ", "drtm", "dslr"],
            base: rdma_tatp,
            vary: Vary {
                name: "clients".into(),
                values: vec![8.0, 16.0, 32.0, 64.0],
            },
            series: None,
            plot: &["throughput", "p50", "p99"],
        },
        Experiment {
            name: "oocc-taobench",
            description: "OOCC Fig. 10 (TAOBench) on sim, RDMA preset: 1M objects, 500k edges \
                          on 2 memory nodes, zipf 0.9, 95% read-only (TAOBench workload A's \
                          sizes); 8 → 64 clients; OOCC vs FORD-style OCC, DrTM, DSLR",
            protocols: &["oocc", "ford-occ", "drtm", "dslr"],
            base: rdma_taobench,
            vary: Vary {
                name: "clients".into(),
                values: vec![8.0, 16.0, 32.0, 64.0],
            },
            series: None,
            plot: &["throughput", "p50", "p99"],
        },
        Experiment {
            name: "oocc-tpcc",
            description: "OOCC Fig. 12 on sim, RDMA preset: TPC-C, 8 warehouses of 10 \
                          districts (300 customers each, 10k items) on 8 memory nodes, Table \
                          IV's mix 45/40/4/4/4; 8 → 64 clients; OOCC vs FORD-style OCC, DrTM, \
                          DSLR; one line per retry policy: backoff-us 0 (retry at once, the \
                          authors' clients) and 20 (the harness's default)",
            protocols: &["oocc", "ford-occ", "drtm", "dslr"],
            base: rdma_tpcc.clone(),
            vary: Vary {
                name: "clients".into(),
                values: vec![8.0, 16.0, 32.0, 64.0],
            },
            series: Some(retry_policies.clone()),
            plot: &["throughput", "p50", "p99"],
        },
        Experiment {
            name: "oocc-tpcc-lease",
            description: "OOCC Fig. 12's TPC-C at 32 clients over the lease: 5 → 80 µs \
                          (the paper's TPC-C lease is 80 µs, Fig. 13's best 7-10 µs); one \
                          line per retry policy (backoff-us 0 and 20); ford-occ is \
                          oocc-tpcc's",
            protocols: &["oocc"],
            base: rdma_tpcc,
            vary: Vary {
                name: "lease-us".into(),
                values: vec![5.0, 7.0, 10.0, 20.0, 40.0, 80.0],
            },
            series: Some(retry_policies),
            plot: &["throughput", "p50", "p99"],
        },
        Experiment {
            name: "oocc-ablation",
            description: "OOCC Fig. 11a on sim, RDMA preset: YCSB 4 ops at zipf 0.99, \
                          transactions that write 0 → 20% (read ratio per op (1-w)^(1/4): \
                          1.0, 0.987, 0.974, 0.960, 0.946); one line per ablation step: \
                          0 = occ (FORD-style), 1 = +lease, 2 = +write-unlock, \
                          3 = +delay-write-lock (= oocc)",
            protocols: &["oocc"],
            base: ablation.clone(),
            vary: write_shares.clone(),
            series: Some(ablation_steps.clone()),
            plot: &["throughput", "commit_rate", "p50"],
        },
        Experiment {
            name: "oocc-ablation-warm",
            description: "oocc-ablation with a warm address cache: 300 ms runs of which the \
                          first 250 ms are warm-up (~4 min)",
            protocols: &["oocc"],
            base: ablation_warm,
            vary: write_shares.clone(),
            series: Some(ablation_steps.clone()),
            plot: &["throughput", "commit_rate", "p50"],
        },
        Experiment {
            name: "oocc-ablation-skew",
            description: "OOCC Fig. 11b/c on sim, RDMA preset: read-intensive YCSB (~10% of \
                          transactions write), zipf 0.6 → 0.99; one line per ablation step \
                          (0 occ, 1 +lease, 2 +write-unlock, 3 +delay-write-lock = oocc)",
            protocols: &["oocc"],
            base: ablation_skew,
            vary: Vary {
                name: "zipf".into(),
                values: vec![0.6, 0.7, 0.8, 0.9, 0.99],
            },
            series: Some(ablation_steps.clone()),
            plot: &["throughput", "commit_rate", "p50"],
        },
        Experiment {
            name: "oocc-lease",
            description: "OOCC Fig. 13 shape on sim, RDMA preset: read-intensive YCSB \
                          (zipf 0.9), lease 2 → 80 µs; `counters` has ro_one_round",
            protocols: &["oocc"],
            base: lease,
            vary: Vary {
                name: "lease-us".into(),
                values: vec![2.0, 5.0, 10.0, 20.0, 40.0, 80.0],
            },
            series: None,
            plot: &["throughput", "p50", "p99"],
        },
        Experiment {
            name: "oocc-lease-write",
            description: "OOCC Fig. 13a-c on sim, RDMA preset: oocc-ablation's YCSB (zipf \
                          0.99, 0 → 20% of transactions write), one line per lease of 4, 7, \
                          10, 14 µs; OCC is oocc-ablation's occ line",
            protocols: &["oocc"],
            base: ablation,
            vary: write_shares.clone(),
            series: Some(Vary {
                name: "lease-us".into(),
                values: vec![4.0, 7.0, 10.0, 14.0],
            }),
            plot: &["throughput", "p50", "p99"],
        },
        Experiment {
            name: "oocc-lease-adapt",
            description: "OOCC Fig. 13d on sim, RDMA preset: throughput and lease per 1 ms \
                          while the Lease Manager adjusts a 4 µs lease every 5 ms (YCSB, read \
                          ratio 0.95 per op, 50 ms); adaptation off (0) vs on (1)",
            protocols: &["oocc"],
            base: lease_adapt,
            vary: Vary {
                name: "oocc-lease-adapt".into(),
                values: vec![0.0, 1.0],
            },
            series: None,
            plot: &["throughput", "lease_us"],
        },
        Experiment {
            name: "oocc-offset",
            description: "OOCC §VIII.G Fig. 14a on sim, RDMA preset: read-intensive YCSB \
                          (~90% read-only, uniform), 10 µs lease, drift offset 10 ns (the \
                          1000 ppm bound's) → 10 µs (no read-validate lease left); \
                          `counters` has ro_one_round",
            protocols: &["oocc"],
            base: offset,
            vary: Vary {
                name: "oocc-offset-ns".into(),
                values: vec![
                    0.0, 500.0, 1000.0, 1500.0, 2000.0, 3000.0, 4000.0, 5000.0, 7000.0, 10000.0,
                ],
            },
            series: None,
            plot: &["throughput", "p50", "p99"],
        },
        Experiment {
            name: "compare",
            description: "2PL (wound-wait, no-wait) vs OCC on the embedded cluster: \
                          YCSB, 2 partitions, skew 0 → 0.99",
            protocols: &["2pl-ww", "2pl-nowait", "occ"],
            base: compare,
            vary: Vary {
                name: "zipf".into(),
                values: vec![0.0, 0.6, 0.9, 0.99],
            },
            series: None,
            plot: &["throughput", "commit_rate", "p90"],
        },
        Experiment {
            name: "contention",
            description: "Janus Fig. 3b shape on sim: micro-benchmark, 3 shards, \
                          96 clients, zipf 0.5 → 1.0; commit rates fall with contention",
            protocols: &["2pl-ww", "2pl-nowait", "occ"],
            base: contention,
            vary: Vary {
                name: "zipf".into(),
                values: vec![0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
            },
            series: None,
            plot: &["throughput", "commit_rate", "p90"],
        },
        Experiment {
            name: "nocc-clients",
            description: "NOCC Figs. 1 and 3 on sim: one counter, write ratio 0.2, \
                          1 → 40 clients; NOCC vs OCC (nocc-off); store aborts in `counters`",
            protocols: &["nocc", "nocc-off"],
            base: counter(1, 0.2, 1),
            vary: Vary {
                name: "clients".into(),
                values: vec![1.0, 2.0, 4.0, 8.0, 16.0, 24.0, 32.0, 40.0],
            },
            series: None,
            plot: &["throughput", "commit_rate", "p50"],
        },
        Experiment {
            name: "nocc-write-ratio",
            description: "NOCC Fig. 4a/c on sim: one counter, 8 clients, write ratio 0 → 1",
            protocols: &["nocc", "nocc-off"],
            base: counter(1, 0.2, 8),
            vary: Vary {
                name: "write-ratio".into(),
                values: vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0],
            },
            series: None,
            plot: &["throughput", "commit_rate", "p50"],
        },
        Experiment {
            name: "nocc-skew",
            description: "NOCC Fig. 4b on sim: 10 counters chosen by zipf 0 → 1.2, \
                          8 clients, write ratio 0.2",
            protocols: &["nocc", "nocc-off"],
            base: counter(10, 0.2, 8),
            vary: Vary {
                name: "zipf".into(),
                values: vec![0.0, 0.4, 0.8, 1.0, 1.2],
            },
            series: None,
            plot: &["throughput", "commit_rate", "p50"],
        },
        Experiment {
            name: "nocc-tpcc",
            description: "NOCC Fig. 5 on sim: TPC-C Payment, tiny configuration \
                          (1 warehouse, 2 districts, 10 customers), 1 → 40 clients, switch \
                          registers of 256 B; throughput and store CPU per committed txn",
            protocols: &["nocc", "nocc-off"],
            base: tpcc_tiny,
            vary: Vary {
                name: "clients".into(),
                values: vec![1.0, 2.0, 4.0, 8.0, 16.0, 24.0, 32.0, 40.0],
            },
            series: None,
            plot: &["throughput", "commit_rate", "server_cpu_us_per_txn"],
        },
    ]
}

/// Look up an experiment; the error lists the names.
pub fn find(name: &str) -> Result<Experiment, crate::spec::SpecError> {
    let all = experiments();
    let names: Vec<_> = all.iter().map(|e| e.name).collect::<Vec<_>>();
    let allowed = names.join(", ");
    all.into_iter()
        .find(|e| e.name == name)
        .ok_or(crate::spec::SpecError::Invalid {
            flag: "experiment NAME",
            value: name.to_string(),
            allowed,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::ids::ShardId;

    /// The COCO experiments §7.1's testbed applies to run on it (a
    /// co-located worker per partition, logging off; `coco-durability`
    /// sweeps the log itself), and `coco-wan` runs it over three regions
    /// with the primaries spread over them (§7.5), §7.1's 12 workers a node.
    #[test]
    fn coco_experiments_on_the_testbed_are_the_ones_it_applies_to() {
        let testbed = [
            "coco-commit",
            "coco-tpcc",
            "coco-aborts",
            "coco-durability",
            "coco-snapshot",
            "coco-epoch",
            "coco-epoch-barrier",
        ];
        for name in testbed {
            let e = find(name).unwrap();
            assert!(e.base.colocate, "{name}");
            assert_eq!(e.base.sim.fsync, 0, "{name}");
            if let WorkloadSpec::Ycsb(c) = &e.base.workload {
                assert_eq!(e.base.clients, c.partitions, "{name}");
            }
        }
        assert_eq!(find("coco-durability").unwrap().vary.name, "fsync-us");
    }

    /// `coco-wan` is §7.5's deployment: three regions, each shard's primary
    /// in its own region and its backups in the other two, each region's
    /// workers beside its primaries, logging off.
    #[test]
    fn coco_wan_spreads_primaries_over_the_regions() {
        let wan = find("coco-wan").unwrap().base;
        assert_eq!(
            wan.sites.as_ref().map(|s| s.name.as_str()),
            Some("coco-wan")
        );
        assert_eq!(wan.primary_sites, crate::sites::PrimarySites::Spread);
        assert!(wan.colocate);
        assert_eq!(wan.sim.fsync, 0);
        assert_eq!(wan.clients, 36);
        let mut spec = wan.clone();
        spec.protocol = "pt-occ".into();
        spec.validate().unwrap();
        // COCO's three replicas (its registry entry's default).
        spec.replicas = Some(3);
        let topo = crate::deploy::topology(&spec);
        assert_eq!(topo.num_shards(), 3);
        for (s, group) in topo.shards.iter().enumerate() {
            let sites: Vec<u32> = group
                .replicas
                .iter()
                .map(|n| topo.nodes[n.0 as usize].site)
                .collect();
            assert_eq!(sites[0], s as u32, "shard {s}'s primary in region {s}");
            let mut all = sites.clone();
            all.sort_unstable();
            assert_eq!(all, vec![0, 1, 2], "shard {s}: a replica per region");
        }
        for (h, host) in topo.client_hosts().enumerate() {
            assert_eq!(host.colocated_with, Some(topo.leader(ShardId(h as u32))));
            assert_eq!(host.site, h as u32);
        }
    }

    /// COCO's TPC-C selects every Payment's customer by id, as the
    /// authors' `bench_tpcc` does by default (no lookup round trip, see
    /// `coco_tpcc` in `experiments`); the other papers' TPC-C experiments
    /// keep clause 2.5.1.2's 60% by last name, but Janus's, whose keys
    /// must be known before execution.
    #[test]
    fn only_coco_and_janus_tpcc_select_customers_by_id() {
        let mut seen = 0;
        for e in experiments() {
            if let WorkloadSpec::Tpcc(c) = &e.base.workload {
                let by_id = e.name.starts_with("coco-") || e.name.starts_with("janus-");
                assert_eq!(c.by_name, if by_id { 0 } else { 60 }, "{}", e.name);
                seen += usize::from(e.name.starts_with("coco-"));
            }
        }
        assert_eq!(
            seen, 4,
            "coco-tpcc, coco-aborts, coco-epoch, coco-epoch-barrier"
        );
    }

    #[test]
    fn every_experiment_is_valid() {
        for e in experiments() {
            for p in e.protocols {
                assert!(crate::registry::find(p).is_ok(), "{}: {p}", e.name);
                let lines = e.series.as_ref().map_or(vec![None], |s| {
                    s.values.iter().map(|&l| Some((s, l))).collect()
                });
                for line in lines {
                    for &v in &e.vary.values {
                        let mut s = e.base.clone();
                        s.protocol = p.to_string();
                        if let Some((series, l)) = line {
                            series.apply(&mut s, l).unwrap();
                        }
                        e.vary.apply(&mut s, v).unwrap();
                        s.validate().unwrap();
                        // Refusing a value of a varied flag skips the point;
                        // anything else would stop the experiment.
                        if let Err(crate::spec::SpecError::Invalid { flag, .. }) =
                            crate::registry::find(p).unwrap().accepts(&s)
                        {
                            let varied = e.series.iter().chain([&e.vary]).any(|q| q.flag() == flag);
                            assert!(varied, "{}: {p} at {v} refuses {flag}", e.name);
                        }
                    }
                }
            }
        }
    }
}
