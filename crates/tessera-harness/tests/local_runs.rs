//! The embedded cluster: real threads, real time, checked histories.

use tessera_core::ids::MS;
use tessera_harness::{run_bench, BenchSpec, RuntimeKind, WorkloadSpec};
use tessera_workloads::{MicroConfig, YcsbConfig};

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
    for p in ["2pl-ww", "2pl-nowait", "occ"] {
        check_local(p, contended_micro());
        check_local(p, contended_ycsb());
    }
}

/// Memory nodes and their coordinators on real threads: OOCC's and DrTM's
/// leases and DSLR's polls run on real time here.
#[test]
fn protocols_on_memory_nodes_pass_the_checker_on_local() {
    for p in ["oocc", "ford-occ", "drtm", "dslr"] {
        check_local(p, contended_ycsb());
    }
}
