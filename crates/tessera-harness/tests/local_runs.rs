//! The embedded cluster: real threads, real time, checked histories.
//!
//! The tests of this file take turns ([`ONE_AT_A_TIME`]): each run has a
//! worker per core, as the runtime is meant to be used. Run side by side
//! they oversubscribe the cores, and protocols that wait on microsecond
//! timers and cross-worker round trips (the memory-node ones: DSLR's
//! polls, OOCC's and DrTM's leases) then spend the run waiting for a
//! descheduled worker: DSLR fell to a few commits in 400 ms that way.

use std::sync::Mutex;
use tessera_core::ids::{Time, MS};
use tessera_harness::{run_bench, BenchSpec, RuntimeKind, WorkloadSpec};
use tessera_workloads::{MicroConfig, YcsbConfig};

/// Held by each test of this file for its whole run.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs `protocol` on `local` with the checker and asserts progress: more
/// than [`MIN_COMMITS`] commits. Progress is a count, not a rate: real
/// threads on a loaded machine commit fewer transactions in a fixed time,
/// so a run that falls short is repeated once with [`LONG_RUN`] before the
/// test fails (each run's history must pass the checker).
fn check_local(protocol: &str, workload: WorkloadSpec) {
    let committed = checked_run(protocol, &workload, 400 * MS);
    if committed > MIN_COMMITS {
        return;
    }
    let committed = checked_run(protocol, &workload, LONG_RUN);
    assert!(
        committed > MIN_COMMITS,
        "{protocol}: {committed} commits in {} ms",
        LONG_RUN / MS
    );
}

/// Commits a run must exceed to count as progress.
const MIN_COMMITS: u64 = 100;

/// The duration of the second try of a run that fell short.
const LONG_RUN: Time = 4_000 * MS;

/// One checked run of `duration`; returns its commits.
fn checked_run(protocol: &str, workload: &WorkloadSpec, duration: Time) -> u64 {
    let mut s = BenchSpec::new(RuntimeKind::Local, protocol, workload.clone());
    s.duration = duration;
    s.warmup = 50 * MS;
    s.cooldown = 20 * MS;
    s.clients = 16;
    s.workers = 2;
    s.check = true;
    let out = run_bench(&s).unwrap();
    let r = out.check.as_ref().unwrap();
    assert!(r.ok, "{protocol} on local: {r}");
    out.row.committed
}

fn contended_micro() -> WorkloadSpec {
    WorkloadSpec::Micro(MicroConfig {
        shards: 3,
        keys_per_shard: 1_000,
        zipf_theta: 0.99,
    })
}

fn contended_ycsb() -> WorkloadSpec {
    WorkloadSpec::Ycsb(YcsbConfig {
        partitions: 2,
        keys_per_partition: 1_000,
        zipf_theta: 0.99,
        multi_partition: 0.3,
        ..YcsbConfig::default()
    })
}

#[test]
fn protocols_pass_the_checker_on_local() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for p in ["2pl-ww", "2pl-nowait", "occ"] {
        check_local(p, contended_micro());
        check_local(p, contended_ycsb());
    }
}

/// Memory nodes and their coordinators on real threads: OOCC's and DrTM's
/// leases and DSLR's polls run on real time here.
#[test]
fn protocols_on_memory_nodes_pass_the_checker_on_local() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for p in ["oocc", "ford-occ", "drtm", "dslr"] {
        check_local(p, contended_ycsb());
    }
}
