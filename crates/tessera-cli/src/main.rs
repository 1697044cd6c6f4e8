//! `tessera`: run, sweep, check and plot protocol comparisons.
//!
//! Exit codes: 0 success; 1 a run failed (including a failed isolation
//! check); 2 bad input (flags, values, paths), with a one-line error that
//! names the flag and what is allowed.

mod cluster;
mod commands;
mod duration;
mod table;

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use tessera_core::ids::Time;

/// Messages are allocated on one worker thread and freed on another; glibc's
/// allocator handles such cross-thread frees slowly (15-20% of OCC's CPU on
/// YCSB went to malloc/free), mimalloc returns them to the owning thread's
/// free list cheaply. Feature `system-alloc` takes the system allocator
/// instead, which heap profilers (heaptrack) can see; `count-alloc` counts
/// the live heap bytes ([`tessera_core::alloc`]), which the simulator's
/// `tessera_sim::load` debug lines print.
#[cfg(not(feature = "system-alloc"))]
type Alloc = mimalloc::MiMalloc;
#[cfg(not(feature = "system-alloc"))]
const ALLOC: Alloc = mimalloc::MiMalloc;
#[cfg(feature = "system-alloc")]
type Alloc = std::alloc::System;
#[cfg(feature = "system-alloc")]
const ALLOC: Alloc = std::alloc::System;

#[cfg(not(feature = "count-alloc"))]
#[global_allocator]
static GLOBAL: Alloc = ALLOC;
#[cfg(feature = "count-alloc")]
#[global_allocator]
static GLOBAL: tessera_core::alloc::Counting<Alloc> = tessera_core::alloc::Counting(ALLOC);

#[derive(Parser)]
#[command(
    name = "tessera",
    version,
    about = "A distributed transaction engine and laboratory: run, check and compare \
             concurrency-control protocols."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run protocols on a workload and print a results table.
    Bench(RunArgs),
    /// Run protocols over a range of one parameter (--vary NAME=V1,V2,...).
    Sweep {
        #[command(flatten)]
        run: RunArgs,
        /// The parameter and its values, e.g. zipf=0.5,0.7,0.9.
        #[arg(long)]
        vary: String,
    },
    /// Plot a results file (JSON lines) as PNG or SVG.
    Plot {
        /// Results written by --out, a sweep or an experiment.
        file: PathBuf,
        /// The field on the x axis (e.g. zipf, clients).
        #[arg(long)]
        x: String,
        /// Metrics to plot, comma-separated (throughput, commit_rate, p50, p90, p99, msgs).
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "throughput,commit_rate,p90"
        )]
        y: Vec<String>,
        /// Output file: .png or .svg.
        #[arg(short, long, default_value = "fig.png")]
        out: PathBuf,
    },
    /// Run a named experiment; writes NAME.jsonl and NAME.png into --out-dir.
    Experiment {
        /// The experiment's name (see --list).
        name: Option<String>,
        /// List the experiments.
        #[arg(long)]
        list: bool,
        #[arg(long, default_value = "results")]
        out_dir: PathBuf,
    },
    /// List the protocols.
    Protocols,
    /// Rococo's offline checker (§3.1): can every conflict of the workload's
    /// transactions be reordered at runtime? Exit 0 if so; exit 1 and the
    /// pieces to merge if not. Workload flags as for `bench`.
    CheckWorkload {
        #[command(flatten)]
        run: RunArgs,
        /// Write the SC-graph in Graphviz DOT to this file.
        #[arg(long)]
        dot: Option<PathBuf>,
    },
    /// Run one node of a cluster file until SIGTERM (one process per node).
    Server {
        /// The cluster file (see examples/cluster-3.toml).
        #[arg(long)]
        config: PathBuf,
        /// The node's name in [[nodes]].
        #[arg(long)]
        node: String,
    },
    /// Run one transaction on a running cluster: get KEY..., put
    /// KEY=VALUE..., or incr KEY [BY]. Prints KEY = VALUE per key; exits 1
    /// if it aborts, times out or the cluster is unreachable.
    Txn {
        /// The cluster file (see examples/cluster-3.toml).
        #[arg(long)]
        config: PathBuf,
        /// Give up after this long, retries included.
        #[arg(long, value_parser = duration::parse, default_value = "5s")]
        timeout: Time,
        /// The client host to run as (default: the first free one).
        #[arg(long)]
        host: Option<u32>,
        /// The command and its arguments.
        #[arg(required = true, num_args = 1.., trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Start or stop every server of a cluster file as local processes.
    Cluster {
        #[command(subcommand)]
        action: ClusterAction,
    },
    /// Null-RPC round trips between two processes over loopback TCP: the
    /// transport's ceiling.
    BenchNet {
        /// How long to measure, e.g. 5s.
        #[arg(long, value_parser = duration::parse, default_value = "5s")]
        duration: Time,
        /// Requests in flight.
        #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..100_000))]
        window: u64,
        /// Internal: serve echo on this address (the child process).
        #[arg(long, hide = true)]
        serve: Option<std::net::SocketAddr>,
    },
}

#[derive(Subcommand)]
enum ClusterAction {
    /// Start a `tessera server` per node (pid files and logs in the run dir)
    /// and wait until every one accepts connections.
    Up {
        #[arg(long)]
        config: PathBuf,
    },
    /// Stop the servers started by `up` (SIGTERM, then SIGKILL after 10 s).
    Down {
        #[arg(long)]
        config: PathBuf,
    },
}

/// Flags shared by `bench` and `sweep`.
#[derive(Args, Clone, Debug)]
pub struct RunArgs {
    /// local (embedded multi-threaded cluster, real time), sim (deterministic
    /// simulator) or tcp (servers of --config in their own processes).
    #[arg(long, default_value = "local")]
    runtime: String,
    /// tcp: the cluster file; its protocol, workload and clients are the
    /// defaults of this run.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Protocols, comma-separated (see `tessera protocols`).
    #[arg(long, value_delimiter = ',', default_value = "2pl-ww,2pl-nowait,occ")]
    protocol: Vec<String>,
    /// micro (Janus: 3 counters on 3 shards), ycsb (COCO's YCSB), tpcc, counter (NOCC's counters),
    /// tatp, or taobench (OOCC §VIII.B's TATP and TAOBench-like social graph).
    #[arg(long, default_value = "ycsb")]
    workload: String,
    /// Shards (micro: default 3; ycsb, tatp, taobench: partitions, default 2;
    /// tpcc: one per warehouse, or 2 with --partition district).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    shards: Option<u32>,
    /// Closed-loop clients in total (default: 8 per shard on local, 32 on sim).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    clients: Option<u32>,
    /// Run length, e.g. 500ms, 10s (default: 10s local, 2s of virtual time on sim).
    #[arg(long, value_parser = duration::parse, allow_negative_numbers = true)]
    duration: Option<Time>,
    /// Trimmed from the start of the measurement (default: a tenth of the run).
    #[arg(long, value_parser = duration::parse, allow_negative_numbers = true)]
    warmup: Option<Time>,
    /// Trimmed from the end of the measurement (default: a twentieth of the run).
    #[arg(long, value_parser = duration::parse, allow_negative_numbers = true)]
    cooldown: Option<Time>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Zipf skew θ in [0, 1.5) of the key choice (0 = uniform).
    #[arg(long, value_parser = parse_zipf, allow_negative_numbers = true)]
    zipf: Option<f64>,
    /// Keys per shard (micro default 1,000,000; ycsb default 200,000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), allow_negative_numbers = true)]
    keys: Option<u64>,
    /// YCSB: operations per transaction (default 10).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    ops: Option<u32>,
    /// YCSB: share of read operations; the rest read-modify-write (default 0.8).
    #[arg(long, value_parser = parse_ratio, allow_negative_numbers = true)]
    read_ratio: Option<f64>,
    /// YCSB: share of multi-partition transactions (default 0).
    #[arg(long, value_parser = parse_ratio, allow_negative_numbers = true)]
    multi_partition: Option<f64>,
    /// TPC-C: warehouses (default 1).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    warehouses: Option<u32>,
    /// TPC-C: districts per warehouse (default 10).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    districts: Option<u32>,
    /// TPC-C: customers per district (default 3000).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    customers: Option<u32>,
    /// TPC-C: items (default 100000).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    items: Option<u32>,
    /// TPC-C: transaction weights, e.g.
    /// neworder=45,payment=43,orderstatus=4,delivery=4,stocklevel=4 (unnamed: 0).
    #[arg(long)]
    mix: Option<String>,
    /// TPC-C: warehouse (Janus, COCO), district (Rococo §5.4: one warehouse
    /// split by district and item) or tiny (NOCC §4: 1 warehouse, 2
    /// districts, 10 customers, 10 items, Payment only).
    #[arg(long)]
    partition: Option<String>,
    /// TPC-C: percent of NewOrders with a line from another warehouse
    /// (COCO: 10), or PCT/line per order line (the spec: 1/line, the
    /// default with several warehouses).
    #[arg(long, allow_negative_numbers = true)]
    remote_neworder: Option<String>,
    /// TPC-C: percent of Payments for another warehouse's customer (default
    /// 15 with several warehouses).
    #[arg(long, allow_negative_numbers = true)]
    remote_payment: Option<f64>,
    /// TPC-C: fixed (a client keeps one home warehouse, clause 5.2.4; the
    /// default) or per-node (drawn per transaction among the home shard's
    /// warehouses, as COCO's workers do, §7.1; warehouse/tiny schemes).
    #[arg(long)]
    home_warehouse: Option<String>,
    /// TPC-C: percent of Payments and Order-Status that select the customer
    /// by last name (clause 2.5.1.2: 60, the default). Ours look the name
    /// up in a piece at the customer's shard — a round trip when the
    /// customer is remote — where COCO's authors read a name index held on
    /// every node (docs/results/coco.md, *COCO Figs. 6 and 9*); 0 shows
    /// what that lookup costs.
    #[arg(long)]
    by_name: Option<u32>,
    /// TPC-C: NewOrder's stock pieces immediate (Rococo §4.2's example of a
    /// workload that needs merged pieces; `check-workload` reports them).
    #[arg(long)]
    immediate_stock: bool,
    /// Record the history and check strict serializability (and, for
    /// TPC-C, the consistency conditions of clause 3.3.2).
    #[arg(long)]
    check: bool,
    /// Write the history as Elle rw-register JSON lines (one file per protocol).
    #[arg(long)]
    history: Option<PathBuf>,
    /// Append one JSON object per (protocol, point) to this file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// local: worker threads (default: one per core).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..1024))]
    workers: Option<u64>,
    /// sim: inject a random fault plan drawn from the seed (loss, duplication,
    /// reordering, a partition, a client crash and restart).
    #[arg(long)]
    faults: bool,
    /// sim: probability of losing a message.
    #[arg(long, value_parser = parse_ratio, allow_negative_numbers = true)]
    loss: Option<f64>,
    /// sim: probability of duplicating a message.
    #[arg(long, value_parser = parse_ratio, allow_negative_numbers = true)]
    duplicate: Option<f64>,
    /// sim: probability of delaying a message so later ones overtake it.
    #[arg(long, value_parser = parse_ratio, allow_negative_numbers = true)]
    reorder: Option<f64>,
    /// sim: a fault plan for replicated shards drawn from the seed (loss,
    /// duplication, reordering; crashes and isolation of leaders and
    /// followers, a minority of each shard at a time, all over before the
    /// last --drain + 20 ms). Needs --replicas.
    #[arg(long)]
    replica_faults: bool,
    /// Servers per shard, a replica group (janus, 2pl-paxos, occ-paxos,
    /// tapir, pt-occ, lt-occ: default 3; 1 for the unreplicated protocols).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64), allow_negative_numbers = true)]
    replicas: Option<u32>,
    /// sim: sites and their round trips: one, three-regions (Janus Table 2:
    /// Oregon, Ireland, Seoul), coco-wan (COCO §7.5: North Virginia, Ohio,
    /// North California), or a FILE with a matrix of round trips in ms.
    #[arg(long)]
    sites: Option<String>,
    /// sim: where client hosts sit with several sites: spread, or leaders
    /// (site 0, with the initial leaders). Default: leaders for the layered
    /// baselines, spread otherwise.
    #[arg(long)]
    client_sites: Option<String>,
    /// sim, with --sites: where each shard's primary sits: first (every
    /// primary on the first site; default), or spread (shard s's primary on
    /// site s % sites, its backups on the others: COCO §7.5's wide-area
    /// deployment, one node per region).
    #[arg(long)]
    primary_sites: Option<String>,
    /// sim: run each client host on the machine of its home shard's
    /// primary, as COCO's workers run on the nodes holding their
    /// partitions (§7.1): messages to the home primary cross no network
    /// (no latency, not counted in msgs/txn). Default: client hosts are
    /// machines of their own.
    #[arg(long)]
    colocate: bool,
    /// Clients start nothing new in the last DRAIN of the run, so replicas
    /// settle before it ends (at most the cool-down; default 0).
    #[arg(long, value_parser = duration::parse, allow_negative_numbers = true)]
    drain: Option<Time>,
    /// tatp: subscribers in total, dealt over the shards (default 100,000,
    /// TATP's smallest population: 2.1M records).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), allow_negative_numbers = true)]
    subscribers: Option<u64>,
    /// tatp: records GET_SUBSCRIBER_DATA and GET_ACCESS_DATA read, 1-16
    /// (default 2, OOCC's two-key reads; 1 is the TATP specification).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=16), allow_negative_numbers = true)]
    ro_keys: Option<u32>,
    /// taobench: objects (default 1,000,000, OOCC §VIII.B).
    #[arg(long, value_parser = clap::value_parser!(u64).range(8..), allow_negative_numbers = true)]
    objects: Option<u64>,
    /// taobench: edges (default 500,000, OOCC §VIII.B).
    #[arg(long, value_parser = clap::value_parser!(u64).range(8..=4_294_967_295), allow_negative_numbers = true)]
    edges: Option<u64>,
    /// counter: share of transactions that increment (default 0.2).
    #[arg(long, value_parser = parse_ratio, allow_negative_numbers = true)]
    write_ratio: Option<f64>,
    /// Switch nodes between client racks and the store (nocc, nocc-off; default 1).
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=64), allow_negative_numbers = true)]
    switches: Option<u32>,
    /// nocc: keys the switch's value cache holds (default 65536).
    #[arg(long, allow_negative_numbers = true)]
    switch_cache: Option<usize>,
    /// nocc: operations per transaction the switch can parse (default 32).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    switch_max_ops: Option<u32>,
    /// nocc: bytes per switch register stage (default 4).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    switch_value_width: Option<u32>,
    /// nocc: register stages a cached value may span (default 16).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    switch_stages: Option<u32>,
    /// nocc: switch time per operation (recirculation), ns (default 100).
    #[arg(long, allow_negative_numbers = true)]
    recirculation_ns: Option<u64>,
    /// 2pl-ww, 2pl-nowait on sim: server CPU charged per abort at a
    /// participant, µs (default 0: an abort costs its messages only). A
    /// sensitivity knob for Rococo §5.5's comparison.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), allow_negative_numbers = true)]
    abort_cpu_us: Option<u64>,
    /// 2pl-paxos, occ-paxos: most commands in one Multi-Paxos slot
    /// (default 256). 1 gives every record its own Accept round, so a
    /// leader handles messages per command, as the Janus paper's
    /// leaders did (§6.2): a sensitivity knob for the layered baselines.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=65536), allow_negative_numbers = true)]
    paxos_batch: Option<u64>,
    /// janus, rococo on sim: CPU time per vertex and edge of the
    /// dependency graph that a walk (settle; Janus's execution) visits, ns (default 0: a message
    /// costs its per-event CPU however large the graph). The graph's
    /// computation, the Janus paper's cause of its throughput's fall with
    /// contention (§6.2).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=1_000_000), allow_negative_numbers = true)]
    graph_cpu_ns: Option<u64>,
    /// 2pl-paxos: which wound-wait: janus (the default; the Janus
    /// authors' baseline, §6.1: priority by client, then attempt id, younger waiters
    /// wounded too) or textbook (age kept across retries, waiters wait).
    #[arg(long)]
    wound: Option<String>,
    /// pt-occ, lt-occ, s2pl: commit and replication: 2pc (no replication,
    /// the default for s2pl), 2pc-sync, or epoch (COCO, the default for
    /// pt-occ and lt-occ).
    #[arg(long)]
    commit: Option<String>,
    /// pt-occ, lt-occ, s2pl: epoch length in ms (default 10).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1000), allow_negative_numbers = true)]
    epoch_ms: Option<u64>,
    /// pt-occ, lt-occ, s2pl under --commit epoch: an epoch whose prepare
    /// is unanswered this many ms aborts (COCO §3.2's failure detection;
    /// default 50, five 10 ms epochs, or four of the slowest round trips
    /// with --sites; a timed-out epoch doubles the next deadline, up to
    /// 16x, and a commit halves it again).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=60_000), allow_negative_numbers = true)]
    prepare_deadline_ms: Option<u64>,
    /// pt-occ, lt-occ: serializable (default) or snapshot transactions
    /// (COCO §5.3; --check then holds runs to snapshot isolation).
    #[arg(long)]
    isolation: Option<String>,
    /// pt-occ, lt-occ, s2pl under --commit epoch or 2pc-sync: who sends
    /// the writes to the backups: coordinator (default; COCO §4.2.3, Fig.
    /// 3: synced once per epoch, or under 2pc-sync sent with the
    /// primaries' write-back and acknowledged to the coordinator, as the
    /// authors' code does) or primary (forwarded by the primary and
    /// acknowledged to it per transaction).
    #[arg(long)]
    coco_replication: Option<String>,
    /// pt-occ, lt-occ, s2pl under --commit epoch: client hosts start no
    /// transaction between an epoch's prepare and its commit, COCO's
    /// global barrier (§3.1, §7.7; on|off, default off).
    #[arg(long, value_parser = parse_on_off)]
    epoch_barrier: Option<bool>,
    /// oocc: implicit leases, one-round read-only commits (on|off, default on).
    #[arg(long, value_parser = parse_on_off)]
    oocc_lease: Option<bool>,
    /// oocc: one WRITE updates and unlocks, with redo logs (on|off, default on).
    #[arg(long, value_parser = parse_on_off)]
    oocc_write_unlock: Option<bool>,
    /// oocc: intention locks at execution, write locks at commit (on|off, default on).
    #[arg(long, value_parser = parse_on_off)]
    oocc_delayed_lock: Option<bool>,
    /// oocc: with delayed write locks, upgrade the intention locks to write locks in a round of their own late in the write-wait lease, so readers meet the write locks for about two round trips, not the lease (§IV) (on|off, default off: in the Validate&Logging round, Alg. 1 l. 19).
    #[arg(long, value_parser = parse_on_off)]
    oocc_late_upgrade: Option<bool>,
    /// oocc, ford-occ: the lease in µs (default 20); drtm: its shared-lock lease (default 400).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), allow_negative_numbers = true)]
    lease_us: Option<u64>,
    /// oocc: the Lease Manager adapts the lease so that >= 80% of read-only
    /// transactions skip validation (on|off, default off: --lease-us stays fixed).
    #[arg(long, value_parser = parse_on_off)]
    oocc_lease_adapt: Option<bool>,
    /// oocc with --oocc-lease-adapt on: the smallest lease, µs (default 2).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), allow_negative_numbers = true)]
    oocc_lease_min_us: Option<u64>,
    /// oocc with --oocc-lease-adapt on: the largest lease, µs (default 1000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), allow_negative_numbers = true)]
    oocc_lease_max_us: Option<u64>,
    /// oocc with --oocc-lease-adapt on: how often the Lease Manager polls
    /// statistics and may adjust, µs (default 1000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), allow_negative_numbers = true)]
    oocc_lease_period_us: Option<u64>,
    /// oocc: a coordinator whose measured clock drift exceeds 80% of the
    /// 1000 ppm bound stops itself (on|off, default on).
    #[arg(long, value_parser = parse_on_off)]
    oocc_drift_stop: Option<bool>,
    /// oocc: widen every lease's drift offset to at least N ns (default:
    /// lease × 1000 ppm, 20 ns of a 20 µs lease; §VIII.G sweeps 0.5–1.5 µs
    /// on a 10 µs lease). It never narrows the bound's offset.
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=1_000_000_000), allow_negative_numbers = true)]
    oocc_offset_ns: Option<u64>,
    /// oocc: how often each coordinator host measures its clock against
    /// the reference, µs (§VII.B's periodic PTP measurement; default 50).
    /// Each sync costs the host and the reference an event of
    /// `--client-cpu-ns`, which matters once that is µs, not ns.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000), allow_negative_numbers = true)]
    oocc_sync_us: Option<u64>,
    /// oocc, ford-occ, drtm, dslr: slots per loaded record in a memory
    /// node's region (default 2); the free slots take inserts, which a long
    /// TPC-C run needs more of (slots never turn free).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64), allow_negative_numbers = true)]
    region_slots_per_record: Option<u32>,
    /// rococo: rounds of a read-only transaction that differ before it runs
    /// through the dependency graph instead (its ordered form, or as a
    /// read-write transaction; default 4; 4294967295 never does, Fig. 9's
    /// unbounded retries).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    ro_rounds: Option<u32>,
    /// janus: epochs of 50 ms a forgotten transaction's tombstone answers
    /// late messages (default 40; the tcp runtime keeps at least 20 s).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000), allow_negative_numbers = true)]
    forget_epochs: Option<u64>,
    /// janus: track conflicts per (row, column) where pieces declare
    /// columns, as the authors' code does (on), or per row (off); the
    /// history is recorded and `--check`ed at the same granularity
    /// (on|off, default on; sim and local only).
    #[arg(long, value_parser = parse_on_off)]
    per_column: Option<bool>,
    /// janus: the coordinator stops waiting for the fast quorum's last
    /// PreAccept replies where, by the round trips it measured, the fast
    /// path cannot save more than it costs (on|off, default on since
    /// session 26; sim and local only; docs/results/janus.md, sessions 25
    /// and 26).
    #[arg(long, value_parser = parse_on_off)]
    fast_path_by_rtt: Option<bool>,
    /// janus: a replica asks for the other shards' outputs (§4) of a
    /// decided component's members at once, not as execution reaches each
    /// (on|off, default off; sim and local only; docs/results/janus.md,
    /// session 26).
    #[arg(long, value_parser = parse_on_off)]
    prefetch_outputs: Option<bool>,
    /// sim: CPU time a server spends on each event, ns (default: the `--net`
    /// preset's, 5000 on dc, 50 on rdma): a sensitivity knob that shows
    /// which protocols the servers' CPU bounds and which their waits bound.
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=1_000_000), allow_negative_numbers = true)]
    server_cpu_ns: Option<u64>,
    /// sim: CPU time a client host spends on each event, ns (the rdma
    /// preset's 300; dc's 1000): a client host runs its clients' events one
    /// at a time, as a thread runs its coroutines.
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=1_000_000), allow_negative_numbers = true)]
    client_cpu_ns: Option<u64>,
    /// sim: CPU time a server spends on a message from its own machine, ns
    /// (default: the server's per-event cost, 5000 on dc): a `--colocate`d
    /// worker's access to its home partition, which COCO makes by a
    /// function call, not an RPC (§4.1).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=1_000_000), allow_negative_numbers = true)]
    local_cpu_ns: Option<u64>,
    /// sim: CPU time per byte of every message a server or client host
    /// sends or receives, in picoseconds, charged at both ends (default 0:
    /// a message costs its per-event CPU whatever its size). 1000 is 1 ns
    /// a byte, about a core encoding, copying and decoding 1 GB/s.
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=1_000_000), allow_negative_numbers = true)]
    byte_cpu_ps: Option<u64>,
    /// sim: clock drift bound in ppm: each node's clock rate is drawn within
    /// ±N ppm (OOCC §VII.B; default 0).
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=500_000), allow_negative_numbers = true)]
    drift_ppm: Option<u32>,
    /// sim: latency of a durable write (fsync) on every node's log device,
    /// in µs (default 100; COCO §7.4 sweeps 1 → 2,000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=1_000_000), allow_negative_numbers = true)]
    fsync_us: Option<u64>,
    /// sim: checkpoint the log of every node that can crash after N KiB of
    /// records (0: never, the default), as `tcp`'s `checkpoint_mb` does: a
    /// restarted node replays its last snapshot and the records after it
    /// (nodes that snapshot: Janus replicas, 2PC participants with a log).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=1_000_000_000), allow_negative_numbers = true)]
    checkpoint_kb: Option<u64>,
    /// sim: node N's clock runs exactly PPM ppm fast (negative: slow),
    /// overriding --drift-ppm for it: `N:PPM`, PPM in -999999..=1000000
    /// (a faulty oscillator, for OOCC's drift stop switch).
    #[arg(long, value_parser = parse_drift_node, allow_negative_numbers = true)]
    drift_node: Option<(u32, i64)>,
    /// sim: network preset: dc (100 µs round trips) or rdma (2-3 µs, OOCC §VIII.A).
    #[arg(long)]
    net: Option<String>,
    /// bench: run each protocol N times (seeds seed, seed+1, ...); every run
    /// goes to --out, the table shows each protocol's median run by
    /// throughput, and a line per protocol gives median, min and max.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100), allow_negative_numbers = true)]
    repeat: u32,
    /// Attempts per transaction before giving up (Janus: 20).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    max_attempts: Option<u32>,
    /// A client's backoff window before its first retry, µs; each further
    /// retry doubles it, up to 5 ms (default 20). 0 retries at once, as
    /// the OOCC authors' clients do.
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=5_000), allow_negative_numbers = true)]
    backoff_us: Option<u64>,
    /// Transactions a client may have finished executing whose results are
    /// not released yet (epoch commit) before it waits for one (default 128).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    max_unreleased: Option<u32>,
    /// End the run once the clients committed N transactions (each its
    /// share, N / clients rounded up), or at --duration if that comes
    /// first; tcp ends early. For tests: rates stay per second of the
    /// whole window.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), allow_negative_numbers = true)]
    commits: Option<u64>,
    /// Also report throughput per window of this length over the whole
    /// run (warm-up included) and the protocol's values over time (e.g.
    /// OOCC's lease), in the row's `timeline_tps` and `samples`.
    #[arg(long, value_parser = duration::parse, allow_negative_numbers = true)]
    timeline: Option<Time>,
}

impl RunArgs {
    /// The default of --protocol.
    pub fn default_protocols() -> Vec<String> {
        ["2pl-ww", "2pl-nowait", "occ"].map(String::from).to_vec()
    }
}

fn parse_zipf(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("'{s}' is not a number"))?;
    if (0.0..1.5).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{v} is outside [0, 1.5)"))
    }
}

fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("'{s}' is not on or off")),
    }
}

fn parse_drift_node(s: &str) -> Result<(u32, i64), String> {
    let bad = || format!("'{s}' is not NODE:PPM with PPM in -999999..=1000000");
    let (n, p) = s.split_once(':').ok_or_else(bad)?;
    let n: u32 = n.parse().map_err(|_| bad())?;
    let p: i64 = p.parse().map_err(|_| bad())?;
    if (-999_999..=1_000_000).contains(&p) {
        Ok((n, p))
    } else {
        Err(bad())
    }
}

fn parse_ratio(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("'{s}' is not a number"))?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{v} is outside [0, 1]"))
    }
}

/// An error and the exit code it deserves.
pub enum Failure {
    /// Bad input: exit 2.
    Usage(String),
    /// The run failed: exit 1.
    Run(anyhow::Error),
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(e: E) -> Self {
        let e = e.into();
        let usage = e.downcast_ref::<tessera_harness::SpecError>().is_some()
            || e.downcast_ref::<tessera_workloads::ConfigError>().is_some()
            || e.downcast_ref::<tessera_tcp::ConfigError>().is_some()
            || e.downcast_ref::<tessera_client::CallError>().is_some();
        if usage {
            Failure::Usage(e.to_string())
        } else {
            Failure::Run(e)
        }
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TESSERA_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        None => commands::default_comparison(),
        Some(Command::Bench(run)) => commands::bench(&run),
        Some(Command::Sweep { run, vary }) => commands::sweep(&run, &vary),
        Some(Command::Plot { file, x, y, out }) => commands::plot(&file, &x, &y, &out),
        Some(Command::Experiment {
            name,
            list,
            out_dir,
        }) => commands::experiment(name.as_deref(), list, &out_dir),
        Some(Command::Protocols) => commands::protocols(),
        Some(Command::CheckWorkload { run, dot }) => {
            match commands::check_workload(&run, dot.as_deref()) {
                Ok(true) => Ok(()),
                Ok(false) => return ExitCode::from(1),
                Err(e) => Err(e),
            }
        }
        Some(Command::Server { config, node }) => cluster::server(&config, &node),
        Some(Command::Txn {
            config,
            timeout,
            host,
            command,
        }) => cluster::txn(&config, timeout, host, &command),
        Some(Command::Cluster {
            action: ClusterAction::Up { config },
        }) => cluster::up(&config),
        Some(Command::Cluster {
            action: ClusterAction::Down { config },
        }) => cluster::down(&config),
        Some(Command::BenchNet {
            duration,
            window,
            serve,
        }) => cluster::bench_net(duration, window, serve),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::from(2)
        }
        Err(Failure::Run(e)) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
