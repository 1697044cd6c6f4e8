//! The protocol registry: the one place that maps a protocol's name to its
//! type and default configuration. Nothing else matches on protocol names.

use crate::deploy::{run_protocol, RawRun};
use crate::sites::ClientSites;
use crate::spec::BenchSpec;
use crate::spec::SpecError;
use std::sync::Arc;
use tessera_core::codec::Codec;
use tessera_core::protocol::Protocol;
use tessera_core::workload::Workload;
use tessera_protocols::janus::{Janus, JanusConfig};
use tessera_protocols::layered::{OccPaxos, PaxosLogConfig, TwoPlPaxos};
use tessera_protocols::nocc::{Nocc, NoccConfig};
use tessera_protocols::occ::{OccConfig, OccProtocol};
use tessera_protocols::paxos::PaxosConfig;
use tessera_protocols::rococo::{Rococo, RococoConfig};
use tessera_protocols::tapir::{Tapir, TapirConfig};
use tessera_protocols::twopc::{Timeouts, TwoPcConfig};
use tessera_protocols::twopl::{Policy, TwoPlConfig, TwoPlProtocol};

type Runner = Box<dyn Fn(&BenchSpec, Arc<dyn Workload>) -> anyhow::Result<RawRun> + Send + Sync>;
type Server = Box<dyn Fn(&BenchSpec, Arc<dyn Workload>, &str) -> anyhow::Result<()> + Send + Sync>;

/// How a protocol whose messages have a wire codec runs on `tcp`.
struct TcpHooks {
    bench: Runner,
    serve: Server,
}

/// A runnable protocol: name, one-line summary, and how to run it.
pub struct ProtocolEntry {
    pub name: &'static str,
    pub summary: &'static str,
    /// Hidden entries exist for tests (e.g. a deliberately broken variant)
    /// and are not listed to users.
    pub hidden: bool,
    run: Runner,
    tcp: Option<TcpHooks>,
}

impl ProtocolEntry {
    /// A protocol with a fixed configuration, which takes no knobs.
    fn new<P: Protocol>(name: &'static str, summary: &'static str, config: P::Config) -> Self
    where
        P::Config: Clone,
    {
        Self::configured::<P>(name, summary, move |spec| {
            if let Some(flag) = spec.knobs.set_flags().first() {
                return Err(SpecError::Invalid {
                    flag,
                    value: name.into(),
                    allowed: "protocols that have this knob (see --help)".into(),
                });
            }
            unreplicated(name, spec)?;
            Ok((config.clone(), spec.clone()))
        })
    }

    /// A protocol whose configuration (and defaults, such as the number of
    /// switches) `configure` derives from the run's spec.
    fn configured<P: Protocol>(
        name: &'static str,
        summary: &'static str,
        configure: impl Fn(&BenchSpec) -> Result<(P::Config, BenchSpec), SpecError>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        ProtocolEntry {
            name,
            summary,
            hidden: false,
            run: Box::new(move |spec, workload| {
                let (config, spec) = configure(spec)?;
                run_protocol::<P>(&config, &spec, workload)
            }),
            tcp: None,
        }
    }

    /// Let the protocol run on `tcp` (its messages have a wire codec).
    fn with_tcp<P: Protocol>(mut self, config: P::Config) -> Self
    where
        P::Msg: Codec,
    {
        let c2 = config.clone();
        self.tcp = Some(TcpHooks {
            bench: Box::new(move |spec, wl| crate::tcp::bench::<P>(&config, spec, wl)),
            serve: Box::new(move |spec, wl, node| crate::tcp::serve::<P>(&c2, spec, wl, node)),
        });
        self
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

    fn hidden(mut self) -> Self {
        self.hidden = true;
        self
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
        cc: TwoPlConfig { policy },
        timeouts: timeouts.clone(),
        log: (),
    };
    let occ = |validate| TwoPcConfig {
        cc: OccConfig { validate },
        timeouts: timeouts.clone(),
        log: (),
    };
    vec![
        ProtocolEntry::new::<TwoPlProtocol>(
            "2pl-ww",
            "2PL + 2PC, wound-wait (Spanner; Rococo §5.1)",
            twopl(Policy::WoundWait),
        )
        .with_tcp::<TwoPlProtocol>(twopl(Policy::WoundWait)),
        ProtocolEntry::new::<TwoPlProtocol>(
            "2pl-nowait",
            "2PL + 2PC, NO_WAIT (COCO §7.1.2)",
            twopl(Policy::NoWait),
        )
        .with_tcp::<TwoPlProtocol>(twopl(Policy::NoWait)),
        ProtocolEntry::new::<OccProtocol>(
            "occ",
            "OCC + 2PC: execute, lock + validate, write back (COCO §4)",
            occ(true),
        )
        .with_tcp::<OccProtocol>(occ(true)),
        ProtocolEntry::new::<Rococo>(
            "rococo",
            "Rococo: dependency tracking, deferred pieces reordered at commit, no aborts (OSDI '14)",
            RococoConfig::default(),
        ),
        ProtocolEntry::configured::<Janus>(
            "janus",
            "Janus: PreAccept/Accept/Commit over replica groups (3 by default), fast path on identical dependencies, no aborts for conflicts (OSDI '16)",
            janus,
        ),
        ProtocolEntry::new::<OccProtocol>(
            "occ-unsafe",
            "OCC + 2PC with validation switched off: broken on purpose, for checker tests",
            occ(false),
        )
        .with_tcp::<OccProtocol>(occ(false))
        .hidden(),
        ProtocolEntry::configured::<TwoPlPaxos>(
            "2pl-paxos",
            "2PL (wound-wait) + 2PC over Multi-Paxos per shard: Janus §5's layered baseline",
            |spec| {
                layered(
                    spec,
                    TwoPlConfig {
                        policy: Policy::WoundWait,
                    },
                )
            },
        ),
        ProtocolEntry::configured::<OccPaxos>(
            "occ-paxos",
            "OCC + 2PC over Multi-Paxos per shard: Janus §5's layered baseline",
            |spec| layered(spec, OccConfig { validate: true }),
        ),
        ProtocolEntry::configured::<Tapir>(
            "tapir",
            "TAPIR: OCC at every replica over inconsistent replication, no leader (Janus §5-6)",
            tapir,
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
    ]
}

/// Refuse a replica group larger than one for a protocol that does not
/// replicate (its extra servers would sit idle, holding stale data).
fn unreplicated(name: &str, spec: &BenchSpec) -> Result<(), SpecError> {
    match spec.replicas {
        None | Some(1) => Ok(()),
        Some(r) => Err(SpecError::Invalid {
            flag: "--replicas",
            value: r.to_string(),
            allowed: format!("1 for {name}, which does not replicate its shards"),
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
    cc: X,
) -> Result<(TwoPcConfig<X, PaxosLogConfig>, BenchSpec), SpecError> {
    if let Some(flag) = spec.knobs.set_flags().first() {
        return Err(SpecError::Invalid {
            flag,
            value: spec.protocol.clone(),
            allowed: "protocols that have this knob (see --help)".into(),
        });
    }
    let rtt = slowest_round_trip(spec);
    let mut timeouts = Timeouts::default();
    timeouts.retransmit = timeouts.retransmit.max(2 * rtt);
    timeouts.inquire = timeouts.inquire.max(4 * rtt);
    timeouts.participant = timeouts.participant.max(20 * rtt);
    timeouts.tombstone = timeouts.tombstone.max(40 * rtt);
    let paxos = PaxosConfig {
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
    let config = TwoPcConfig {
        cc,
        timeouts,
        log: PaxosLogConfig { paxos },
    };
    let mut spec = spec.clone();
    spec.replicas = Some(spec.replicas.unwrap_or(3));
    spec.client_sites = Some(spec.client_sites.unwrap_or(ClientSites::Leaders));
    Ok((config, spec))
}

/// TAPIR's configuration: three replicas and clients spread over the sites
/// unless told; timeouts cover the slowest round trip of the world.
fn tapir(spec: &BenchSpec) -> Result<(TapirConfig, BenchSpec), SpecError> {
    if let Some(flag) = spec.knobs.set_flags().first() {
        return Err(SpecError::Invalid {
            flag,
            value: spec.protocol.clone(),
            allowed: "protocols that have this knob (see --help)".into(),
        });
    }
    let config = TapirConfig::for_round_trip(slowest_round_trip(spec));
    let mut spec = spec.clone();
    spec.replicas = Some(spec.replicas.unwrap_or(3));
    spec.client_sites = Some(spec.client_sites.unwrap_or(ClientSites::Spread));
    Ok((config, spec))
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
    unreplicated(&spec.protocol, spec)?;
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
/// spec says otherwise.
fn janus(spec: &BenchSpec) -> Result<(JanusConfig, BenchSpec), SpecError> {
    if let Some(flag) = spec.knobs.set_flags().first() {
        return Err(SpecError::Invalid {
            flag,
            value: "janus".into(),
            allowed: "protocols that have this knob (see --help)".into(),
        });
    }
    let mut spec = spec.clone();
    spec.replicas = Some(spec.replicas.unwrap_or(3));
    if spec.replicas == Some(0) {
        return Err(SpecError::Invalid {
            flag: "--replicas",
            value: "0".into(),
            allowed: "at least 1 replica per shard".into(),
        });
    }
    Ok((JanusConfig::default(), spec))
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
}
