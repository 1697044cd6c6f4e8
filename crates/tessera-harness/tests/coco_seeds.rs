//! COCO on the simulator: PT-OCC and LT-OCC under each commit mode, many
//! seeds, contention, message loss, duplication and reordering, a client
//! host partition and a client host crash; every history checked for
//! serializability. Server crashes (§3.2 epoch abort) are not built yet.
//!
//! `TESSERA_SEEDS` sets the number of seeds per combination (default 200).

use tessera_core::ids::MS;
use tessera_harness::deploy::topology;
use tessera_harness::faults::random_plan;
use tessera_harness::spec::Knobs;
use tessera_harness::{run_bench, BenchSpec, RuntimeKind, WorkloadSpec};
use tessera_workloads::YcsbConfig;

fn seeds() -> u64 {
    std::env::var("TESSERA_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200)
}

fn spec(protocol: &str, commit: &str, seed: u64) -> BenchSpec {
    let workload = WorkloadSpec::Ycsb(YcsbConfig {
        partitions: 3,
        keys_per_partition: 500,
        zipf_theta: 0.99,
        multi_partition: 0.5,
        ..YcsbConfig::default()
    });
    let mut s = BenchSpec::new(RuntimeKind::Sim, protocol, workload);
    s.seed = seed;
    s.clients = 12;
    s.duration = 200 * MS;
    s.warmup = 20 * MS;
    s.cooldown = 60 * MS;
    s.check = true;
    s.replicas = Some(3);
    s.knobs = Knobs {
        commit: Some(commit.into()),
        epoch_ms: Some(5),
        ..Knobs::default()
    };
    s
}

fn replay(s: &BenchSpec, faults: bool) -> String {
    format!(
        "tessera bench --runtime sim --protocol {} --commit {} --epoch-ms 5 --replicas 3 \
         --workload ycsb --shards 3 --keys 500 --zipf 0.99 --multi-partition 0.5 --clients 12 \
         --duration 200ms --warmup 20ms --cooldown 60ms --seed {} --check{}",
        s.protocol,
        s.knobs.commit.as_deref().unwrap_or("epoch"),
        s.seed,
        if faults { " --faults" } else { "" }
    )
}

fn many_seeds(protocol: &str, commit: &str) {
    let mut progressed = 0;
    for seed in 0..seeds() {
        let mut s = spec(protocol, commit, seed);
        s.sim = random_plan(seed, &topology(&s), s.duration);
        let out = run_bench(&s)
            .unwrap_or_else(|e| panic!("seed {seed}: {e:#}\nreplay: {}", replay(&s, true)));
        let report = out.check.as_ref().expect("checked");
        assert!(
            report.ok,
            "{protocol}/{commit} seed {seed}: {report}\nreplay: {}",
            replay(&s, true)
        );
        // A crashed client host leaves locks behind until it restarts and
        // answers the primaries' inquiries; in epoch mode that holds the
        // epoch, and every result, up (COCO §3.2 aborts the epoch instead,
        // not built yet). So not every seed commits inside the window.
        if out.row.committed > 0 {
            progressed += 1;
        } else {
            assert_eq!(
                commit,
                "epoch",
                "{protocol}/{commit} seed {seed}: nothing committed\nreplay: {}",
                replay(&s, true)
            );
        }
    }
    assert!(
        progressed * 2 >= seeds(),
        "{protocol}/{commit}: only {progressed} of {} seeds committed anything",
        seeds()
    );
}

/// Loss, duplication and reordering but no crash: after the cool-down the
/// backups hold exactly the primaries' data.
fn converges(protocol: &str, commit: &str) {
    for seed in 0..seeds().min(20) {
        let mut s = spec(protocol, commit, seed);
        s.sim.loss = 0.02;
        s.sim.duplicate = 0.02;
        s.sim.reorder = 0.1;
        let out = run_bench(&s)
            .unwrap_or_else(|e| panic!("seed {seed}: {e:#}\nreplay: {}", replay(&s, false)));
        let report = out.check.as_ref().expect("checked");
        assert!(
            report.ok,
            "{protocol}/{commit} seed {seed}: {report}\nreplay: {}",
            replay(&s, false)
        );
        assert!(out.row.committed > 0);
        assert_eq!(
            out.row.counters.get("replica_divergent_keys"),
            Some(&0),
            "{protocol}/{commit} seed {seed}: backups diverged\nreplay: {} --loss 0.02 \
             --duplicate 0.02 --reorder 0.1",
            replay(&s, false)
        );
    }
}

#[test]
fn pt_occ_epoch_survives_faults() {
    many_seeds("pt-occ", "epoch");
}

#[test]
fn pt_occ_2pc_sync_survives_faults() {
    many_seeds("pt-occ", "2pc-sync");
}

#[test]
fn pt_occ_2pc_survives_faults() {
    many_seeds("pt-occ", "2pc");
}

#[test]
fn lt_occ_epoch_survives_faults() {
    many_seeds("lt-occ", "epoch");
}

#[test]
fn lt_occ_2pc_sync_survives_faults() {
    many_seeds("lt-occ", "2pc-sync");
}

#[test]
fn lt_occ_2pc_survives_faults() {
    many_seeds("lt-occ", "2pc");
}

#[test]
fn replicas_converge_after_quiescence() {
    for p in ["pt-occ", "lt-occ"] {
        for c in ["epoch", "2pc-sync"] {
            converges(p, c);
        }
    }
}
