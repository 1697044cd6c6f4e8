//! Random fault plans for simulator runs: one seed, one plan.
//!
//! A plan injects message loss, duplication and reordering, a short
//! partition between a client host and a server, and a crash of a client
//! host (its coordinator with it) that restarts later — the faults the
//! foundation protocols must survive. Server crashes come with the
//! protocols that log enough to recover (Rococo, Janus, COCO, WAL issue).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tessera_core::ids::{Time, MS};
use tessera_core::topology::{Role, Topology};
use tessera_sim::{Crash, Partition, SimConfig};

/// A fault plan for `topology` over a run of `duration`, drawn from `seed`.
pub fn random_plan(seed: u64, topology: &Topology, duration: Time) -> SimConfig {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xFA17_FA17);
    let servers: Vec<_> = topology
        .nodes
        .iter()
        .filter(|n| matches!(n.role, Role::Server { .. }))
        .map(|n| n.id)
        .collect();
    let clients: Vec<_> = topology.client_hosts().map(|n| n.id).collect();
    let mut cfg = SimConfig {
        loss: rng.random_range(0.0..0.02),
        duplicate: rng.random_range(0.0..0.02),
        reorder: rng.random_range(0.0..0.1),
        ..SimConfig::default()
    };
    if let (Some(&c), Some(&s)) = (
        clients.get(rng.random_range(0..clients.len().max(1))),
        servers.get(rng.random_range(0..servers.len().max(1))),
    ) {
        let from = rng.random_range(duration / 10..duration / 2);
        cfg.partitions.push(Partition {
            from,
            until: from + rng.random_range(5 * MS..50 * MS),
            a: vec![c],
            b: vec![s],
        });
    }
    if let Some(&c) = clients.get(rng.random_range(0..clients.len().max(1))) {
        cfg.crashes.push(Crash {
            node: c,
            at: rng.random_range(duration / 5..duration / 2),
            restart_after: Some(rng.random_range(10 * MS..100 * MS)),
        });
    }
    cfg
}
