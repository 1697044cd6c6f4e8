//! Random fault plans for simulator runs: one seed, one plan.
//!
//! A plan injects message loss, duplication and reordering, a short
//! partition between a client host and a server, and a crash of a client
//! host (its coordinator with it) that restarts later — the faults the
//! foundation protocols must survive. Server crashes come with the
//! protocols that log enough to recover (Rococo, Janus, COCO, WAL issue):
//! [`replica_plan`] crashes and isolates server replicas, leaders
//! included, never more than a minority of a shard at a time.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tessera_core::ids::NodeId;
use tessera_core::ids::{Time, MS};
use tessera_core::topology::{Role, Topology};
use tessera_sim::{Crash, Partition, SimConfig};

/// The seeds a seed test runs: `TESSERA_SEEDS` as a count (`200`: seeds
/// 0 to 199) or a range (`677..678`: seed 677 alone, to replay one
/// failure), `0..default` when unset.
pub fn seed_range(default: u64) -> std::ops::Range<u64> {
    let Ok(v) = std::env::var("TESSERA_SEEDS") else {
        return 0..default;
    };
    let bad = || panic!("TESSERA_SEEDS={v}: want a count (200) or a range (187..188)");
    match v.split_once("..") {
        Some((a, b)) => a.parse().unwrap_or_else(|_| bad())..b.parse().unwrap_or_else(|_| bad()),
        None => 0..v.parse().unwrap_or_else(|_| bad()),
    }
}

/// `--faults`: a [`random_plan`] drawn when the run starts, for the
/// topology the protocol really runs on (its registry entry may add
/// replicas or switches), with the network rates the user fixed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RandomFaults {
    pub loss: Option<f64>,
    pub duplicate: Option<f64>,
    pub reorder: Option<f64>,
}

impl RandomFaults {
    /// `base` (latencies, CPU costs, ...) with the plan's crashes,
    /// partitions and network rates.
    pub fn plan(
        &self,
        base: &SimConfig,
        seed: u64,
        topology: &Topology,
        duration: Time,
    ) -> SimConfig {
        let p = random_plan(seed, topology, duration);
        SimConfig {
            loss: self.loss.unwrap_or(p.loss),
            duplicate: self.duplicate.unwrap_or(p.duplicate),
            reorder: self.reorder.unwrap_or(p.reorder),
            crashes: p.crashes,
            partitions: p.partitions,
            ..base.clone()
        }
    }
}

/// A fault plan for `topology` over a run of `duration`, drawn from `seed`.
pub fn random_plan(seed: u64, topology: &Topology, duration: Time) -> SimConfig {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xFA17_FA17);
    let servers = servers(topology);
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

fn servers(topology: &Topology) -> Vec<NodeId> {
    topology
        .nodes
        .iter()
        .filter(|n| matches!(n.role, Role::Server { .. }))
        .map(|n| n.id)
        .collect()
}

/// [`random_plan`] plus crashes of servers, one at a time, each restarted
/// 5–40 ms later on its durable records, the last one back by `until`: for
/// protocols whose unreplicated servers recover from their own log
/// (Rococo, §3.5). While a server is down its shard is unavailable.
pub fn server_crash_plan(seed: u64, topology: &Topology, duration: Time, until: Time) -> SimConfig {
    let mut cfg = random_plan(seed, topology, duration);
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x5E2F_C2A5);
    let servers = servers(topology);
    if servers.is_empty() {
        return cfg;
    }
    let mut t = until / 10;
    loop {
        let at = t + rng.random_range(5 * MS..40 * MS);
        let down = rng.random_range(5 * MS..40 * MS);
        if at + down > until {
            break;
        }
        cfg.crashes.push(Crash {
            node: servers[rng.random_range(0..servers.len())],
            at,
            restart_after: Some(down),
        });
        t = at + down;
    }
    cfg
}

/// A fault plan for replicated shards, drawn from `seed`, whose faults all
/// end by `until`: loss, duplication and reordering all run long; each
/// shard's replicas crash (and restart) or are cut off from every other
/// node, one after another, at most `(r - 1) / 2` of a shard at a time,
/// the initial leader among the first; and a client
/// host is cut off from a server for a while.
pub fn replica_plan(seed: u64, topology: &Topology, until: Time) -> SimConfig {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x5EED_0FA7);
    let mut cfg = SimConfig {
        loss: rng.random_range(0.0..0.02),
        duplicate: rng.random_range(0.0..0.02),
        reorder: rng.random_range(0.0..0.1),
        ..SimConfig::default()
    };
    let all: Vec<NodeId> = topology.nodes.iter().map(|n| n.id).collect();
    for group in &topology.shards {
        let r = group.replicas.len();
        let lanes = (r - 1) / 2;
        // Lane `l` owns the replicas `l, l + lanes, ...`, so lanes never
        // fault the same replica and at most `lanes` are down at once.
        for lane in 0..lanes {
            let mine: Vec<NodeId> = group
                .replicas
                .iter()
                .copied()
                .skip(lane)
                .step_by(lanes)
                .collect();
            let mut t = until / 10;
            let mut first = true;
            loop {
                let from = t + rng.random_range(5 * MS..40 * MS);
                let len = rng.random_range(5 * MS..80 * MS);
                if from + len > until {
                    break;
                }
                let node = if first {
                    mine[0]
                } else {
                    mine[rng.random_range(0..mine.len())]
                };
                first = false;
                if rng.random_bool(0.6) {
                    cfg.crashes.push(Crash {
                        node,
                        at: from,
                        restart_after: Some(len),
                    });
                } else {
                    cfg.partitions.push(Partition {
                        from,
                        until: from + len,
                        a: vec![node],
                        b: all.iter().copied().filter(|&n| n != node).collect(),
                    });
                }
                t = from + len;
            }
        }
    }
    let servers: Vec<NodeId> = topology
        .shards
        .iter()
        .flat_map(|g| g.replicas.iter().copied())
        .collect();
    let clients: Vec<NodeId> = topology.client_hosts().map(|n| n.id).collect();
    if !clients.is_empty() && !servers.is_empty() {
        let from = rng.random_range(until / 10..until / 2);
        cfg.partitions.push(Partition {
            from,
            until: from + rng.random_range(5 * MS..50 * MS),
            a: vec![clients[rng.random_range(0..clients.len())]],
            b: vec![servers[rng.random_range(0..servers.len())]],
        });
    }
    cfg
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--faults` draws its plan for the topology the protocol runs on:
    /// with three replicas per shard the crashed node is still a client
    /// host (drawn for one replica, its id would name a backup server).
    #[test]
    fn random_faults_follow_the_run_topology_and_the_user_rates() {
        let topo = Topology::new(3, 3, 2);
        let base = SimConfig {
            fsync: 7,
            ..SimConfig::default()
        };
        let f = RandomFaults {
            loss: Some(0.0),
            duplicate: None,
            reorder: Some(0.5),
        };
        for seed in 0..50 {
            let cfg = f.plan(&base, seed, &topo, 200 * MS);
            assert_eq!(cfg.fsync, 7);
            assert_eq!((cfg.loss, cfg.reorder), (0.0, 0.5));
            assert_eq!(cfg.duplicate, random_plan(seed, &topo, 200 * MS).duplicate);
            for c in &cfg.crashes {
                assert!(
                    matches!(topo.nodes[c.node.0 as usize].role, Role::Client { .. }),
                    "seed {seed}: crashed {:?}, a server",
                    c.node
                );
            }
        }
    }

    #[test]
    fn server_crashes_come_one_at_a_time_and_end_in_time() {
        let topo = Topology::new(3, 1, 2);
        for seed in 0..50 {
            let cfg = server_crash_plan(seed, &topo, 300 * MS, 200 * MS);
            let servers: Vec<_> = cfg
                .crashes
                .iter()
                .filter(|c| matches!(topo.nodes[c.node.0 as usize].role, Role::Server { .. }))
                .collect();
            assert!(!servers.is_empty(), "seed {seed}: no server crash");
            for w in servers.windows(2) {
                assert!(w[0].at + w[0].restart_after.unwrap() <= w[1].at);
            }
            let last = servers.last().unwrap();
            assert!(last.at + last.restart_after.unwrap() <= 200 * MS);
        }
    }

    #[test]
    fn replica_faults_hit_a_minority_of_each_shard_at_a_time() {
        for replicas in [3, 5] {
            let topo = Topology::new(2, replicas, 2);
            let until = 500 * MS;
            for seed in 0..50 {
                let cfg = replica_plan(seed, &topo, until);
                let mut windows: Vec<(NodeId, Time, Time)> = cfg
                    .crashes
                    .iter()
                    .map(|c| (c.node, c.at, c.at + c.restart_after.unwrap()))
                    .collect();
                windows.extend(
                    cfg.partitions
                        .iter()
                        .filter(|p| p.a.len() == 1 && p.b.len() > 1)
                        .map(|p| (p.a[0], p.from, p.until)),
                );
                assert!(windows.iter().all(|w| w.2 <= until));
                for g in &topo.shards {
                    for &(_, at, _) in &windows {
                        let down = windows
                            .iter()
                            .filter(|w| g.replicas.contains(&w.0) && w.1 <= at && at < w.2)
                            .count();
                        assert!(
                            down <= (replicas as usize - 1) / 2,
                            "seed {seed}: {down} down"
                        );
                    }
                    assert!(
                        windows.iter().any(|w| w.0 == g.leader()),
                        "seed {seed}: the leader is never faulted"
                    );
                }
            }
        }
    }
}
