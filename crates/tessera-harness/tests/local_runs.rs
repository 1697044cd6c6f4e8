//! The embedded cluster: real threads, real time, checked histories.
//!
//! The tests of this file take turns ([`ONE_AT_A_TIME`]): each run has a
//! worker per core, as the runtime is meant to be used. Run side by side
//! they oversubscribe the cores, and protocols that wait on microsecond
//! timers and cross-worker round trips (the memory-node ones: DSLR's
//! polls, OOCC's and DrTM's leases) then spend the run waiting for a
//! descheduled worker: DSLR fell to a few commits in 400 ms that way.

use std::sync::Mutex;
use tessera_core::ids::MS;
use tessera_harness::{run_bench, BenchSpec, RuntimeKind, WorkloadSpec};
use tessera_workloads::{MicroConfig, YcsbConfig};

/// Held by each test of this file for its whole run.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn check_local(protocol: &str, workload: WorkloadSpec) {
    let mut s = BenchSpec::new(RuntimeKind::Local, protocol, workload);
    s.duration = 400 * MS;
    s.warmup = 50 * MS;
    s.cooldown = 20 * MS;
    s.clients = 16;
    s.workers = 2;
    s.check = true;
    let out = run_bench(&s).unwrap();
    let r = out.check.as_ref().unwrap();
    assert!(r.ok, "{protocol} on local: {r}");
    assert!(
        out.row.committed > 100,
        "{protocol}: {} commits",
        out.row.committed
    );
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
