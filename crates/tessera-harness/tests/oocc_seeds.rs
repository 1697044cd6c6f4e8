//! OOCC and its baselines (FORD-style OCC, DrTM, DSLR) on memory nodes under the
//! simulator's RDMA preset: many seeds with contention (few hot keys on two
//! memory nodes, multi-partition transactions, messages held back past the
//! lease) and clock drift within OOCC's bound (1000 ppm, §VII.B), every
//! history checked for strict serializability.
//!
//! `TESSERA_SEEDS` sets the number of seeds (default 200).

use tessera_core::ids::{MS, US};
use tessera_harness::{run_bench, BenchSpec, RuntimeKind, SimConfig, WorkloadSpec};
use tessera_workloads::YcsbConfig;

fn seeds() -> u64 {
    std::env::var("TESSERA_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200)
}

fn ycsb(read_ratio: f64) -> WorkloadSpec {
    WorkloadSpec::Ycsb(ycsb_config(read_ratio))
}

fn ycsb_config(read_ratio: f64) -> YcsbConfig {
    YcsbConfig {
        partitions: 2,
        keys_per_partition: 20,
        ops_per_txn: 4,
        read_ratio,
        fields: 1,
        field_size: 8,
        zipf_theta: 0.99,
        multi_partition: 0.5,
    }
}

fn spec(protocol: &str, seed: u64) -> BenchSpec {
    let mut s = BenchSpec::new(RuntimeKind::Sim, protocol, ycsb(0.9));
    s.seed = seed;
    s.clients = 16;
    s.duration = 4 * MS;
    s.warmup = MS / 2;
    s.cooldown = MS / 2;
    s.check = true;
    s.sim = SimConfig {
        reorder: 0.05,
        reorder_delay: 30 * US,
        drift_ppm: 1_000,
        ..SimConfig::rdma()
    };
    s
}

fn replay(protocol: &str, seed: u64) -> String {
    format!(
        "tessera bench --runtime sim --net rdma --reorder 0.05 --drift-ppm 1000 --protocol {protocol} \
         --workload ycsb --shards 2 --keys 20 --ops 4 --read-ratio 0.9 --zipf 0.99 \
         --multi-partition 0.5 --clients 16 --duration 4ms --warmup 500us --cooldown 500us \
         --seed {seed} --check (reorder delay 30us, 1 field of 8 bytes)"
    )
}

fn seed_loop(protocol: &str) -> std::collections::BTreeMap<String, u64> {
    let mut counters = std::collections::BTreeMap::new();
    for seed in 0..seeds() {
        let s = spec(protocol, seed);
        let out = run_bench(&s)
            .unwrap_or_else(|e| panic!("seed {seed}: {e:#}\nreplay: {}", replay(protocol, seed)));
        let report = out.check.as_ref().expect("checked");
        assert!(
            report.ok,
            "seed {seed}: {report}\nreplay: {}",
            replay(protocol, seed)
        );
        assert!(
            out.row.committed > 0,
            "seed {seed}: nothing committed\nreplay: {}",
            replay(protocol, seed)
        );
        for (k, v) in &out.row.counters {
            *counters.entry(k.clone()).or_insert(0) += v;
        }
    }
    counters
}

#[test]
fn oocc_is_strictly_serializable_under_contention() {
    let c = seed_loop("oocc");
    // Both read-only paths and both abort kinds were exercised.
    assert!(c["ro_one_round"] > 0, "{c:?}");
    assert!(c["ro_commits"] > c["ro_one_round"], "{c:?}");
    assert!(c["lock_aborts"] > 0 && c["validation_aborts"] > 0, "{c:?}");
    assert!(c["lease_wait_ns"] > 0, "{c:?}");
}

#[test]
fn ford_occ_is_strictly_serializable_under_contention() {
    let c = seed_loop("ford-occ");
    assert_eq!(c["ro_one_round"], 0, "{c:?}");
    assert_eq!(c["lease_wait_ns"], 0, "{c:?}");
    assert!(c["lock_aborts"] > 0 && c["validation_aborts"] > 0, "{c:?}");
}

#[test]
fn drtm_is_strictly_serializable_under_contention() {
    let c = seed_loop("drtm");
    // Readers set leases by CAS, writers waited leases out and aborted on
    // other writers, and read leases expired before some commit points.
    assert!(c["lease_cas"] > 0 && c["lease_wait_ns"] > 0, "{c:?}");
    assert!(c["lock_aborts"] > 0 && c["ro_commits"] > 0, "{c:?}");
}

#[test]
fn dslr_is_strictly_serializable_under_contention() {
    let c = seed_loop("dslr");
    // Conflicting transactions queued and polled for their tickets.
    assert!(c["queued"] > 0 && c["polls"] > 0, "{c:?}");
    assert!(c["ro_commits"] > 0, "{c:?}");
}

/// DSLR's counter reset end to end: with counters that reset after 8
/// tickets, hot records reset many times, void tickets retry, and every
/// history still checks (a tenth of the seeds).
#[test]
fn dslr_counter_reset_is_strictly_serializable() {
    let mut resets = 0;
    for seed in 0..(seeds() / 10).max(1) {
        let out = run_bench(&spec("dslr-reset", seed)).unwrap();
        let report = out.check.as_ref().expect("checked");
        assert!(
            report.ok && out.row.committed > 0,
            "seed {seed}: {report}\nreplay: {}",
            replay("dslr-reset", seed)
        );
        resets += out.row.counters["resets"];
    }
    assert!(resets > 0, "no reset in the runs");
}

/// The check is real: writers that release before the lease expires let a
/// read-only transaction that skipped validation see half a transaction
/// (reads held back past the write's release, still within a long lease;
/// 9 of these 40 seeds show it). The same runs with waiting writers
/// pass.
#[test]
fn checker_catches_writers_that_do_not_wait_out_the_lease() {
    let run = |protocol: &str, seed| {
        let mut s = spec(protocol, seed);
        s.workload = WorkloadSpec::Ycsb(YcsbConfig {
            keys_per_partition: 10,
            ops_per_txn: 2,
            read_ratio: 0.7,
            zipf_theta: 0.0,
            multi_partition: 1.0,
            ..ycsb_config(0.0)
        });
        s.clients = 32;
        s.sim.reorder = 0.3;
        s.sim.reorder_delay = 100 * US;
        s.sim.drift_ppm = 0;
        s.knobs.lease_us = Some(1_000);
        s.duration = 60 * MS;
        run_bench(&s).unwrap().row.check
    };
    let caught = (0..40)
        .filter(|&seed| run("oocc-nowait", seed) == "fail")
        .count();
    assert!(caught > 0, "no anomaly caught in 40 seeds");
    for seed in 0..5 {
        assert_eq!(run("oocc", seed), "pass", "seed {seed}");
    }
}

/// Every combination of the ablation flags (Fig. 11's steps and the rest)
/// is a correct protocol: a tenth of the seeds for each.
#[test]
fn every_ablation_combination_is_strictly_serializable() {
    for bits in 0..8u8 {
        let (lease, unlock, delayed) = (bits & 1 != 0, bits & 2 != 0, bits & 4 != 0);
        for seed in 0..(seeds() / 10).max(1) {
            let mut s = spec("oocc", seed);
            s.knobs.oocc_lease = Some(lease);
            s.knobs.oocc_write_unlock = Some(unlock);
            s.knobs.oocc_delayed_lock = Some(delayed);
            let out = run_bench(&s).unwrap();
            let report = out.check.as_ref().expect("checked");
            let on = |b| if b { "on" } else { "off" };
            assert!(
                report.ok && out.row.committed > 0,
                "seed {seed}: {report}\nreplay: {} --oocc-lease {} --oocc-write-unlock {} \
                 --oocc-delayed-lock {}",
                replay("oocc", seed),
                on(lease),
                on(unlock),
                on(delayed)
            );
        }
    }
}
