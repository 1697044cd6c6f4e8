//! NOCC: network optimistic concurrency control (`nocc-network-occ.txt`).
//!
//! Clients execute transactions on a local mirror of the data and submit
//! them as compares, reads and writes ([`msg`]). A single store commits a
//! request when all its compares hold, in arrival order, and otherwise
//! aborts it with corrections ([`store`]). On the path, a switch per rack of
//! clients keeps a cache of hot values and aborts, before they reach the
//! store, the requests whose compares it already knows to fail, updating the
//! cache speculatively from the requests it forwards ([`switch`], §2
//! "Speculative Verification Offload"). Clients retry at once on the
//! corrections an abort brings ([`client`]).
//!
//! `nocc-off` is the same deployment with switches that only forward: the
//! paper's OCC baseline.
//!
//! Our switch is a node of the runtime, not a Tofino: its limits (parse
//! depth, register width and stages, recirculation) are configuration (§3).
//! NOCC has one store: workloads must have one shard.

pub mod cache;
pub mod client;
pub mod msg;
pub mod store;
pub mod switch;

use tessera_core::ids::{Time, MS};
use tessera_core::node::Node;
use tessera_core::protocol::{CoordinatorEnv, Protocol, ServerEnv, SwitchEnv};

pub use msg::Msg;

/// The switch's behaviour and limits, and the client's retransmission.
#[derive(Clone, Debug)]
pub struct NoccConfig {
    /// Verify at the switch (`nocc`); `false`: forward only (`nocc-off`).
    pub verify: bool,
    /// Check compares at the store. `false` is broken on purpose, so that
    /// tests can show the isolation checker catches it.
    pub validate: bool,
    /// Keys the switch's value cache holds.
    pub cache_keys: usize,
    /// Operations per request the switch's parser reaches (the packet
    /// header vector, §3); larger requests pass unverified.
    pub max_ops: usize,
    /// Bytes one register stage reads or writes per pass (32 bits on Tofino,
    /// §3) and register stages a value may span.
    pub value_width: usize,
    pub stages: usize,
    /// Switch time per operation: one recirculation each (§3).
    pub recirculation: Time,
    /// Send a metrics-only probe to the store for every switch abort, to
    /// count false aborts (the simulator does not charge for probes).
    pub probe: bool,
    /// Client retransmission timeout (doubles, capped at 8x).
    pub retransmit: Time,
}

impl Default for NoccConfig {
    fn default() -> Self {
        NoccConfig {
            verify: true,
            validate: true,
            cache_keys: 65_536,
            max_ops: 32,
            value_width: 4,
            stages: 16,
            recirculation: 100,
            probe: false,
            retransmit: 20 * MS,
        }
    }
}

impl NoccConfig {
    /// The widest value the switch can cache.
    pub fn max_value_bytes(&self) -> usize {
        self.value_width.saturating_mul(self.stages)
    }
}

/// The NOCC protocol: store, client mirror, and switch.
pub struct Nocc;

impl Protocol for Nocc {
    type Msg = Msg;
    type Config = NoccConfig;
    type Server = store::NoccStore;
    type Coordinator = client::NoccClient;

    fn server(config: &NoccConfig, env: ServerEnv) -> store::NoccStore {
        store::NoccStore::new(env, config.validate)
    }

    fn coordinator(config: &NoccConfig, env: CoordinatorEnv) -> client::NoccClient {
        client::NoccClient::new(config.clone(), env)
    }

    fn switch(config: &NoccConfig, env: SwitchEnv) -> Option<Box<dyn Node<Msg>>> {
        Some(Box::new(switch::NoccSwitch::new(
            config.clone(),
            env.topology,
        )))
    }
}
