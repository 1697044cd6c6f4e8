//! Rococo's fault tolerance (§3.5) in the simulator: servers crash one at a
//! time and restart on their logs, during contended runs that also lose,
//! duplicate and reorder messages, cut a client host off a server, and
//! crash a client host (its coordinator with it).
//!
//! `TESSERA_SEEDS` sets the number of seeds (default 200). A failure prints
//! the seed.

use tessera_core::history::Outcome;
use tessera_core::ids::{Time, MS};
use tessera_harness::deploy::topology;
use tessera_harness::faults::server_crash_plan;
use tessera_harness::run::lost_writes;
use tessera_harness::{run_bench, BenchSpec, RuntimeKind, WorkloadSpec};
use tessera_workloads::{MicroConfig, YcsbConfig};

fn seeds() -> u64 {
    std::env::var("TESSERA_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200)
}

const DURATION: Time = 300 * MS;
/// Every server is back by then, leaving a third of the run for progress.
const CRASHES_UNTIL: Time = 200 * MS;

/// Zipf 0.99 over few keys, three shards: micro on even seeds, YCSB with
/// half its transactions multi-partition on odd ones.
fn spec(seed: u64) -> BenchSpec {
    let workload = if seed % 2 == 0 {
        WorkloadSpec::Micro(MicroConfig {
            shards: 3,
            keys_per_shard: 2_000,
            zipf_theta: 0.99,
        })
    } else {
        WorkloadSpec::Ycsb(YcsbConfig {
            partitions: 3,
            keys_per_partition: 2_000,
            zipf_theta: 0.99,
            multi_partition: 0.5,
            ..YcsbConfig::default()
        })
    };
    let mut s = BenchSpec::new(RuntimeKind::Sim, "rococo", workload);
    s.seed = seed;
    s.clients = 24;
    s.duration = DURATION;
    s.warmup = 20 * MS;
    s.cooldown = 20 * MS;
    s.check = true;
    s.sim = server_crash_plan(seed, &topology(&s), DURATION, CRASHES_UNTIL);
    s
}

/// Strict serializability, no committed write lost, no abort, and commits
/// of transactions that started after the last server came back.
#[test]
fn rococo_servers_survive_crashes() {
    let started = std::time::Instant::now();
    let mut server_crashes = 0;
    for seed in 0..seeds() {
        let s = spec(seed);
        let out = run_bench(&s).unwrap_or_else(|e| panic!("seed {seed}: {e:#}"));
        let report = out.check.as_ref().expect("checked");
        assert!(report.ok, "rococo seed {seed}: {report}");
        let h = out.history.as_ref().expect("recorded");
        let lost = lost_writes(h, &out.raw.stores);
        assert!(lost.is_empty(), "rococo seed {seed}: lost writes {lost:?}");
        assert!(
            h.txns.iter().all(|t| t.outcome != Outcome::Aborted),
            "rococo seed {seed}: an attempt aborted"
        );
        let topo = topology(&s);
        let restarts: Vec<Time> = s
            .sim
            .crashes
            .iter()
            .filter(|c| topo.client_hosts().all(|h| h.id != c.node))
            .map(|c| c.at + c.restart_after.expect("restarts"))
            .collect();
        server_crashes += restarts.len();
        let back = restarts.iter().copied().max().expect("a server crashed");
        let after = h
            .txns
            .iter()
            .filter(|t| t.outcome == Outcome::Committed && t.start > back)
            .count();
        assert!(
            after > 0,
            "rococo seed {seed}: nothing committed after the last restart at {} ms",
            back / MS
        );
    }
    eprintln!(
        "{} seeds, {server_crashes} server crashes, {:.1} s",
        seeds(),
        started.elapsed().as_secs_f64()
    );
}
