//! The protocol registry: the one place that maps a protocol's name to its
//! type and default configuration. Nothing else matches on protocol names.

use crate::deploy::{run_protocol, run_protocol_on_wire, RawRun};
use crate::sites::ClientSites;
use crate::spec::BenchSpec;
use crate::spec::SpecError;
use std::sync::Arc;
use tessera_checker::Level;
use tessera_core::codec::Codec;
use tessera_core::ids::{Time, MS};
use tessera_core::protocol::Protocol;
use tessera_core::workload::Workload;
use tessera_protocols::coco::{Cc, Coco, CocoConfig, CommitMode, Isolation, Replication};
use tessera_protocols::disagg::RegionConfig;
use tessera_protocols::drtm::{Drtm, DrtmConfig};
use tessera_protocols::dslr::{Dslr, DslrConfig};
use tessera_protocols::janus::{Janus, JanusConfig};
use tessera_protocols::layered::{OccPaxos, PaxosLogConfig, TwoPlPaxos};
use tessera_protocols::nocc::{Nocc, NoccConfig};
use tessera_protocols::occ::{OccConfig, OccProtocol};
use tessera_protocols::oocc::{AdaptConfig, Oocc, OoccConfig};
use tessera_protocols::paxos::PaxosConfig;
use tessera_protocols::rococo::offline::MergeSet;
use tessera_protocols::rococo::{Rococo, RococoConfig};
use tessera_protocols::tapir::{Tapir, TapirConfig};
use tessera_protocols::twopc::{Timeouts, TwoPcConfig};
use tessera_protocols::twopl::{Policy, TwoPlConfig, TwoPlProtocol, Wound};

type Runner = Box<dyn Fn(&BenchSpec, Arc<dyn Workload>) -> anyhow::Result<RawRun> + Send + Sync>;
type Server = Box<dyn Fn(&BenchSpec, Arc<dyn Workload>, &str) -> anyhow::Result<()> + Send + Sync>;
type Accepts = Box<dyn Fn(&BenchSpec) -> Result<(), SpecError> + Send + Sync>;
type Promise = Box<dyn Fn(&BenchSpec) -> Level + Send + Sync>;
type PerColumn = Box<dyn Fn(&BenchSpec) -> bool + Send + Sync>;

type Embedder = Box<
    dyn Fn(&BenchSpec, Arc<dyn Workload>, crate::tcp::Embedding) -> anyhow::Result<()>
        + Send
        + Sync,
>;

/// How a protocol whose messages have a wire codec runs on `tcp`.
struct TcpHooks {
    bench: Runner,
    serve: Server,
    embed: Embedder,
}

/// How a protocol's configuration, and the spec it runs with (defaults
/// such as its replicas), follow from the run's spec.
trait Configure<C>:
    Fn(&BenchSpec) -> Result<(C, BenchSpec), SpecError> + Send + Sync + 'static
{
}

impl<C, F> Configure<C> for F where
    F: Fn(&BenchSpec) -> Result<(C, BenchSpec), SpecError> + Send + Sync + 'static
{
}

/// The configuration `config` of protocol `name`, for any spec without
/// knobs or replicas (it takes neither).
fn fixed<C: Clone + Send + Sync + 'static>(name: &'static str, config: C) -> impl Configure<C> {
    move |spec: &BenchSpec| {
        unreplicated(spec, name)?;
        only_knobs(spec, name, &[])?;
        Ok((config.clone(), spec.clone()))
    }
}

/// 2PL's `config` with `--abort-cpu-us` applied: a simulated cost, so
/// `sim` only (elsewhere an abort costs what it really costs).
fn with_abort_cpu(
    name: &'static str,
    config: TwoPcConfig<TwoPlConfig>,
) -> impl Configure<TwoPcConfig<TwoPlConfig>> {
    move |spec: &BenchSpec| {
        unreplicated(spec, name)?;
        only_knobs(spec, name, &["--abort-cpu-us"])?;
        let mut config = config.clone();
        if let Some(us) = spec.knobs.abort_cpu_us {
            if spec.runtime != crate::RuntimeKind::Sim {
                return Err(SpecError::Invalid {
                    flag: "--abort-cpu-us",
                    value: us.to_string(),
                    allowed: "only with --runtime sim (a simulated cost)".into(),
                });
            }
            config.cc.abort_cpu = us * tessera_core::ids::US;
        }
        Ok((config, spec.clone()))
    }
}

/// A runnable protocol: name, one-line summary, and how to run it.
pub struct ProtocolEntry {
    pub name: &'static str,
    pub summary: &'static str,
    /// Hidden entries exist for tests (e.g. a deliberately broken variant)
    /// and are not listed to users.
    pub hidden: bool,
    /// What `--check` holds the history to: the isolation the protocol
    /// promises with the spec's knobs (strict serializability unless it
    /// says less); see [`ProtocolEntry::level`].
    level: Promise,
    /// Whether a run of a spec orders conflicts per column, so that
    /// `--check` reasons per column ([`tessera_checker::check_columns`])
    /// and clients record the columns of writes: asked of the protocol's
    /// configuration for that spec (Janus with `--per-column on`, whose
    /// stores then report per-column versions); never for every other
    /// protocol. See [`ProtocolEntry::checks_per_column`].
    per_column: PerColumn,
    run: Runner,
    accepts: Accepts,
    tcp: Option<TcpHooks>,
}

impl ProtocolEntry {
    /// A protocol with a fixed configuration, which takes no knobs.
    fn new<P: Protocol>(name: &'static str, summary: &'static str, config: P::Config) -> Self
    where
        P::Config: Clone,
    {
        Self::configured::<P>(name, summary, fixed(name, config))
    }

    /// A protocol whose configuration (and defaults, such as the number of
    /// switches) `configure` derives from the run's spec.
    fn configured<P: Protocol>(
        name: &'static str,
        summary: &'static str,
        configure: impl Configure<P::Config>,
    ) -> Self {
        let configure = Arc::new(configure);
        let check = configure.clone();
        ProtocolEntry {
            name,
            summary,
            hidden: false,
            level: Box::new(|_| Level::StrictSerializable),
            per_column: Box::new(|_| false),
            run: Box::new(move |spec, workload| {
                let (config, spec) = configure(spec)?;
                run_protocol::<P>(&config, &spec, workload)
            }),
            accepts: Box::new(move |spec| check(spec).map(|_| ())),
            tcp: None,
        }
    }

    /// Whether the protocol takes the spec's knobs and replicas (the error
    /// names the flag it refuses), without running anything.
    pub fn accepts(&self, spec: &BenchSpec) -> Result<(), SpecError> {
        (self.accepts)(spec)
    }

    /// Let the protocol run on `tcp` (its messages have a wire codec), with
    /// the fixed configuration and the checks of [`ProtocolEntry::new`].
    fn with_tcp<P: Protocol>(self, config: P::Config) -> Self
    where
        P::Msg: Codec,
    {
        let name = self.name;
        self.with_tcp_configured::<P>(fixed(name, config))
    }

    /// [`ProtocolEntry::with_tcp`] for a protocol whose configuration
    /// `configure` derives from the run's spec (as for
    /// [`ProtocolEntry::configured`]).
    fn with_tcp_configured<P: Protocol>(mut self, configure: impl Configure<P::Config>) -> Self
    where
        P::Msg: Codec,
    {
        let configure = Arc::new(configure);
        let (c2, c3, c4) = (configure.clone(), configure.clone(), configure.clone());
        self.run = Box::new(move |spec, workload| {
            let (config, spec) = c4(spec)?;
            run_protocol_on_wire::<P>(&config, &spec, workload)
        });
        self.tcp = Some(TcpHooks {
            bench: Box::new(move |spec, wl| {
                let (config, spec) = configure(spec)?;
                crate::tcp::bench::<P>(&config, &spec, wl)
            }),
            serve: Box::new(move |spec, wl, node| {
                let (config, spec) = c2(spec)?;
                crate::tcp::serve::<P>(&config, &spec, wl, node)
            }),
            embed: Box::new(move |spec, wl, e| {
                let (config, spec) = c3(spec)?;
                crate::tcp::embed::<P>(&config, &spec, wl, e)
            }),
        });
        self
    }

    /// A protocol on memory nodes ([`tessera_protocols::disagg`]), on every
    /// runtime. On `tcp` its compute nodes run only in the bench driver,
    /// where all client hosts share one clock and reach each other: OOCC's
    /// coordinators measure their drift against the Lease Manager's host
    /// and DrTM's leases are times of the coordinators' common clock
    /// (DrTM assumes PTP), neither of which holds between an embedded
    /// client's process and another's. Embedding one is refused.
    fn memory_node_protocol<P: Protocol>(
        name: &'static str,
        summary: &'static str,
        configure: impl Configure<P::Config> + Clone,
    ) -> Self
    where
        P::Msg: Codec,
    {
        let mut e = Self::configured::<P>(name, summary, configure.clone())
            .with_tcp_configured::<P>(configure);
        if let Some(t) = e.tcp.as_mut() {
            t.embed = Box::new(move |_, _, _| {
                anyhow::bail!(
                    "{name} runs its compute nodes only in `tessera bench --runtime tcp`: \
                     its client hosts must share one clock and reach each other, which \
                     embedded clients (the client library, `tessera txn`) in their own \
                     processes do not"
                )
            });
        }
        e
    }

    fn tcp_hooks(&self) -> anyhow::Result<&TcpHooks> {
        self.tcp.as_ref().ok_or_else(|| {
            anyhow::anyhow!(
                "protocol '{}' has no wire codec: it cannot run on --runtime tcp",
                self.name
            )
        })
    }

    /// Serve node `node` of `spec.cluster` until SIGTERM (`tcp` only).
    pub fn serve(
        &self,
        spec: &BenchSpec,
        workload: Arc<dyn Workload>,
        node: &str,
    ) -> anyhow::Result<()> {
        (self.tcp_hooks()?.serve)(spec, workload, node)
    }

    /// Run an embedded client host of `spec.cluster` on this thread until
    /// the application lets go (`tcp` only; see [`crate::tcp::embed`]).
    pub fn embed(
        &self,
        spec: &BenchSpec,
        workload: Arc<dyn Workload>,
        e: crate::tcp::Embedding,
    ) -> anyhow::Result<()> {
        (self.tcp_hooks()?.embed)(spec, workload, e)
    }

    fn hidden(mut self) -> Self {
        self.hidden = true;
        self
    }

    /// Histories of the specs for which `per_column` holds (the protocol's
    /// configuration orders conflicts per column) are recorded and checked
    /// per column (see [`ProtocolEntry::checks_per_column`]).
    fn checked_per_column_by(
        mut self,
        per_column: impl Fn(&BenchSpec) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.per_column = Box::new(per_column);
        self
    }

    /// Whether a run of `spec` is recorded and checked per column: the
    /// object of a read or write is one column of a row wherever the
    /// pieces declare columns, so two transactions that wrote disjoint
    /// columns of a row in either order pass, where per row they are a
    /// lost update. The granularity follows what the configured run
    /// claims: a run that orders conflicts per column (Janus's default,
    /// §3: conflicts are on the data a piece accesses) can only be checked
    /// this way, and a run that orders them per row (Janus with
    /// `--per-column off`, every other protocol) is held to the per-row
    /// check, the only one that can see its row-level anomalies. The one
    /// place that decides it: the clients' `record_columns`
    /// ([`crate::deploy::client_config`]), from which `--check` picks its
    /// checker ([`crate::run::run_bench`]).
    pub fn checks_per_column(&self, spec: &BenchSpec) -> bool {
        (self.per_column)(spec)
    }

    /// What the protocol promises, which may depend on its knobs (COCO's
    /// `--isolation`).
    fn guarantees_by(
        mut self,
        level: impl Fn(&BenchSpec) -> Level + Send + Sync + 'static,
    ) -> Self {
        self.level = Box::new(level);
        self
    }

    /// The isolation level a run of `spec` promises, which `--check` holds
    /// its history to.
    pub fn level(&self, spec: &BenchSpec) -> Level {
        (self.level)(spec)
    }

    pub fn run(&self, spec: &BenchSpec, workload: Arc<dyn Workload>) -> anyhow::Result<RawRun> {
        if spec.runtime == crate::RuntimeKind::Tcp {
            return (self.tcp_hooks()?.bench)(spec, workload);
        }
        (self.run)(spec, workload)
    }
}

/// Every protocol tessera can run.
pub fn registry() -> Vec<ProtocolEntry> {
    let timeouts = Timeouts::default();
    let twopl = |policy| TwoPcConfig {
        cc: TwoPlConfig {
            policy,
            wound: Wound::Textbook,
            abort_cpu: 0,
        },
        timeouts: timeouts.clone(),
        log: (),
    };
    let occ = |validate| TwoPcConfig {
        cc: OccConfig { validate },
        timeouts: timeouts.clone(),
        log: (),
    };
    vec![
        ProtocolEntry::configured::<TwoPlProtocol>(
            "2pl-ww",
            "2PL + 2PC, wound-wait (Spanner; Rococo §5.1)",
            with_abort_cpu("2pl-ww", twopl(Policy::WoundWait)),
        )
        .with_tcp_configured::<TwoPlProtocol>(with_abort_cpu("2pl-ww", twopl(Policy::WoundWait))),
        ProtocolEntry::configured::<TwoPlProtocol>(
            "2pl-nowait",
            "2PL + 2PC, NO_WAIT (COCO §7.1.2)",
            with_abort_cpu("2pl-nowait", twopl(Policy::NoWait)),
        )
        .with_tcp_configured::<TwoPlProtocol>(with_abort_cpu("2pl-nowait", twopl(Policy::NoWait))),
        ProtocolEntry::new::<OccProtocol>(
            "occ",
            "OCC + 2PC: execute, lock + validate, write back (COCO §4)",
            occ(true),
        )
        .with_tcp::<OccProtocol>(occ(true)),
        ProtocolEntry::configured::<Rococo>(
            "rococo",
            "Rococo: dependency tracking, deferred pieces reordered at commit, no aborts (OSDI '14)",
            |spec| rococo(spec, "rococo", true),
        )
        .with_tcp_configured::<Rococo>(|spec| rococo(spec, "rococo", true)),
        ProtocolEntry::configured::<Rococo>(
            "rococo-nomerge",
            "Rococo without merged pieces (§4.2) whatever the offline checker says: broken on purpose where it asks for merges, for tests",
            |spec| rococo(spec, "rococo-nomerge", false),
        )
        .hidden(),
        ProtocolEntry::configured::<Janus>(
            "janus",
            "Janus: PreAccept/Accept/Commit over replica groups (3 by default), fast path on identical dependencies, no aborts for conflicts (OSDI '16)",
            janus,
        )
        .checked_per_column_by(|spec| janus(spec).is_ok_and(|(config, _)| config.per_column))
        .with_tcp_configured::<Janus>(janus),
        ProtocolEntry::new::<OccProtocol>(
            "occ-unsafe",
            "OCC + 2PC with validation switched off: broken on purpose, for checker tests",
            occ(false),
        )
        .with_tcp::<OccProtocol>(occ(false))
        .hidden(),
        ProtocolEntry::configured::<TwoPlPaxos>(
            "2pl-paxos",
            "2PL (wound-wait) + 2PC over Multi-Paxos per shard: Janus §5's layered baseline; --wound janus (default: the authors' wound-wait, §6.1) | textbook",
            |spec| {
                let wound = wound(spec)?;
                layered(
                    spec,
                    &["--wound"],
                    TwoPlConfig {
                        policy: Policy::WoundWait,
                        wound,
                        abort_cpu: 0,
                    },
                )
            },
        ),
        ProtocolEntry::configured::<OccPaxos>(
            "occ-paxos",
            "OCC + 2PC over Multi-Paxos per shard: Janus §5's layered baseline",
            |spec| layered(spec, &[], OccConfig { validate: true }),
        ),
        ProtocolEntry::configured::<Tapir>(
            "tapir",
            "TAPIR: OCC at every replica over inconsistent replication, no leader (Janus §5-6)",
            tapir,
        ),
        ProtocolEntry::configured::<Coco>(
            "pt-occ",
            "COCO PT-OCC (Silo TIDs); --commit epoch (default) | 2pc-sync | 2pc; --isolation serializable (default) | snapshot (VLDB '21 §5.1, §5.3)",
            |spec| coco(spec, Cc::PtOcc),
        )
        .guarantees_by(|spec| coco_level(spec, Level::StrictSerializable)),
        ProtocolEntry::configured::<Coco>(
            "lt-occ",
            "COCO LT-OCC (TicToc [wts, rts]); --commit epoch (default) | 2pc-sync | 2pc; --isolation serializable (default) | snapshot (§5.2, §5.3)",
            |spec| coco(spec, Cc::LtOcc),
        )
        // TicToc commits back in logical time: a transaction may be ordered
        // before one that finished before it started (§5.2, TicToc §3).
        .guarantees_by(|spec| coco_level(spec, Level::Serializable)),
        ProtocolEntry::configured::<Coco>(
            "s2pl",
            "COCO's S2PL NO_WAIT baseline (§7.1.2) in COCO's framework; --commit 2pc (default) | 2pc-sync | epoch",
            |spec| coco(spec, Cc::S2pl),
        ),
        ProtocolEntry::configured::<Nocc>(
            "nocc",
            "NOCC: OCC by compares at one store, verified early by a switch per rack (NOCC §2)",
            |spec| nocc(spec, true),
        ),
        ProtocolEntry::configured::<Nocc>(
            "nocc-off",
            "NOCC's store and clients with forwarding-only switches: the paper's OCC baseline",
            |spec| nocc(spec, false),
        ),
        ProtocolEntry::configured::<Nocc>(
            "nocc-unsafe",
            "NOCC whose store does not check compares: broken on purpose, for checker tests",
            |spec| {
                let (mut config, spec) = nocc(spec, true)?;
                config.validate = false;
                Ok((config, spec))
            },
        )
        .hidden(),
        ProtocolEntry::memory_node_protocol::<Oocc>(
            "oocc",
            "OOCC on memory nodes: implicit leases (one-round read-only), delayed write lock, write unlock (OOCC Alg. 1)",
            |spec| oocc(spec, OoccConfig::oocc()),
        ),
        ProtocolEntry::memory_node_protocol::<Oocc>(
            "ford-occ",
            "OCC on memory nodes, FORD-style: execute + CAS lock, validate + undo log, commit, release (OOCC Fig. 3)",
            |spec| oocc(spec, OoccConfig::ford()),
        ),
        broken_oocc(
            "oocc-nowait",
            "OOCC whose writers do not wait out the lease: broken on purpose, for checker tests",
            |c| c.wait_lease = false,
        ),
        broken_oocc(
            "oocc-same-round",
            "OOCC whose writers trust one Validate&Logging round however long it takes (Alg. 1 as written): broken on purpose, for checker tests",
            |c| c.bound_upgrade = false,
        ),
        broken_oocc(
            "oocc-rw-skip",
            "OOCC whose read-write transactions skip validation within the lease (Alg. 1 l. 13 as written): broken on purpose (write skew), for checker tests",
            |c| c.validate_writers = false,
        ),
        ProtocolEntry::memory_node_protocol::<Drtm>(
            "drtm",
            "DrTM on memory nodes: 2PL, shared locks as leases set by CAS in the lock word, exclusive locks by CAS (OOCC §VIII baseline)",
            drtm,
        ),
        ProtocolEntry::memory_node_protocol::<Dslr>(
            "dslr",
            "DSLR on memory nodes: 2PL with FAA reader-writer ticket locks, queueing instead of aborting (OOCC §VIII baseline)",
            dslr,
        ),
        ProtocolEntry::configured::<Dslr>(
            "dslr-reset",
            "DSLR whose lock counters reset after 8 tickets, for tests of the reset",
            |spec| {
                let (mut config, spec) = dslr(spec)?;
                config.count_max = 8;
                Ok((config, spec))
            },
        )
        .hidden(),
    ]
}

/// Refuse `--replicas` other than 1 for a protocol that does not replicate.
/// Rococo's configuration for `spec`: the pieces to merge come from the
/// offline checker's verdict on the workload's profiles (§3.1, §4.2),
/// computed once per deployment; none when `merge` is off or the workload
/// does not describe itself.
fn rococo(
    spec: &BenchSpec,
    name: &str,
    merge: bool,
) -> Result<(RococoConfig, BenchSpec), SpecError> {
    unreplicated(spec, name)?;
    only_knobs(spec, name, &["--ro-rounds", "--graph-cpu-ns"])?;
    let merges = match crate::run::check_workload(&spec.workload) {
        Ok(v) if merge => MergeSet::of(&v),
        _ => MergeSet::default(),
    };
    let mut config = RococoConfig {
        merges: Arc::new(merges),
        ..RococoConfig::default()
    };
    match spec.knobs.ro_rounds {
        Some(0) => {
            return Err(SpecError::Invalid {
                flag: "--ro-rounds",
                value: "0".into(),
                allowed: "1 or more (rounds compared before a read-only transaction is ordered)"
                    .into(),
            })
        }
        Some(n) => config.ro_rounds = n,
        None => {}
    }
    config.graph_cpu = graph_cpu(spec)?;
    if spec.runtime == crate::RuntimeKind::Tcp {
        // A server forgets a transaction its recovery driver finished
        // after `forget_after` without a request, and takes a request
        // that comes later as new (rococo module docs): a timing
        // assumption, as Janus's tombstones were until 2026-11-29 (see
        // `janus` below). Real processes on a loaded machine deliver some
        // messages seconds late, so on `tcp` the window is 20 s, not 1 s.
        config.forget_after = config.forget_after.max(20_000 * MS);
    }
    Ok((config, spec.clone()))
}

fn unreplicated(spec: &BenchSpec, name: &str) -> Result<(), SpecError> {
    // On `tcp` the cluster file lays out the replicas.
    let file = spec.cluster.as_ref().and_then(|c| {
        c.shards
            .iter()
            .enumerate()
            .find(|(_, s)| s.replicas.len() > 1)
    });
    if let Some((i, s)) = file {
        return Err(SpecError::Invalid {
            flag: "[[shards]] replicas",
            value: format!(
                "{} nodes for shard {i} ({})",
                s.replicas.len(),
                s.replicas.join(", ")
            ),
            allowed: format!("one node per shard for {name}, which is not replicated"),
        });
    }
    match spec.replicas.filter(|r| *r != 1) {
        Some(r) => Err(SpecError::Invalid {
            flag: "--replicas",
            value: r.to_string(),
            allowed: format!("1 for {name}, which is not replicated"),
        }),
        None => Ok(()),
    }
}

/// Refuse any knob set that `name` does not read (`allowed`).
fn only_knobs(spec: &BenchSpec, name: &str, allowed: &[&str]) -> Result<(), SpecError> {
    match spec
        .knobs
        .set_flags()
        .into_iter()
        .find(|f| !allowed.contains(f))
    {
        Some(flag) => Err(SpecError::Invalid {
            flag,
            value: name.into(),
            allowed: "protocols that have this knob (see --help)".into(),
        }),
        None => Ok(()),
    }
}

/// 2pl-paxos's wound-wait (`--wound`): the Janus authors' baseline by
/// default, since 2pl-paxos is Janus §6's baseline and that is what its
/// numbers were measured with (§6.1; [`Wound::JanusBaseline`]).
fn wound(spec: &BenchSpec) -> Result<Wound, SpecError> {
    match spec.knobs.wound.as_deref() {
        None | Some("janus") => Ok(Wound::JanusBaseline),
        Some("textbook") => Ok(Wound::Textbook),
        Some(other) => Err(SpecError::Invalid {
            flag: "--wound",
            value: other.into(),
            allowed: "janus, textbook".into(),
        }),
    }
}

fn commit_mode(spec: &BenchSpec, default: CommitMode) -> Result<CommitMode, SpecError> {
    match &spec.knobs.commit {
        None => Ok(default),
        Some(s) => CommitMode::parse(s).ok_or_else(|| SpecError::Invalid {
            flag: "--commit",
            value: s.clone(),
            allowed: CommitMode::NAMES.join(", "),
        }),
    }
}

/// The slowest round trip between two nodes of the spec's simulated world
/// (for timeouts that must cover a wide-area round trip).
fn slowest_round_trip(spec: &BenchSpec) -> tessera_core::ids::Time {
    let one_way = spec
        .sim_config()
        .latency
        .iter()
        .flatten()
        .copied()
        .max()
        .unwrap_or(0);
    2 * one_way + spec.sim.jitter
}

/// A layered protocol's configuration: 2PC with concurrency control `cc`
/// over a Paxos group per shard, three replicas unless told; timeouts cover
/// the slowest round trip of the world (geo sites).
fn layered<X>(
    spec: &BenchSpec,
    knobs: &[&str],
    cc: X,
) -> Result<(TwoPcConfig<X, PaxosLogConfig>, BenchSpec), SpecError> {
    let knobs: Vec<&str> = knobs.iter().copied().chain(["--paxos-batch"]).collect();
    only_knobs(spec, &spec.protocol, &knobs)?;
    let rtt = slowest_round_trip(spec);
    let mut timeouts = Timeouts::default();
    timeouts.retransmit = timeouts.retransmit.max(2 * rtt);
    timeouts.inquire = timeouts.inquire.max(4 * rtt);
    timeouts.participant = timeouts.participant.max(20 * rtt);
    timeouts.tombstone = timeouts.tombstone.max(40 * rtt);
    let mut paxos = PaxosConfig {
        // A snapshot copies the whole store: rarely, on big stores.
        snapshot_every: 4096,
        // Passive batching lets `pipeline` batches fly per round trip; a
        // record that finds them all in flight waits a whole round trip.
        // Four suffice inside a data center; across regions (hundreds of
        // ms per round trip) allow one batch per 2 ms of round trip, or
        // every record would wait twice.
        pipeline: ((rtt / (2 * tessera_core::ids::MS)) as usize).clamp(4, 128),
        ..PaxosConfig::for_round_trip(rtt)
    };
    if let Some(batch) = spec.knobs.paxos_batch {
        // Smaller slots, more of them in flight: the commands a round trip
        // can carry stay the same, so `--paxos-batch` changes what a leader
        // handles per command and not how many commands can wait.
        let in_flight = paxos.pipeline * paxos.max_batch;
        paxos.max_batch = batch;
        paxos.pipeline = in_flight.div_ceil(batch);
    }
    let config = TwoPcConfig {
        cc,
        timeouts,
        log: PaxosLogConfig { paxos },
    };
    let mut spec = spec.clone();
    spec.replicas = Some(spec.replicas.unwrap_or(3));
    // With the leaders on every site (`--primary-sites spread`) there is no
    // one site to put the clients with.
    let clients = match spec.primary_sites {
        crate::sites::PrimarySites::First => ClientSites::Leaders,
        crate::sites::PrimarySites::Spread => ClientSites::Spread,
    };
    spec.client_sites = Some(spec.client_sites.unwrap_or(clients));
    Ok((config, spec))
}

/// TAPIR's configuration: three replicas and clients spread over the sites
/// unless told; timeouts cover the slowest round trip of the world.
fn tapir(spec: &BenchSpec) -> Result<(TapirConfig, BenchSpec), SpecError> {
    only_knobs(spec, &spec.protocol, &[])?;
    let config = TapirConfig::for_round_trip(slowest_round_trip(spec));
    let mut spec = spec.clone();
    spec.replicas = Some(spec.replicas.unwrap_or(3));
    spec.client_sites = Some(spec.client_sites.unwrap_or(ClientSites::Spread));
    Ok((config, spec))
}

fn isolation(spec: &BenchSpec) -> Result<Isolation, SpecError> {
    match &spec.knobs.isolation {
        None => Ok(Isolation::Serializable),
        Some(s) => Isolation::parse(s).ok_or_else(|| SpecError::Invalid {
            flag: "--isolation",
            value: s.clone(),
            allowed: Isolation::NAMES.join(", "),
        }),
    }
}

/// What a COCO run promises: `serializable`, its variant's level; snapshot
/// transactions, snapshot isolation (§5.3).
fn coco_level(spec: &BenchSpec, serializable: Level) -> Level {
    match isolation(spec) {
        Ok(Isolation::Snapshot) => Level::SnapshotIsolation,
        _ => serializable,
    }
}

/// The longest epoch prepare deadline `--prepare-deadline-ms` takes: a
/// minute, far above any round trip of ours (the wide-area preset's 61 ms);
/// past it a crash would stop every epoch, and hold back every result, for
/// longer.
pub const MAX_PREPARE_DEADLINE_MS: u64 = 60_000;

/// COCO's configuration: serializable transactions and three replicas
/// unless told; epoch commit for PT-OCC and LT-OCC, 2PC without
/// replication for S2PL (the paper runs it with 2PC, §7.1.2). S2PL has no
/// snapshot transactions (§5.3 is the OCC variants').
fn coco(spec: &BenchSpec, cc: Cc) -> Result<(CocoConfig, BenchSpec), SpecError> {
    only_knobs(
        spec,
        &spec.protocol,
        &[
            "--commit",
            "--epoch-ms",
            "--prepare-deadline-ms",
            "--isolation",
            "--coco-replication",
            "--epoch-barrier",
        ],
    )?;
    let default = match cc {
        Cc::S2pl => CommitMode::TwoPc,
        Cc::PtOcc | Cc::LtOcc => CommitMode::Epoch,
    };
    let mut config = CocoConfig::new(cc, commit_mode(spec, default)?)
        .covering_round_trip(slowest_round_trip(spec));
    config.isolation = isolation(spec)?;
    if let Some(s) = &spec.knobs.coco_replication {
        config.replication = Replication::parse(s).ok_or_else(|| SpecError::Invalid {
            flag: "--coco-replication",
            value: s.clone(),
            allowed: Replication::NAMES.join(", "),
        })?;
    }
    if cc == Cc::S2pl && config.isolation != Isolation::Serializable {
        return Err(SpecError::Invalid {
            flag: "--isolation",
            value: spec.knobs.isolation.clone().unwrap_or_default(),
            allowed:
                "serializable for s2pl (snapshot transactions are PT-OCC's and LT-OCC's, COCO §5.3)"
                    .into(),
        });
    }
    if let Some(ms) = spec.knobs.epoch_ms {
        if !(1..=1000).contains(&ms) {
            return Err(SpecError::Invalid {
                flag: "--epoch-ms",
                value: ms.to_string(),
                allowed: "1 to 1000".into(),
            });
        }
        config.epoch = ms * MS;
    }
    if let Some(ms) = spec.knobs.prepare_deadline_ms {
        let refused = if config.commit != CommitMode::Epoch {
            Some("unset unless --commit epoch (only epoch commit prepares, COCO §3.1)")
        } else if !(1..=MAX_PREPARE_DEADLINE_MS).contains(&ms) {
            Some("1 to 60000")
        } else {
            None
        };
        if let Some(allowed) = refused {
            return Err(SpecError::Invalid {
                flag: "--prepare-deadline-ms",
                value: ms.to_string(),
                allowed: allowed.into(),
            });
        }
        config.epoch_timeout = ms * MS;
    }
    if let Some(on) = spec.knobs.epoch_barrier {
        if on && config.commit != CommitMode::Epoch {
            return Err(SpecError::Invalid {
                flag: "--epoch-barrier",
                value: "on".into(),
                allowed: "off unless --commit epoch (only epoch commit has epochs to stop at, \
                          COCO §3.1)"
                    .into(),
            });
        }
        config.barrier = on;
    }
    let mut spec = spec.clone();
    spec.replicas = Some(spec.replicas.unwrap_or(3));
    Ok((config, spec))
}

/// OOCC's configuration: `base` with the ablation flags, the lease, its
/// adaptation and the drift stop switch the spec sets. Only the OOCC knobs
/// apply.
fn oocc(spec: &BenchSpec, base: OoccConfig) -> Result<(OoccConfig, BenchSpec), SpecError> {
    let run = on_memory_nodes(
        spec,
        &[
            "--oocc-lease",
            "--oocc-write-unlock",
            "--oocc-delayed-lock",
            "--oocc-late-upgrade",
            "--lease-us",
            "--oocc-lease-adapt",
            "--oocc-lease-min-us",
            "--oocc-lease-max-us",
            "--oocc-lease-period-us",
            "--oocc-drift-stop",
            "--oocc-offset-ns",
            "--oocc-sync-us",
        ],
    )?;
    let k = &spec.knobs;
    let mut config = base;
    config.region = region(spec, config.region);
    config.lease = k.oocc_lease.unwrap_or(config.lease);
    config.write_unlock = k.oocc_write_unlock.unwrap_or(config.write_unlock);
    config.delayed_lock = k.oocc_delayed_lock.unwrap_or(config.delayed_lock);
    config.late_upgrade = k.oocc_late_upgrade.unwrap_or(config.late_upgrade);
    config.drift_stop = k.oocc_drift_stop.unwrap_or(config.drift_stop);
    if let Some(us) = k.oocc_sync_us {
        config.sync_period = us * tessera_core::ids::US;
    }
    config.offset.floor = offset_floor(spec, config.lease)?.unwrap_or(config.offset.floor);
    config.lease_ns = lease_ns(spec)?.unwrap_or(config.lease_ns);
    config.adapt = lease_adapt(spec, config.lease, config.lease_ns)?;
    Ok((config, run))
}

/// A hidden `oocc` whose configuration `breaks` changes after the spec's
/// knobs: a variant broken on purpose, so that tests can show the checker
/// catches it (see `oocc/mod.rs`).
fn broken_oocc(
    name: &'static str,
    summary: &'static str,
    breaks: fn(&mut OoccConfig),
) -> ProtocolEntry {
    ProtocolEntry::configured::<Oocc>(name, summary, move |spec: &BenchSpec| {
        let (mut config, spec) = oocc(spec, OoccConfig::oocc())?;
        breaks(&mut config);
        Ok((config, spec))
    })
    .hidden()
}

/// `--oocc-offset-ns`, if given: it widens leases (§VII.B, §VIII.G), so it
/// needs them on, and stays within a second, the CLI's bound.
fn offset_floor(spec: &BenchSpec, lease: bool) -> Result<Option<Time>, SpecError> {
    const MAX: Time = 1_000 * MS;
    let Some(ns) = spec.knobs.oocc_offset_ns else {
        return Ok(None);
    };
    let allowed = if !lease {
        "unset when leases are off (--oocc-lease off, ford-occ): there is no lease to widen"
    } else if ns > MAX {
        "0 to 1000000000 ns"
    } else {
        return Ok(Some(ns));
    };
    Err(SpecError::Invalid {
        flag: "--oocc-offset-ns",
        value: ns.to_string(),
        allowed: allowed.into(),
    })
}

/// The Lease Manager's adaptation (§VII.A), off unless `--oocc-lease-adapt
/// on`: its bounds and period apply only with it, and the starting lease
/// must lie within the bounds.
fn lease_adapt(
    spec: &BenchSpec,
    lease: bool,
    start: tessera_core::ids::Time,
) -> Result<Option<AdaptConfig>, SpecError> {
    use tessera_core::ids::US;
    let k = &spec.knobs;
    let on_flag = k.oocc_lease_adapt == Some(true);
    let knobs = [
        ("--oocc-lease-min-us", k.oocc_lease_min_us),
        ("--oocc-lease-max-us", k.oocc_lease_max_us),
        ("--oocc-lease-period-us", k.oocc_lease_period_us),
    ];
    for (flag, v) in knobs {
        match v {
            Some(v) if !on_flag => {
                return Err(SpecError::Invalid {
                    flag,
                    value: v.to_string(),
                    allowed: "only with --oocc-lease-adapt on".into(),
                })
            }
            Some(0) => {
                return Err(SpecError::Invalid {
                    flag,
                    value: "0".into(),
                    allowed: "1 or more microseconds".into(),
                })
            }
            _ => {}
        }
    }
    if !on_flag {
        return Ok(None);
    }
    if !lease {
        return Err(SpecError::Invalid {
            flag: "--oocc-lease-adapt",
            value: "on".into(),
            allowed: "off when leases are off (--oocc-lease off, ford-occ)".into(),
        });
    }
    let mut a = AdaptConfig::default();
    a.min = k
        .oocc_lease_min_us
        .map_or(a.min, |us| us.saturating_mul(US));
    a.max = k
        .oocc_lease_max_us
        .map_or(a.max, |us| us.saturating_mul(US));
    a.period = k
        .oocc_lease_period_us
        .map_or(a.period, |us| us.saturating_mul(US));
    let bound = |flag, v: tessera_core::ids::Time| SpecError::Invalid {
        flag,
        value: (v / US).to_string(),
        allowed: format!(
            "bounds around the starting lease: min <= {} µs (--lease-us) <= max",
            start.div_ceil(US)
        ),
    };
    if a.min > start {
        return Err(bound("--oocc-lease-min-us", a.min));
    }
    if a.max < start {
        return Err(bound("--oocc-lease-max-us", a.max));
    }
    Ok(Some(a))
}

/// DrTM's configuration: `--lease-us` sets its shared-lock lease (400 µs
/// by default, §VIII.A).
fn drtm(spec: &BenchSpec) -> Result<(DrtmConfig, BenchSpec), SpecError> {
    let run = on_memory_nodes(spec, &["--lease-us"])?;
    let mut config = DrtmConfig::default();
    config.region = region(spec, config.region);
    config.lease_ns = lease_ns(spec)?.unwrap_or(config.lease_ns);
    Ok((config, run))
}

fn dslr(spec: &BenchSpec) -> Result<(DslrConfig, BenchSpec), SpecError> {
    let run = on_memory_nodes(spec, &[])?;
    let mut config = DslrConfig::default();
    config.region = region(spec, config.region);
    Ok((config, run))
}

/// The memory nodes' region with `--region-slots-per-record` applied (the
/// CLI refuses 0).
fn region(spec: &BenchSpec, base: RegionConfig) -> RegionConfig {
    RegionConfig {
        slots_per_record: spec
            .knobs
            .region_slots_per_record
            .unwrap_or(base.slots_per_record)
            .max(1),
        ..base
    }
}

/// `--lease-us` in nanoseconds, if given (zero is refused).
fn lease_ns(spec: &BenchSpec) -> Result<Option<tessera_core::ids::Time>, SpecError> {
    match spec.knobs.lease_us {
        Some(0) => Err(SpecError::Invalid {
            flag: "--lease-us",
            value: "0".into(),
            allowed: "1 or more microseconds".into(),
        }),
        us => Ok(us.map(|us| us.saturating_mul(tessera_core::ids::US))),
    }
}

/// What every protocol on memory nodes refuses (knobs other than `knobs`,
/// and replication), and the spec it runs: on `tcp`, clients start nothing
/// in the cool-down (`--drain`), so that the transactions in flight
/// release their locks before the bench driver exits. Memory nodes outlive
/// the driver and nothing recovers a compute node's locks (OOCC's logs
/// are not replayed), so a transaction cut off at the end would leave its
/// records locked for every later run on the same memory nodes.
fn on_memory_nodes(spec: &BenchSpec, knobs: &[&'static str]) -> Result<BenchSpec, SpecError> {
    let mut allowed = knobs.to_vec();
    if spec.runtime != crate::RuntimeKind::Tcp {
        // On tcp the memory nodes are `tessera server` processes, laid
        // out before the bench driver starts.
        allowed.push("--region-slots-per-record");
    }
    only_knobs(spec, &spec.protocol, &allowed)?;
    unreplicated(spec, &spec.protocol)?;
    let mut spec = spec.clone();
    if spec.runtime == crate::RuntimeKind::Tcp {
        spec.drain = spec.cooldown;
    }
    Ok(spec)
}

/// NOCC's configuration from the spec's knobs; one switch unless told.
fn nocc(spec: &BenchSpec, verify: bool) -> Result<(NoccConfig, BenchSpec), SpecError> {
    if spec.workload.shards() != 1 {
        return Err(SpecError::Invalid {
            flag: "--shards",
            value: spec.workload.shards().to_string(),
            allowed: "1: NOCC has a single store".into(),
        });
    }
    only_knobs(
        spec,
        &spec.protocol,
        &[
            "--switch-cache",
            "--switch-max-ops",
            "--switch-value-width",
            "--switch-stages",
            "--recirculation-ns",
        ],
    )?;
    unreplicated(spec, &spec.protocol)?;
    let d = NoccConfig::default();
    let k = &spec.knobs;
    let positive = |flag: &'static str, v: Option<u64>, default: u64| match v {
        Some(0) => Err(SpecError::Invalid {
            flag,
            value: "0".into(),
            allowed: "1 or more".into(),
        }),
        Some(v) => Ok(v),
        None => Ok(default),
    };
    let config = NoccConfig {
        verify,
        validate: true,
        cache_keys: k.switch_cache.unwrap_or(d.cache_keys),
        max_ops: positive(
            "--switch-max-ops",
            k.switch_max_ops.map(u64::from),
            d.max_ops as u64,
        )? as usize,
        value_width: positive(
            "--switch-value-width",
            k.switch_value_width.map(u64::from),
            d.value_width as u64,
        )? as usize,
        stages: positive(
            "--switch-stages",
            k.switch_stages.map(u64::from),
            d.stages as u64,
        )? as usize,
        recirculation: k.recirculation_ns.unwrap_or(d.recirculation),
        // False aborts are counted with probes the simulator does not charge
        // for; elsewhere they would cost store CPU, so they stay off.
        probe: spec.runtime == crate::spec::RuntimeKind::Sim,
        retransmit: d.retransmit,
    };
    let mut spec = spec.clone();
    spec.switches = Some(spec.switches.unwrap_or(1));
    Ok((config, spec))
}

/// Names a user may pick.
pub fn names() -> Vec<&'static str> {
    registry()
        .into_iter()
        .filter(|e| !e.hidden)
        .map(|e| e.name)
        .collect()
}

/// Look up a protocol by name; the error lists the allowed names.
pub fn find(name: &str) -> Result<ProtocolEntry, crate::spec::SpecError> {
    registry()
        .into_iter()
        .find(|e| e.name == name)
        .ok_or_else(|| crate::spec::SpecError::Invalid {
            flag: "--protocol",
            value: name.to_string(),
            allowed: names().join(", "),
        })
}

/// Janus replicates every shard itself (§3.1): groups of three unless the
/// spec says otherwise. `--per-column` sets [`JanusConfig::per_column`]
/// (conflicts per (row, column), §3, or per row), which is also what the
/// run is checked at ([`ProtocolEntry::checks_per_column`]).
fn janus(spec: &BenchSpec) -> Result<(JanusConfig, BenchSpec), SpecError> {
    only_knobs(
        spec,
        "janus",
        &[
            "--forget-epochs",
            "--per-column",
            "--fast-path-by-rtt",
            "--prefetch-outputs",
            "--graph-cpu-ns",
        ],
    )?;
    let mut spec = spec.clone();
    spec.replicas = Some(spec.replicas.unwrap_or(3));
    // Timeouts cover the slowest round trip of the world, as the layered
    // baselines' do: over geo sites a 20 ms retransmission and a 150 ms
    // suspicion would resend and recover transactions that are only slow.
    let rtt = slowest_round_trip(&spec);
    let mut cfg = JanusConfig::default();
    cfg.retransmit = cfg.retransmit.max(2 * rtt);
    cfg.inquire_after = cfg.inquire_after.max(4 * rtt);
    cfg.recover_after = cfg.recover_after.max(20 * rtt);
    // The `tcp` runtime no longer keeps tombstones 20 s (it did from
    // 2026-11-25 to 2026-11-29: late messages about a forgotten
    // transaction ran it again once its tombstone expired, and without the
    // 20 s janus_cluster failed). A replica now keeps an exact record of
    // what it forgot (janus/gc.rs, *what a replica forgot*), so a
    // tombstone's age is no longer a timing assumption; janus_cluster
    // passed 10 of 10 runs with the 2 s default (2026-11-29, janus23b).
    match spec.knobs.forget_epochs {
        Some(0) => {
            return Err(SpecError::Invalid {
                flag: "--forget-epochs",
                value: "0".into(),
                allowed: "1 or more (epochs a tombstone answers late messages)".into(),
            })
        }
        Some(n) => cfg.forget_epochs = n,
        None => {}
    }
    if let Some(on) = spec.knobs.per_column {
        // `tessera server` builds its configuration from the cluster file,
        // without knobs: the servers track per column whatever this
        // driver's flag says, and a per-row check of their history would
        // report their column-disjoint orders as lost updates.
        if spec.runtime == crate::RuntimeKind::Tcp {
            return Err(SpecError::Invalid {
                flag: "--per-column",
                value: if on { "on" } else { "off" }.into(),
                allowed: "only with --runtime sim or local (on tcp the servers track \
                          conflicts per column)"
                    .into(),
            });
        }
        cfg.per_column = on;
    }
    // On `tcp` the servers (and their recovery coordinators) take their
    // configuration from the cluster file: these are refused there as
    // `--per-column` is, so one run has one rule.
    if let Some(on) = spec.knobs.fast_path_by_rtt {
        not_on_tcp(&spec, "--fast-path-by-rtt", on)?;
        cfg.fast_path_wait_by_rtt = on;
    }
    if let Some(on) = spec.knobs.prefetch_outputs {
        not_on_tcp(&spec, "--prefetch-outputs", on)?;
        cfg.prefetch_outputs = on;
    }
    cfg.graph_cpu = graph_cpu(&spec)?;
    Ok((cfg, spec))
}

/// `--graph-cpu-ns`: a simulated cost, so `sim` only (elsewhere a walk
/// costs what it really costs).
fn graph_cpu(spec: &BenchSpec) -> Result<u64, SpecError> {
    match spec.knobs.graph_cpu_ns {
        Some(ns) if spec.runtime != crate::RuntimeKind::Sim => Err(SpecError::Invalid {
            flag: "--graph-cpu-ns",
            value: ns.to_string(),
            allowed: "only with --runtime sim (a simulated cost)".into(),
        }),
        ns => Ok(ns.unwrap_or(0)),
    }
}

/// Refuses the on/off `flag` on the `tcp` runtime.
fn not_on_tcp(spec: &BenchSpec, flag: &'static str, on: bool) -> Result<(), SpecError> {
    if spec.runtime == crate::RuntimeKind::Tcp {
        return Err(SpecError::Invalid {
            flag,
            value: if on { "on" } else { "off" }.into(),
            allowed: "only with --runtime sim or local".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_hidden_ones_not_listed() {
        let all = registry();
        let mut n: Vec<_> = all.iter().map(|e| e.name).collect();
        n.sort_unstable();
        n.dedup();
        assert_eq!(n.len(), all.len());
        assert!(!names().contains(&"occ-unsafe"));
        assert!(find("occ-unsafe").is_ok());
        let err = find("paxos").err().unwrap().to_string();
        assert!(
            err.contains("--protocol") && err.contains("2pl-ww"),
            "{err}"
        );
    }

    /// Every entry refuses the knobs it does not read, naming the flag,
    /// before anything runs.
    #[test]
    fn knobs_are_refused_by_protocols_that_do_not_read_them() {
        use crate::spec::{Knobs, RuntimeKind, WorkloadSpec};
        let wl_spec = WorkloadSpec::Ycsb(tessera_workloads::YcsbConfig {
            partitions: 1,
            ..Default::default()
        });
        let wl = crate::run::workload(&wl_spec).unwrap();
        // s2pl reads --isolation but refuses snapshot, naming the flag.
        let cases: [(&str, Knobs); 11] = [
            (
                "--epoch-ms",
                Knobs {
                    epoch_ms: Some(5),
                    ..Knobs::default()
                },
            ),
            (
                "--prepare-deadline-ms",
                Knobs {
                    prepare_deadline_ms: Some(100),
                    ..Knobs::default()
                },
            ),
            (
                "--isolation",
                Knobs {
                    isolation: Some("snapshot".into()),
                    ..Knobs::default()
                },
            ),
            (
                "--switch-cache",
                Knobs {
                    switch_cache: Some(10),
                    ..Knobs::default()
                },
            ),
            // Rococo reads it, and refuses 0 (no round to compare).
            (
                "--ro-rounds",
                Knobs {
                    ro_rounds: Some(0),
                    ..Knobs::default()
                },
            ),
            // Janus reads it, and refuses 0 (a tombstone must outlive the
            // epoch that buried it).
            (
                "--forget-epochs",
                Knobs {
                    forget_epochs: Some(0),
                    ..Knobs::default()
                },
            ),
            (
                "--per-column",
                Knobs {
                    per_column: Some(false),
                    ..Knobs::default()
                },
            ),
            (
                "--fast-path-by-rtt",
                Knobs {
                    fast_path_by_rtt: Some(true),
                    ..Knobs::default()
                },
            ),
            (
                "--prefetch-outputs",
                Knobs {
                    prefetch_outputs: Some(true),
                    ..Knobs::default()
                },
            ),
            (
                "--paxos-batch",
                Knobs {
                    paxos_batch: Some(1),
                    ..Knobs::default()
                },
            ),
            (
                "--graph-cpu-ns",
                Knobs {
                    graph_cpu_ns: Some(100),
                    ..Knobs::default()
                },
            ),
        ];
        for e in registry() {
            for (flag, knobs) in &cases {
                let reads = match *flag {
                    "--epoch-ms" => ["pt-occ", "lt-occ", "s2pl"].contains(&e.name),
                    // s2pl's default commit is 2pc, which refuses it.
                    "--prepare-deadline-ms" => ["pt-occ", "lt-occ"].contains(&e.name),
                    "--isolation" => ["pt-occ", "lt-occ"].contains(&e.name),
                    "--ro-rounds" | "--forget-epochs" => false,
                    "--per-column" | "--fast-path-by-rtt" | "--prefetch-outputs" => {
                        e.name == "janus"
                    }
                    "--paxos-batch" => ["2pl-paxos", "occ-paxos"].contains(&e.name),
                    "--graph-cpu-ns" => ["janus", "rococo", "rococo-nomerge"].contains(&e.name),
                    _ => e.name.starts_with("nocc"),
                };
                if reads {
                    continue;
                }
                let mut spec = BenchSpec::new(RuntimeKind::Sim, e.name, wl_spec.clone());
                spec.knobs = knobs.clone();
                let err = e
                    .run(&spec, wl.clone())
                    .err()
                    .unwrap_or_else(|| panic!("{} ran with {flag}", e.name))
                    .to_string();
                assert!(err.contains(flag), "{}: {err}", e.name);
            }
        }
        let mut spec = BenchSpec::new(RuntimeKind::Sim, "nocc", wl_spec);
        spec.replicas = Some(3);
        let err = find("nocc")
            .unwrap()
            .run(&spec, wl)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("--replicas"), "{err}");
    }

    /// A `sim` spec of `protocol` on the default YCSB.
    fn sim_ycsb(protocol: &str) -> BenchSpec {
        use crate::spec::{RuntimeKind, WorkloadSpec};
        BenchSpec::new(
            RuntimeKind::Sim,
            protocol,
            WorkloadSpec::Ycsb(tessera_workloads::YcsbConfig::default()),
        )
    }

    /// `--graph-cpu-ns` prices Janus's and Rococo's graph walks, on `sim`
    /// only (a simulated cost).
    #[test]
    fn graph_cpu_is_set_on_sim_only() {
        for protocol in ["janus", "rococo"] {
            let mut spec = sim_ycsb(protocol);
            spec.knobs.graph_cpu_ns = Some(250);
            let cost = |spec: &BenchSpec| match protocol {
                "janus" => janus(spec).map(|(c, _)| c.graph_cpu),
                _ => rococo(spec, protocol, true).map(|(c, _)| c.graph_cpu),
            };
            assert_eq!(cost(&spec).unwrap(), 250, "{protocol}");
            spec.knobs.graph_cpu_ns = None;
            assert_eq!(cost(&spec).unwrap(), 0, "{protocol}");
            spec.knobs.graph_cpu_ns = Some(250);
            spec.runtime = crate::RuntimeKind::Local;
            let err = cost(&spec).err().unwrap().to_string();
            assert!(
                err.contains("--graph-cpu-ns") && err.contains("sim"),
                "{err}"
            );
        }
    }

    /// `--paxos-batch` shrinks the layered baselines' slots and lets more
    /// of them fly, so as many commands fit in a round trip as before.
    #[test]
    fn paxos_batch_keeps_the_commands_in_flight() {
        let mut spec = sim_ycsb("occ-paxos");
        let occ = OccConfig { validate: true };
        let default = layered(&spec, &[], occ.clone()).unwrap().0.log.paxos;
        assert_eq!(default.max_batch, PaxosConfig::default().max_batch);
        spec.knobs.paxos_batch = Some(1);
        let one = layered(&spec, &[], occ).unwrap().0.log.paxos;
        assert_eq!(one.max_batch, 1);
        assert_eq!(one.pipeline, default.pipeline * default.max_batch);
    }

    /// `--prepare-deadline-ms` becomes the epoch manager's deadline, also
    /// on wide-area sites, whose round trips otherwise raise the default.
    #[test]
    fn the_prepare_deadline_is_the_configured_one() {
        let mut spec = sim_ycsb("pt-occ");
        let default = coco(&spec, Cc::PtOcc).unwrap().0.epoch_timeout;
        assert_eq!(default, 50 * MS);
        spec.knobs.prepare_deadline_ms = Some(200);
        assert_eq!(coco(&spec, Cc::PtOcc).unwrap().0.epoch_timeout, 200 * MS);
        spec.sites = Some(crate::sites::Sites::coco_wan());
        assert_eq!(coco(&spec, Cc::PtOcc).unwrap().0.epoch_timeout, 200 * MS);
        spec.knobs.prepare_deadline_ms = None;
        assert!(coco(&spec, Cc::PtOcc).unwrap().0.epoch_timeout > 200 * MS);
        spec.knobs.prepare_deadline_ms = Some(MAX_PREPARE_DEADLINE_MS + 1);
        let err = coco(&spec, Cc::PtOcc).err().unwrap().to_string();
        assert!(err.contains("--prepare-deadline-ms"), "{err}");
    }

    /// `--oocc-sync-us` sets how often a coordinator host measures its
    /// clock (§VII.B); unset, the period stays the config's 50 µs, so
    /// every earlier row is unchanged.
    #[test]
    fn the_sync_period_is_the_configured_one() {
        use tessera_core::ids::US;
        let mut spec = sim_ycsb("oocc");
        let default = oocc(&spec, OoccConfig::oocc()).unwrap().0.sync_period;
        assert_eq!(default, 50 * US);
        spec.knobs.oocc_sync_us = Some(1_000);
        assert_eq!(spec.knobs.set_flags(), vec!["--oocc-sync-us"]);
        let config = oocc(&spec, OoccConfig::oocc()).unwrap().0;
        assert_eq!(config.sync_period, 1_000 * US);
        assert_eq!(config.calibration, OoccConfig::oocc().calibration);
    }

    /// Whether a run is recorded and checked per column is asked of the
    /// configured run: Janus per column unless `--per-column off`, every
    /// other protocol per row; the clients record columns exactly then.
    /// On tcp the servers ignore the driver's knobs, so the flag is
    /// refused there.
    #[test]
    fn the_check_granularity_follows_the_configured_run() {
        let entry = find("janus").unwrap();
        let mut spec = sim_ycsb("janus");
        for (knob, per_column) in [(None, true), (Some(true), true), (Some(false), false)] {
            spec.knobs.per_column = knob;
            assert_eq!(janus(&spec).unwrap().0.per_column, per_column, "{knob:?}");
            assert_eq!(entry.checks_per_column(&spec), per_column, "{knob:?}");
            assert_eq!(
                crate::deploy::client_config(&spec).record_columns,
                per_column,
                "{knob:?}"
            );
        }
        spec.knobs.per_column = None;
        assert_eq!(spec.knobs.set_flags(), Vec::<&str>::new());
        spec.knobs.per_column = Some(false);
        assert_eq!(spec.knobs.set_flags(), vec!["--per-column"]);
        let tapir = sim_ycsb("tapir");
        assert!(!find("tapir").unwrap().checks_per_column(&tapir));
        assert!(!crate::deploy::client_config(&tapir).record_columns);
        spec.runtime = crate::RuntimeKind::Tcp;
        let err = janus(&spec).err().unwrap().to_string();
        assert!(err.contains("--per-column") && err.contains("tcp"), "{err}");
    }
    /// `--fast-path-by-rtt` sets the coordinator's rule for giving up on
    /// the fast path (on unless turned off), `--prefetch-outputs` when a
    /// replica asks for other shards' outputs (off unless asked): each
    /// set on sim and local only.
    #[test]
    fn the_fast_path_wait_and_the_output_prefetch_are_the_configured_ones() {
        type Set = fn(&mut crate::spec::Knobs);
        type Get = fn(&JanusConfig) -> bool;
        let cases: [(&str, Set, Get, bool); 2] = [
            (
                "--fast-path-by-rtt",
                |k| k.fast_path_by_rtt = Some(false),
                |c| c.fast_path_wait_by_rtt,
                true,
            ),
            (
                "--prefetch-outputs",
                |k| k.prefetch_outputs = Some(true),
                |c| c.prefetch_outputs,
                false,
            ),
        ];
        for (flag, set, get, default) in cases {
            let mut spec = sim_ycsb("janus");
            assert_eq!(get(&janus(&spec).unwrap().0), default, "{flag}");
            set(&mut spec.knobs);
            assert_eq!(spec.knobs.set_flags(), vec![flag]);
            assert_eq!(get(&janus(&spec).unwrap().0), !default, "{flag}");
            spec.runtime = crate::RuntimeKind::Tcp;
            let err = janus(&spec).err().unwrap().to_string();
            assert!(err.contains(flag) && err.contains("sim"), "{err}");
        }
    }
}
